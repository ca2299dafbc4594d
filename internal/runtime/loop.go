package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The poll loop: it fetches, hands records to the tasks, runs their turns, paces their
// partitions and decides when to commit. It does not know which group protocol assigned
// the tasks (member.go).

// loop polls and processes until ctx is done or a fatal error. It returns a non-nil error
// only for failures of the loop itself.
func (r *Runtime) loop(ctx context.Context) error {
	lastCommit := time.Now()
	var openUntil time.Time // see txnOpenUntilLocked
	defer r.ops.loopEnded()
	for {
		// Wake up when the next commit is due even if no record arrives, so that an idle
		// instance still commits what it processed; and when a task must be looked at again
		// (a wall-clock punctuation, the end of an idle wait).
		wait := max(time.Until(lastCommit.Add(r.cfg.CommitInterval)), time.Until(openUntil), 5*time.Millisecond)
		if r.committing.Load() {
			// A commit's tail runs, and the next commit waits for it: the tail kicks the
			// loop when it ends (commitasync.go).
			wait = max(wait, r.cfg.CommitInterval)
		}
		if !r.wake.IsZero() {
			wait = min(wait, max(time.Until(r.wake), time.Millisecond))
		}
		if r.holding {
			wait = min(wait, max(time.Until(r.holdUntil), time.Millisecond))
		}
		r.ops.turn(wait) // Health: a loop that stops turning is not live (status.go)
		// A task's turn that ends cuts the poll short (turns.go).
		pctx, cancel := r.kick.pollContext(ctx, wait)
		var fetches kgo.Fetches
		if r.holding {
			// A task that keeps up has a buffer's worth waiting already: poll again once its
			// turn has ended (it kicks), as the loop did when it waited for every turn.
			<-pctx.Done()
		} else {
			var polled time.Time
			if r.met != nil {
				polled = time.Now()
			}
			fetches = r.consumer.PollRecords(pctx, r.cfg.MaxPollRecords)
			if r.met != nil {
				r.met.polled(time.Since(polled), fetches.NumRecords())
			}
		}
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			r.consumer.AllowRebalance()
			return nil
		}
		errs := 0
		fetches.EachError(func(topic string, p int32, err error) {
			if r.fetchError(topic, p, err) {
				errs++
			}
		})
		if r.fatal() != nil || r.fencedCause() != nil {
			r.consumer.AllowRebalance()
			return nil
		}
		if errs > 0 && fetches.NumRecords() == 0 {
			// Only errors (an unreachable broker, a deleted topic): do not spin; let a
			// rebalance through meanwhile.
			r.mu.Lock()
			allow := r.sess == nil || (!r.inTxn && !r.txnEndingLocked())
			r.mu.Unlock()
			if allow {
				r.allowRebalance()
				r.afterRebalance(ctx)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}

		r.mu.Lock()
		// A commit due now stops the running turns (quiesceLocked): no new turn is launched
		// just before it, or a turn launched when the loop wakes for the commit would be
		// stopped before it did anything, every time (a wall-clock punctuator of an idle task
		// would never run). Those tasks are launched on the next turn of the loop, at once.
		commit := time.Since(lastCommit) >= r.cfg.CommitInterval || r.commitNow.Load()
		if commit && r.inflight != nil && !r.commitOverLocked() {
			// The previous commit's tail still runs: the tasks go on, and the loop commits
			// once it is over (the tail kicks it; commitasync.go).
			commit = false
		}
		if commit && r.joins.putOff(lastCommit) {
			commit = false // the group is joining: see joinWatch
		}
		if errs == 0 && fetches.NumRecords() > 0 && State(r.state.Load()) == StateRebalancing {
			// Records fetched without an error: the group session is whole again. A session
			// error noted after the rejoin it caused (its fetch was polled late) left the
			// state REBALANCING with nothing after it to end it (lifecycle.go).
			r.maybeRunningLocked()
		}
		aborts := r.aborts
		if r.commitOverLocked() {
			r.quiesceLocked()
			r.endCommitLocked()
		} else if r.txnEndedOverLocked() {
			r.quiesceLocked()
			r.txnEndedLocked(r.inflight)
		}
		if commit && !r.commitNow.Load() && time.Now().Before(r.txnOpenUntilLocked()) {
			// The transaction begun for what the tasks did while the last one ended
			// (perhaps just now, above) stays open an interval (eos_async.go).
			commit = false
		}
		if r.aborts != aborts {
			// Handling the transaction's end moved the consumer back to the committed
			// offsets (abortedLocked). This poll's records were fetched before that, from
			// wherever the consumer was: buffered now, they would be processed twice, or
			// ahead of the records before them, which the consumer fetches again.
			fetches = nil
		}
		yield := r.yieldToRebalance
		r.yieldToRebalance = false
		r.processLocked(fetches, !commit && !yield && !(r.txnEndingLocked() && r.held.full()))
		if yield && r.inTxn && r.fatal() == nil && r.fencedCause() == nil {
			// A rebalance waits, and a transaction ended while the tasks worked for the next:
			// that one ends now, with the tasks at rest (as Kafka Streams commits before a
			// rebalance), and the rebalance goes through below, between transactions.
			r.log.Info("kstream: a rebalance waits; committing what was processed while the last transaction ended, then letting it through", "app", r.cfg.ApplicationID, "transactional_id", r.txnID)
			cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
			if err := r.commitLocked(cctx); err != nil {
				r.log.Warn("kstream: commit before a rebalance failed; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "err", err)
			}
			cancel()
		}
		if r.fatal() == nil && r.fencedCause() == nil && commit {
			r.commitNow.Store(false)
			// The interval counts from the start of a commit, as Kafka Streams' lastCommitMs:
			// a record that arrives as a commit begins waits one interval plus one commit,
			// not one interval plus two.
			started := time.Now()
			cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
			if r.sess == nil {
				cctx = context.WithValue(cctx, periodicKey{}, true) // see PeriodicCommit
			}
			var err error
			switch {
			case r.cfg.BlockingCommits:
				err = r.commitLocked(cctx)
			case r.sess == nil:
				err = r.commitAsyncLocked(cctx)
			default:
				err = r.commitTxnAsyncLocked(cctx)
			}
			cancel()
			switch {
			case errors.Is(err, errCommitInFlight):
				// Not reached (a commit in flight is not due, above); the loop tries again.
			case errors.Is(err, errJoining):
				// Not a commit: the next turn of the loop tries again (see joinWatch).
				r.log.Debug("kstream: commit put off while the group joins", "app", r.cfg.ApplicationID)
			default:
				if err != nil {
					r.log.Warn("kstream: commit failed; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "err", err)
				}
				lastCommit = started
			}
		}
		r.holding, r.holdUntil = r.holdLocked()
		openUntil = r.txnOpenUntilLocked()
		// Under exactly-once, rebalances go through only between transactions, so that
		// partitions are given up with everything processed committed.
		allow := r.sess == nil || (!r.inTxn && !r.txnEndingLocked())
		r.mu.Unlock()
		if allow {
			r.allowRebalance()
			r.afterRebalance(ctx)
		}
		if r.fatal() != nil || r.fencedCause() != nil {
			return nil
		}
	}
}

// fetchError decides what a poll's error means. Conditions that heal by waiting (an
// unreachable broker, a leader or coordinator that moved, a group session that kgo is
// rejoining) are logged at warn, at most once per interval, and waited out; only an
// authorization failure, or Config.GiveUpAfter passing, stops the application. A deleted
// source topic is decided by the topic watcher (watch.go), which this wakes. It reports
// whether err is an error at all (a poll that only timed out is not).
func (r *Runtime) fetchError(topic string, p int32, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var dl *kgo.ErrDataLoss
	if errors.As(err, &dl) {
		r.log.Warn("kstream: data loss detected, consuming from the reset offset", "topic", topic, "partition", p, "err", err)
		return true
	}
	if authError(err) {
		where := fmt.Sprintf("topic %q partition %d", topic, p)
		if topic == "" {
			where = fmt.Sprintf("group %q", r.cfg.ApplicationID)
		}
		r.fail(fmt.Errorf("kstream: consuming %s: not authorized: %w", where, err))
		return true
	}
	var gs *kgo.ErrGroupSession
	if errors.As(err, &gs) || topic == "" {
		// kgo reports a lost group session (a broker that went away, a heartbeat that
		// failed, a generation that moved on) and rejoins by itself, with backoff. The
		// partitions were given up in onLost; they come back with the next assignment.
		now := time.Now().UnixNano()
		r.sessionLost.CompareAndSwap(0, now)
		if errors.As(err, &gs) {
			// Not leftGroup: kgo rejoins by itself, and the partitions it gives up go through
			// onLost; the error may also be polled after the rejoin it caused.
			r.rebalancing(fmt.Sprintf("not a member of the group (%v): rejoining", err))
		}
		since := time.Duration(now - r.sessionLost.Load())
		if r.cfg.GiveUpAfter > 0 && since > r.cfg.GiveUpAfter {
			r.fail(fmt.Errorf("kstream: group %q: not a member for %s (Config.GiveUpAfter %s): %w", r.cfg.ApplicationID, since.Round(time.Millisecond), r.cfg.GiveUpAfter, err))
			return true
		}
		r.warnEvery("group", "kstream: not a member of the group; waiting for the cluster and rejoining", "group", r.cfg.ApplicationID, "waited", since.Round(time.Millisecond), "err", err)
		return true
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		r.checkTopicsSoon()
	}
	r.warnEvery("fetch "+topic, "kstream: fetch error; retrying", "topic", topic, "partition", p, "err", err)
	return true
}

// authError reports whether err is an authorization or authentication failure: it does not
// heal by waiting.
func authError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// allowRebalance lets a waiting rebalance through (the loop holds no records and, under
// exactly-once, no open transaction).
func (r *Runtime) allowRebalance() {
	r.endMu.Lock()
	r.blocked = false
	r.endMu.Unlock()
	r.consumer.AllowRebalance()
}

// onBlocked is called (on its own goroutine) when kgo wants to run a rebalance callback but
// the loop has not allowed rebalances. While an exactly-once commit has been ending its
// transaction for endGrace, the rebalance is let through: the session may be waiting for the
// group (a heartbeat that the lost session will never answer), and the group for the loop.
// The callbacks then only set their partitions aside (deferDrop), and the transaction
// aborts (see endTxnLocked).
func (r *Runtime) onBlocked(_ context.Context, cl *kgo.Client) {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	r.blocked = true
	if r.ending && time.Since(r.endBegan) >= endGrace {
		r.log.Info("kstream: a rebalance waits while the transaction ends; letting it through", "transactional_id", r.txnID)
		cl.AllowRebalance()
	}
}

// processLocked buffers one poll's records in their tasks' partition groups (or, for a task
// whose turn runs, in its inbox), then (with launch) launches a turn of every idle task that
// may process a record or has a wall-clock punctuator due, each on its own goroutine,
// without waiting for them (turns.go), and pauses or resumes the partitions whose buffers
// are full or no longer so.
func (r *Runtime) processLocked(fetches kgo.Fetches, launch bool) {
	now := time.Now()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 || r.fatal() != nil {
			return
		}
		tp := topicPartition{p.Topic, p.Partition}
		t := r.parts[tp]
		if t == nil {
			// Not ours any more (revoked between fetch and poll); kgo drops it too.
			return
		}
		if t.task == nil {
			// Still restoring: its partitions are paused before fetching starts, so this
			// should not happen; if it does, fetch these records again later.
			first := p.Records[0]
			r.consumer.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Partition: {Epoch: first.LeaderEpoch, Offset: first.Offset}}})
			r.consumer.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
			return
		}
		r.addFetchedLocked(t, p, now)
	})
	if r.fatal() != nil {
		return
	}
	var batch []*taskRun
	for _, t := range r.tasks {
		if t.task == nil || t.busy.Load() {
			continue
		}
		r.drainInboxLocked(t)
		t.ready, t.idleWake, t.lagWait = t.groupReady(now)
		if launch && (t.ready || due(t.task.NextPunctuation(), now) || t.asyncCompleted()) {
			batch = append(batch, t)
		}
	}
	if r.fatal() != nil {
		return
	}
	if len(batch) > 0 && r.sess != nil && !r.inTxn && !r.txnEndingLocked() {
		// No turn runs outside a transaction (turns.go) but while one ends, when the
		// outputs are held for the next (eos_async.go); this only drains inboxes.
		r.quiesceLocked()
		if err := r.beginTxnLocked(); err != nil {
			if r.fencedCause() != nil {
				// The producer was fenced while this turn began (the fence was noted by a
				// produce or commit callback after the loop checked): the session cannot
				// begin any more, and the loop's next check migrates the tasks (fence.go).
				r.log.Info("kstream: not beginning a transaction: the producer was fenced", "transactional_id", r.txnID, "err", err)
				return
			}
			r.fail(err)
			return
		}
	}
	budget := r.turnBudget()
	r.launchLocked(batch, now, budget)
	r.flowControlLocked()
	r.wake = r.wakeLocked(now)
	r.publishStatusLocked(now)
}

