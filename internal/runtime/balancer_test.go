package runtime

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
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

// fakeHost is a memberHost for balancer tests.
type fakeHost struct {
	states   map[TaskID]taskState
	set      func(self string, set TaskSet)
	fixed    func(topic string) (int32, bool)
	onGrown  func(topic string, was, now int32)
	lastHost []hostAssignment
	txn      string
	fenced   []string
	// shutdown is the request the host makes; shutdownGot the ones it was told of.
	shutdown    *shutdownRequest
	shutdownGot []shutdownRequest
	rejoins     int
}

func (h *fakeHost) taskStates() map[TaskID]taskState { return h.states }
func (h *fakeHost) assignedTasks(self string, set TaskSet, hosts []hostAssignment) {
	h.lastHost = hosts
	if h.set != nil {
		h.set(self, set)
	}
}
func (h *fakeHost) fixedCount(topic string) (int32, bool) {
	if h.fixed == nil {
		return 0, false
	}
	return h.fixed(topic)
}
func (h *fakeHost) transactionalID() string        { return h.txn }
func (h *fakeHost) fenceTransactions(ids []string) { h.fenced = append(h.fenced, ids...) }
func (h *fakeHost) shutdownRequest() *shutdownRequest {
	return h.shutdown
}
func (h *fakeHost) shutdownRequested(req shutdownRequest) { h.shutdownGot = append(h.shutdownGot, req) }
func (h *fakeHost) rejoinForShutdown()                    { h.rejoins++ }
func (h *fakeHost) sourceGrown(topic string, was, now int32) {
	if h.onGrown != nil {
		h.onGrown(topic, was, now)
	}
}

