package runtime

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Status and health: what an operator asks of a running instance. The runtime keeps, for
// them, a heartbeat of the poll loop, a snapshot of the active tasks' positions that the
// loop publishes (so that reading it never waits for a batch being processed), the
// restorations in progress, and a bounded ring of the dead-letter records written last.
// None of it costs the processing path more than an increment per record.

// deadLetterRing is how many dead-letter records Status keeps.
const deadLetterRing = 100

// statusPublishEvery bounds how often the loop publishes its task snapshot while busy.
const statusPublishEvery = 500 * time.Millisecond

// opsState is what the runtime keeps for Status and Health.
type opsState struct {
	// beat is when the poll loop last began a turn (Unix nanoseconds), and due when that
	// turn's poll returns at the latest; 0 while no loop runs (before the first, between a
	// fence and the rejoin, after the last).
	beat, due atomic.Int64
	// tasks is the last published snapshot of the active tasks; published is when
	// (loop goroutine only).
	tasks     atomic.Pointer[taskSnapshot]
	published time.Time
	// processed counts the records processed by tasks that were closed since (their own
	// count is gone with them); guarded by Runtime.mu.
	processed int64

	restoreMu sync.Mutex
	restores  map[*RestoreProgress]struct{}

	dlqMu sync.Mutex
	dlq   []DeadLetterInfo // ring of the last deadLetterRing records
	dlqN  int              // records noted in all

	// End offsets asked of the broker for the input partitions that nothing was fetched
	// from since they were assigned (a partition caught up before a rebalance, a restoring
	// task's paused input), so that Status knows their lag too. Asked at most every
	// endProbeEvery, only when Status is called, one question at a time.
	probeMu   sync.Mutex
	probing   bool
	probedAt  time.Time
	probed    map[topicPartition]int64
	probesOff bool // the instance stops: no more questions
	probeWG   sync.WaitGroup
}

// endProbeEvery bounds how often Status asks the broker for end offsets.
const endProbeEvery = time.Second

// taskSnapshot is the active tasks as of at.
type taskSnapshot struct {
	at        time.Time
	tasks     []TaskStatus
	processed int64
}

// TaskStatus is one active task of this instance.
type TaskStatus struct {
	ID TaskID
	// Restoring says the task's stores are still restoring: it processes nothing yet.
	Restoring bool
	// Processed is the number of records the task processed since it was assigned here.
	Processed  int64
	Partitions []PartitionStatus
}

// PartitionStatus is one input partition of an active task.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// Position is the offset of the next record to process (the offset after the last one
	// processed, or the committed offset when none was processed yet); -1 if unknown.
	Position int64
	// Committed is the offset this instance last committed for the partition, -1 if none.
	Committed int64
	// End is the partition's end offset (the last stable offset under exactly-once) as of
	// the last fetch that returned records; -1 if unknown.
	End int64
	// Lag is End minus Position: records not processed yet, fetched or not; -1 if unknown.
	Lag int64
	// Buffered is the number of records fetched and waiting in the task's buffer.
	Buffered int
	// Paused says fetching is paused because the buffer is full (or the task restores).
	Paused bool

	endProbed bool // End was asked of the broker (probeEnds), not learned from a fetch
}

// StandbyStatus is one standby task of this instance.
type StandbyStatus struct {
	ID TaskID
	// Following says the standby follows its changelogs (it was checked against them).
	Following bool
	// Warmup says it is a warm-up replica: this instance is to take the task over once
	// caught up (member.go).
	Warmup bool
	Stores []StandbyStoreStatus
}

// StandbyStoreStatus is one store partition of a standby task.
type StandbyStoreStatus struct {
	Store     string
	Changelog string
	Partition int32
	// Position is the next changelog offset to apply; End the changelog's end as last
	// seen (-1 unknown); Lag their difference (-1 unknown).
	Position, End, Lag int64
}

// RestoreProgress is one store partition being restored from its changelog. Its fields
// are updated by the restoring goroutine; read them with Snapshot.
type RestoreProgress struct {
	task      TaskID
	store     string
	topic     string
	partition int32
	from, end int64
	began     time.Time
	pos       atomic.Int64
	restored  atomic.Int64
	// met is the store's metrics (Config.Metrics), which count the records of the
	// restorations that ended; nil without.
	met *storeMetrics
}

