package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// balancerProtocol is the group protocol name every member of a kstream application speaks.
const balancerProtocol = "kstream-tasks"

// memberUserData is carried in every member's join metadata. It is versioned so later
// releases can add fields without breaking older members; unknown fields are ignored.
type memberUserData struct {
	Version int `json:"v"`
	// Offsets are, for each stateful task the member has local state for, the sum of its
	// stores' changelog positions: the leader prefers the member with the most state when a
	// task's owner is gone, and places standbys where state already is.
	Offsets map[string]int64 `json:"o,omitempty"`
	// Lags are, for the tasks of Offsets whose lag the member knows, how many changelog
	// records it is behind (0 for a running active task): the leader moves a stateful task
	// only to a member within the acceptable recovery lag, and warms the others up.
	Lags map[string]int64 `json:"l,omitempty"`
	// Endpoint is the member's query endpoint (Config.ApplicationServer), "" if none.
	Endpoint string `json:"e,omitempty"`
	// Rack is the member's rack (Config.Rack), "" if none: standbys go to other racks than
	// their active's.
	Rack string `json:"r,omitempty"`
	// Txn is the member's transactional id under exactly-once, "" otherwise: when the member
	// is gone, the leader fences it so that its open transaction is aborted at once.
	Txn string `json:"x,omitempty"`
	// Shutdown is the member's request to shut the application down
	// (UncaughtShutdownApplication, uncaught.go), nil if it made none: the leader then
	// assigns nothing and passes it to every member, as Kafka Streams' SHUTDOWN_REQUESTED
	// error code in the subscription and the assignment.
	Shutdown *shutdownRequest `json:"sd,omitempty"`
}

// assignmentUserData is carried in every member's assignment.
type assignmentUserData struct {
	Version  int      `json:"v"`
	Standbys []string `json:"s,omitempty"` // standby task ids, "<sub>_<partition>"
	// Warmups are the member's warm-up tasks: standbys beyond NumStandbys that restore a
	// task this member is to take over once caught up (a probing rebalance moves it).
	Warmups []string `json:"w,omitempty"`
	// Member is the id of the member this assignment is for; Hosts is the whole group's
	// assignment, so that every member knows which one hosts which task (key discovery,
	// as Kafka Streams' partitionsByHost and standbyPartitionByHost).
	Member string           `json:"m,omitempty"`
	Hosts  []hostAssignment `json:"h,omitempty"`
	// Topics are the sub-topologies reading each source topic, so that tools reading the
	// group from the broker alone (kstream lag) can name the task of each partition:
	// "<sub-topology>_<partition>".
	Topics map[string][]int `json:"t,omitempty"`
	// Shutdown is a member's request to shut the application down: every member that
	// receives it stops (uncaught.go).
	Shutdown *shutdownRequest `json:"sd,omitempty"`
}

// hostAssignment is one member's share of an assignment.
type hostAssignment struct {
	Member   string   `json:"m"`
	Endpoint string   `json:"e,omitempty"`
	Active   []string `json:"a,omitempty"`
	Standby  []string `json:"s,omitempty"`
	Warmup   []string `json:"w,omitempty"`
	Txn      string   `json:"x,omitempty"` // its transactional id under exactly-once
}

