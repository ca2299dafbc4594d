package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func taskList(subs, parts int) []TaskID {
	var out []TaskID
	for p := range parts {
		for s := range subs {
			out = append(out, TaskID{s, int32(p)})
		}
	}
	return out
}

func loads(owner []int, n int) []int {
	l := make([]int, n)
	for _, o := range owner {
		l[o]++
	}
	return l
}

func TestAssignTasksBalanced(t *testing.T) {
	for _, tc := range []struct{ tasks, members int }{{6, 1}, {6, 2}, {6, 4}, {7, 3}, {12, 5}, {3, 5}} {
		tasks := taskList(1, tc.tasks)
		owner := assignTasks(tasks, nil, tc.members)
		l := loads(owner, tc.members)
		if slices.Max(l)-slices.Min(l) > 1 {
			t.Errorf("%d tasks over %d members: loads %v", tc.tasks, tc.members, l)
		}
	}
}

func TestAssignTasksSticky(t *testing.T) {
	tasks := taskList(2, 6) // 12 tasks
	first := assignTasks(tasks, nil, 2)
	prev := map[TaskID]int{}
	for i, id := range tasks {
		prev[id] = first[i]
	}
	// Same members again: nothing moves.
	if again := assignTasks(tasks, prev, 2); !slices.Equal(again, first) {
		t.Fatalf("stable group moved tasks: %v -> %v", first, again)
	}
	// A third member joins: only the tasks it takes move, and loads are 4/4/4.
	third := assignTasks(tasks, prev, 3)
	moved := 0
	for i := range tasks {
		if third[i] != first[i] {
			moved++
			if third[i] != 2 {
				t.Errorf("task %v moved between old members: %d -> %d", tasks[i], first[i], third[i])
			}
		}
	}
	if moved != 4 || !slices.Equal(loads(third, 3), []int{4, 4, 4}) {
		t.Fatalf("moved %d tasks, loads %v", moved, loads(third, 3))
	}
	// Member 0 leaves (members renumber: old 1 -> 0, old 2 -> 1): the survivors keep theirs.
	prev3 := map[TaskID]int{}
	for i, id := range tasks {
		if third[i] > 0 {
			prev3[id] = third[i] - 1
		}
	}
	after := assignTasks(tasks, prev3, 2)
	for i, id := range tasks {
		if m, ok := prev3[id]; ok && after[i] != m {
			t.Errorf("task %v of a surviving member moved", id)
		}
	}
	if !slices.Equal(loads(after, 2), []int{6, 6}) {
		t.Fatalf("loads after leave: %v", loads(after, 2))
	}
}

// Balance gives every source partition of a task to the same member, for a sub-topology
// that reads two co-partitioned topics.
func TestBalanceAssignsWholeTasks(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "a"}, {Topic: "b"}}},
		{ID: 1, Sources: []Source{{Topic: "app-x-repartition", Internal: true}}},
	}}
	tb := newTaskBalancer(topo)
	var members []kmsg.JoinGroupResponseMember
	for i := range 3 {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("m%d", i)
		m.ProtocolMetadata = tb.JoinGroupMetadata([]string{"a", "app-x-repartition", "b"}, nil, 1)
		members = append(members, m)
	}
	gmb, topics, err := tb.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 3 {
		t.Fatalf("topics %v", topics)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": 4, "b": 4, "app-x-repartition": 2})
	if err != nil {
		t.Fatal(err)
	}
	plan := into.(standbyPlan).plan.(*kgo.BalancePlan)
	owners := map[TaskID]string{}
	total := 0
	for member, ts := range plan.AsMemberIDMap() {
		for topic, ps := range ts {
			sub := 0
			if topic == "app-x-repartition" {
				sub = 1
			}
			for _, p := range ps {
				total++
				id := TaskID{sub, p}
				if o, ok := owners[id]; ok && o != member {
					t.Errorf("task %v split between %s and %s", id, o, member)
				}
				owners[id] = member
			}
		}
	}
	if total != 10 || len(owners) != 6 {
		t.Fatalf("assigned %d partitions in %d tasks, want 10 in 6", total, len(owners))
	}
	// Every assignment names the sub-topologies of each source topic, for tools that read
	// the group from the broker (kstream lag).
	for _, a := range into.IntoSyncAssignment() {
		var ca kmsg.ConsumerMemberAssignment
		if err := ca.ReadFrom(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		var ud assignmentUserData
		if err := json.Unmarshal(ca.UserData, &ud); err != nil {
			t.Fatal(err)
		}
		if want := map[string][]int{"a": {0}, "b": {0}, "app-x-repartition": {1}}; !reflect.DeepEqual(ud.Topics, want) {
			t.Errorf("member %s: assignment topics %v, want %v", a.MemberID, ud.Topics, want)
		}
	}
}

// With standbys: every stateful task gets one standby on a member other than its owner, the
// assignment carries them to each member, and a task whose owner left goes to the member
// reporting the most of its state.
func TestBalanceStandbys(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
		{ID: 1, Sources: []Source{{Topic: "other"}}}, // stateless: no standbys
	}}
	got := map[string][]TaskID{}
	newMember := func(id string, offsets map[TaskID]int64) kmsg.JoinGroupResponseMember {
		tb := newTaskBalancer(topo)
		tb.offsets = func() map[TaskID]int64 { return offsets }
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = tb.JoinGroupMetadata([]string{"in", "other"}, nil, 1)
		return m
	}
	// m1 (the former owner of 0_1 and 0_2, now gone) left; m2 holds state of 0_1 (far
	// ahead of m0's), m0 holds a little state of 0_2.
	members := []kmsg.JoinGroupResponseMember{
		newMember("m0", map[TaskID]int64{{0, 1}: 10, {0, 2}: 500}),
		newMember("m2", map[TaskID]int64{{0, 1}: 900}),
	}
	leader := newTaskBalancer(topo)
	leader.numStandbys = 1
	gmb, _, err := leader.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"in": 4, "other": 4})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[TaskID]string{}
	for _, a := range into.IntoSyncAssignment() {
		parser := newTaskBalancer(topo)
		parser.onStandbys = func(ids, _ []TaskID) { got[a.MemberID] = ids }
		parts, err := parser.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		for topic, ps := range parts {
			sub := 0
			if topic == "other" {
				sub = 1
			}
			for _, p := range ps {
				owner[TaskID{sub, p}] = a.MemberID
			}
		}
	}
	if owner[TaskID{0, 1}] != "m2" || owner[TaskID{0, 2}] != "m0" {
		t.Errorf("owners of 0_1 and 0_2 = %s, %s; want the members with the most state (m2, m0)", owner[TaskID{0, 1}], owner[TaskID{0, 2}])
	}
	standbyOf := map[TaskID]string{}
	for m, ids := range got {
		for _, id := range ids {
			if id.SubTopology != 0 {
				t.Errorf("stateless task %v got a standby on %s", id, m)
			}
			if owner[id] == m {
				t.Errorf("task %v: standby on its owner %s", id, m)
			}
			if prev, dup := standbyOf[id]; dup {
				t.Errorf("task %v: two standbys (%s, %s) with NumStandbys 1", id, prev, m)
			}
			standbyOf[id] = m
		}
	}
	if len(standbyOf) != 4 {
		t.Errorf("standbys %v, want one for each of the 4 stateful tasks", got)
	}
}