// RestoreStatus is a snapshot of a RestoreProgress.
type RestoreStatus struct {
	Task      TaskID
	Store     string
	Changelog string
	Partition int32
	// From is the offset restoration started at, End the changelog's end it restores to,
	// Position the next offset to read.
	From, End, Position int64
	// Restored counts the records applied so far; Remaining is End-Position (offsets, which
	// may include transaction markers and records removed by compaction).
	Restored, Remaining int64
	Started             time.Time
	// Rate is the records (offsets) restored per second since Started; ETA the time left at
	// that rate, -1 if unknown (nothing restored yet).
	Rate float64
	ETA  time.Duration
}

// DeadLetterInfo is one dead-letter record this instance wrote, read back from its
// headers.
type DeadLetterInfo struct {
	Time time.Time // when its write was acknowledged
	// Kind is deserialization, processing or production; Operator the operator that failed.
	Kind     string
	Operator string
	// Topic, Partition and Offset locate the failed input record (Offset -1: none).
	Topic     string
	Partition int32
	Offset    int64
	Error     string
	// DeadLetterTopic, DeadLetterPartition and DeadLetterOffset locate the dead-letter record.
	DeadLetterTopic     string
	DeadLetterPartition int32
	DeadLetterOffset    int64
}

// Status is this instance's status.
type Status struct {
	ApplicationID string
	At            time.Time
	State         State
	StateSince    time.Time // when State began
	StateReason   string    // why the instance is in State (StateInfo.Reason)
	MemberID      string
	Endpoint      string
	Active        []TaskStatus
	Standby       []StandbyStatus
	Restores      []RestoreStatus
	DeadLetters   []DeadLetterInfo // oldest first
	DeadLettersN  int              // dead-letter records written since start
	Processed     int64            // records processed since start, all tasks
	TasksAsOf     time.Time        // when Active was taken
	Stats         Stats
	LoopHeartbeat time.Time // when the poll loop last began a turn; zero if it does not run
}

// Health is whether the instance is alive and ready.
type Health struct {
	Live, Ready bool
	Reason      string
}

// StallBound is how long a turn of the poll loop may outlast its poll's wait (at most the
// commit interval) before Health reports the instance not live: Config.StallTimeout, or by
// default the close timeout (the longest a commit waits) plus the rebalance timeout (60 s
// unless set: a member that does not come back to its loop within it drops out of the
// group anyway), at least 60 s.
func (r *Runtime) StallBound() time.Duration {
	if r.cfg.StallTimeout > 0 {
		return r.cfg.StallTimeout
	}
	return max(r.cfg.CloseTimeout+cmp.Or(r.cfg.RebalanceTimeout, 60*time.Second), 60*time.Second)
}

// turn notes that the loop begins a turn whose poll waits at most wait.
func (o *opsState) turn(wait time.Duration) {
	now := time.Now()
	o.due.Store(now.Add(wait).UnixNano())
	o.beat.Store(now.UnixNano())
}

// loopEnded notes that the loop returned.
func (o *opsState) loopEnded() {
	o.beat.Store(0)
	o.due.Store(0)
}

// Health reports whether the instance is live (no fatal error, and its poll loop not
// stalled past StallBound) and ready (RUNNING with every active task restored).
func (r *Runtime) Health() Health {
	st := State(r.state.Load())
	if err := r.fatal(); err != nil {
		return Health{Reason: "failed: " + err.Error()}
	}
	if st == StateError {
		return Health{Reason: "state ERROR"}
	}
	if d := r.ops.due.Load(); d != 0 {
		// Stalled: the turn outlasted its poll's wait by more than the bound.
		if over := time.Since(time.Unix(0, d)); over > r.StallBound() {
			since := time.Since(time.Unix(0, r.ops.beat.Load()))
			return Health{Reason: "the poll loop has not turned for " + since.Round(time.Millisecond).String() + " (bound " + r.StallBound().String() + " beyond the poll's wait)"}
		}
	}
	h := Health{Live: true}
	switch {
	case st != StateRunning:
		h.Reason = "state " + st.String()
		if si := r.StateInfo(); si.State == st && si.Reason != "" {
			h.Reason += ": " + si.Reason
		}
	default:
		if n := len(r.restoringTaskIDs()); n > 0 {
			h.Reason = strconv.Itoa(n) + " active task(s) restoring"
		} else {
			h.Ready = true
		}
	}
	return h
}

