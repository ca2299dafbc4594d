package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A fenced producer under exactly-once is a task migration, as in Kafka Streams
// (ProducerFencedException becomes TaskMigratedException there): the broker bumped the
// producer's epoch, either because a transaction outlived TransactionTimeout (a slow
// poll, a stalled broker, a machine under load) or because another producer initialized
// the same transactional id. The open transaction is gone; nothing of it reached a store
// (its writes wait in the pending batches). kgo cannot go on with a fenced producer under
// transaction version 2, so the instance drops its tasks, leaves the group, creates a new
// transactional session (whose InitProducerID takes the id back) and rejoins; the tasks
// restart from the committed offsets and their stores' checkpoints.
//
// Two instances on copies of one state directory would fence each other for ever: after
// maxFences fences within fenceWindow, the fence is fatal, with a message that says so.
const (
	maxFences   = 5
	fenceWindow = 5 * time.Minute
)

// fenceState records fences: the cause of the one being handled, and recent times.
type fenceState struct {
	mu     sync.Mutex
	cause  error
	recent []time.Time
}

// fencedProducer reports whether err means that the producer's epoch is gone: fenced by
// another producer with the same transactional id, or by the broker aborting a
// transaction that timed out (INVALID_PRODUCER_EPOCH, which kgo cannot recover from under
// transaction version 2).
func fencedProducer(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// producerUnusable reports whether err, from beginning or ending a transaction, leaves the
// transactional producer unable to go on: fenced (fencedProducer), or a producer-state error
// that kgo holds as fatal for the producer ID (INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING,
// UNKNOWN_PRODUCER_ID, TRANSACTION_ABORTABLE once its transaction could not be aborted). On
// Apache Kafka 4.4 a producer whose epoch another InitProducerID bumped mid-transaction can
// get INVALID_TXN_STATE instead of PRODUCER_FENCED. Either way the only way on is the one a
// fence takes: a new producer, the tasks restarted from the committed offsets.
func producerUnusable(err error) bool {
	return fencedProducer(err) || errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.UnknownProducerID) || errors.Is(err, kerr.TransactionAbortable)
}

// onFenced starts a task migration: the loop stops at its next turn and Run rejoins with a
// new session (see rejoinAfterFence). Only the first cause is kept until then.
func (r *Runtime) onFenced(err error) {
	r.fence.mu.Lock()
	defer r.fence.mu.Unlock()
	if r.fence.cause != nil {
		return
	}
	r.fence.cause = err
	r.log.Warn("kstream: the transactional producer was fenced; dropping the tasks and rejoining the group with a new producer (processing goes on from the committed offsets)",
		"app", r.cfg.ApplicationID, "transactional_id", r.txnID, "transaction_timeout", r.cfg.TransactionTimeout, "err", err)
}

// fencedCause returns the fence being handled, or nil.
func (r *Runtime) fencedCause() error {
	r.fence.mu.Lock()
	defer r.fence.mu.Unlock()
	return r.fence.cause
}

// rejoinAfterFence tears the fenced session down and opens a new one. It returns an error
// (fatal) when fences come too often to be weather, or when the new session cannot be made.
func (r *Runtime) rejoinAfterFence(ctx context.Context) error {
	r.fence.mu.Lock()
	cause := r.fence.cause
	now := time.Now()
	kept := r.fence.recent[:0]
	for _, at := range r.fence.recent {
		if now.Sub(at) < fenceWindow {
			kept = append(kept, at)
		}
	}
	r.fence.recent = append(kept, now)
	n, first := len(r.fence.recent), r.fence.recent[0]
	r.fence.mu.Unlock()
	r.stats.fences.Add(1)
	if n > maxFences {
		return fmt.Errorf("%w (fenced %d times within %s: another instance probably runs with a copy of this state directory)", fencedErr(r.txnID, r.cfg.TransactionTimeout, cause), n, fenceWindow)
	}
	if r.cfg.GiveUpAfter > 0 && n > 1 && now.Sub(first) > r.cfg.GiveUpAfter {
		return fmt.Errorf("kstream: gave up after %s of fences (Config.GiveUpAfter): %w", r.cfg.GiveUpAfter, fencedErr(r.txnID, r.cfg.TransactionTimeout, cause))
	}
	r.closeForRejoin("the transactional producer was fenced: rejoining the group with a new one")
	r.fence.mu.Lock()
	r.fence.cause = nil
	r.fence.mu.Unlock()
	if err := r.reopenConsumer(ctx); err != nil {
		return err
	}
	r.log.Info("kstream: rejoining the group with a new transactional producer", "app", r.cfg.ApplicationID, "transactional_id", r.txnID, "fences_recently", n)
	return nil
}