// offsetStates are task states with offsets only (lags unknown).
func offsetStates(offsets map[TaskID]int64) map[TaskID]taskState {
	out := map[TaskID]taskState{}
	for id, o := range offsets {
		out[id] = taskState{Offset: o, Lag: -1}
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

// A topic a pattern source picked up (pattern.go) goes only to the members that subscribe to
// it: the owner of a task that has not picked it up yet keeps the task's other topics and gets
// the new topic's partition when it rejoins with the topic in its subscription.
func TestBalanceNewTopicOnlyToSubscribers(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{{Topic: "a"}}}}}
	ix := newSourceIndex(topo, map[string]int32{"a": 2}).with(0, Source{Topic: "b"}, 2, false)
	tb := newTaskBalancer(topo)
	tb.src = func() *sourceIndex { return ix }
	var members []kmsg.JoinGroupResponseMember
	for i, topics := range [][]string{{"a", "b"}, {"a"}} {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("m%d", i)
		m.ProtocolMetadata = tb.JoinGroupMetadata(topics, nil, 1)
		members = append(members, m)
	}
	gmb, _, err := tb.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": 2, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	got := into.(standbyPlan).plan.(*kgo.BalancePlan).AsMemberIDMap()
	want := map[string]map[string][]int32{"m0": {"a": {0}, "b": {0}}, "m1": {"a": {1}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan %v, want %v", got, want)
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
		tb.host = &fakeHost{states: offsetStates(offsets)}
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
		parser.host = &fakeHost{set: func(_ string, set TaskSet) { got[a.MemberID] = set.Standby }}
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
	var grown []string
	tb.host = &fakeHost{
		fixed:   func(topic string) (int32, bool) { return 2, topic == "keyed" },
		onGrown: func(topic string, was, now int32) { grown = append(grown, fmt.Sprintf("%s %d->%d", topic, was, now)) },
	}
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

// warmGroup simulates a group of members over the balancer: each member reports what it
// owns and its task states, the leader balances, and the test reads back each member's
// active, standby and warm-up tasks.
type warmGroup struct {
	t      *testing.T
	topo   *Topology
	leader *taskBalancer
	ids    []string
	racks  map[string]string
	active map[string][]TaskID
	states map[string]map[TaskID]taskState
	sets   map[string]TaskSet
}

func (g *warmGroup) balance(parts int32) {
	g.t.Helper()
	var members []kmsg.JoinGroupResponseMember
	for _, id := range g.ids {
		tb := newTaskBalancer(g.topo)
		tb.host = &fakeHost{states: g.states[id]}
		tb.rack = g.racks[id]
		current := map[string][]int32{}
		for _, task := range g.active[id] {
			current["in"] = append(current["in"], task.Partition)
		}
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = tb.JoinGroupMetadata([]string{"in"}, current, 1)
		members = append(members, m)
	}
	gmb, _, err := g.leader.MemberBalancer(members)
	if err != nil {
		g.t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"in": parts})
	if err != nil {
		g.t.Fatal(err)
	}
	// The target, as the cooperative protocol reaches it after its follow-up rebalance:
	// read the hosts rather than the partitions of this round.
	g.sets = map[string]TaskSet{}
	for _, a := range into.IntoSyncAssignment() {
		h := &fakeHost{}
		var set TaskSet
		h.set = func(_ string, s TaskSet) { set = s }
		parser := newTaskBalancer(g.topo)
		parser.host = h
		if _, err := parser.ParseSyncAssignment(a.MemberAssignment); err != nil {
			g.t.Fatal(err)
		}
		for _, host := range h.lastHost {
			if host.Member == a.MemberID {
				set.Active, _ = parseTaskIDs(host.Active)
			}
		}
		g.sets[a.MemberID] = set
	}
	g.active = map[string][]TaskID{}
	for id, set := range g.sets {
		g.active[id] = set.Active
	}
}

func (g *warmGroup) loads() []int {
	var out []int
	for _, id := range g.ids {
		out = append(out, len(g.sets[id].Active))
	}
	return out
}

// A new member gets warm-up replicas, not tasks: no stateful task moves to a member that is
// not caught up while another is. Once its warm-ups report a lag within the acceptable one,
// a probing rebalance moves exactly those tasks to it, and gives it the next warm-ups; the
// group is balanced after two probes with 4 tasks to move and 2 warm-ups at a time.
func TestBalanceWarmupsThenProbingMoves(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
	}}
	leader := newTaskBalancer(topo)
	leader.acceptableLag, leader.maxWarmups = 100, 2
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a", "b"}, states: map[string]map[TaskID]taskState{}}
	g.balance(12)
	if l := g.loads(); !slices.Equal(l, []int{6, 6}) {
		t.Fatalf("two members: loads %v", l)
	}
	for _, id := range g.ids {
		g.states[id] = map[TaskID]taskState{}
		for _, task := range g.active[id] {
			g.states[id][task] = taskState{Offset: 1e6, Lag: 0}
		}
	}
	before := map[TaskID]string{}
	for _, id := range g.ids {
		for _, task := range g.active[id] {
			before[task] = id
		}
	}
	g.ids = append(g.ids, "c")
	g.balance(12)
	if l := g.loads(); !slices.Equal(l, []int{6, 6, 0}) {
		t.Fatalf("a new member took tasks it had no state for: loads %v", l)
	}
	if w := g.sets["c"].Warmup; len(w) != 2 {
		t.Fatalf("new member's warm-ups %v, want 2", w)
	}
	for probe := 1; ; probe++ {
		if probe > 3 {
			t.Fatalf("not balanced after %d probing rebalances: loads %v", probe-1, g.loads())
		}
		warm := g.sets["c"].Warmup
		g.states["c"] = map[TaskID]taskState{}
		for _, task := range g.active["c"] {
			g.states["c"][task] = taskState{Offset: 1e6, Lag: 0}
		}
		for _, task := range warm {
			g.states["c"][task] = taskState{Offset: 1e6 - 50, Lag: 50} // caught up
		}
		g.balance(12)
		for _, task := range warm {
			if !slices.Contains(g.active["c"], task) {
				t.Fatalf("probe %d: caught-up warm-up %v not moved to c (c has %v)", probe, task, g.active["c"])
			}
		}
		for _, id := range []string{"a", "b"} {
			for _, task := range g.active[id] {
				if before[task] != id {
					t.Fatalf("probe %d: task %v moved from %s to %s", probe, task, before[task], id)
				}
			}
		}
		if l := g.loads(); slices.Max(l)-slices.Min(l) <= 1 {
			if probe != 2 {
				t.Errorf("balanced after %d probes, want 2", probe)
			}
			if w := g.sets["c"].Warmup; len(w) != 0 {
				t.Errorf("balanced, but c still has warm-ups %v", w)
			}
			break
		}
	}
	// Balanced and stable: a rebalance with the same states moves nothing.
	prev := maps.Clone(g.active)
	g.balance(12)
	for id := range prev {
		a, b := slices.Clone(prev[id]), slices.Clone(g.active[id])
		slices.SortFunc(a, compareTaskIDs)
		slices.SortFunc(b, compareTaskIDs)
		if !slices.Equal(a, b) {
			t.Errorf("stable group: %s had %v, now %v", id, prev[id], g.active[id])
		}
	}
}

