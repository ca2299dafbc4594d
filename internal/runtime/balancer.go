package runtime

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// balancerProtocol is the group protocol name every member of a kstream application speaks.
const balancerProtocol = "kstream-tasks"

// memberUserData is carried in every member's join metadata. It is versioned so later
// releases can add fields (query endpoints, task lags) without breaking older members.
type memberUserData struct {
	Version int `json:"v"`
	// Offsets are, for each stateful task the member has local state for, the sum of its
	// stores' checkpointed changelog offsets: the leader prefers the member with the most
	// state when a task's owner is gone, and places standbys where state already is.
	Offsets map[string]int64 `json:"o,omitempty"`
	// Endpoint is the member's query endpoint (Config.ApplicationServer), "" if none.
	Endpoint string `json:"e,omitempty"`
}

// assignmentUserData is carried in every member's assignment.
type assignmentUserData struct {
	Version  int      `json:"v"`
	Standbys []string `json:"s,omitempty"` // standby task ids, "<sub>_<partition>"
	// Member is the id of the member this assignment is for; Hosts is the whole group's
	// assignment, so that every member knows which one hosts which task (key discovery,
	// as Kafka Streams' partitionsByHost and standbyPartitionByHost).
	Member string           `json:"m,omitempty"`
	Hosts  []hostAssignment `json:"h,omitempty"`
	// Topics are the sub-topologies reading each source topic, so that tools reading the
	// group from the broker alone (kstream lag) can name the task of each partition:
	// "<sub-topology>_<partition>".
	Topics map[string][]int `json:"t,omitempty"`
}

// hostAssignment is one member's share of an assignment.
type hostAssignment struct {
	Member   string   `json:"m"`
	Endpoint string   `json:"e,omitempty"`
	Active   []string `json:"a,omitempty"`
	Standby  []string `json:"s,omitempty"`
}

// taskBalancer is a cooperative group balancer that assigns whole tasks: every source
// partition of a task goes to the same member. It keeps tasks where they were when it can
// (sticky), and spreads the rest so that member loads differ by at most one. A stateful task
// whose owner left goes to the member holding the most of its state (a standby), and each
// stateful task gets up to numStandbys standby replicas on other members.
type taskBalancer struct {
	topo        *Topology
	topicSubs   map[string][]int // topic -> sub-topologies reading it
	numStandbys int
	// offsets reports this member's local state (see memberUserData.Offsets); may be nil.
	offsets func() map[TaskID]int64
	// onStandbys receives the standby and active tasks of each new assignment; may be nil.
	onStandbys func(standbys, actives []TaskID)
	// endpoint is this member's query endpoint; onHosts receives this member's id and the
	// group's assignment carried by each new assignment. May be nil.
	endpoint string
	onHosts  func(self string, hosts []hostAssignment)
	// fixed, if set, returns the partition count that a source topic of keyed state
	// (stores, or co-partitioning) had when the application started; onGrown is called when
	// the group's metadata shows more. The new partitions are never assigned: their keys'
	// state lives in other tasks' stores, and the topic watcher stops the application with
	// the error that says so (watch.go). May be nil.
	fixed   func(topic string) (int32, bool)
	onGrown func(topic string, was, now int32)
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

func (tb *taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
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
	ud := memberUserData{Version: 2, Endpoint: tb.endpoint}
	if tb.offsets != nil {
		for id, o := range tb.offsets() {
			if ud.Offsets == nil {
				ud.Offsets = map[string]int64{}
			}
			ud.Offsets[id.String()] = o
		}
	}
	meta.UserData, _ = json.Marshal(ud)
	return meta.AppendTo(nil)
}

func (tb *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("kstream: reading the group assignment: %w", err)
	}
	out := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		out[t.Topic] = t.Partitions
	}
	var standbys []TaskID
	if len(a.UserData) > 0 {
		var ud assignmentUserData
		if err := json.Unmarshal(a.UserData, &ud); err != nil {
			return nil, fmt.Errorf("kstream: reading the group assignment's user data: %w", err)
		}
		for _, s := range ud.Standbys {
			id, err := parseTaskID(s)
			if err != nil {
				return nil, err
			}
			standbys = append(standbys, id)
		}
		if tb.onHosts != nil && ud.Hosts != nil {
			tb.onHosts(ud.Member, ud.Hosts)
		}
	}
	if tb.onStandbys != nil {
		seen := map[TaskID]bool{}
		var actives []TaskID
		for topic, ps := range out {
			for _, sub := range tb.topicSubs[topic] {
				for _, p := range ps {
					if id := (TaskID{sub, p}); !seen[id] {
						seen[id] = true
						actives = append(actives, id)
					}
				}
			}
		}
		tb.onStandbys(standbys, actives)
	}
	return out, nil
}

