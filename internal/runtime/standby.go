package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SuspendReason says why a standby stopped following its changelog.
type SuspendReason int

const (
	// SuspendMigrated: the standby was assigned to another instance (or the instance stops).
	SuspendMigrated SuspendReason = iota
	// SuspendPromoted: this instance became the task's active owner.
	SuspendPromoted
)

// String returns "migrated" or "promoted".
func (s SuspendReason) String() string {
	if s == SuspendPromoted {
		return "promoted"
	}
	return "migrated"
}

// StandbyListener observes standby replicas, as Kafka Streams' StandbyUpdateListener does.
// Its methods are called from the standby goroutine and must not block for long.
type StandbyListener interface {
	// OnUpdateStart: the standby of store's partition starts following its changelog at
	// startOffset (its checkpoint).
	OnUpdateStart(store, topic string, partition int32, startOffset int64)
	// OnBatchLoaded: records were applied, up to batchEnd (excluding); currentEnd is the
	// changelog's last stable offset as of the fetch.
	OnBatchLoaded(store, topic string, partition int32, batchEnd int64, records int, currentEnd int64)
	// OnUpdateSuspended: the standby stopped at storeOffset, the position its store is
	// checkpointed at.
	OnUpdateSuspended(store, topic string, partition int32, storeOffset int64, reason SuspendReason)
}

// standbys keeps this instance's standby replicas up to date: one consumer follows the
// changelog partitions of every standby task and applies their records to the local stores,
// each batch with its new position as the store's checkpoint. A promoted standby therefore
// restores only the changelog tail written since its last batch.
type standbys struct {
	r *Runtime

	// mu guards the fields below and is held while a batch is applied, so that once remove
	// returns no write reaches the removed task's stores.
	mu     sync.Mutex
	tasks  map[TaskID]*standbyTask
	byTP   map[topicPartition]*standbyStore
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

type standbyTask struct {
	id     TaskID
	stores []*standbyStore
	// The stores follow their changelogs once checked against them (checkLocal, which may
	// wipe them): following is set then. cancel stops the check; checked is closed when it
	// ended.
	following bool
	cancel    context.CancelFunc
	checked   chan struct{}
}

type standbyStore struct {
	spec      StoreSpec
	partition int32
	raw       store.Backend
	restorer  store.Restorer // for a store with a Codec
	pos       int64          // next changelog offset to apply
	end       int64          // the changelog's end as last known (check, fetches, refreshEnds); -1 unknown
}

func newStandbys(r *Runtime) *standbys {
	return &standbys{r: r, tasks: map[TaskID]*standbyTask{}, byTP: map[topicPartition]*standbyStore{}}
}

// loggedSpecs are the stores of sub-topology sub that have a changelog (only those can be
// replicated).
func loggedSpecs(st SubTopology) []StoreSpec {
	var out []StoreSpec
	for _, s := range st.Stores {
		if s.Changelog != "" {
			out = append(out, s)
		}
	}
	return out
}

// has reports whether id is a standby here.
func (s *standbys) has(id TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[id] != nil
}

// ids returns the standby tasks, sorted.
func (s *standbys) ids() []TaskID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskID, 0, len(s.tasks))
	for id := range s.tasks {
		out = append(out, id)
	}
	slices.SortFunc(out, compareTaskIDs)
	return out
}

// offsetSum returns the sum of the standby's store positions, and whether id is a standby.
func (s *standbys) offsetSum(id TaskID) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[id]
	if t == nil {
		return 0, false
	}
	var sum int64
	for _, st := range t.stores {
		sum += st.pos
	}
	return sum, true
}

// lag returns how many records the standby id is behind its changelogs' ends as last
// known, and whether it is a standby that knows all its ends.
func (s *standbys) lag(id TaskID) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[id]
	if t == nil || !t.following {
		return 0, false
	}
	var sum int64
	for _, st := range t.stores {
		if st.end < 0 {
			return 0, false
		}
		sum += max(st.end-st.pos, 0)
	}
	return sum, true
}