func isControl(r *kgo.Record) bool { return r.Attrs.IsControl() }

// due reports whether a punctuation due at at (zero: none) is due at now.
func due(at, now time.Time) bool { return !at.IsZero() && !at.After(now) }

// turnBudget bounds how long a task processes buffered records in one turn of the loop:
// the commit interval, at most a second and at least 10 ms. Kafka Streams bounds a turn the
// same way (its StreamThread processes a number of records per task that it halves when a
// turn outlasts the commit interval). Without the bound, a turn over a full buffer of slow
// records (a slow operator, a loaded machine) can outlast the transaction timeout under
// exactly-once: the broker aborts the transaction, the producer is fenced, and the same
// records are processed again in a turn just as long, for ever.
func (r *Runtime) turnBudget() time.Duration {
	return min(max(r.cfg.CommitInterval, 10*time.Millisecond), time.Second)
}

// run processes the task's buffered records in the order of its partition group while the
// group is ready, for about budget at most (the rest stays buffered for the next turn, and
// t.ready stays set: see wakeLocked), then runs its wall-clock punctuators that are due.
// The group was ready (or not) at now when the task was picked. Once preempt is set (a
// commit, a rebalance or shutdown waits for the turn: quiesceLocked), it stops at the next
// record boundary and leaves its punctuators for the next turn.
func (t *taskRun) run(now time.Time, budget time.Duration, preempt *atomic.Bool) error {
	pprof.SetGoroutineLabels(t.labels)
	defer pprof.SetGoroutineLabels(t.base)
	// Finished async calls first: handing them back frees the room that lets the task take
	// records again (Async).
	if err := t.resumeAsync(now); err != nil {
		return err
	}
	for n := 1; t.ready; n++ {
		if preempt.Load() {
			return t.maybeFlush()
		}
		if n%32 == 0 && time.Since(now) > budget {
			break
		}
		rec, ts, err := t.group.Next()
		if err != nil {
			return err
		}
		if rec == nil {
			break
		}
		if err := t.process(rec, ts, now); err != nil {
			return err
		}
		pos := t.parts[topicPartition{rec.Topic, rec.Partition}]
		pos.next, pos.epoch, pos.dirty = rec.Offset+1, rec.LeaderEpoch, true
		pos.count++
		if pos.met != nil {
			pos.met.pos.Store(pos.next)
		}
		t.processed++
		t.ready, t.idleWake, t.lagWait = t.groupReady(now)
	}
	if due(t.task.NextPunctuation(), now) && !preempt.Load() {
		var began time.Time
		if t.met != nil {
			began = time.Now()
		}
		ran, err := t.task.Punctuate(now)
		if err != nil {
			return err
		}
		if ran && t.met != nil {
			t.met.m.punctuations.Add(1)
			t.met.m.punctLatency.Observe(time.Since(began).Seconds())
		}
		t.punctuated = t.punctuated || ran
	}
	return t.maybeFlush()
}

