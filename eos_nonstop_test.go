package kstream_test

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Under exactly-once the tasks go on processing while a transaction ends (its flush, its
// offset commit and its EndTxn), for the next transaction, and the output is still exactly
// once. The in-process broker answers every committing EndTxn of the application 300 ms
// late; a Peek notes when each input record is processed. With the default commits, records
// are processed while an EndTxn waits for its answer; with Config.BlockingCommits (the
// earlier behaviour, and Kafka Streams') none is. Either way the read_committed counts are
// exactly 1..n for every key, none missing, none twice. With the default commits, the
// transaction begun for what was processed while one ended stays open a commit interval
// before its own EndTxn (txnOpenUntilLocked): the next commit does not come at once because
// the slow end outlasted the interval.
func TestExactlyOnceProcessesWhileTheTransactionEnds(t *testing.T) {
	t.Parallel()
	for _, blocking := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "blocking"}[blocking], func(t *testing.T) {
			t.Parallel()
			b := kafkatest.Embedded(t)
			if b == nil {
				t.Skip("request injection needs the in-process broker")
			}
			in := kafkatest.CreateTopic(t, "in", 3, nil)
			out := kafkatest.CreateTopic(t, "out", 3, nil)
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 50*time.Millisecond
			cfg.BlockingCommits = blocking

			var mu sync.Mutex
			var processed []time.Time
			bld := kstream.NewBuilder()
			src := kstream.Stream(bld, in, serde.String(), serde.String()).Peek(func(string, string) {
				mu.Lock()
				processed = append(processed, time.Now())
				mu.Unlock()
			})
			kstream.Count(src.GroupByKey(), "counts").ToStream().To(out, nil, nil)

			// Every committing EndTxn of this application: answered 300 ms late; noted as
			// the span from its arrival to its answer.
			type span struct{ from, to time.Time }
			var spans []span
			c := b.Cluster()
			controlKey(t, b, int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				r := req.(*kmsg.EndTxnRequest)
				if !r.Commit || !strings.HasPrefix(r.TransactionalID, cfg.ApplicationID) {
					return nil, nil, false
				}
				from := time.Now()
				c.SleepControl(func() { time.Sleep(300 * time.Millisecond) }) // a slow coordinator
				mu.Lock()
				spans = append(spans, span{from, time.Now()})
				mu.Unlock()
				return nil, nil, false // then handled normally
			})

			app := newApp(t, bld, cfg)
			r := start(t, app)
			outputs := collect(t, out, readCommitted)
			// Input arrives all along: batches of 100 records, one after the other, until
			// five delayed EndTxns have been answered.
			want := map[string]int64{}
			for batch := uint64(1); ; batch++ {
				produceCounts(t, in, 100, 200, batch, want)
				mu.Lock()
				ended := len(spans)
				mu.Unlock()
				if ended >= 5 && batch >= 20 {
					break
				}
			}
			kafkatest.Eventually(t, 60*time.Second, "every count", func() bool { return outputs.reached(want) })
			if err, done := r.wait(10 * time.Millisecond); done {
				t.Fatalf("Run returned: %v", err)
			}
			outputs.checkExact(t, want)

			mu.Lock()
			during := 0
			for _, at := range processed {
				for _, s := range spans {
					if at.After(s.from) && at.Before(s.to) {
						during++
						break
					}
				}
			}
			n, ends := len(processed), len(spans)
			mu.Unlock()
			st := app.Stats()
			t.Logf("%d records processed, %d of them while one of %d delayed EndTxns waited; %d commits, %d aborted", n, during, ends, st.Commits, st.TransactionsAborted)
			if ends == 0 {
				t.Fatal("no EndTxn was delayed")
			}
			if blocking && during > 0 {
				t.Fatalf("blocking commits processed %d records while a transaction ended", during)
			}
			if !blocking && during == 0 {
				t.Fatal("no record was processed while a transaction ended")
			}
			mu.Lock()
			defer mu.Unlock()
			for i := 0; !blocking && i+1 < min(len(spans), 5); i++ {
				// Input arrived all along until the fifth EndTxn was answered.
				if gap := spans[i+1].from.Sub(spans[i].to); gap < cfg.CommitInterval {
					t.Errorf("EndTxn %d came %v after EndTxn %d was answered, less than the commit interval %v", i+2, gap, i+1, cfg.CommitInterval)
				}
			}
		})
	}
}