// taskBalancer is a cooperative group balancer that assigns whole tasks: every source
// partition of a task goes to the same member. It keeps tasks where they were when it can
// (sticky), and spreads the rest so that member loads differ by at most one. A stateful task
// moves only to a member that is caught up with its state (within the acceptable recovery
// lag): while the target member is not, the task stays where it is caught up and the target
// gets a warm-up replica, and a later (probing) rebalance moves it. A stateful task whose
// owner left goes to the member holding the most of its state (a standby), and each stateful
// task gets up to numStandbys standby replicas on other members, on other racks first.
type taskBalancer struct {
	topo *Topology
	// src is the sources the members read (the runtime's, sources.go): the topics of
	// pattern sources picked up since the start are in it.
	src         func() *sourceIndex
	numStandbys int
	// acceptableLag is the lag within which a member counts as caught up with a task;
	// maxWarmups bounds the warm-up replicas of the group (0: none, tasks move at once).
	acceptableLag int64
	maxWarmups    int
	// endpoint and rack are this member's, carried in its join metadata.
	endpoint string
	rack     string
	// host is the runtime (member.go); nil in tests that need no local state.
	host memberHost
	// target is the owner (member id) of each task in the last assignment this member
	// made as the group's leader. A cooperative move takes two rebalances: the first
	// revokes the task, the second assigns it to its new owner; in the second nobody owns
	// it, and the target of the first says where it goes (not back to the member that
	// just gave it up, which holds the most of its state).
	target map[TaskID]string
	// hosts is the group's assignment as the last assignment this member got carried it:
	// a new leader knows from it which members (and transactional ids) are gone.
	hosts []hostAssignment
}

