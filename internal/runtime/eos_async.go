package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once commits that do not stop processing.
//
// The commit of a transaction has a cut, on the loop with every task at rest, and an end,
// on its own goroutine while the tasks go on:
//
//   - The cut (commitTxnAsyncLocked) is what a commit did before it ended the transaction:
//     the tasks finish what the transaction must cover (preCommitLocked), the stores' buffered
//     changes go to their changelogs inside it (logPending), the processed positions are its
//     offsets; then each store's buffer freezes its changes (the transaction's generation), and
//     each task and partition group takes the state that the transaction commits (Task.Cut,
//     PartitionGroup.Cut): stream time, punctuation schedules, the operators' clocks and
//     partition times. From then on the tasks work for the next transaction, on the next
//     generation of their buffers, reading through to the frozen one.
//   - The end (endTxnAsync) flushes the transaction's records, commits its offsets in it and
//     ends it, then, if it committed, writes the frozen changes to the stores with their
//     checkpoints, as writeStoresAsyncLocked did after a blocking end.
//
// While the transaction ends, no transaction is open, and kgo refuses records outside one:
// the outputs of the tasks (results, repartition records, dead letters) are held in order
// (heldOutputs) and produced into the next transaction once it begins; the tasks stop
// taking turns when maxHeldOutputs records are held. The loop goes on polling. kgo's session
// documents a poll during End as unsupported: an End that aborts moves the consumer back to
// the committed offsets, which a poll in between may not see; the loop moves the consumer
// back again and drops every record it buffered when it handles the abort (abortedLocked),
// and the records of the poll in hand when it does (loop.go), so such a poll costs a fetch
// again, no record. (Buffered, those were processed twice, or ahead of the records the
// abort gave back: TestExactlyOnceAbortDropsRecordsPolledDuringTheEnd. A first version did
// not poll while a transaction ended: with ends longer than the commit interval, as kgo's
// ends of a transaction without input records are on the in-process broker, an instance
// then polled once per end, and aligned windows downstream of it never closed.) Rebalances
// wait for the end, as they waited for the loop before; the group callbacks that cannot
// wait set their partitions aside (deferDrop), as before. An assignment let through
// during an end (after endGrace, or between the tries of an end that fails while the
// broker is away) waits for it in onAssigned, so that the partitions set aside are dropped
// before the assigned ones get their tasks: they may be the same partitions, given back
// after a lost session.
//
// Once the end is over, the loop ends the commit at its next turn with the tasks at rest
// (txnEndedLocked). If the transaction committed, the state taken at its cut becomes the
// committed state (what an abort goes back to), its offsets the positions committed, and the
// held outputs go into the next transaction. If it aborted, everything since the last
// committed cut is undone as before (abortedLocked): both buffer generations, the held
// outputs, the positions and the tasks' state, and the consumer goes back to the committed
// offsets. The work done for the next transaction is undone as well when the partitions of
// some tasks were set aside while the transaction ended, or its outcome had to be read from
// the broker (the consumer was moved back to its offsets).
//
// Event-time alignment writes no progress report while outputs are held (TaskEnv.Holding):
// a report held with them came out after what the other instances wrote meanwhile, and a
// downstream task then read it at a stream time that the reporting task had not reached,
// so that it believed a caught-up task ahead of its own next outputs and dropped them as
// late (TestShopSlowTransactionEnds; TestShopFailoverExactlyOnce on Apache Kafka under
// load). The first turn after the next transaction begins writes it.
//
// A rebalance that waits when a transaction has ended goes through before the next one
// ends in the background: the loop commits the next transaction at once, blocking, then
// lets the rebalance through (with the tasks working for the next transaction while each
// one ends, a busy instance is otherwise never between transactions). An earlier version
// undid the work since the cut instead: a rewind (kgo's SetOffsets) while a rebalance
// callback waited sometimes left a partition that fetched nothing more, and the frequent
// rewinds cost aligned windows their records (TestScaleOutWarmsUpBeforeMoving and
// TestAlignedEventTimeReprocessingOnBroker on Apache Kafka).
//
// Config.BlockingCommits keeps the earlier behaviour: the tasks wait while the transaction
// ends (commitTxnLocked). Commits outside the loop (before a revocation, at shutdown) end
// the transaction that way too.

