package kstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// warmupRecorder is a StandbyListener that keeps which changelog partitions had a standby
// (here: a warm-up) and why each stopped.
type warmupRecorder struct {
	mu        sync.Mutex
	started   map[int32]bool
	suspended map[int32]string
}

func (w *warmupRecorder) OnUpdateStart(_, _ string, p int32, _ int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started == nil {
		w.started, w.suspended = map[int32]bool{}, map[int32]string{}
	}
	w.started[p] = true
}
func (w *warmupRecorder) OnBatchLoaded(string, string, int32, int64, int, int64) {}
func (w *warmupRecorder) OnUpdateSuspended(_, _ string, p int32, _ int64, reason kstream.SuspendReason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.suspended[p] = reason.String()
}

// A third instance joins two that hold a counting application's state while input keeps
// coming (exactly-once). The new instance first gets warm-up replicas, not tasks: each task
// it ends up running was restored there as a warm-up and then promoted, and its active
// restore replays only the changelog's tail (at most about the acceptable recovery lag),
// never the whole store. The group ends balanced (2/2/2) with no warm-ups left, and every
// key's counts are exactly 1..n.
func TestScaleOutWarmsUpBeforeMoving(t *testing.T) {
	t.Parallel()
	const parts, keys, acceptable = 6, 60000, 1000
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	base := testConfig(t)
	base.Guarantee = kstream.ExactlyOnce
	base.AcceptableRecoveryLag = acceptable
	base.MaxWarmupReplicas = 1 // two tasks move: one warm-up at a time, two probes
	base.ProbingRebalanceInterval = 3 * time.Second
	changelog := base.ApplicationID + "-counts-changelog"
	newInstance := func() kstream.Config {
		cfg := base
		cfg.StateDir = t.TempDir()
		return cfg
	}
	a := newApp(t, countTopology(in, out), newInstance())
	b := newApp(t, countTopology(in, out), newInstance())
	start(t, a)
	start(t, b)
	outputs := collect(t, out, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	kafkatest.Eventually(t, 60*time.Second, "two instances with three tasks each", func() bool {
		return len(a.Tasks()) == 3 && len(b.Tasks()) == 3 && a.State() == kstream.StateRunning && b.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 60000, keys, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 60000 records", func() bool { return outputs.reached(want) })
	full := endOffsets(t, changelog)

	// Input keeps coming while the third instance joins: about 1,000 records a second.
	var mu sync.Mutex
	ctx, stopProducing := context.WithCancel(context.Background())
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		cl := kafkatest.Client(t)
		rng := rand.New(rand.NewPCG(2, 2))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			recs := make([]*kgo.Record, 0, 20)
			mu.Lock()
			for range 20 {
				k := fmt.Sprintf("k%05d", rng.IntN(keys))
				want[k]++
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v")})
			}
			mu.Unlock()
			pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
				t.Errorf("producing: %v", err)
			}
			cancel()
		}
	}()

	cfg := newInstance()
	warm, restored := &warmupRecorder{}, &restoreRecorder{}
	cfg.StandbyListener, cfg.RestoreListener = warm, restored
	c := newApp(t, countTopology(in, out), cfg)
	joined := time.Now()
	start(t, c)
	sawWarmup := false
	kafkatest.Eventually(t, 90*time.Second, "balanced: two tasks on each instance, no warm-up left", func() bool {
		st := c.Status()
		for _, s := range st.Standby {
			sawWarmup = sawWarmup || s.Warmup
		}
		return len(a.Tasks()) == 2 && len(b.Tasks()) == 2 && len(st.Active) == 2 && len(st.Standby) == 0 &&
			c.State() == kstream.StateRunning
	})
	t.Logf("balanced %s after the third instance started", time.Since(joined).Round(100*time.Millisecond))
	stopProducing()
	<-produced
	mu.Lock()
	defer mu.Unlock()
	kafkatest.Eventually(t, 60*time.Second, "counts of every record", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)

	if !sawWarmup {
		t.Log("no warm-up seen in Status (they may have come and gone between two looks)")
	}
	warm.mu.Lock()
	defer warm.mu.Unlock()
	restored.mu.Lock()
	defer restored.mu.Unlock()
	for _, id := range c.Tasks() {
		p := id.Partition
		// The warm-up follows the changelog until the task comes (through the first round
		// of the cooperative move, which makes this instance its target), and is promoted.
		if !warm.started[p] || warm.suspended[p] != "promoted" {
			t.Errorf("task %v: warm-up started %v, suspended %q; want a warm-up promoted", id, warm.started[p], warm.suspended[p])
		}
		// The active restore replays the tail written since the warm-up's last batch: at
		// most about the acceptable lag, plus what came during the probing rebalance.
		if n := restored.restored[p]; n > acceptable+2000 || n >= full[p] {
			t.Errorf("task %v: restored %d records as an active task (the store's changelog had %d before the join); want a tail of at most about %d", id, n, full[p], acceptable)
		}
		t.Logf("task %v: changelog %d records at the join; restored %d as active after the warm-up", id, full[p], restored.restored[p])
	}
}
