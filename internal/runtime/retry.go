package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Faults are weather: a broker that cannot be reached, a coordinator or leader that moved, a
// request that timed out are waited out with backoff, logged at warn with what the instance
// waits for, and never fatal unless Config.GiveUpAfter passes. Only conditions that cannot
// heal by waiting (an authorization failure, a fenced producer, a missing topic) stop the
// application.

// retriable reports whether err is a condition that heals by waiting: a retriable Kafka
// error, a coordinator or leader move, a lost connection, a request or dial timeout.
func retriable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if ke.Retriable {
			return true
		}
		// Errors kgo does not flag as retriable but that heal once the cluster settles.
		switch ke {
		case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress,
			kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID,
			kerr.FencedInstanceID, kerr.UnstableOffsetCommit, kerr.ConcurrentTransactions,
			kerr.NotController, kerr.BrokerNotAvailable, kerr.ReplicaNotAvailable,
			kerr.LeaderNotAvailable, kerr.NotLeaderForPartition, kerr.FencedLeaderEpoch,
			kerr.UnknownLeaderEpoch, kerr.OffsetNotAvailable, kerr.ThrottlingQuotaExceeded:
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return errors.Is(err, context.DeadlineExceeded)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, kgo.ErrRecordTimeout) ||
		kgo.IsRetryableBrokerErr(err)
}

// retry calls fn until it returns nil or an error that is not [retriable], ctx ends, or
// Config.GiveUpAfter passes (never, by default). Each failed attempt waits a backoff that
// grows from 50ms to 5s. While it waits it logs at warn what it waits for (what), at most
// once per 10s with the number of attempts so far. It returns the last error, wrapped with
// what, or the context's error.
func (r *Runtime) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	began := time.Now()
	backoff := 50 * time.Millisecond
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			if attempt > 1 {
				r.log.Info("kstream: recovered after retrying", "app", r.cfg.ApplicationID, "what", what, "attempts", attempt, "took", time.Since(began).Round(time.Millisecond))
			}
			return nil
		}
		if !retriable(err) || ctx.Err() != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				return fmt.Errorf("kstream: %s: %w", what, errors.Join(err, ctx.Err()))
			}
			if strings.HasPrefix(err.Error(), "kstream: ") {
				return err // it already says what failed
			}
			return fmt.Errorf("kstream: %s: %w", what, err)
		}
		if r.cfg.GiveUpAfter > 0 && time.Since(began) >= r.cfg.GiveUpAfter {
			return fmt.Errorf("kstream: %s: gave up after %s (Config.GiveUpAfter) and %d attempts: %w", what, r.cfg.GiveUpAfter, attempt, err)
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			r.log.Warn("kstream: waiting for the cluster; retrying", "app", r.cfg.ApplicationID, "what", what, "attempts", attempt, "waited", time.Since(began).Round(time.Millisecond), "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kstream: %s: %w", what, errors.Join(err, ctx.Err()))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// noise bounds repeated log lines: a condition that repeats (a deleted topic, an unreachable
// broker) is logged once per interval with the number of times it occurred since.
type noise struct {
	mu   sync.Mutex
	seen map[string]*noiseEntry
}

type noiseEntry struct {
	last  time.Time
	count int
}

// noiseInterval is how often a repeating condition is logged.
const noiseInterval = 10 * time.Second

// allow reports whether the condition named key should be logged now, and how many times it
// occurred since it was last logged (this occurrence included).
func (n *noise) allow(key string) (bool, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]*noiseEntry{}
	}
	e := n.seen[key]
	if e == nil {
		e = &noiseEntry{}
		n.seen[key] = e
	}
	e.count++
	if time.Since(e.last) < noiseInterval {
		return false, e.count
	}
	c := e.count
	e.last, e.count = time.Now(), 0
	return true, c
}

// warnEvery logs msg at warn under key at most once per [noiseInterval], with the number of
// occurrences since the last line.
func (r *Runtime) warnEvery(key, msg string, args ...any) {
	ok, count := r.noise.allow(key)
	if !ok {
		return
	}
	r.log.Warn(msg, append(args, "app", r.cfg.ApplicationID, "occurrences", count)...)
}