// A warm-up that has not caught up stays a warm-up of the same task: the task does not move,
// and the warm-up is not moved to another task.
func TestBalanceWarmupNotCaughtUpKeepsItsTask(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
	}}
	leader := newTaskBalancer(topo)
	leader.acceptableLag, leader.maxWarmups = 100, 2
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a", "b"}, states: map[string]map[TaskID]taskState{}}
	g.balance(6)
	for _, id := range g.ids {
		g.states[id] = map[TaskID]taskState{}
		for _, task := range g.active[id] {
			g.states[id][task] = taskState{Offset: 1e6, Lag: 0}
		}
	}
	g.ids = append(g.ids, "c")
	g.balance(6)
	warm := g.sets["c"].Warmup
	g.states["c"] = map[TaskID]taskState{}
	for _, task := range warm {
		g.states["c"][task] = taskState{Offset: 1000, Lag: 500000}
	}
	g.balance(6)
	if len(g.active["c"]) != 0 || !slices.Equal(g.sets["c"].Warmup, warm) {
		t.Errorf("c: active %v, warm-ups %v; want none and the same warm-ups %v", g.active["c"], g.sets["c"].Warmup, warm)
	}
}

// Without a caught-up member (its owner is gone and nobody reports a small lag), a task goes
// to the member with the most of its state at once; with MaxWarmupReplicas 0, tasks move to
// a new member at once, as before warm-ups.
func TestBalanceNoCaughtUpMemberMovesAtOnce(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
	}}
	leader := newTaskBalancer(topo)
	leader.acceptableLag, leader.maxWarmups = 100, 2
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a", "b"}, states: map[string]map[TaskID]taskState{
		"a": {{0, 0}: {Offset: 10, Lag: 5000}},
		"b": {{0, 0}: {Offset: 900, Lag: 4000}},
	}}
	g.balance(2)
	if !slices.Contains(g.active["b"], TaskID{0, 0}) {
		t.Errorf("task 0_0 without owner went to %v, want b (most state)", g.active)
	}
	// A task whose changelog is within the acceptable lag moves at once: restoring all of
	// it is cheap (as in Kafka Streams, where a member without state lags by the whole
	// changelog).
	g = &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a"}, states: map[string]map[TaskID]taskState{}}
	g.balance(4)
	g.states["a"] = map[TaskID]taskState{}
	for _, task := range g.active["a"] {
		g.states["a"][task] = taskState{Offset: 80, Lag: 0}
	}
	g.ids = append(g.ids, "b")
	g.balance(4)
	if l := g.loads(); !slices.Equal(l, []int{2, 2}) || len(g.sets["b"].Warmup) != 0 {
		t.Errorf("small state: loads %v, warm-ups %v; want 2/2 at once", l, g.sets["b"].Warmup)
	}
	leader.maxWarmups = 0
	g = &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a"}, states: map[string]map[TaskID]taskState{}}
	g.balance(4)
	g.states["a"] = map[TaskID]taskState{}
	for _, task := range g.active["a"] {
		g.states["a"][task] = taskState{Offset: 1e6, Lag: 0}
	}
	g.ids = append(g.ids, "b")
	g.balance(4)
	if l := g.loads(); !slices.Equal(l, []int{2, 2}) || len(g.sets["b"].Warmup) != 0 {
		t.Errorf("without warm-ups: loads %v, warm-ups %v; want 2/2 at once", l, g.sets["b"].Warmup)
	}
}