// flowControlLocked pauses fetching the partitions whose buffer holds more than
// BufferedRecordsPerPartition records after their task processed what it could (Kafka
// Streams' buffered.records.per.partition), and resumes those whose buffer went back to
// it. A task that keeps up never pauses: only one that waits (for another partition, see
// PartitionGroup.Ready) does.
func (r *Runtime) flowControlLocked() {
	limit := r.cfg.BufferedRecordsPerPartition
	var pause, resume map[string][]int32
	if len(r.unpause) > 0 {
		resume, r.unpause = r.unpause, map[string][]int32{}
	}
	for _, t := range r.tasks {
		if t.task == nil {
			continue
		}
		// While a turn of t runs, its group is its own: see taskRun.buffered.
		busy := t.busy.Load()
		for tp, pos := range t.parts {
			n := t.buffered(tp, busy, limit)
			switch {
			case !pos.paused.Load() && n > limit:
				pos.paused.Store(true)
				if pause == nil {
					pause = map[string][]int32{}
				}
				pause[tp.topic] = append(pause[tp.topic], tp.partition)
			case pos.paused.Load() && n <= limit:
				pos.paused.Store(false)
				if busy {
					t.resumed = append(t.resumed, resumedAt{tp, time.Now()}) // applied once at rest
				} else if pos.fetched {
					// Nothing was fetched while paused: the lag known from the last fetch
					// is as fresh as now, not as old as the pause (lagOf would otherwise
					// take it for stale once the buffer drains, and let the task run
					// ahead of this partition before its next fetch arrives).
					pos.fetchedAt = time.Now()
				}
				if resume == nil {
					resume = map[string][]int32{}
				}
				resume[tp.topic] = append(resume[tp.topic], tp.partition)
			}
		}
	}
	if pause != nil {
		r.consumer.PauseFetchPartitions(pause)
	}
	if resume != nil {
		r.consumer.ResumeFetchPartitions(resume)
	}
}

