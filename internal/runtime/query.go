package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kstream-go/kstream/store"
)

// Interactive queries: the runtime publishes which store partitions this instance holds
// (active, restoring, standby) in snapshots that readers load without taking the runtime's
// locks, so that a query never waits for a batch of records being processed, and hands out
// read views over the stores' engines. A view reads what the engine holds: a store's data
// as of its task's last commit (its writes are buffered in the task until then, and reach
// the engine in one atomic batch), except for a memory store without a changelog, which is
// written directly (under at-least-once).

// QueryReason says why a store partition cannot be read here now.
type QueryReason int

const (
	// QueryUnknownStore: no store of that name in the topology (not retryable).
	QueryUnknownStore QueryReason = iota + 1
	// QueryNotRunning: the instance is not running (not started, or stopped).
	QueryNotRunning
	// QueryNotOwned: the partition is neither active nor (when allowed) a standby here.
	QueryNotOwned
	// QueryRestoring: the partition is active here but its stores are still restoring, or
	// it is a standby that has not started following its changelog yet.
	QueryRestoring
	// QueryStale: the partition is a standby here whose lag exceeds the bound asked for.
	QueryStale
	// QueryRebalancing: the partition is not hosted here and the instance is rebalancing:
	// it may come here, or its new owner be known, once the rebalance ends.
	QueryRebalancing
)

// String names the reason.
func (q QueryReason) String() string {
	switch q {
	case QueryUnknownStore:
		return "unknown store"
	case QueryNotRunning:
		return "instance not running"
	case QueryNotOwned:
		return "partition not hosted here"
	case QueryRestoring:
		return "restoring"
	case QueryStale:
		return "standby lag beyond the bound"
	case QueryRebalancing:
		return "partition not hosted here while the group rebalances"
	}
	return fmt.Sprintf("QueryReason(%d)", int(q))
}

// QueryError is why a store partition cannot be read.
type QueryError struct {
	Store     string
	Partition int32 // -1 when the error is not about one partition
	Reason    QueryReason
	Lag       int64 // the standby's lag, for QueryStale
	MaxLag    int64 // the bound asked for, for QueryStale
}

func (e *QueryError) Error() string {
	var s string
	if e.Partition >= 0 {
		s = fmt.Sprintf("kstream: store %q partition %d: %s", e.Store, e.Partition, e.Reason)
	} else {
		s = fmt.Sprintf("kstream: store %q: %s", e.Store, e.Reason)
	}
	if e.Reason == QueryStale {
		s += fmt.Sprintf(" (lag %d records, bound %d)", e.Lag, e.MaxLag)
	}
	return s
}

// StoreView is a read view of one local store partition. Its Backend belongs to the
// caller's goroutine; only its read methods may be used.
type StoreView struct {
	Spec      StoreSpec
	Partition int32
	Standby   bool
	Backend   store.Backend
	// Position is the changelog offset the store is complete up to (its checkpoint), -1 if
	// unknown (never checkpointed).
	Position int64
	// Lag is how many changelog records the store is behind the end of its changelog as
	// last seen: 0 for an active task that is running, -1 if unknown.
	Lag int64

	run     *taskRun     // the active task, or nil
	standby *standbyTask // the standby task, or nil
	global  bool         // a global store's view
	pool    *sync.Pool   // where Backend goes back (ReleaseView), nil if nowhere
}

// storePart names one store partition.
type storePart struct {
	store     string
	partition int32
}

// activeEntry is a store partition of an active task.
type activeEntry struct {
	run       *taskRun
	spec      StoreSpec
	restoring bool
}

// queryState is what readers load: the active store partitions and the partition counts of
// each sub-topology, replaced (never modified) under Runtime.mu.
type queryState struct {
	active  map[storePart]*activeEntry
	running bool
}

// queryIndex maps store names to their sub-topology and spec; built once in New.
type queryIndex struct {
	sub  map[string]int
	spec map[string]StoreSpec
}

func newQueryIndex(topo *Topology) queryIndex {
	qi := queryIndex{sub: map[string]int{}, spec: map[string]StoreSpec{}}
	for _, st := range topo.SubTopologies {
		for _, s := range st.Stores {
			qi.sub[s.Name], qi.spec[s.Name] = st.ID, s
		}
	}
	return qi
}

// queryRuntime holds the published snapshots.
type queryRuntime struct {
	state  atomic.Pointer[queryState]
	counts atomic.Pointer[map[int]int32] // sub-topology -> partitions
	meta   atomic.Pointer[GroupMetadata]
	pools  sync.Map // storePart+persistent -> *sync.Pool of backends
}