// publishStatusLocked publishes the active tasks' snapshot: at most every
// statusPublishEvery, unless the tasks changed. r.mu must be held.
func (r *Runtime) publishStatusLocked(now time.Time) {
	if now.Sub(r.ops.published) < statusPublishEvery && !r.tasksChangedLocked() {
		return
	}
	r.ops.published = now
	r.ops.tasks.Store(r.taskSnapshotLocked(now, true))
}

// publishTasksLocked publishes the active tasks' snapshot after the tasks changed
// (assigned, revoked, restored), so that a Status taken while the loop holds r.mu shows
// them rather than those of before. It runs in the group's callbacks, which may come before
// Run has set r.consumer (without r.mu): the snapshot leaves the group's committed offsets
// out (the positions' own are there), and the loop's next one has them. r.mu must be held.
func (r *Runtime) publishTasksLocked() {
	now := time.Now()
	r.ops.published = now
	r.ops.tasks.Store(r.taskSnapshotLocked(now, false))
}

// tasksChangedLocked reports whether the active tasks, or which of them restore, changed
// since the last published snapshot. r.mu must be held.
func (r *Runtime) tasksChangedLocked() bool {
	prev := r.ops.tasks.Load()
	if prev == nil || len(prev.tasks) != len(r.tasks) {
		return true
	}
	for _, ts := range prev.tasks {
		if t := r.tasks[ts.ID]; t == nil || ts.Restoring != (t.task == nil) {
			return true
		}
	}
	return false
}

// taskSnapshotLocked reads the active tasks. r.mu must be held.
func (r *Runtime) taskSnapshotLocked(now time.Time, groupCommitted bool) *taskSnapshot {
	s := &taskSnapshot{at: now, tasks: make([]TaskStatus, 0, len(r.tasks)), processed: r.ops.processed}
	var committed map[string]map[int32]kgo.EpochOffset
	// Tasks exist only once the consumer polled (rebalances wait for a poll): r.consumer,
	// which Run sets without r.mu, is then set (and replaced only under r.mu).
	if groupCommitted && len(r.tasks) > 0 && r.consumer != nil {
		committed = r.member.committed()
	}
	r.ops.probeMu.Lock()
	probed := r.ops.probed
	r.ops.probeMu.Unlock()
	for id, t := range r.tasks {
		if t.busy.Load() {
			// Its turn runs (turns.go): the task as Status last saw it at rest.
			ts := TaskStatus{ID: id}
			if t.lastStatus != nil {
				ts = *t.lastStatus
			}
			ts.Processed = t.turnProcessed.Load() // as of its last turn's end
			s.processed += ts.Processed
			s.tasks = append(s.tasks, ts)
			continue
		}
		ts := TaskStatus{ID: id, Restoring: t.task == nil, Processed: t.processed}
		s.processed += t.processed
		for tp, pos := range t.parts {
			ps := PartitionStatus{Topic: tp.topic, Partition: tp.partition, Position: pos.next, Committed: -1, End: -1, Lag: -1, Paused: pos.paused.Load() || t.task == nil}
			if c, ok := committed[tp.topic][tp.partition]; ok && c.Offset >= 0 {
				ps.Committed = c.Offset
			} else if pos.committed.Offset >= 0 {
				ps.Committed = pos.committed.Offset
			}
			if t.group != nil {
				ps.Buffered = t.held(tp)
			}
			switch {
			case ps.Position >= 0:
			case pos.first.Offset >= 0: // fetched, nothing processed yet
				ps.Position = pos.first.Offset
			default:
				ps.Position = ps.Committed
			}
			if pos.fetched {
				ps.End = pos.end
				if ps.Position >= 0 {
					ps.Lag = max(ps.End-ps.Position, 0)
				}
			} else if end, ok := probed[tp]; ok {
				ps.End, ps.endProbed = end, true
				if ps.Position >= 0 {
					ps.Lag = max(end-ps.Position, 0)
				}
			} else if pr := pos.probe; pr != nil {
				pr.mu.Lock()
				if pr.done && pr.err == nil {
					ps.Lag = pr.lag
				}
				pr.mu.Unlock()
			}
			if ps.Lag < 0 && ps.End == 0 {
				ps.Lag = 0 // an empty partition: nothing to process, wherever the position is
			}
			ts.Partitions = append(ts.Partitions, ps)
		}
		slices.SortFunc(ts.Partitions, func(a, b PartitionStatus) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		t.lastStatus = &ts
		s.tasks = append(s.tasks, ts)
	}
	slices.SortFunc(s.tasks, func(a, b TaskStatus) int { return compareTaskIDs(a.ID, b.ID) })
	return s
}

// taskClosedLocked keeps the count of a task being closed. r.mu must be held.
func (r *Runtime) taskClosedLocked(t *taskRun) { r.ops.processed += t.processed }

// Status returns this instance's status. It does not wait for a batch being processed: the
// active tasks are then as the loop last published them (TasksAsOf says when).
func (r *Runtime) Status() Status {
	now := time.Now()
	si := r.StateInfo()
	s := Status{ApplicationID: r.cfg.ApplicationID, At: now, State: si.State, StateSince: si.Since, StateReason: si.Reason,
		MemberID: r.LiveMemberID(), Endpoint: r.cfg.ApplicationServer, Stats: r.Stats()}
	if b := r.ops.beat.Load(); b != 0 {
		s.LoopHeartbeat = time.Unix(0, b)
	}
	snap := r.ops.tasks.Load()
	if r.mu.TryLock() {
		snap = r.taskSnapshotLocked(now, true)
		r.mu.Unlock()
	}
	if snap != nil {
		s.Active, s.Processed, s.TasksAsOf = snap.tasks, snap.processed, snap.at
		r.probeEnds(snap)
	}
	s.Standby = r.standby.status()
	r.wantMu.Lock()
	for i := range s.Standby {
		s.Standby[i].Warmup = slices.Contains(r.warmups, s.Standby[i].ID)
	}
	r.wantMu.Unlock()
	s.Restores = r.restoreStatus(now)
	s.DeadLetters, s.DeadLettersN = r.deadLetters()
	return s
}

// status lists the standby tasks.
func (s *standbys) status() []StandbyStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StandbyStatus, 0, len(s.tasks))
	for id, t := range s.tasks {
		ss := StandbyStatus{ID: id, Following: t.following}
		for _, st := range t.stores {
			x := StandbyStoreStatus{Store: st.spec.Name, Changelog: st.spec.Changelog, Partition: st.partition, Position: st.pos, End: st.end, Lag: -1}
			if t.following && st.end >= 0 {
				x.Lag = max(st.end-st.pos, 0)
			}
			ss.Stores = append(ss.Stores, x)
		}
		slices.SortFunc(ss.Stores, func(a, b StandbyStoreStatus) int { return strings.Compare(a.Store, b.Store) })
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b StandbyStatus) int { return compareTaskIDs(a.ID, b.ID) })
	return out
}

