package runtime

import (
	"fmt"
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
	plan := into.(*kgo.BalancePlan)
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
}