// A rebalance while a transaction ends, the tasks going on: the in-process broker answers
// each committing EndTxn of the application late while a second instance joins and input
// keeps arriving. The read_committed counts are exactly 1..n for every key either way.
//
//   - waits: 300 ms late, within the time the instance lets a waiting rebalance wait. Once
//     the end is over, the instance commits the transaction of what it processed meanwhile
//     at once, blocking, and lets the rebalance through between the two (logged at info),
//     instead of undoing that work.
//   - let-through: 1.5 s late, longer than that. The rebalance is let through during the
//     end; kgo runs the revocation once the end returns (committed), before the loop has
//     handled it: the revoked partitions are set aside, and what the tasks processed since
//     the cut is undone and processed again (logged at info).
func TestExactlyOnceRebalanceWhileTheTransactionEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		log   string // a line the instances must log
	}{
		{"waits", 300 * time.Millisecond, "a rebalance waits; committing what was processed while the last transaction ended"},
		{"let-through", 1500 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := kafkatest.Embedded(t)
			if b == nil {
				t.Skip("request injection needs the in-process broker")
			}
			in := kafkatest.CreateTopic(t, "in", 4, nil)
			out := kafkatest.CreateTopic(t, "out", 4, nil)
			logs := &logCapture{t: t}
			cfg := testConfig(t)
			cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 50*time.Millisecond
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			delayed := delayEndTxns(t, b, cfg.ApplicationID, tc.delay)

			cfg1 := cfg
			cfg1.StateDir = t.TempDir()
			app1 := newApp(t, countTopology(in, out), cfg1)
			r1 := start(t, app1)
			outputs := collect(t, out, readCommitted)
			want := map[string]int64{}
			batch := uint64(1)
			produceUntil := func(ends int64) {
				for ; delayed.Load() < ends; batch++ {
					produceCounts(t, in, 100, 200, batch, want)
				}
			}
			produceUntil(2)
			cfg2 := cfg
			cfg2.StateDir = t.TempDir()
			app2 := newApp(t, countTopology(in, out), cfg2)
			r2 := start(t, app2)
			kafkatest.Eventually(t, 90*time.Second, "two instances with two tasks each", func() bool {
				produceCounts(t, in, 100, 200, batch, want)
				batch++
				return len(app1.Tasks()) == 2 && len(app2.Tasks()) == 2
			})
			produceUntil(delayed.Load() + 4)
			kafkatest.Eventually(t, 90*time.Second, "every count", func() bool { return outputs.reached(want) })
			for i, r := range []*running{r1, r2} {
				if err, done := r.wait(10 * time.Millisecond); done {
					t.Fatalf("instance %d: Run returned: %v", i+1, err)
				}
			}
			outputs.checkExact(t, want)
			if tc.log != "" && !logs.has(tc.log) {
				t.Errorf("no line logged with %q", tc.log)
			}
			st1, st2 := app1.Stats(), app2.Stats()
			t.Logf("%d delayed EndTxns; instance 1: %d commits, %d aborted; instance 2: %d commits, %d aborted", delayed.Load(), st1.Commits, st1.TransactionsAborted, st2.Commits, st2.TransactionsAborted)
		})
	}
}

// controlKey has the in-process broker hand every request of kind key to fn until the
// test ends: fn answers it (handled true) or lets the broker handle it as usual.
func controlKey(t *testing.T, b *embedded.Broker, key int16, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	c := b.Cluster()
	c.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		if done.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		return fn(req)
	})
}

// delayEndTxns has the in-process broker answer every committing EndTxn of application
// app late by d (a slow transaction coordinator) until the test ends, and returns the
// number of EndTxns delayed so far.
func delayEndTxns(t *testing.T, b *embedded.Broker, app string, d time.Duration) *atomic.Int64 {
	var delayed atomic.Int64
	c := b.Cluster()
	controlKey(t, b, int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || !strings.HasPrefix(r.TransactionalID, app) {
			return nil, nil, false
		}
		delayed.Add(1)
		c.SleepControl(func() { time.Sleep(d) }) // a slow coordinator
		return nil, nil, false                   // then handled normally
	})
	return &delayed
}