// add starts a standby for id: each logged store is checked against its changelog (and
// wiped if it cannot come from it, see checkLocal) in the background, then follows the
// changelog from its checkpoint.
func (s *standbys) add(id TaskID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.tasks[id] != nil {
		return nil
	}
	specs := loggedSpecs(s.r.topo.SubTopologies[id.SubTopology])
	if len(specs) == 0 {
		return nil
	}
	if s.cl == nil {
		cl, err := kgo.NewClient(append(s.r.clientOpts(
			kgo.KeepControlRecords(),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.FetchMaxBytes(64<<20),
			kgo.FetchMaxPartitionBytes(32<<20),
			// A partition added while a fetch waits for data joins the next fetch: a
			// short wait keeps a new standby from starting seconds late.
			kgo.FetchMaxWait(500*time.Millisecond),
			s.r.clientIDOpt(roleRestoreConsumer),
		), s.r.clientMetrics("standby", "")...)...)
		if err != nil {
			return fmt.Errorf("kstream: creating the standby consumer: %w", err)
		}
		ctx, cancel := context.WithCancel(s.r.restoreCtx)
		s.cl, s.cancel, s.done = cl, cancel, make(chan struct{})
		go s.follow(ctx, cl, s.done)
		s.r.bg.Go(func() { s.refreshEnds(ctx) })
	}
	t := &standbyTask{id: id, checked: make(chan struct{})}
	dbs := make([]store.DB, 0, len(specs))
	for _, spec := range specs {
		db, err := s.r.stores.db(spec.Persistent)
		if err != nil {
			return err
		}
		raw, err := db.Open(spec.Name, id.Partition)
		if err != nil {
			return fmt.Errorf("kstream: opening standby store %s partition %d: %w", spec.Name, id.Partition, err)
		}
		from, err := raw.Checkpoint()
		if err != nil {
			return fmt.Errorf("kstream: reading the checkpoint of standby store %s partition %d: %w", spec.Name, id.Partition, err)
		}
		restorer, err := spec.newRestorer(raw)
		if err != nil {
			return err
		}
		t.stores = append(t.stores, &standbyStore{spec: spec, partition: id.Partition, raw: raw, restorer: restorer, pos: max(from, 0), end: -1})
		dbs = append(dbs, db)
	}
	ctx, cancel := context.WithCancel(s.r.restoreCtx)
	t.cancel = cancel
	s.tasks[id] = t
	s.r.bg.Go(func() {
		defer close(t.checked)
		s.check(ctx, t, dbs)
	})
	return nil
}

// check checks the stores of t against their changelogs, then makes them follow, unless t
// was removed meanwhile. A failure is logged and drops the standby, which the next
// assignment starts again.
func (s *standbys) check(ctx context.Context, t *standbyTask, dbs []store.DB) {
	from := make([]int64, len(t.stores))
	ends := make([]int64, len(t.stores))
	for i, ss := range t.stores {
		lc, err := s.r.checkLocal(ctx, dbs[i], ss.spec, ss.partition, ss.raw, "standby")
		if err != nil {
			if ctx.Err() == nil {
				s.r.log.Warn("kstream: starting a standby task", "task", t.id.String(), "store", ss.spec.Name, "err", err)
			}
			s.mu.Lock()
			if s.tasks[t.id] == t {
				delete(s.tasks, t.id)
			}
			s.mu.Unlock()
			return
		}
		from[i] = max(lc.from, lc.start, 0) // see restore
		ends[i] = lc.end
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.tasks[t.id] != t {
		return // removed while checking
	}
	add := map[string]map[int32]kgo.Offset{}
	for i, ss := range t.stores {
		ss.pos = from[i]
		// The changelog's end as checked: a standby already caught up fetches no record
		// that would tell it, and its lag would stay unknown to queries.
		ss.end = max(ends[i], ss.pos)
		s.byTP[topicPartition{ss.spec.Changelog, ss.partition}] = ss
		if add[ss.spec.Changelog] == nil {
			add[ss.spec.Changelog] = map[int32]kgo.Offset{}
		}
		add[ss.spec.Changelog][ss.partition] = kgo.NewOffset().At(ss.pos)
		if l := s.r.cfg.StandbyListener; l != nil {
			l.OnUpdateStart(ss.spec.Name, ss.spec.Changelog, ss.partition, ss.pos)
		}
	}
	t.following = true
	s.cl.AddConsumePartitions(add)
	s.r.log.Info("kstream: standby task started", "task", t.id.String(), "stores", len(t.stores), "from", from, "ends", ends)
}

// remove stops the standby of id. When it returns, no more writes reach its stores (its
// check, which may wipe them, has ended too).
func (s *standbys) remove(id TaskID, reason SuspendReason) {
	s.mu.Lock()
	t := s.tasks[id]
	if t == nil {
		s.mu.Unlock()
		return
	}
	delete(s.tasks, id)
	if t.following {
		rm := map[string][]int32{}
		for _, ss := range t.stores {
			delete(s.byTP, topicPartition{ss.spec.Changelog, ss.partition})
			rm[ss.spec.Changelog] = append(rm[ss.spec.Changelog], ss.partition)
			if l := s.r.cfg.StandbyListener; l != nil {
				l.OnUpdateSuspended(ss.spec.Name, ss.spec.Changelog, ss.partition, ss.pos, reason)
			}
		}
		s.cl.RemoveConsumePartitions(rm)
	}
	s.mu.Unlock()
	t.cancel()
	<-t.checked
	s.r.log.Info("kstream: standby task stopped", "task", id.String(), "reason", reason.String())
}

// close stops every standby and the follower.
func (s *standbys) close() {
	for _, id := range s.ids() {
		s.remove(id, SuspendMigrated)
	}
	s.mu.Lock()
	s.closed = true
	cl, cancel, done := s.cl, s.cancel, s.done
	s.mu.Unlock()
	if cl == nil {
		return
	}
	cancel()
	<-done
	cl.Close()
}

// endsRefresh is how often the standbys' changelog ends are read from the broker, for their
// lag (queries' staleness bound): a fetch tells the end only when it brings records, and a
// standby whose changelog gets records it has not fetched yet must not look caught up.
const endsRefresh = 500 * time.Millisecond

// refreshEnds reads the end offsets of the followed changelog partitions every
// endsRefresh until ctx ends.
func (s *standbys) refreshEnds(ctx context.Context) {
	t := time.NewTicker(endsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		topics := map[string]bool{}
		for tp := range s.byTP {
			topics[tp.topic] = true
		}
		s.mu.Unlock()
		if len(topics) == 0 || s.r.admin == nil {
			continue
		}
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		lctx, cancel := context.WithTimeout(ctx, endsRefresh*4)
		ends, err := s.r.admin.ListEndOffsets(lctx, names...)
		cancel()
		if err != nil {
			continue // the lag stays as last known; the next tick tries again
		}
		s.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if ss := s.byTP[topicPartition{o.Topic, o.Partition}]; ss != nil && o.Err == nil {
				ss.end = max(ss.end, o.Offset)
			}
		})
		s.mu.Unlock()
	}
}