// Each sub-topology spreads over the members: with two members and two sub-topologies of
// even partition counts, each member gets half of each (the tasks are listed partition by
// partition, which used to give each member one whole sub-topology).
func TestAssignTasksSpreadsEachSubTopology(t *testing.T) {
	for _, tc := range []struct{ subs, parts, members int }{{2, 6, 2}, {2, 12, 3}, {3, 4, 2}, {2, 12, 4}} {
		tasks := taskList(tc.subs, tc.parts)
		owner := assignTasks(tasks, nil, tc.members)
		per := make([][]int, tc.subs)
		for s := range per {
			per[s] = make([]int, tc.members)
		}
		for i, id := range tasks {
			per[id.SubTopology][owner[i]]++
		}
		for s, l := range per {
			if slices.Max(l)-slices.Min(l) > 1 {
				t.Errorf("%d sub-topologies x %d partitions over %d members: sub-topology %d loads %v", tc.subs, tc.parts, tc.members, s, l)
			}
		}
	}
}

// A source topic of keyed state that grew: the balancer assigns none of its new partitions
// (their records would be counted in tasks whose stores do not hold their keys' state) and
// reports the growth, so that the topic watcher stops the application with the error that
// says why. A stateless sub-topology takes its new partitions.
func TestBalanceKeepsNewPartitionsOfKeyedSourcesOut(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "keyed"}}},
		{ID: 1, Sources: []Source{{Topic: "stateless"}}},
	}}
	tb := newTaskBalancer(topo)
	tb.fixed = func(topic string) (int32, bool) { return 2, topic == "keyed" }
	var grown []string
	tb.onGrown = func(topic string, was, now int32) { grown = append(grown, fmt.Sprintf("%s %d->%d", topic, was, now)) }
	var members []kmsg.JoinGroupResponseMember
	for i := range 2 {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("m%d", i)
		m.ProtocolMetadata = tb.JoinGroupMetadata([]string{"keyed", "stateless"}, nil, 1)
		members = append(members, m)
	}
	gmb, _, err := tb.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"keyed": 4, "stateless": 4})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int32{}
	for _, ts := range into.(standbyPlan).plan.(*kgo.BalancePlan).AsMemberIDMap() {
		for topic, ps := range ts {
			got[topic] = append(got[topic], ps...)
		}
	}
	for topic := range got {
		slices.Sort(got[topic])
	}
	if want := map[string][]int32{"keyed": {0, 1}, "stateless": {0, 1, 2, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("assigned %v, want %v", got, want)
	}
	if !slices.Equal(grown, []string{"keyed 2->4"}) {
		t.Errorf("growth reported: %v, want [keyed 2->4]", grown)
	}
}