// parseTaskID parses "<sub-topology>_<partition>".
func parseTaskID(s string) (TaskID, error) {
	sub, part, ok := strings.Cut(s, "_")
	a, err1 := strconv.Atoi(sub)
	b, err2 := strconv.ParseInt(part, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return TaskID{}, fmt.Errorf("kstream: bad task id %q in group metadata", s)
	}
	return TaskID{a, int32(b)}, nil
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
	state := make([]map[TaskID]int64, len(members)) // local state per member
	endpoints := make([]string, len(members))
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		idx := memberIndex(members, m.MemberID)
		for _, op := range meta.OwnedPartitions {
			for _, sub := range tb.topicSubs[op.Topic] {
				for _, p := range op.Partitions {
					prev[TaskID{sub, p}] = idx
				}
			}
		}
		var ud memberUserData
		if len(meta.UserData) > 0 && json.Unmarshal(meta.UserData, &ud) == nil {
			endpoints[idx] = ud.Endpoint
			for s, o := range ud.Offsets {
				if id, err := parseTaskID(s); err == nil {
					if state[idx] == nil {
						state[idx] = map[TaskID]int64{}
					}
					state[idx][id] = o
				}
			}
		}
	})
	tasks := tb.tasks(topics)
	// A stateful task without a live owner goes preferably to the member with the most of
	// its state: its standby, which then restores only the changelog's tail.
	for _, id := range tasks {
		if _, ok := prev[id]; ok || !tb.stateful(id) {
			continue
		}
		if m := mostState(state, id, -1); m >= 0 {
			prev[id] = m
		}
	}
	owner := assignTasks(tasks, prev, len(members))
	standbys := assignStandbys(tasks, owner, state, len(members), tb.numStandbys, tb.stateful)
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
	sp := standbyPlan{plan: plan, standbys: map[string][]string{}, topics: tb.topicSubs}
	hosts := make([]hostAssignment, len(members))
	for m := range members {
		hosts[m] = hostAssignment{Member: members[m].MemberID, Endpoint: endpoints[m]}
	}
	// The hosts are those of the target assignment: a task moving between members is
	// listed at its new owner, which gets it after the follow-up rebalance.
	for i, id := range tasks {
		hosts[owner[i]].Active = append(hosts[owner[i]].Active, id.String())
	}
	for m, ids := range standbys {
		for _, id := range ids {
			sp.standbys[members[m].MemberID] = append(sp.standbys[members[m].MemberID], id.String())
			hosts[m].Standby = append(hosts[m].Standby, id.String())
		}
	}
	sp.hosts = hosts
	return sp
}

// stateful reports whether task id has a store with a changelog (only those have standbys
// and state worth moving to).
func (tb *taskBalancer) stateful(id TaskID) bool {
	return len(loggedSpecs(tb.topo.SubTopologies[id.SubTopology])) > 0
}

// mostState returns the member (other than except) reporting the highest offset sum for id,
// or -1 if none reports state for it.
func mostState(state []map[TaskID]int64, id TaskID, except int) int {
	best, bestOff := -1, int64(-1)
	for m, st := range state {
		if m == except {
			continue
		}
		if o, ok := st[id]; ok && o > bestOff {
			best, bestOff = m, o
		}
	}
	return best
}