// follow applies fetched changelog records to the standby stores until ctx ends.
func (s *standbys) follow(ctx context.Context, cl *kgo.Client, done chan struct{}) {
	defer close(done)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			// kgo retries the fetch by itself; a standby is best effort, so even an error
			// that does not heal only leaves it behind (its task restores the rest when
			// it becomes active).
			msg := "kstream: standby: fetch error; retrying"
			if !retriable(err) {
				msg = "kstream: standby: fetch error"
			}
			s.r.warnEvery(fmt.Sprintf("standby-fetch %s %d", t, p), msg, "topic", t, "partition", p, "err", err)
		})
		if err := s.apply(fetches); err != nil {
			s.r.fail(err)
			return
		}
	}
}

// apply writes one poll's records to their standby stores.
func (s *standbys) apply(fetches kgo.Fetches) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		ss := s.byTP[topicPartition{fp.Topic, fp.Partition}]
		if ss == nil || err != nil {
			return // removed meanwhile
		}
		b := ss.raw.NewBatch()
		n, pos := 0, ss.pos
		for _, rec := range fp.Records {
			if rec.Offset < pos {
				continue
			}
			pos = rec.Offset + 1
			if rec.Attrs.IsControl() {
				continue
			}
			applied, aerr := applyChangelogRecord(b, ss.spec, ss.restorer, rec)
			if aerr != nil {
				err = fmt.Errorf("kstream: standby store %s partition %d at offset %d: %w", ss.spec.Name, ss.partition, rec.Offset, aerr)
				return
			}
			if applied {
				n++
			}
		}
		if fp.LogStartOffset > pos {
			pos = fp.LogStartOffset
		}
		if fp.Err == nil && len(fp.Records) > 0 {
			// The end as of this fetch (a partition that failed, or came without records,
			// carries no offsets worth believing). It only moves forward.
			ss.end = max(ss.end, fp.LastStableOffset, pos)
		}
		if pos == ss.pos {
			return
		}
		b.SetCheckpoint(pos)
		if cerr := b.Commit(); cerr != nil {
			err = fmt.Errorf("kstream: standby store %s partition %d: writing a batch at offset %d: %w", ss.spec.Name, ss.partition, pos, cerr)
			return
		}
		ss.pos = pos
		if l := s.r.cfg.StandbyListener; l != nil {
			l.OnBatchLoaded(ss.spec.Name, ss.spec.Changelog, ss.partition, pos, n, fp.LastStableOffset)
		}
	})
	return err
}

func compareTaskIDs(a, b TaskID) int {
	if a.SubTopology != b.SubTopology {
		return a.SubTopology - b.SubTopology
	}
	return int(a.Partition - b.Partition)
}

// The runtime is the memberHost of its membership (member.go).