// The group session lost while a transaction ends, the tasks going on, and the partitions
// given back before the end is over, as when the broker restarts: for 3 s from a
// transaction's offset commit, the in-process broker answers the application's EndTxn and
// InitProducerID with COORDINATOR_LOAD_IN_PROGRESS, and refuses its next heartbeat with
// ILLEGAL_GENERATION. Each try to end the transaction fails after Config.CloseTimeout (1 s
// here) and the instance tries again (abortUntilEnded); between two tries kgo declares the
// partitions lost, the instance sets them aside (the transaction is ending), and the member
// rejoins and gets the same partitions back. The partitions set aside must be dropped before
// their new tasks are made: dropped after, they closed the new tasks, whose partitions stayed
// paused for a restore that had stopped, and the instance processed nothing more
// (TestRealBrokerKillRestart/exactly-once on Apache Kafka). The read_committed counts are
// exact.
func TestExactlyOnceSessionLostWhileTheTransactionEnds(t *testing.T) {
	t.Parallel()
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("request injection needs the in-process broker")
	}
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 50*time.Millisecond
	cfg.CloseTimeout = time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))

	var armed, failHeartbeat atomic.Bool
	var until, refused atomic.Int64 // end of the outage (unix ns); requests refused in it
	ours := func(txnID string) bool { return strings.HasPrefix(txnID, cfg.ApplicationID) }
	down := func() bool {
		if time.Now().UnixNano() >= until.Load() {
			return false
		}
		refused.Add(1)
		return true
	}
	controlKey(t, b, int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if r := req.(*kmsg.TxnOffsetCommitRequest); r.Group == cfg.ApplicationID && armed.CompareAndSwap(true, false) {
			until.Store(time.Now().Add(3 * time.Second).UnixNano())
			failHeartbeat.Store(true)
		}
		return nil, nil, false
	})
	controlKey(t, b, int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.HeartbeatRequest)
		if r.Group != cfg.ApplicationID || !failHeartbeat.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp, nil, true
	})
	controlKey(t, b, int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !ours(r.TransactionalID) || !down() {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	controlKey(t, b, int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID == nil || !ours(*r.TransactionalID) || !down() {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil, true
	})

	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	produceCounts(t, in, 2000, 200, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "the first counts", func() bool { return outputs.reached(want) })

	armed.Store(true)
	batch := uint64(2)
	kafkatest.Eventually(t, 60*time.Second, "the coordinator away while a transaction ends", func() bool {
		produceCounts(t, in, 100, 200, batch, want)
		batch++
		return refused.Load() != 0
	})
	kafkatest.Eventually(t, 60*time.Second, "partitions lost and assigned again", func() bool {
		return logs.has("partitions lost without a chance to commit") && len(app.Tasks()) == 4
	})
	for range 10 {
		produceCounts(t, in, 200, 200, batch, want)
		batch++
	}
	kafkatest.Eventually(t, 60*time.Second, "every count after the session was lost", func() bool { return outputs.reached(want) })
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.checkExact(t, want)
	st := app.Stats()
	t.Logf("%d commits, %d aborted, %d fences", st.Commits, st.TransactionsAborted, st.ProducerFences)
}

// A transaction that aborts while the tasks go on moves the consumer back to the committed
// offsets; a poll that returned during the end carries records fetched from before that
// move, and must not be processed: handled in the same turn of the loop as the abort, they
// were processed once from them and once more as the consumer fetched them again (an async
// operator's outputs twice, TestAsyncExactlyOnceAbortsOnSlowCall under load), or ahead of
// the records the abort gave back (a versioned join's orders then dropped as late,
// TestVersionedJoinSurvivesKillsExactlyOnce). The in-process broker answers every third
// committing EndTxn of the application 200 ms late with TRANSACTION_ABORTABLE while input
// arrives all along; the read_committed counts are exactly 1..n for every key.
func TestExactlyOnceAbortDropsRecordsPolledDuringTheEnd(t *testing.T) {
	t.Parallel()
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("request injection needs the in-process broker")
	}
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	cfg := testConfig(t)
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 50*time.Millisecond

	const aborts = 40
	var commits, refused atomic.Int64
	c := b.Cluster()
	controlKey(t, b, int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || !strings.HasPrefix(r.TransactionalID, cfg.ApplicationID) || commits.Add(1)%2 != 0 || refused.Load() >= aborts {
			return nil, nil, false
		}
		c.SleepControl(func() { time.Sleep(100 * time.Millisecond) }) // polls return meanwhile
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.TransactionAbortable.Code
		return resp, nil, true
	})

	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	for batch := uint64(1); refused.Load() < aborts; batch++ {
		produceCounts(t, in, 50, 100, batch, want)
	}
	kafkatest.Eventually(t, 60*time.Second, "every count", func() bool { return outputs.reached(want) || outputs.overshot(want) })
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.checkExact(t, want)
	st := app.Stats()
	t.Logf("%d commits, %d aborted", st.Commits, st.TransactionsAborted)
	if st.TransactionsAborted < aborts {
		t.Fatalf("%d transactions aborted, want %d", st.TransactionsAborted, aborts)
	}
}