// wakeLocked is when the loop must look at the tasks again even if no record arrives: the
// next wall-clock punctuation, the end of an idle wait, or soon when a task waits for a
// lag. Zero means only the commit interval matters.
func (r *Runtime) wakeLocked(now time.Time) time.Time {
	var wake time.Time
	earlier := func(at time.Time) {
		if !at.IsZero() && (wake.IsZero() || at.Before(wake)) {
			wake = at
		}
	}
	for _, t := range r.tasks {
		if t.task == nil || t.busy.Load() {
			continue // a turn that ends kicks the loop (turns.go)
		}
		if t.ready || t.asyncCompleted() {
			earlier(now) // its turn ended with records left to process (turnBudget), or async results wait
		}
		earlier(t.task.NextPunctuation())
		earlier(t.idleWake)
		if t.lagWait {
			earlier(now.Add(lagRecheck))
		}
	}
	return wake
}

// groupReady is the task's partition group's Ready at now, except that a task whose async
// operators take no record now (Async.Saturated) is not ready: its records stay buffered
// until a finished call frees room (the call's completion wakes the loop, see
// Runtime.Wake), and its partitions pause once the buffer is full (flowControlLocked).
func (t *taskRun) groupReady(now time.Time) (ready bool, idleWake time.Time, lagWait bool) {
	ready, idleWake, lagWait = t.group.Ready(now)
	if ready {
		if a, ok := t.task.(Async); ok && a.Saturated() {
			ready = false
		}
	}
	return ready, idleWake, lagWait
}