// startRestore notes a restoration from offset from to end of store partition ls.
func (r *Runtime) startRestore(task TaskID, ls *loggedStore, from, end int64) *RestoreProgress {
	p := &RestoreProgress{task: task, store: ls.spec.Name, topic: ls.spec.Changelog, partition: ls.partition, from: from, end: end, began: time.Now()}
	p.pos.Store(from)
	if r.met != nil {
		p.met = r.met.store(task, ls.spec.Name) // before restoreMu: Collect locks it under the metrics' lock
	}
	r.ops.restoreMu.Lock()
	if r.ops.restores == nil {
		r.ops.restores = map[*RestoreProgress]struct{}{}
	}
	r.ops.restores[p] = struct{}{}
	r.ops.restoreMu.Unlock()
	return p
}

// update notes a restored batch: the next offset to read and the records applied.
func (p *RestoreProgress) update(pos int64, records int) {
	p.pos.Store(pos)
	p.restored.Add(int64(records))
}

// endRestore forgets a restoration that ended (or stopped); the metrics keep the count
// of the records it restored.
func (r *Runtime) endRestore(p *RestoreProgress) {
	r.ops.restoreMu.Lock()
	if p.met != nil {
		p.met.restored += p.restored.Load()
	}
	delete(r.ops.restores, p)
	r.ops.restoreMu.Unlock()
}