// maxHeldOutputs bounds the outputs held while a transaction ends: the loop launches no
// turn while that many are held.
const maxHeldOutputs = 100_000

// heldOutputs are the outputs produced while a transaction ends, in order.
type heldOutputs struct {
	on   atomic.Bool // set by the cut, cleared by the end (txnEndedLocked), tasks at rest
	mu   sync.Mutex
	recs []*OutRecord
	n    atomic.Int64 // len(recs)
}

// hold keeps o if outputs are held, and reports whether it did.
func (h *heldOutputs) hold(o *OutRecord) bool {
	if !h.on.Load() {
		return false
	}
	h.mu.Lock()
	h.recs = append(h.recs, o)
	h.n.Store(int64(len(h.recs)))
	h.mu.Unlock()
	return true
}

// take stops holding and returns the held outputs.
func (h *heldOutputs) take() []*OutRecord {
	h.on.Store(false)
	h.mu.Lock()
	recs := h.recs
	h.recs = nil
	h.n.Store(0)
	h.mu.Unlock()
	return recs
}

// full reports whether maxHeldOutputs are held.
func (h *heldOutputs) full() bool { return h.n.Load() >= maxHeldOutputs }

// txnEnd is the end of a transaction that runs while the tasks go on: part of its
// inflightCommit.
type txnEnd struct {
	ended     chan struct{} // closed when the transaction has ended
	handled   bool          // txnEndedLocked ran
	committed bool
	err       error // why the transaction aborted, if it did with an error
	// recheck: the end's outcome was unknown to the client and read from the broker, which
	// had committed it; kgo had moved the consumer back.
	recheck bool
	// cutAt are the positions of the commit's dirty partitions at the cut (c.dirty's).
	cutAt []kgo.EpochOffset
}

// txnEndingLocked reports whether a transaction ends while the tasks go on, and its end is
// not handled yet.
func (r *Runtime) txnEndingLocked() bool {
	c := r.inflight
	return c != nil && c.end != nil && !c.end.handled
}

// txnEndedOverLocked reports whether the transaction in flight has ended and the loop is to
// handle it (txnEndedLocked).
func (r *Runtime) txnEndedOverLocked() bool {
	if !r.txnEndingLocked() {
		return false
	}
	select {
	case <-r.inflight.end.ended:
		return true
	default:
		return false
	}
}

// commitTxnAsyncLocked is the loop's periodic commit under exactly-once: the cut now, the
// transaction's end in the background (see the top of this file). It returns
// errCommitInFlight while the previous commit is in flight.
func (r *Runtime) commitTxnAsyncLocked(ctx context.Context) error {
	if r.inflight != nil && !r.commitOverLocked() {
		return errCommitInFlight
	}
	r.quiesceLocked()
	if r.inflight != nil {
		r.endCommitLocked()
	}
	if !r.inTxn {
		return nil
	}
	if err := r.preCommitLocked(ctx); err != nil {
		r.txnFailed.Store(true)
	}
	offsets, dirty, records := r.positionsLocked()
	stores := r.storesLocked()
	_ = eachStore(stores, func(ls *loggedStore) error { ls.logPending(); return nil })
	c := &inflightCommit{done: make(chan struct{}), offsets: offsets, dirty: dirty, records: records, began: time.Now(), eos: true,
		end: &txnEnd{ended: make(chan struct{})}}
	if err := c.cutStores(stores); err != nil {
		return err // the transaction stays open; the next commit tries again
	}
	for _, pos := range dirty {
		c.end.cutAt = append(c.end.cutAt, kgo.EpochOffset{Epoch: pos.epoch, Offset: pos.next})
		pos.dirty = false // set again by what is processed for the next transaction
	}
	r.cutTasksLocked()
	r.inTxn = false
	r.held.on.Store(true)
	r.endMu.Lock()
	r.ending, r.endBegan = true, time.Now()
	r.endMu.Unlock()
	r.inflight = c
	r.committing.Store(true)
	// The end has its own deadline: the loop's ends when this returns.
	ectx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
	ectx, cut := r.cutBeforeCommit(ectx, offsets)
	go func() {
		r.endTxnAsync(ectx, c)
		cut()
		cancel()
	}()
	return nil
}