// newTaskBalancer returns a balancer of topo's tasks, which reads the sources of topo as
// they are now; the runtime's reads its own (newClassicMembership).
func newTaskBalancer(topo *Topology) *taskBalancer {
	ix := newSourceIndex(topo, nil)
	return &taskBalancer{topo: topo, src: func() *sourceIndex { return ix }}
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
	ud := memberUserData{Version: 3, Endpoint: tb.endpoint, Rack: tb.rack}
	if tb.host != nil {
		ud.Txn = tb.host.transactionalID()
		ud.Shutdown = tb.host.shutdownRequest()
		for id, st := range tb.host.taskStates() {
			if ud.Offsets == nil {
				ud.Offsets = map[string]int64{}
			}
			ud.Offsets[id.String()] = st.Offset
			if st.Lag >= 0 {
				if ud.Lags == nil {
					ud.Lags = map[string]int64{}
				}
				ud.Lags[id.String()] = st.Lag
			}
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
	var set TaskSet
	var ud assignmentUserData
	if len(a.UserData) > 0 {
		if err := json.Unmarshal(a.UserData, &ud); err != nil {
			return nil, fmt.Errorf("kstream: reading the group assignment's user data: %w", err)
		}
		var err error
		if set.Standby, err = parseTaskIDs(ud.Standbys); err != nil {
			return nil, err
		}
		if set.Warmup, err = parseTaskIDs(ud.Warmups); err != nil {
			return nil, err
		}
	}
	seen := map[TaskID]bool{}
	topicSubs := tb.src().topicSubs
	for topic, ps := range out {
		for _, sub := range topicSubs[topic] {
			for _, p := range ps {
				if id := (TaskID{sub, p}); !seen[id] {
					seen[id] = true
					set.Active = append(set.Active, id)
				}
			}
		}
	}
	if ud.Shutdown != nil {
		if tb.host != nil {
			tb.host.shutdownRequested(*ud.Shutdown)
		}
		return out, nil
	}
	if tb.host != nil && tb.host.shutdownRequest() != nil {
		// This member asked to shut the application down, but its assignment does not carry
		// the request: a static member that joins again under its instance id is given its
		// previous assignment without a rebalance (its new join metadata unread). It takes
		// no partition, and asks for a rebalance, whose join metadata carries the request.
		tb.host.rejoinForShutdown()
		return map[string][]int32{}, nil
	}
	if ud.Hosts != nil {
		tb.hosts = ud.Hosts
	}
	if tb.host != nil {
		tb.host.assignedTasks(ud.Member, set, ud.Hosts)
	}
	return out, nil
}

func parseTaskIDs(ss []string) ([]TaskID, error) {
	var out []TaskID
	for _, s := range ss {
		id, err := parseTaskID(s)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
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

// groupView is what the leader knows of the group when it balances: per member (by index in
// the sorted member list), what it owns, its local state and lags, endpoint and rack.
type groupView struct {
	owned     map[TaskID]int     // the member running each task now
	state     []map[TaskID]int64 // offset sums per member
	lags      []map[TaskID]int64 // known lags per member
	endpoints []string
	racks     []string
	txns      []string       // transactional ids (exactly-once)
	target    map[TaskID]int // the owners of the leader's previous assignment, if still members
}

// caughtUp reports whether member m is caught up with task id: it runs it, or its lag is
// within acceptable. The lag is the one m reports (a standby or warm-up knows it), else the
// owner's changelog position (or the furthest a member reports) minus m's, all of it when m
// has no state: as in Kafka Streams, a task whose whole changelog is within the acceptable
// lag moves at once, as restoring it is cheap.
func (v *groupView) caughtUp(m int, id TaskID, acceptable int64) bool {
	o, owned := v.owned[id]
	if owned && o == m {
		return true
	}
	if l, ok := v.lags[m][id]; ok {
		return l <= acceptable
	}
	// The changelog's position: the owner's, or without one the furthest any member has.
	pos, ok := int64(0), false
	if owned {
		pos, ok = v.state[o][id]
	} else {
		for _, st := range v.state {
			if p, has := st[id]; has && (!ok || p > pos) {
				pos, ok = p, true
			}
		}
	}
	if !ok {
		return true // nobody has state on disk yet: nothing to restore
	}
	return pos-v.state[m][id] <= acceptable
}

// Balance implements kgo.ConsumerBalancerBalance.
func (tb *taskBalancer) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	members := b.Members() // sorted by instance id, then member id
	n := len(members)
	v := &groupView{owned: make(map[TaskID]int, 64), state: make([]map[TaskID]int64, n), lags: make([]map[TaskID]int64, n),
		endpoints: make([]string, n), racks: make([]string, n), txns: make([]string, n)}
	var shutdown *shutdownRequest
	ix := tb.src()
	// subscribed are the topics each member subscribes to: a member that has not picked up
	// a new topic of a pattern source yet (pattern.go) gets none of its partitions, and
	// rejoins when it does.
	subscribed := make([]map[string]bool, n)
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		idx := memberIndex(members, m.MemberID)
		subscribed[idx] = make(map[string]bool, len(meta.Topics))
		for _, t := range meta.Topics {
			subscribed[idx][t] = true
		}
		for _, op := range meta.OwnedPartitions {
			for _, sub := range ix.topicSubs[op.Topic] {
				for _, p := range op.Partitions {
					v.owned[TaskID{sub, p}] = idx
				}
			}
		}
		var ud memberUserData
		if len(meta.UserData) > 0 && json.Unmarshal(meta.UserData, &ud) == nil {
			if ud.Shutdown != nil && shutdown == nil {
				shutdown = ud.Shutdown
			}
			v.endpoints[idx], v.racks[idx], v.txns[idx] = ud.Endpoint, ud.Rack, ud.Txn
			v.state[idx] = parseTaskMap(ud.Offsets)
			v.lags[idx] = parseTaskMap(ud.Lags)
		}
	})
	if shutdown != nil {
		// A member asks to shut the application down: no member gets a task, every one
		// gets the request (Kafka Streams' StreamsPartitionAssignor.errorAssignment).
		return standbyPlan{plan: b.NewPlan(), shutdown: shutdown}
	}
	v.target = make(map[TaskID]int, len(tb.target))
	for id, member := range tb.target {
		if m := memberIndex(members, member); m >= 0 {
			v.target[id] = m
		}
	}
	if gone := goneTransactions(tb.hosts, members, v.txns); len(gone) > 0 && tb.host != nil {
		tb.host.fenceTransactions(gone)
	}
	tasks := tb.tasks(ix, topics)
	a := tb.assign(tasks, v, n)
	tb.target = make(map[TaskID]string, len(tasks))
	for i, id := range tasks {
		tb.target[id] = members[a.owner[i]].MemberID
	}
	plan := b.NewPlan()
	for i, id := range tasks {
		m := &members[a.owner[i]]
		for _, src := range ix.subs[id.SubTopology] {
			if n, ok := topics[src.Topic]; ok && id.Partition < n && subscribed[a.owner[i]][src.Topic] {
				plan.AddPartition(m, src.Topic, id.Partition)
			}
		}
	}
	plan.AdjustCooperative(b)
	sp := standbyPlan{plan: plan, standbys: map[string][]string{}, warmups: map[string][]string{}, topics: ix.topicSubs}
	hosts := make([]hostAssignment, n)
	for m := range members {
		hosts[m] = hostAssignment{Member: members[m].MemberID, Endpoint: v.endpoints[m], Txn: v.txns[m]}
	}
	// The hosts are those of the target assignment: a task moving between members is
	// listed at its new owner, which gets it after the follow-up rebalance.
	for i, id := range tasks {
		hosts[a.owner[i]].Active = append(hosts[a.owner[i]].Active, id.String())
	}
	for m, ids := range a.standbys {
		for _, id := range ids {
			sp.standbys[members[m].MemberID] = append(sp.standbys[members[m].MemberID], id.String())
			hosts[m].Standby = append(hosts[m].Standby, id.String())
		}
	}
	for m, ids := range a.warmups {
		for _, id := range ids {
			sp.warmups[members[m].MemberID] = append(sp.warmups[members[m].MemberID], id.String())
			hosts[m].Warmup = append(hosts[m].Warmup, id.String())
		}
	}
	sp.hosts = hosts
	return sp
}

// goneTransactions returns the transactional ids of the members of the previous assignment
// (hosts) that are not members any more, unless a member reports the same id now (the same
// instance came back). Under exactly-once a member that crashed left its transaction open;
// read_committed consumers of the partitions it wrote see nothing past it until the broker
// aborts it at its timeout, plus up to the broker's check interval (10 s by default).
// Fencing its transactional id (an InitProducerID) aborts it at once, so that a failover's
// pause is bounded by the session timeout.
func goneTransactions(hosts []hostAssignment, members []kmsg.JoinGroupResponseMember, txns []string) []string {
	var gone []string
	for _, h := range hosts {
		if h.Txn == "" || memberIndex(members, h.Member) >= 0 || slices.Contains(txns, h.Txn) || slices.Contains(gone, h.Txn) {
			continue
		}
		gone = append(gone, h.Txn)
	}
	return gone
}

func parseTaskMap(m map[string]int64) map[TaskID]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[TaskID]int64, len(m))
	for s, o := range m {
		if id, err := parseTaskID(s); err == nil {
			out[id] = o
		}
	}
	return out
}