// taskStates implements memberHost: the local state of each stateful task (localOffsets),
// with its lag where known: 0 for an active task, and a standby's (or warm-up's) lag behind
// the changelogs' ends as last refreshed.
func (r *Runtime) taskStates() map[TaskID]taskState {
	offsets := r.localOffsets()
	out := make(map[TaskID]taskState, len(offsets))
	for id, o := range offsets {
		st := taskState{Offset: o, Lag: -1}
		if l, ok := r.standby.lag(id); ok {
			st.Lag = l
		}
		out[id] = st
	}
	// Active tasks count as caught up (the leader sees that they are owned); r.mu is not
	// taken here, as the loop may hold it while it waits for the group.
	r.wantMu.Lock()
	for _, id := range r.assigned {
		if st, ok := out[id]; ok {
			st.Lag = 0
			out[id] = st
		}
	}
	r.wantMu.Unlock()
	return out
}

// assignedTasks implements memberHost.
func (r *Runtime) assignedTasks(self string, set TaskSet, hosts []hostAssignment) {
	r.wantMu.Lock()
	r.memberID = self
	r.want = append(slices.Clone(set.Standby), set.Warmup...)
	r.warmups, r.assigned = set.Warmup, set.Active
	r.assignedAt, r.probed = time.Now(), false
	// The tasks this member is the target of but does not run yet (the first round of a
	// cooperative move): a standby of one keeps following until the task comes, so that
	// the active restores only what was written since.
	r.targets = nil
	for _, h := range hosts {
		if h.Member == self {
			for _, s := range h.Active {
				if id, err := parseTaskID(s); err == nil && !slices.Contains(set.Active, id) {
					r.targets = append(r.targets, id)
				}
			}
		}
	}
	r.wantMu.Unlock()
	if hosts != nil {
		r.setMetadata(hosts)
	}
	// The assignment may change only standbys, with no partition callback to follow:
	// reconcile now, off the group's goroutine.
	r.bg.Go(r.reconcileStandbys)
}

// sourceGrown implements memberHost.
func (r *Runtime) sourceGrown(topic string, was, now int32) {
	r.warnEvery("grown "+topic, "kstream: a source topic of keyed state has more partitions than when the application started; the new ones are not assigned", "topic", topic, "from", was, "to", now)
	r.checkTopicsSoon()
}

// reconcileStandbys starts the standbys of the last assignment that are not active here
// and stops the others.
func (r *Runtime) reconcileStandbys() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconcileStandbysLocked()
}

func (r *Runtime) reconcileStandbysLocked() {
	if r.closing.Load() || r.restoreCtx == nil || r.restoreCtx.Err() != nil {
		return
	}
	r.wantMu.Lock()
	want := slices.Clone(r.want)
	assigned := append(slices.Clone(r.assigned), r.targets...)
	r.wantMu.Unlock()
	keep := map[TaskID]bool{}
	for _, id := range want {
		if id.SubTopology < 0 || id.SubTopology >= len(r.topo.SubTopologies) || r.tasks[id] != nil {
			continue
		}
		if ch := r.restorers[id]; ch != nil && !isClosed(ch) {
			continue // a revoked active task is still restoring these stores; retried when it ends
		}
		keep[id] = true
		if err := r.standby.add(id); err != nil {
			r.log.Warn("kstream: starting a standby task", "task", id.String(), "err", err)
		}
	}
	for _, id := range r.standby.ids() {
		// A standby that the assignment made active here is promoted by onAssigned, which
		// may not have run yet.
		if !keep[id] && !slices.Contains(assigned, id) {
			r.standby.remove(id, SuspendMigrated)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// StandbyTasks returns the ids of the standby tasks this instance runs now, sorted.
func (r *Runtime) StandbyTasks() []TaskID { return r.standby.ids() }

// localOffsets reports, for each stateful task with local state, the sum of its stores'
// checkpoints (read from the stores themselves, so it covers active tasks, standbys and
// state left by earlier owners or runs). It runs on the group's goroutine when joining.
func (r *Runtime) localOffsets() map[TaskID]int64 {
	out := map[TaskID]int64{}
	ix := r.sources()
	if ix.counts == nil {
		return out
	}
	for _, st := range r.topo.SubTopologies {
		specs := loggedSpecs(st)
		if len(specs) == 0 {
			continue
		}
		var parts int32
		for _, src := range ix.subs[st.ID] {
			parts = max(parts, ix.counts[src.Topic])
		}
		for p := range parts {
			id := TaskID{st.ID, p}
			if sum, ok := r.standby.offsetSum(id); ok {
				out[id] = sum
				continue
			}
			var sum int64
			found := false
			for _, spec := range specs {
				if !spec.Persistent && !r.stores.hasMemory() {
					continue
				}
				db, err := r.stores.db(spec.Persistent)
				if err != nil {
					continue
				}
				b, err := db.Open(spec.Name, p)
				if err != nil {
					continue
				}
				if cp, err := b.Checkpoint(); err == nil && cp >= 0 {
					sum += cp
					found = true
				}
			}
			if found {
				out[id] = sum
			}
		}
	}
	return out
}