// endTxnAsync ends the transaction of c while the tasks go on, then writes its store
// changes if it committed. It touches nothing of the tasks: the loop does that once the
// transaction has ended (txnEndedLocked).
func (r *Runtime) endTxnAsync(ctx context.Context, c *inflightCommit) {
	e := c.end
	// Every record of the transaction first: see commitTxnLocked.
	if err := r.producer.Flush(ctx); err != nil {
		r.txnFailed.Store(true)
	}
	try := kgo.TryCommit
	if r.txnFailed.Load() || r.fatal() != nil {
		try = kgo.TryAbort
	}
	committed, err := r.endTxn(ctx, try)
	if err != nil && !committed {
		err = r.abortUntilEnded(err, r.endTxn)
		if try == kgo.TryCommit && len(c.offsets) > 0 && !errors.Is(err, errTxnTooOld) && !errors.Is(err, context.Canceled) && !fencedProducer(err) && r.fatal() == nil && r.committedOnBroker(c.offsets) {
			r.log.Warn("kstream: the transaction's outcome was unknown; the group's committed offsets show that it committed", "transactional_id", r.txnID, "err", err)
			committed, err, e.recheck = true, nil, true
		}
	}
	e.committed, e.err = committed, err
	c.took = time.Since(c.began)
	r.stats.observe(c.took, committed, c.records)
	if committed {
		// No changelog record is produced before the loop's next cut, which waits for
		// this commit: the positions acknowledged now are the checkpoints.
		for _, sc := range c.cuts {
			sc.settle()
		}
	}
	close(e.ended)
	r.kick.kick()
	if committed {
		for _, sc := range c.cuts {
			if c.err = sc.write(); c.err != nil {
				break
			}
		}
		if c.err == nil {
			c.err = r.stores.sync()
		}
	}
	close(c.done)
	r.kick.kick()
}

// cutTasksLocked takes each task's state for the commit being cut (see committedLocked).
func (r *Runtime) cutTasksLocked() {
	var now time.Time
	if r.met != nil {
		now = time.Now()
	}
	for _, t := range r.tasks {
		t.punctuated = false
		if t.task != nil {
			t.task.Cut()
			t.group.Cut()
			if r.met != nil {
				r.met.sized(t, now)
			}
		}
	}
}

// promoteTasksLocked makes the state of each task's last cut its committed state.
func (r *Runtime) promoteTasksLocked() {
	for _, t := range r.tasks {
		if t.task != nil {
			t.task.Committed()
			t.group.Save()
		}
	}
}