// asyncCompleted reports whether the task has finished async calls to take back (Async).
func (t *taskRun) asyncCompleted() bool {
	a, ok := t.task.(Async)
	return ok && a.Completed()
}

// resumeAsync hands the task's finished async calls back to it (Async.Resume), in its turn,
// and then asks its group again whether it may process.
func (t *taskRun) resumeAsync(now time.Time) error {
	a, ok := t.task.(Async)
	if !ok || !a.Completed() {
		return nil
	}
	if err := a.Resume(); err != nil {
		return err
	}
	t.ready, t.idleWake, t.lagWait = t.groupReady(now)
	return nil
}

// maybeFlush writes large buffered store changes to the engine early.
func (t *taskRun) maybeFlush() error {
	for _, s := range t.stores {
		if err := s.maybeFlush(); err != nil {
			return fmt.Errorf("kstream: task %s: %w", t.id, err)
		}
	}
	return nil
}

// storesLocked returns the stores of every task.
func (r *Runtime) storesLocked() []*loggedStore {
	var out []*loggedStore
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			out = append(out, ls)
		}
	}
	return out
}

// eachStore calls fn for every store of a commit, on up to GOMAXPROCS goroutines (each
// store on one), and returns the first error in the order of stores. The tasks are at
// rest, and the stores are independent: their logging (each store's changelog records in
// order) and their flushes to the engine, the bulk of a commit of a stateful topology,
// then use every core instead of the loop's alone.
func eachStore(stores []*loggedStore, fn func(*loggedStore) error) error {
	workers := min(len(stores), goruntime.GOMAXPROCS(0))
	if workers <= 1 {
		for _, ls := range stores {
			if err := fn(ls); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(stores))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(stores); i = int(next.Add(1) - 1) {
				errs[i] = fn(stores[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// groupConfig is the configuration of the partition group of task t.
func (r *Runtime) groupConfig(t *taskRun) GroupConfig {
	return GroupConfig{
		MaxTaskIdle: r.cfg.MaxTaskIdle,
		Extract: func(rec *kgo.Record, partitionTime int64) (int64, error) {
			ts, err := t.task.Timestamp(rec, partitionTime)
			if err != nil {
				return 0, fmt.Errorf("kstream: task %s: extracting the timestamp of the record at topic %q partition %d offset %d: %w", t.id, rec.Topic, rec.Partition, rec.Offset, err)
			}
			return ts, nil
		},
		Dropped: func(rec *kgo.Record, ts int64) {
			// As Kafka Streams' RecordQueue: logged, counted as dropped, and passed over
			// (its offset is processed: the record is not read again).
			r.log.Warn("kstream: skipping a record with a negative timestamp", "task", t.id.String(), "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "timestamp", ts)
			r.stats.dropped.Add(1)
			if t.met != nil {
				t.met.Dropped(DropNegativeTimestamp)
			}
			if pos := t.parts[topicPartition{rec.Topic, rec.Partition}]; pos != nil {
				pos.next, pos.epoch, pos.dirty = rec.Offset+1, rec.LeaderEpoch, true
				pos.count++
				if pos.met != nil {
					pos.met.pos.Store(pos.next)
				}
			}
		},
		Lag: func(topic string, partition int32, now time.Time) (int64, bool) {
			return r.lagOf(t, topicPartition{topic, partition}, now)
		},
		Enforced: func() { r.stats.enforced.Add(1) },
	}
}