// assignment is the balancer's decision: the owner of each task (by index in the task list),
// and the standby and warm-up tasks of each member.
type assignment struct {
	owner    []int
	standbys map[int][]TaskID
	warmups  map[int][]TaskID
}

// assign decides the assignment of tasks over n members given the group's view. First a
// balanced target, sticky, that prefers for each moving task a member caught up with it,
// then one with some of its state. Then each stateful task whose target member is not caught
// up stays with a member that is (its owner, or a caught-up standby), if any, and the
// target gets a warm-up replica (at most maxWarmups in the group; without one the task
// stays and waits for a later rebalance). Then the standbys.
func (tb *taskBalancer) assign(tasks []TaskID, v *groupView, n int) assignment {
	a := assignment{standbys: map[int][]TaskID{}, warmups: map[int][]TaskID{}}
	prev := make(map[TaskID]int, len(v.owned))
	for id, m := range v.owned {
		prev[id] = m
	}
	warm := tb.maxWarmups > 0 && tb.acceptableLag >= 0
	caught := func(m int, id TaskID) bool {
		return !warm || v.caughtUp(m, id, tb.acceptableLag)
	}
	// A task without a live owner goes to the owner the previous assignment meant for it
	// (the second rebalance of a cooperative move); else, if stateful, to the member with
	// the most of its state (a standby, which then restores only the changelog's tail).
	for _, id := range tasks {
		if _, ok := prev[id]; ok {
			continue
		}
		if m, ok := v.target[id]; ok {
			prev[id] = m
			continue
		}
		if !tb.stateful(id) {
			continue
		}
		if m := mostState(v.state, id, -1); m >= 0 {
			prev[id] = m
		}
	}
	// A member ranks 2 for a task it reports a lag within the acceptable one for (a warm-up
	// or standby that caught up), 1 for a task it holds state of. A member merely estimated
	// caught up (the task's state is small) ranks 0: such a task is cheap to move anywhere,
	// and the placement spreads each sub-topology as without warm-ups.
	pref := func(i, m int) int {
		id := tasks[i]
		if !tb.stateful(id) {
			return 0
		}
		if l, ok := v.lags[m][id]; ok && l <= tb.acceptableLag {
			if o, owned := v.owned[id]; !owned || o != m {
				return 2
			}
		}
		if _, ok := v.state[m][id]; ok {
			return 1
		}
		return 0
	}
	if !warm {
		pref = nil
	}
	var near func(i, m int) bool
	if slices.ContainsFunc(v.racks, func(r string) bool { return r != "" }) {
		near = func(i, m int) bool {
			o, ok := v.owned[tasks[i]]
			if !ok {
				o, ok = prev[tasks[i]]
			}
			return ok && v.racks[o] == v.racks[m]
		}
	}
	a.owner = placeTasks(tasks, prev, n, pref, near)
	// pending are the tasks kept with a caught-up member while their target is not caught
	// up: task index -> target member.
	pending := map[int]int{}
	if warm {
		for i, id := range tasks {
			t := a.owner[i]
			if !tb.stateful(id) || caught(t, id) {
				continue
			}
			c := -1
			if o, ok := v.owned[id]; ok {
				c = o // its owner runs it: caught up
			} else {
				var best int64 = -1
				for m := range n {
					if l, ok := v.lags[m][id]; ok && m != t && l <= tb.acceptableLag && (best < 0 || l < best) {
						c, best = m, l
					}
				}
			}
			if c < 0 || c == t {
				continue // no member is caught up: the task moves now and restores
			}
			a.owner[i] = c
			pending[i] = t
		}
	}
	a.standbys = assignStandbys(tasks, a.owner, v.state, v.racks, n, tb.numStandbys, tb.stateful)
	// The target of a pending task gets a warm-up replica, unless it holds a standby of the
	// task already (the standby warms it up); at most maxWarmups in the group. A pending
	// task without one stays where it is until a later rebalance. The warm-ups listed for
	// a member include its standbys of pending tasks: the member asks for a probing
	// rebalance once they are caught up (probe.go).
	used := 0
	for i, id := range tasks {
		t, ok := pending[i]
		if !ok {
			continue
		}
		if slices.Contains(a.standbys[t], id) {
			a.warmups[t] = append(a.warmups[t], id)
			continue
		}
		if used < tb.maxWarmups {
			a.warmups[t] = append(a.warmups[t], id)
			used++
		}
	}
	return a
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
// than its owner, so that members' standby counts differ by at most one: among the members
// below their share, first on racks that hold no replica of the task yet (when racks are
// known), then where its state already is (most state first), then on the members with the
// fewest standbys (lowest index on ties). It returns the standby tasks per member.
func assignStandbys(tasks []TaskID, owner []int, state []map[TaskID]int64, racks []string, nMembers, n int, stateful func(TaskID) bool) map[int][]TaskID {
	out := map[int][]TaskID{}
	n = min(n, nMembers-1)
	if n <= 0 {
		return out
	}
	rack := func(m int) string {
		if m < len(racks) {
			return racks[m]
		}
		return ""
	}
	total := 0
	for _, id := range tasks {
		if stateful(id) {
			total += n
		}
	}
	// Shares as placeTasks': the first (total % nMembers) members to fill up may hold one
	// more than the others.
	base, extra := total/nMembers, total%nMembers
	extrasUsed := 0
	load := make([]int, nMembers)
	fits := func(m int) bool { return load[m] < base || (load[m] == base && extrasUsed < extra) }
	for i, id := range tasks {
		if !stateful(id) {
			continue
		}
		chosen := map[int]bool{owner[i]: true}
		usedRacks := map[string]bool{rack(owner[i]): true}
		for range n {
			best := -1
			for _, within := range []bool{true, false} { // within the shares, else anywhere
				for m := range nMembers {
					if chosen[m] || (within && !fits(m)) {
						continue
					}
					if best < 0 {
						best = m
						continue
					}
					// A rack without a replica of the task beats one with (rack
					// awareness); racks unknown ("") are all one rack.
					if mNew, bNew := !usedRacks[rack(m)], !usedRacks[rack(best)]; mNew != bNew {
						if mNew {
							best = m
						}
						continue
					}
					mo, mHas := state[m][id]
					bo, bHas := state[best][id]
					switch {
					case mHas != bHas:
						if mHas {
							best = m
						}
					case mHas && mo != bo:
						if mo > bo {
							best = m
						}
					case load[m] < load[best]:
						best = m
					}
				}
				if best >= 0 {
					break
				}
			}
			if best < 0 {
				break
			}
			chosen[best] = true
			usedRacks[rack(best)] = true
			if load[best] == base {
				extrasUsed++
			}
			load[best]++
			out[best] = append(out[best], id)
		}
	}
	// The greedy pass can end with a member above its share where the only members left
	// with room were the task's owner or already held it; move standbys from the most to
	// the least loaded member until the counts differ by at most one, keeping a moved
	// standby off racks that hold the task already when possible.
	ownerOf := map[TaskID]int{}
	for i, id := range tasks {
		ownerOf[id] = owner[i]
	}
	replicaRacks := func(id TaskID, except int) map[string]bool {
		rs := map[string]bool{rack(ownerOf[id]): true}
		for m, ids := range out {
			if m != except && slices.Contains(ids, id) {
				rs[rack(m)] = true
			}
		}
		return rs
	}
	for range total {
		hi, lo := 0, 0
		for m := range nMembers {
			if len(out[m]) > len(out[hi]) {
				hi = m
			}
			if len(out[m]) < len(out[lo]) {
				lo = m
			}
		}
		if len(out[hi])-len(out[lo]) <= 1 {
			break
		}
		pick := -1
		for j, id := range out[hi] {
			if ownerOf[id] == lo || slices.Contains(out[lo], id) {
				continue
			}
			if pick < 0 || !replicaRacks(id, hi)[rack(lo)] {
				pick = j
			}
		}
		if pick < 0 {
			break
		}
		id := out[hi][pick]
		out[hi] = slices.Delete(out[hi], pick, pick+1)
		out[lo] = append(out[lo], id)
	}
	return out
}

// standbyPlan is a balance plan whose member assignments carry their standby and warm-up
// tasks in the assignment's user data.
type standbyPlan struct {
	plan     kgo.IntoSyncAssignment
	standbys map[string][]string // member id -> standby task ids
	warmups  map[string][]string // member id -> warm-up task ids
	hosts    []hostAssignment
	topics   map[string][]int // source topic -> sub-topologies reading it
	shutdown *shutdownRequest // a member's request to shut the application down
}

// IntoSyncAssignment implements kgo.IntoSyncAssignment.
func (p standbyPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := p.plan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // cannot happen: kgo encoded it
		}
		a.UserData, _ = json.Marshal(assignmentUserData{Version: 3, Standbys: p.standbys[out[i].MemberID], Warmups: p.warmups[out[i].MemberID],
			Member: out[i].MemberID, Hosts: p.hosts, Topics: p.topics, Shutdown: p.shutdown})
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
}