// closeForRejoin closes every task without committing (an open transaction is aborted),
// leaves the group and closes the consumer; the stores stay open. The state is
// REBALANCING for the reason why until reopenConsumer's new consumer has its assignment.
// A fence (rejoinAfterFence) and the uncaught-error policy's restarts (uncaught.go) go
// through it.
func (r *Runtime) closeForRejoin(why string) {
	r.life.started.Store(false)
	r.leftGroup(why)

	r.migrating.Store(true)
	cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
	r.mu.Lock()
	r.quiesceLocked()
	r.awaitCommitNowLocked() // a transaction that ends while the tasks go on, first
	if r.inTxn {
		// The transaction is gone with the epoch; an abort may still be needed by kgo
		// to let go of its records. Its outcome does not matter.
		actx, acancel := context.WithTimeout(cctx, 2*time.Second)
		_, _ = r.endTxnLocked(actx, kgo.TryAbort)
		acancel()
	}
	r.inTxn = false
	r.txnFailed.Store(false)
	r.abortedLocked()
	all := map[string][]int32{}
	for tp := range r.parts {
		all[tp.topic] = append(all[tp.topic], tp.partition)
	}
	r.dropLocked(all)
	r.revoked = false
	r.mu.Unlock()
	r.leaveAndClose(cctx)
	cancel()
}

// reopenConsumer joins the group again with a new consumer after closeForRejoin, and, under
// exactly-once, initializes the transactional producer again.
func (r *Runtime) reopenConsumer(ctx context.Context) error {
	// The old client is closed; goroutines that still read r.consumer (under mu) find it
	// closed until the new one replaces it, which creating it under mu does at once.
	r.mu.Lock()
	r.endMu.Lock()
	r.ending, r.blocked, r.deferred = false, false, nil
	r.endMu.Unlock()
	r.sessionLost.Store(0)
	err := r.openConsumer()
	r.mu.Unlock()
	r.migrating.Store(false)
	if err != nil {
		return err
	}
	// The classic membership rejoins with the new consumer by itself; the streams
	// membership's heartbeat stopped when it left, and starts again.
	r.member.start()
	if err := r.fencePrevious(ctx); err != nil {
		return err
	}
	r.startedRunning()
	return nil
}

// leaveAndClose lets a waiting rebalance through, leaves the group so that the other
// members take over at once, and closes the consumer, waiting at most until ctx ends.
func (r *Runtime) leaveAndClose(ctx context.Context) {
	r.leaveAndCloseAs(ctx, false)
}

// leaveAndCloseAs is leaveAndClose; final says the runtime is stopping (not rejoining
// after a fence), when a static member leaves only if Config.LeaveOnClose is set. kgo sends
// no LeaveGroup for a static member: it leaves through the admin client, by its instance
// id, once the consumer is closed, as Kafka Streams does.
func (r *Runtime) leaveAndCloseAs(ctx context.Context, final bool) {
	defer func() {
		if r.cfg.InstanceID == "" || !final || !r.cfg.LeaveOnClose || r.admin == nil || r.cfg.StreamsProtocol {
			return
		}
		resp, err := r.admin.LeaveGroup(ctx, kadm.LeaveGroup(r.cfg.ApplicationID).InstanceIDs(r.cfg.InstanceID).Reason("kstream: closing with LeaveGroupOnClose"))
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			r.log.Warn("kstream: leaving the group as a static member", "app", r.cfg.ApplicationID, "instance_id", r.cfg.InstanceID, "err", err)
		} else {
			r.log.Info("kstream: left the group (static member)", "app", r.cfg.ApplicationID, "instance_id", r.cfg.InstanceID)
		}
	}()
	r.allowRebalance()
	if err := r.member.leave(ctx, final); err != nil {
		r.log.Warn("kstream: leaving the group", "app", r.cfg.ApplicationID, "err", err)
	}
	// Closing waits for a group join in flight, which kgo does not cancel: bound the wait
	// by the close timeout, as Kafka Streams' close(timeout) does.
	closed := make(chan struct{})
	cl := r.consumer
	go func() {
		defer close(closed)
		cl.CloseAllowingRebalance()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		r.log.Warn("kstream: the consumer did not close within the close timeout (a group join is in flight); it finishes closing in the background", "app", r.cfg.ApplicationID)
	}
}