// assignStandbys places up to n standby replicas of every stateful task on members other
// than its owner: first where its state already is (most state first), then on the members
// with the fewest standbys (lowest index on ties). It returns the standby tasks per member.
func assignStandbys(tasks []TaskID, owner []int, state []map[TaskID]int64, nMembers, n int, stateful func(TaskID) bool) map[int][]TaskID {
	out := map[int][]TaskID{}
	n = min(n, nMembers-1)
	if n <= 0 {
		return out
	}
	load := make([]int, nMembers)
	for i, id := range tasks {
		if !stateful(id) {
			continue
		}
		chosen := map[int]bool{owner[i]: true}
		for range n {
			best := -1
			for m := range nMembers {
				if chosen[m] {
					continue
				}
				if best < 0 {
					best = m
					continue
				}
				_, mHas := state[m][id]
				_, bHas := state[best][id]
				switch {
				case mHas != bHas:
					if mHas && load[m] <= load[best]+1 {
						best = m
					}
				case mHas && state[m][id] > state[best][id] && load[m] <= load[best]+1:
					best = m
				case load[m] < load[best]:
					best = m
				}
			}
			if best < 0 {
				break
			}
			chosen[best] = true
			load[best]++
			out[best] = append(out[best], id)
		}
	}
	return out
}

// standbyPlan is a balance plan whose member assignments carry their standby tasks in the
// assignment's user data.
type standbyPlan struct {
	plan     kgo.IntoSyncAssignment
	standbys map[string][]string // member id -> standby task ids
	hosts    []hostAssignment
	topics   map[string][]int // source topic -> sub-topologies reading it
}

// IntoSyncAssignment implements kgo.IntoSyncAssignment.
func (p standbyPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := p.plan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // cannot happen: kgo encoded it
		}
		a.UserData, _ = json.Marshal(assignmentUserData{Version: 2, Standbys: p.standbys[out[i].MemberID], Member: out[i].MemberID, Hosts: p.hosts, Topics: p.topics})
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
}

// tasks lists every task, ordered by partition then sub-topology so that a round-robin
// placement spreads each sub-topology across members.
func (tb *taskBalancer) tasks(topics map[string]int32) []TaskID {
	var out []TaskID
	var maxParts int32
	counts := make([]int32, len(tb.topo.SubTopologies))
	for i, st := range tb.topo.SubTopologies {
		for _, src := range st.Sources {
			n := topics[src.Topic]
			if tb.fixed != nil {
				if was, ok := tb.fixed(src.Topic); ok && n > was {
					if tb.onGrown != nil {
						tb.onGrown(src.Topic, was, n)
					}
					n = was
				}
			}
			counts[i] = max(counts[i], n)
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
	// Among the least loaded members, a task goes to the one with the fewest tasks of its
	// sub-topology, so that each sub-topology (a stateful one especially) spreads over the
	// members rather than whole sub-topologies landing on one member each.
	subLoad := make([]map[int]int, nMembers)
	for m := range subLoad {
		subLoad[m] = map[int]int{}
	}
	for i, id := range tasks {
		if owner[i] >= 0 {
			subLoad[owner[i]][id.SubTopology]++
		}
	}
	for i, id := range tasks {
		if owner[i] >= 0 {
			continue
		}
		best := -1
		for m := 0; m < nMembers; m++ {
			if !fits(m) {
				continue
			}
			if best < 0 || load[m] < load[best] || (load[m] == load[best] && subLoad[m][id.SubTopology] < subLoad[best][id.SubTopology]) {
				best = m
			}
		}
		if best < 0 { // cannot happen: total capacity equals the task count
			best = 0
		}
		owner[i] = best
		take(best)
		subLoad[best][id.SubTopology]++
	}
	return owner
}