// txnEndedLocked ends, with the tasks at rest, the commit whose transaction ended while
// the tasks went on (see the top of this file); the changes of a committed transaction
// may still be being written to the stores (the commit stays in flight until then).
func (r *Runtime) txnEndedLocked(c *inflightCommit) {
	e := c.end
	e.handled = true
	r.endMu.Lock()
	r.ending = false
	setAside := len(r.deferred) > 0
	waiting := r.blocked
	r.endMu.Unlock()
	held := r.held.take()
	if e.committed {
		for i, pos := range c.dirty {
			pos.committed = e.cutAt[i]
		}
		r.promoteTasksLocked()
		r.log.Debug("kstream: transaction committed", "records", c.records, "took", c.took)
		if e.recheck || setAside || r.txnFailed.Load() {
			// What the tasks did since the cut cannot go into the next transaction: some of
			// their partitions are gone, or the consumer was moved back. Undo it: processed
			// again from the offsets just committed.
			r.log.Info("kstream: the transaction committed, but partitions were revoked or lost while it ended, or its outcome was read from the broker; what was processed since its cut is processed again", "transactional_id", r.txnID, "revoked_or_lost", setAside, "outcome_read", e.recheck)
			held = nil
			r.abortedLocked()
		}
	} else {
		for _, sc := range c.cuts {
			sc.end(false)
		}
		c.cuts = nil
		held = nil
		r.abortedLocked()
		if e.err != nil {
			r.log.Warn("kstream: transaction aborted; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "transactional_id", r.txnID, "err", e.err)
		} else {
			r.log.Warn("kstream: transaction aborted; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "transactional_id", r.txnID)
		}
	}
	if waiting {
		// A rebalance waits for the loop, which lets it through only between transactions:
		// with the tasks working for the next transaction while each one ends, perhaps
		// never. The loop ends the next transaction at once, blocking, and launches no turn
		// before it lets the rebalance through (loop.go).
		r.yieldToRebalance = true
	}
	r.txnFailed.Store(false)
	r.dropDeferredLocked()
	r.kick.kick() // the loop polls again
	if r.fatal() != nil || r.fencedCause() != nil || (len(held) == 0 && !r.workedLocked()) {
		return
	}
	// The next transaction, for what the tasks did while this one ended: their outputs, in
	// the order produced, and their positions, store changes and the updates a record cache
	// holds, which its next commit covers. (Without a transaction open, the next commit
	// would have nothing to end, and what an idle instance's tasks did last would wait for
	// its next input.)
	aborts := r.aborts
	if err := r.beginTxnLocked(); err != nil {
		if r.fencedCause() == nil {
			r.fail(err)
		}
		return
	}
	if r.aborts != aborts {
		return // beginning undid the tasks' work (a revocation reset the session)
	}
	r.carried = time.Now()
	for _, o := range held {
		r.Produce(o)
	}
}

// txnOpenUntilLocked is the earliest time of the next cut besides the commit interval: one
// interval after the loop began the open transaction for what the tasks did while the last
// one ended (zero if it did not, and with blocking commits).
//
// Without it, an end longer than the interval (the broker answers a transaction's first
// produce requests slowly; on Apache Kafka 4.4 here the end took 26 ms at p50 with 20 ms
// commits) made the next cut due the moment the transaction began: the held outputs were
// produced just before it, and its flush waited for their slow requests, so the end took
// as long again. Commits then came one end apart and every record waited for two. With
// the transaction open for an interval, its first requests are answered before its cut:
// on the same broker the flush went from 21 to 5 ms at p50, and the end-to-end latency of
// the count at 20 ms commits from 26.8 to 24.2 ms at p50 and from 60.9 to 54.4 ms at p99
// (go run ./bench/compare -scenarios latency-eos-20ms, 4 rounds, better in each). A record
// that arrives after a quiet spell (no outputs held) is still committed as soon as the
// interval since the last cut allows. The time open is at most a quarter of the
// transaction timeout, far from the end the broker enforces (txnEndBy).
func (r *Runtime) txnOpenUntilLocked() time.Time {
	if r.sess == nil || r.cfg.BlockingCommits || !r.inTxn || r.carried.IsZero() {
		return time.Time{}
	}
	return r.carried.Add(min(r.cfg.CommitInterval, r.cfg.TransactionTimeout/4))
}

// workedLocked reports whether a task processed a record or ran a punctuator since the
// last cut.
func (r *Runtime) workedLocked() bool {
	for _, t := range r.tasks {
		if t.punctuated {
			return true
		}
		for _, pos := range t.parts {
			if pos.dirty {
				return true
			}
		}
	}
	return false
}

// settle fixes the checkpoint of a logged cut at the changelog position acknowledged now,
// once its transaction committed (endTxnAsync).
func (c *storeCut) settle() {
	if c.logged {
		c.source = c.ls.acked.Load()
		c.settled = true
	}
}