// publishQueryLocked publishes the active store partitions. r.mu must be held.
func (r *Runtime) publishQueryLocked() {
	old := r.query.state.Load()
	next := &queryState{active: map[storePart]*activeEntry{}, running: !r.closing.Load()}
	for id, t := range r.tasks {
		for _, spec := range r.topo.SubTopologies[id.SubTopology].Stores {
			k := storePart{spec.Name, id.Partition}
			restoring := t.task == nil
			if old != nil {
				if e := old.active[k]; e != nil && e.run == t && e.restoring == restoring {
					next.active[k] = e // keep the entry: views taken from it stay valid
					continue
				}
			}
			next.active[k] = &activeEntry{run: t, spec: spec, restoring: restoring}
		}
	}
	r.query.state.Store(next)
}

// publishCounts publishes the partition count of every sub-topology (after prepare).
func (r *Runtime) publishCounts() {
	m := map[int]int32{}
	ix := r.sources()
	for sub, srcs := range ix.subs {
		for _, src := range srcs {
			m[sub] = max(m[sub], ix.counts[src.Topic])
		}
	}
	r.query.counts.Store(&m)
}

// StorePartitionCount returns the number of partitions of the store named name (those of
// its sub-topology's input), and false if the store is unknown or the count is not known
// yet (before the application has started).
func (r *Runtime) StorePartitionCount(name string) (int32, bool) {
	sub, ok := r.qindex.sub[name]
	if !ok {
		return 0, false
	}
	m := r.query.counts.Load()
	if m == nil {
		return 0, false
	}
	n, ok := (*m)[sub]
	return n, ok && n > 0
}

// StoreSourceTopic returns the input topic of the store named name with the most
// partitions (the first such, in the order of its sub-topology's sources) and its count;
// false if the store is unknown or the counts are not known yet.
func (r *Runtime) StoreSourceTopic(name string) (string, int32, bool) {
	sub, ok := r.qindex.sub[name]
	if !ok || r.query.counts.Load() == nil {
		return "", 0, false
	}
	var topic string
	var n int32
	ix := r.sources()
	for _, src := range ix.subs[sub] {
		if c := ix.counts[src.Topic]; c > n {
			topic, n = src.Topic, c
		}
	}
	return topic, n, n > 0
}

// StoreSubTopology returns the sub-topology of the store named name.
func (r *Runtime) StoreSubTopology(name string) (int, bool) {
	sub, ok := r.qindex.sub[name]
	return sub, ok
}

// HasStore reports whether the topology has a store named name (global stores too).
func (r *Runtime) HasStore(name string) bool {
	_, ok := r.qindex.spec[name]
	return ok || r.globalSpec(name) >= 0
}

// globalSpec returns the index of the global store named name, or -1.
func (r *Runtime) globalSpec(name string) int {
	return slices.IndexFunc(r.topo.GlobalStores, func(s GlobalStoreSpec) bool { return s.Name == name })
}

// globalView returns a read view of global store i, once it has bootstrapped.
func (r *Runtime) globalView(i int) (StoreView, error) {
	gs := r.topo.GlobalStores[i]
	st := r.query.state.Load()
	if st == nil || !st.running || r.global == nil {
		return StoreView{}, &QueryError{Store: gs.Name, Partition: -1, Reason: QueryNotRunning}
	}
	if !isClosed(r.global.boot) {
		return StoreView{}, &QueryError{Store: gs.Name, Partition: -1, Reason: QueryRestoring}
	}
	spec := StoreSpec{Name: gs.Name, Persistent: gs.Persistent, Changelog: gs.Topic, SourceTopic: true}
	b, pool, err := r.backend(spec, GlobalDataPartition)
	if err != nil {
		return StoreView{}, fmt.Errorf("kstream: global store %q: %w", gs.Name, err)
	}
	return StoreView{Spec: spec, Partition: GlobalDataPartition, Backend: b, Position: -1, global: true, pool: pool}, nil
}

// backend returns a backend of (spec, partition) for the caller's goroutine: Pebble's
// backends keep a key buffer, so each reader takes one from a pool and gives it back with
// it to the pool returned (nil: no pool).
func (r *Runtime) backend(spec StoreSpec, partition int32) (store.Backend, *sync.Pool, error) {
	db, err := r.stores.db(spec.Persistent)
	if err != nil {
		return nil, nil, err
	}
	if !spec.Persistent {
		b, err := db.Open(spec.Name, partition)
		return b, nil, err
	}
	k := storePart{spec.Name, partition}
	pv, ok := r.query.pools.Load(k) // Load first: LoadOrStore would allocate a pool per call
	if !ok {
		pv, _ = r.query.pools.LoadOrStore(k, &sync.Pool{})
	}
	pool := pv.(*sync.Pool)
	if b, ok := pool.Get().(store.Backend); ok {
		return b, pool, nil
	}
	b, err := db.Open(spec.Name, partition)
	if err != nil {
		return nil, nil, err
	}
	return b, pool, nil
}