// restoreStatus lists the restorations in progress, sorted by store and partition.
func (r *Runtime) restoreStatus(now time.Time) []RestoreStatus {
	r.ops.restoreMu.Lock()
	ps := make([]*RestoreProgress, 0, len(r.ops.restores))
	for p := range r.ops.restores {
		ps = append(ps, p)
	}
	r.ops.restoreMu.Unlock()
	out := make([]RestoreStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.status(now))
	}
	slices.SortFunc(out, func(a, b RestoreStatus) int {
		return cmp.Or(strings.Compare(a.Store, b.Store), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// status is the restoration's progress as of now.
func (p *RestoreProgress) status(now time.Time) RestoreStatus {
	pos := p.pos.Load()
	rs := RestoreStatus{Task: p.task, Store: p.store, Changelog: p.topic, Partition: p.partition, From: p.from, End: p.end,
		Position: pos, Restored: p.restored.Load(), Remaining: max(p.end-pos, 0), Started: p.began, ETA: -1}
	if el := now.Sub(p.began).Seconds(); el > 0 && pos > p.from {
		rs.Rate = float64(pos-p.from) / el
		rs.ETA = time.Duration(float64(rs.Remaining) / rs.Rate * float64(time.Second))
	}
	return rs
}

// noteDeadLetter keeps an acknowledged dead-letter record in the ring.
func (r *Runtime) noteDeadLetter(dl *kgo.Record) {
	d := DeadLetterInfo{Time: time.Now(), Offset: -1, Partition: -1, DeadLetterTopic: dl.Topic, DeadLetterPartition: dl.Partition, DeadLetterOffset: dl.Offset}
	for _, h := range dl.Headers {
		v := string(h.Value)
		switch h.Key {
		case "kstream.error.kind":
			d.Kind = v
		case "kstream.error.operator":
			d.Operator = v
		case "__streams.errors.topic":
			d.Topic = v
		case "__streams.errors.partition":
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				d.Partition = int32(n)
			}
		case "__streams.errors.offset":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				d.Offset = n
			}
		case "__streams.errors.message":
			d.Error = v
		}
	}
	o := &r.ops
	o.dlqMu.Lock()
	defer o.dlqMu.Unlock()
	if len(o.dlq) < deadLetterRing {
		o.dlq = append(o.dlq, d)
	} else {
		o.dlq[o.dlqN%deadLetterRing] = d
	}
	o.dlqN++
}

// deadLetters returns the ring, oldest first, and the count of records noted in all.
func (r *Runtime) deadLetters() ([]DeadLetterInfo, int) {
	o := &r.ops
	o.dlqMu.Lock()
	defer o.dlqMu.Unlock()
	if len(o.dlq) < deadLetterRing {
		return slices.Clone(o.dlq), o.dlqN
	}
	i := o.dlqN % deadLetterRing
	return append(slices.Clone(o.dlq[i:]), o.dlq[:i]...), o.dlqN
}

// probeEnds asks the broker, in the background, for the end offsets of the partitions of
// snap whose end is unknown, unless it did less than endProbeEvery ago or the instance
// does not run. The answer serves the next Status.
func (r *Runtime) probeEnds(snap *taskSnapshot) {
	var topics []string
	for _, t := range snap.tasks {
		for _, p := range t.Partitions {
			if (p.End < 0 || p.endProbed) && !slices.Contains(topics, p.Topic) {
				topics = append(topics, p.Topic)
			}
		}
	}
	if len(topics) == 0 || r.admin == nil { // topics, hence tasks: r.admin and restoreCtx are set
		return
	}
	o := &r.ops
	o.probeMu.Lock()
	defer o.probeMu.Unlock()
	ctx := r.restoreCtx
	if o.probesOff || o.probing || time.Since(o.probedAt) < endProbeEvery || ctx == nil || ctx.Err() != nil {
		return
	}
	o.probing, o.probedAt = true, time.Now()
	o.probeWG.Add(1)
	list := r.admin.ListEndOffsets
	if r.cfg.ExactlyOnce {
		list = r.admin.ListCommittedOffsets // the last stable offsets, as a read_committed fetch sees
	}
	go func() {
		defer o.probeWG.Done()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		listed, err := list(pctx, topics...)
		o.probeMu.Lock()
		defer o.probeMu.Unlock()
		o.probing = false
		if err != nil {
			r.log.Debug("kstream: asking end offsets for Status", "topics", topics, "err", err)
			return
		}
		next := map[topicPartition]int64{}
		for tp, end := range o.probed {
			next[tp] = end
		}
		listed.Each(func(l kadm.ListedOffset) {
			if l.Err == nil {
				next[topicPartition{l.Topic, l.Partition}] = l.Offset
			}
		})
		o.probed = next
	}()
}

// stopProbes waits for the end-offset question in flight, if any, and allows no more.
func (o *opsState) stopProbes() {
	o.probeMu.Lock()
	o.probesOff = true
	o.probeMu.Unlock()
	o.probeWG.Wait()
}