// Standbys go to another rack than their active's when there is one.
func TestBalanceStandbysOnOtherRacks(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
	}}
	leader := newTaskBalancer(topo)
	leader.numStandbys = 1
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a1", "a2", "b1", "b2"},
		racks:  map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"},
		states: map[string]map[TaskID]taskState{}}
	g.balance(8)
	owner := map[TaskID]string{}
	for id, set := range g.sets {
		for _, task := range set.Active {
			owner[task] = id
		}
	}
	standbys := 0
	for id, set := range g.sets {
		for _, task := range set.Standby {
			standbys++
			if g.racks[id] == g.racks[owner[task]] {
				t.Errorf("task %v: active on %s, standby on %s, same rack %s", task, owner[task], id, g.racks[id])
			}
		}
		if n := len(set.Standby); n != 2 {
			t.Errorf("%s has %d standbys, want 2 (balanced)", id, n)
		}
	}
	if standbys != 8 {
		t.Errorf("%d standbys, want 8", standbys)
	}
}

// A cooperative move takes two rebalances: the first revokes, the second assigns. In the
// second, the revoked tasks have no owner, and the member that gave them up reports the most
// of their state; they still go where the first meant them to go, and the tasks that stayed
// stay (with standbys caught up on the new member, the target used to flip between the two).
func TestBalanceCooperativeSecondRoundKeepsTheTarget(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{
		{ID: 0, Sources: []Source{{Topic: "in"}}, Stores: []StoreSpec{{Name: "s", Changelog: "app-s-changelog"}}},
	}}
	leader := newTaskBalancer(topo)
	leader.acceptableLag, leader.maxWarmups, leader.numStandbys = 10000, 2, 1
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"a"}, states: map[string]map[TaskID]taskState{}}
	g.balance(4)
	g.states["a"] = map[TaskID]taskState{}
	for _, task := range g.active["a"] {
		g.states["a"][task] = taskState{Offset: 300, Lag: 0}
	}
	g.ids = append(g.ids, "b")
	g.balance(4) // the first round: its target
	target := maps.Clone(g.active)
	if l := g.loads(); !slices.Equal(l, []int{2, 2}) {
		t.Fatalf("target loads %v, want 2/2 (small state moves at once)", l)
	}
	// The second round: a owns what it kept, b nothing yet; b's standbys of a's tasks are
	// caught up; a still has the state of the tasks it gave up.
	g.active = map[string][]TaskID{"a": target["a"]}
	g.states["b"] = map[TaskID]taskState{}
	for _, task := range g.sets["b"].Standby {
		g.states["b"][task] = taskState{Offset: 300, Lag: 0}
	}
	g.balance(4)
	for id := range target {
		a, b := slices.Clone(target[id]), slices.Clone(g.active[id])
		slices.SortFunc(a, compareTaskIDs)
		slices.SortFunc(b, compareTaskIDs)
		if !slices.Equal(a, b) {
			t.Errorf("second round: %s has %v, the first round's target was %v", id, b, a)
		}
	}
}

// Standby counts differ by at most one between members, whatever state the members report
// (the preference for members holding state used to pile standbys onto them).
func TestAssignStandbysBalanced(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	stateful := func(TaskID) bool { return true }
	for trial := range 200 {
		nMembers := 2 + rng.IntN(5)
		n := 1 + rng.IntN(2)
		tasks := taskList(1+rng.IntN(2), 1+rng.IntN(12))
		owner := assignTasks(tasks, nil, nMembers)
		state := make([]map[TaskID]int64, nMembers)
		racks := make([]string, nMembers)
		for m := range state {
			state[m] = map[TaskID]int64{}
			for _, id := range tasks {
				if rng.IntN(3) == 0 {
					state[m][id] = rng.Int64N(1000)
				}
			}
			if trial%2 == 0 {
				racks[m] = fmt.Sprint("r", rng.IntN(2))
			}
		}
		out := assignStandbys(tasks, owner, state, racks, nMembers, n, stateful)
		loads := make([]int, nMembers)
		for m, ids := range out {
			loads[m] = len(ids)
		}
		if slices.Max(loads)-slices.Min(loads) > 1 {
			t.Fatalf("trial %d: %d members, %d tasks, %d standbys each: standby loads %v", trial, nMembers, len(tasks), n, loads)
		}
	}
}

// The leader fences the transactional ids of the members of the last assignment that are not
// members any more, unless a member reports the same id now (the instance came back).
func TestGoneTransactions(t *testing.T) {
	hosts := []hostAssignment{{Member: "a", Txn: "app-1"}, {Member: "b", Txn: "app-2"}, {Member: "c", Txn: "app-3"}, {Member: "d"}}
	var members []kmsg.JoinGroupResponseMember
	for _, id := range []string{"a", "e"} {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		members = append(members, m)
	}
	// a stays; b and c are gone, but e is c's instance back with its transactional id; d
	// had none (at-least-once).
	if got := goneTransactions(hosts, members, []string{"app-1", "app-3"}); !slices.Equal(got, []string{"app-2"}) {
		t.Errorf("gone transactions %v, want [app-2]", got)
	}
}