// StoreView returns a read view of partition p of the store named name: the active task's
// store if this instance runs the task and has restored it, else, if allowStandby, the
// standby's store when its lag is at most maxLag (a negative maxLag is no bound). The
// returned release must be called when the view is no longer used.
func (r *Runtime) StoreView(name string, p int32, allowStandby bool, maxLag int64) (*StoreView, func(), error) {
	v, err := r.AcquireView(name, p, allowStandby, maxLag)
	if err != nil {
		return nil, nil, err
	}
	return &v, func() { r.ReleaseView(&v) }, nil
}

// AcquireView is StoreView without allocating: the view is returned by value, and
// ReleaseView must be called when it is no longer used (a point read takes one per get).
func (r *Runtime) AcquireView(name string, p int32, allowStandby bool, maxLag int64) (StoreView, error) {
	spec, ok := r.qindex.spec[name]
	if !ok {
		if i := r.globalSpec(name); i >= 0 {
			return r.globalView(i)
		}
		return StoreView{}, &QueryError{Store: name, Partition: -1, Reason: QueryUnknownStore}
	}
	st := r.query.state.Load()
	if st == nil || !st.running {
		return StoreView{}, &QueryError{Store: name, Partition: p, Reason: QueryNotRunning}
	}
	if e := st.active[storePart{name, p}]; e != nil {
		if e.restoring {
			return StoreView{}, &QueryError{Store: name, Partition: p, Reason: QueryRestoring}
		}
		b, pool, err := r.backend(spec, p)
		if err != nil {
			return StoreView{}, fmt.Errorf("kstream: store %q partition %d: %w", name, p, err)
		}
		pos := int64(-1)
		if ls := e.run.stores[name]; ls != nil {
			pos = ls.position.Load()
		}
		return StoreView{Spec: spec, Partition: p, Backend: b, Position: pos, Lag: 0, run: e.run, pool: pool}, nil
	}
	if !allowStandby {
		return StoreView{}, r.notOwned(name, p)
	}
	id := TaskID{r.qindex.sub[name], p}
	pos, end, t, following := r.standby.position(id, name)
	switch {
	case t == nil:
		return StoreView{}, r.notOwned(name, p)
	case !following:
		return StoreView{}, &QueryError{Store: name, Partition: p, Reason: QueryRestoring}
	}
	lag := int64(-1)
	if end >= 0 {
		lag = max(end-pos, 0)
	}
	if maxLag >= 0 && (lag < 0 || lag > maxLag) {
		return StoreView{}, &QueryError{Store: name, Partition: p, Reason: QueryStale, Lag: lag, MaxLag: maxLag}
	}
	b, pool, err := r.backend(spec, p)
	if err != nil {
		return StoreView{}, fmt.Errorf("kstream: standby store %q partition %d: %w", name, p, err)
	}
	return StoreView{Spec: spec, Partition: p, Standby: true, Backend: b, Position: pos, Lag: lag, standby: t, pool: pool}, nil
}

// ReleaseView gives back the backend of a view taken with AcquireView; v.Backend must
// not be used afterwards.
func (r *Runtime) ReleaseView(v *StoreView) {
	if v.pool != nil && v.Backend != nil {
		v.pool.Put(v.Backend)
	}
	v.Backend, v.pool = nil, nil
}

// notOwned is the error for partition p of store name, not hosted here.
func (r *Runtime) notOwned(name string, p int32) error {
	reason := QueryNotOwned
	if State(r.state.Load()) == StateRebalancing {
		reason = QueryRebalancing
	}
	return &QueryError{Store: name, Partition: p, Reason: reason}
}

// Valid reports whether v still reads a store partition this instance hosts as it did when
// v was taken: a reader checks it after reading, since a partition revoked meanwhile may
// have been dropped (a memory store) or stopped following its changelog.
func (r *Runtime) Valid(v *StoreView) bool {
	if v.global {
		st := r.query.state.Load()
		return st != nil && st.running
	}
	if v.run != nil {
		st := r.query.state.Load()
		if st == nil || !st.running {
			return false
		}
		e := st.active[storePart{v.Spec.Name, v.Partition}]
		return e != nil && e.run == v.run && !e.restoring
	}
	return r.standby.current(TaskID{r.qindex.sub[v.Spec.Name], v.Partition}, v.standby)
}

