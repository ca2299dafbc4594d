package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A cooperative rebalance must not pause the tasks that stay. kgo holds every offset commit
// of the group while the member joins and syncs (committing between join and sync fails
// with REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION), and the join lasts until every member
// has rejoined: up to a heartbeat interval, often more. The loop commits with every task at
// rest (quiesceLocked) and holding its lock, so a commit that waited for the join held every
// task of the instance for as long, although none of them was moving (measured: 0.4-0.6 s
// with three instances, on both brokers: go run ./bench -only scale-rebalance).
//
// joinWatch follows the join from the consumer's requests (a client hook): joining from the
// write of a JoinGroup request until the read of a SyncGroup response (or a failed read, or
// a LeaveGroup). While joining, the loop puts its periodic commit off (it commits once the
// join is over, or after commitDeferLimit in any case), and a commit that already waits for
// the join when it starts is cancelled and put off too. Java's StreamThread keeps processing
// while its consumer rejoins in the same way: its commit is not held by the join either.
type joinWatch struct {
	mu      sync.Mutex
	joining bool
	since   time.Time
	// cancel ends the context of the commit waiting now (commitContext), nil if none.
	cancel context.CancelCauseFunc
}

// errJoining is the cause of a commit's context cancelled because the group began a join.
var errJoining = errors.New("kstream: the group is joining; the commit is put off until it has synced")

// commitDeferLimit bounds how long a commit is put off for a join: past it the loop commits
// and waits for the join, as a safeguard against a join whose end the watch missed.
const commitDeferLimit = 10 * time.Second

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (w *joinWatch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch kmsg.Key(key) {
	case kmsg.JoinGroup:
		if err != nil {
			return
		}
		w.mu.Lock()
		if !w.joining {
			w.joining, w.since = true, time.Now()
		}
		cancel := w.cancel
		w.mu.Unlock()
		if cancel != nil {
			// kgo took its commit lock before writing the join: a commit that waits now
			// waits for the whole join. (A commit in flight holds the lock, and the join
			// is written only after it ended.)
			cancel(errJoining)
		}
	case kmsg.LeaveGroup:
		w.end()
	}
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *joinWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch kmsg.Key(key) {
	case kmsg.SyncGroup:
		w.end()
	case kmsg.JoinGroup:
		if err != nil {
			w.end()
		}
	}
}

func (w *joinWatch) end() {
	w.mu.Lock()
	w.joining = false
	w.mu.Unlock()
}

// putOff reports whether a commit due now should wait for the join in progress: the group is
// joining and the last commit was less than commitDeferLimit ago.
func (w *joinWatch) putOff(lastCommit time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joining && time.Since(lastCommit) < commitDeferLimit
}

// commitContext returns the context of an offset commit about to be sent, cancelled with
// errJoining if the group begins a join before it is sent; done ends the watch and reports
// whether that happened.
func (w *joinWatch) commitContext(ctx context.Context) (cctx context.Context, done func() bool) {
	cctx, cancel := context.WithCancelCause(ctx)
	w.mu.Lock()
	w.cancel = cancel
	w.mu.Unlock()
	return cctx, func() bool {
		w.mu.Lock()
		w.cancel = nil
		w.mu.Unlock()
		joined := errors.Is(context.Cause(cctx), errJoining)
		cancel(nil)
		return joined
	}
}