// tasks lists every task, ordered by partition then sub-topology so that a round-robin
// placement spreads each sub-topology across members. The new partitions of a source topic
// of keyed state are left out: their keys' state lives in other tasks' stores, and the topic
// watcher stops the application with the error that says so (watch.go).
func (tb *taskBalancer) tasks(ix *sourceIndex, topics map[string]int32) []TaskID {
	var out []TaskID
	var maxParts int32
	counts := make([]int32, len(tb.topo.SubTopologies))
	for i := range tb.topo.SubTopologies {
		for _, src := range ix.subs[i] {
			n := topics[src.Topic]
			if tb.host != nil {
				if was, ok := tb.host.fixedCount(src.Topic); ok && n > was {
					tb.host.sourceGrown(src.Topic, was, n)
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

// assignTasks is placeTasks without preferences.
func assignTasks(tasks []TaskID, prev map[TaskID]int, nMembers int) []int {
	return placeTasks(tasks, prev, nMembers, nil, nil)
}

// placeTasks returns the member index of each task. Tasks stay with their previous owner
// while that owner is below its fair share; the rest go to the least loaded member (lowest
// index on ties), so the result is deterministic for the same input.
//
// pref, if not nil, ranks member m for task i (2 caught up with its state, 1 holds some of
// it, 0 neither). An owner above its fair share then keeps first the tasks that no other
// member ranks higher than 0, and a task that moves goes first to a member that ranks it
// highest among those with room: so that the tasks that move are those whose state is
// already elsewhere (a warm-up replica that caught up).
//
// near, if not nil, reports whether member m is in the rack of task i's previous owner: among
// members of the same rank and load, a moving task goes to one that is, so that tasks do not
// move between racks without need.
func placeTasks(tasks []TaskID, prev map[TaskID]int, nMembers int, pref func(i, m int) int, near func(i, m int) bool) []int {
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
	// elsewhere is the best rank of task i on a member other than m.
	elsewhere := func(i, m int) int {
		best := 0
		if pref != nil {
			for o := range nMembers {
				if o != m {
					best = max(best, pref(i, o))
				}
			}
		}
		return best
	}
	for i := range owner {
		owner[i] = -1
	}
	for rank := 0; rank <= 2; rank++ {
		for i, id := range tasks {
			m, ok := prev[id]
			if !ok || owner[i] >= 0 || m < 0 || m >= nMembers || elsewhere(i, m) != rank || !fits(m) {
				continue
			}
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
	place := func(i int, minRank int) {
		id := tasks[i]
		best, bestRank := -1, -1
		for m := 0; m < nMembers; m++ {
			if !fits(m) {
				continue
			}
			r := 0
			if pref != nil {
				r = pref(i, m)
			}
			if r < minRank {
				continue
			}
			better := best < 0 || r > bestRank
			if !better && r == bestRank {
				switch {
				case load[m] != load[best]:
					better = load[m] < load[best]
				case near != nil && near(i, m) != near(i, best):
					better = near(i, m)
				default:
					better = subLoad[m][id.SubTopology] < subLoad[best][id.SubTopology]
				}
			}
			if better {
				best, bestRank = m, r
			}
		}
		if best < 0 {
			if minRank > 0 {
				return
			}
			best = 0 // cannot happen: total capacity equals the task count
		}
		owner[i] = best
		take(best)
		subLoad[best][id.SubTopology]++
	}
	if pref != nil {
		// Tasks that a member with room is caught up with, then that one holds state of,
		// go there before any other task takes the room.
		for _, minRank := range []int{2, 1} {
			for i := range tasks {
				if owner[i] < 0 {
					place(i, minRank)
				}
			}
		}
	}
	for i := range tasks {
		if owner[i] < 0 {
			place(i, 0)
		}
	}
	return owner
}