// LocalPartition is the status of one local store partition.
type LocalPartition struct {
	Store     string
	Partition int32
	Standby   bool
	Restoring bool
	Position  int64 // changelog offset the store is complete up to, -1 if unknown
	Lag       int64 // records behind the changelog's end as last seen, -1 if unknown
}

// LocalPartitions lists the store partitions this instance holds (active and standby),
// sorted by store and partition: Kafka Streams' allLocalStorePartitionLags.
func (r *Runtime) LocalPartitions() []LocalPartition {
	var out []LocalPartition
	if st := r.query.state.Load(); st != nil && st.running {
		for k, e := range st.active {
			lp := LocalPartition{Store: k.store, Partition: k.partition, Restoring: e.restoring, Position: -1, Lag: -1}
			if !e.restoring {
				lp.Lag = 0
				if ls := e.run.stores[k.store]; ls != nil {
					lp.Position = ls.position.Load()
				}
			}
			out = append(out, lp)
		}
	}
	out = append(out, r.standby.partitions()...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Store != out[j].Store {
			return out[i].Store < out[j].Store
		}
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return !out[i].Standby
	})
	return out
}

// position returns the position and last seen changelog end of store name in standby
// task id, the task, and whether it follows its changelog yet.
func (s *standbys) position(id TaskID, name string) (pos, end int64, t *standbyTask, following bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t = s.tasks[id]
	if t == nil {
		return 0, -1, nil, false
	}
	for _, ss := range t.stores {
		if ss.spec.Name == name {
			return ss.pos, ss.end, t, t.following
		}
	}
	return 0, -1, nil, false // a store without changelog has no standby
}

// current reports whether t is still the standby of id.
func (s *standbys) current(id TaskID, t *standbyTask) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t != nil && s.tasks[id] == t && t.following
}

// partitions lists the standby store partitions.
func (s *standbys) partitions() []LocalPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LocalPartition
	for _, t := range s.tasks {
		for _, ss := range t.stores {
			lp := LocalPartition{Store: ss.spec.Name, Partition: ss.partition, Standby: true, Restoring: !t.following, Position: ss.pos, Lag: -1}
			if t.following && ss.end >= 0 {
				lp.Lag = max(ss.end-ss.pos, 0)
			}
			out = append(out, lp)
		}
	}
	return out
}

// GroupMetadata is the group's assignment as the last rebalance made it: every member's
// query endpoint, active tasks and standby tasks.
type GroupMetadata struct {
	Members []MemberMetadata
}

// MemberMetadata is one member of the group.
type MemberMetadata struct {
	MemberID string
	Endpoint string // Config.ApplicationServer, "" if none
	Active   []TaskID
	Standby  []TaskID
}

// Metadata returns the group metadata of the last assignment, or nil before the first.
func (r *Runtime) Metadata() *GroupMetadata { return r.query.meta.Load() }

// ApplicationServer returns this instance's query endpoint (Config.ApplicationServer).
func (r *Runtime) ApplicationServer() string { return r.cfg.ApplicationServer }

// MemberID returns this instance's group member id as the group's metadata names it (""
// before it joined): the id in Metadata's members.
func (r *Runtime) MemberID() string {
	r.wantMu.Lock()
	defer r.wantMu.Unlock()
	return r.memberID
}

// LiveMemberID returns the member id the broker knows this instance by now. It differs from
// MemberID after a static member came back without a rebalance: its assignment, and every
// member's metadata, still name it by its previous id until the next rebalance.
func (r *Runtime) LiveMemberID() string {
	r.wantMu.Lock()
	defer r.wantMu.Unlock()
	return cmp.Or(r.liveID, r.memberID)
}

// setMetadata publishes the metadata carried by an assignment.
func (r *Runtime) setMetadata(hosts []hostAssignment) {
	md := &GroupMetadata{}
	for _, h := range hosts {
		m := MemberMetadata{MemberID: h.Member, Endpoint: h.Endpoint}
		for _, s := range h.Active {
			if id, err := parseTaskID(s); err == nil {
				m.Active = append(m.Active, id)
			}
		}
		for _, s := range h.Standby {
			if id, err := parseTaskID(s); err == nil {
				m.Standby = append(m.Standby, id)
			}
		}
		slices.SortFunc(m.Active, compareTaskIDs)
		slices.SortFunc(m.Standby, compareTaskIDs)
		md.Members = append(md.Members, m)
	}
	slices.SortFunc(md.Members, func(a, b MemberMetadata) int {
		return cmp.Or(strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.MemberID, b.MemberID))
	})
	r.query.meta.Store(md)
}