// Tasks do not move between racks without need: when two instances join two others, one in
// each rack, the tasks each old instance gives up go to the new instance of its own rack.
func TestBalanceMovesStayInTheirRack(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{{Topic: "in"}}}}}
	leader := newTaskBalancer(topo)
	racks := map[string]string{"m1": "a", "m2": "b", "m3": "b", "m4": "a"}
	g := &warmGroup{t: t, topo: topo, leader: leader, ids: []string{"m1", "m2"}, racks: racks, states: map[string]map[TaskID]taskState{}}
	g.balance(8)
	before := maps.Clone(g.active)
	// In member order the first new member (m3) is in the other rack than the first old
	// one (m1), whose tasks would go there if only loads counted.
	g.ids = []string{"m1", "m2", "m3", "m4"}
	g.balance(8)
	if l := g.loads(); !slices.Equal(l, []int{2, 2, 2, 2}) {
		t.Fatalf("loads %v, want 2 each", l)
	}
	for _, id := range []string{"m3", "m4"} {
		for _, task := range g.active[id] {
			from := "m1"
			if slices.Contains(before["m2"], task) {
				from = "m2"
			}
			if racks[from] != racks[id] {
				t.Errorf("task %v moved from %s (rack %s) to %s (rack %s)", task, from, racks[from], id, racks[id])
			}
		}
	}
}

// A member's shutdown request in its join metadata makes the leader assign no task and put
// the request in every member's assignment; each member that parses it tells its host.
func TestBalanceShutdownRequest(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{{Topic: "a"}}}}}
	req := &shutdownRequest{Instance: `"app-1"`, Cause: "boom"}
	var members []kmsg.JoinGroupResponseMember
	hosts := make([]*fakeHost, 3)
	tbs := make([]*taskBalancer, 3)
	for i := range 3 {
		hosts[i] = &fakeHost{}
		if i == 1 {
			hosts[i].shutdown = req
		}
		tbs[i] = newTaskBalancer(topo)
		tbs[i].host = hosts[i]
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("m%d", i)
		m.ProtocolMetadata = tbs[i].JoinGroupMetadata([]string{"a"}, nil, 1)
		members = append(members, m)
	}
	gmb, _, err := tbs[0].MemberBalancer(members) // m0 leads; m1 asked
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range into.IntoSyncAssignment() {
		i := slices.IndexFunc(members, func(m kmsg.JoinGroupResponseMember) bool { return m.MemberID == a.MemberID })
		parts, err := tbs[i].ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 0 {
			t.Errorf("member %s assigned %v with a shutdown request", a.MemberID, parts)
		}
	}
	for i, h := range hosts {
		if len(h.shutdownGot) != 1 || h.shutdownGot[0] != *req {
			t.Errorf("member %d told of %v, want the request %v once", i, h.shutdownGot, *req)
		}
		if h.lastHost != nil {
			t.Errorf("member %d got an assignment of tasks: %v", i, h.lastHost)
		}
	}
}

// A member that asked to shut the application down but gets an assignment without the
// request (a static member given its previous assignment) takes no partition and asks for a
// rebalance.
func TestParseAssignmentWithoutShutdownRejoins(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{{Topic: "a"}}}}}
	tb := newTaskBalancer(topo)
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID = "m0"
	m.ProtocolMetadata = tb.JoinGroupMetadata([]string{"a"}, nil, 1)
	gmb, _, err := tb.MemberBalancer([]kmsg.JoinGroupResponseMember{m})
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": 2})
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{shutdown: &shutdownRequest{Instance: `"x"`, Cause: "boom"}}
	tb.host = h
	parts, err := tb.ParseSyncAssignment(into.IntoSyncAssignment()[0].MemberAssignment)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 0 || h.rejoins != 1 || h.lastHost != nil {
		t.Fatalf("partitions %v, rejoins %d, assigned %v; want none, 1, none", parts, h.rejoins, h.lastHost)
	}
}
