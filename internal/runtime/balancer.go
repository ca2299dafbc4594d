package runtime

import (
	"encoding/json"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// balancerProtocol is the group protocol name every member of a kstream application speaks.
const balancerProtocol = "kstream-tasks"

// memberUserData is carried in every member's join metadata. It is versioned so later
// releases can add fields (query endpoints, task lags) without breaking older members.
type memberUserData struct {
	Version int `json:"v"`
}

// taskBalancer is a cooperative group balancer that assigns whole tasks: every source
// partition of a task goes to the same member. It keeps tasks where they were when it can
// (sticky), and spreads the rest so that member loads differ by at most one.
type taskBalancer struct {
	topo      *Topology
	topicSubs map[string][]int // topic -> sub-topologies reading it
}

func newTaskBalancer(topo *Topology) *taskBalancer {
	tb := &taskBalancer{topo: topo, topicSubs: map[string][]int{}}
	for _, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			tb.topicSubs[src.Topic] = append(tb.topicSubs[src.Topic], st.ID)
		}
	}
	return tb
}

func (*taskBalancer) ProtocolName() string { return balancerProtocol }
func (*taskBalancer) IsCooperative() bool  { return true }

func (*taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	topics := make([]string, 0, len(current))
	for t := range current {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = t
		op.Partitions = current[t]
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	meta.UserData, _ = json.Marshal(memberUserData{Version: 1})
	return meta.AppendTo(nil)
}

func (*taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (tb *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(tb, members)
	if err != nil {
		return nil, nil, err
	}
	return b, b.MemberTopics(), nil
}

// Balance implements kgo.ConsumerBalancerBalance.
func (tb *taskBalancer) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	members := b.Members() // sorted by instance id, then member id
	prev := make(map[TaskID]int, 64)
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		idx := memberIndex(members, m.MemberID)
		for _, op := range meta.OwnedPartitions {
			for _, sub := range tb.topicSubs[op.Topic] {
				for _, p := range op.Partitions {
					prev[TaskID{sub, p}] = idx
				}
			}
		}
	})
	tasks := tb.tasks(topics)
	owner := assignTasks(tasks, prev, len(members))
	plan := b.NewPlan()
	for i, id := range tasks {
		m := &members[owner[i]]
		for _, src := range tb.topo.SubTopologies[id.SubTopology].Sources {
			if n, ok := topics[src.Topic]; ok && id.Partition < n {
				plan.AddPartition(m, src.Topic, id.Partition)
			}
		}
	}
	plan.AdjustCooperative(b)
	return plan
}

// tasks lists every task, ordered by partition then sub-topology so that a round-robin
// placement spreads each sub-topology across members.
func (tb *taskBalancer) tasks(topics map[string]int32) []TaskID {
	var out []TaskID
	var maxParts int32
	counts := make([]int32, len(tb.topo.SubTopologies))
	for i, st := range tb.topo.SubTopologies {
		for _, src := range st.Sources {
			counts[i] = max(counts[i], topics[src.Topic])
		}
		maxParts = max(maxParts, counts[i])
	}
	for p := int32(0); p < maxParts; p++ {
		for i := range tb.topo.SubTopologies {
			if p < counts[i] {
				out = append(out, TaskID{tb.topo.SubTopologies[i].ID, p})
			}
		}
	}
	return out
}

func memberIndex(members []kmsg.JoinGroupResponseMember, id string) int {
	for i := range members {
		if members[i].MemberID == id {
			return i
		}
	}
	return -1
}

// assignTasks returns the member index of each task. Tasks stay with their previous owner
// while that owner is below its fair share; the rest go to the least loaded member (lowest
// index on ties), so the result is deterministic for the same input.
func assignTasks(tasks []TaskID, prev map[TaskID]int, nMembers int) []int {
	owner := make([]int, len(tasks))
	if nMembers == 0 {
		return owner
	}
	load := make([]int, nMembers)
	// Fair shares: the first (len%n) members may hold one more.
	base, extra := len(tasks)/nMembers, len(tasks)%nMembers
	extrasUsed := 0
	fits := func(m int) bool {
		if load[m] < base {
			return true
		}
		if load[m] == base && extrasUsed < extra {
			return true
		}
		return false
	}
	take := func(m int) {
		if load[m] == base {
			extrasUsed++
		}
		load[m]++
	}
	for i, id := range tasks {
		owner[i] = -1
		if m, ok := prev[id]; ok && m >= 0 && m < nMembers && fits(m) {
			owner[i] = m
			take(m)
		}
	}
	for i := range tasks {
		if owner[i] >= 0 {
			continue
		}
		best := -1
		for m := 0; m < nMembers; m++ {
			if !fits(m) {
				continue
			}
			if best < 0 || load[m] < load[best] {
				best = m
			}
		}
		if best < 0 { // cannot happen: total capacity equals the task count
			best = 0
		}
		owner[i] = best
		take(best)
	}
	return owner
}
