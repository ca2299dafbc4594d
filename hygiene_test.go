package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// hygieneTopology joins in with the global table of global (the stream's value is the
// global key; an inner join, so a record counts only once the global store has its key),
// counts the joined records per key in the Pebble store "counts" and writes each new count
// to out. It has every kind of goroutine an instance runs: the poll loop, task goroutines,
// the global-table goroutine, Pebble's.
func hygieneTopology(in, global, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	g := kstream.GlobalTable(b, global, serde.String(), serde.String(), "hygiene-global")
	s := kstream.Stream(b, in, serde.String(), serde.String())
	joined := kstream.JoinGlobal(s, g, func(_, v string) string { return v }, func(_, _, gv string) string { return gv })
	kstream.Count(joined.GroupByKey(), "counts").ToStream().To(out, nil, serde.Int64())
	return b
}

// openFDs returns the targets of this process's open file descriptors (/proc/self/fd),
// sorted, or ok false where /proc/self/fd does not exist.
func openFDs() (targets []string, ok bool) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		// The directory's own descriptor, opened by ReadDir, is gone by now and reads as
		// an error; skip it.
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		targets = append(targets, target)
	}
	slices.Sort(targets)
	return targets, true
}

// extra returns the elements of after not matched one for one in before (both sorted).
func extra(before, after []string) []string {
	var out []string
	i := 0
	for _, a := range after {
		for i < len(before) && before[i] < a {
			i++
		}
		if i < len(before) && before[i] == a {
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// hygieneCycles is the number of start/stop cycles of TestStartStopLeavesNothing.
const hygieneCycles = 50

// 50 start/stop cycles of a stateful instance (a Pebble count, a global table) in one
// process, each reaching RUNNING and counting a few records, leave no goroutine and no file
// descriptor behind. Each cycle is a new App of the same application on the same state
// directory, so it reopens its state; the counts go on from one cycle to the next, and
// every cycle's output is checked record by record.
//
// Not parallel: the goroutine and descriptor counts are of the whole process.
func TestStartStopLeavesNothing(t *testing.T) {
	const parts, keys = 2, 4
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	global := kafkatest.CreateTopic(t, "global", 1, map[string]*string{"cleanup.policy": kstreamPtr("compact")})
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	setup := kafkatest.Client(t)
	kafkatest.Produce(t, setup, &kgo.Record{Topic: global, Key: []byte("g"), Value: []byte("joined")})
	setup.Close()

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.CloseTimeout = 5 * time.Second

	// Baselines, taken once the shared broker and the topics exist and the set-up client is
	// closed. The broker's goroutines and sockets of this test's connections may still be
	// closing: wait for the descriptor count to settle first.
	fdsBefore, haveFDs := openFDs()
	if haveFDs {
		settle := time.Now().Add(5 * time.Second)
		for time.Now().Before(settle) {
			time.Sleep(100 * time.Millisecond) // a settling period, not a condition
			now, _ := openFDs()
			if len(now) == len(fdsBefore) {
				break
			}
			fdsBefore = now
		}
	}
	ignore := goleak.IgnoreCurrent()
	goroutinesBefore := runtime.NumGoroutine()

	began := time.Now()
	var slowest time.Duration
	for cycle := range hygieneCycles {
		c0 := time.Now()
		hygieneCycle(t, cycle, keys, in, global, out, cfg)
		if t.Failed() {
			t.Fatalf("cycle %d failed", cycle)
		}
		slowest = max(slowest, time.Since(c0))
	}
	elapsed := time.Since(began)

	// Goroutines: poll with a deadline, since closed connections end their goroutines (the
	// in-process broker's included) asynchronously.
	var leak error
	deadline := time.Now().Add(10 * time.Second)
	for {
		if leak = goleak.Find(ignore); leak == nil || time.Now().After(deadline) {
			break
		}
	}
	if leak != nil {
		t.Errorf("after %d cycles, goroutines are left (%d before, %d now): %v", hygieneCycles, goroutinesBefore, runtime.NumGoroutine(), leak)
	}

	if !haveFDs {
		t.Logf("%d cycles in %v (slowest %v): no goroutine left; /proc/self/fd not available, descriptors not checked", hygieneCycles, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond))
		return
	}
	var fdsAfter []string
	deadline = time.Now().Add(10 * time.Second)
	for {
		fdsAfter, _ = openFDs()
		if len(fdsAfter) <= len(fdsBefore) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(fdsAfter) > len(fdsBefore) {
		t.Errorf("after %d cycles, %d file descriptors are open, %d before; new: %v", hygieneCycles, len(fdsAfter), len(fdsBefore), extra(fdsBefore, fdsAfter))
	}
	t.Logf("%d cycles in %v (slowest %v); goroutines %d before, %d after; file descriptors %d before, %d after",
		hygieneCycles, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond), goroutinesBefore, runtime.NumGoroutine(), len(fdsBefore), len(fdsAfter))
}

// hygieneCycle runs one cycle: a new App runs until RUNNING, counts one record of each of
// keys keys, and is stopped by cancelling its context. Every client it uses is closed
// before it returns. Cycle c's output is exactly one record per key with the count c+1.
func hygieneCycle(t *testing.T, cycle, keys int, in, global, out string, cfg kstream.Config) {
	t.Helper()
	app := newApp(t, hygieneTopology(in, global, out), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("Run did not return within 30s of cancelling its context")
		}
	}

	waitRunning := time.Now().Add(30 * time.Second)
	for app.State() != kstream.StateRunning || len(app.Tasks()) != 2 {
		if time.Now().After(waitRunning) {
			t.Errorf("cycle %d: not RUNNING with both tasks within 30s (state %v, tasks %v)", cycle, app.State(), app.Tasks())
			if err := stop(); err != nil {
				t.Errorf("cycle %d: %v", cycle, err)
			}
			return
		}
		select {
		case err := <-done:
			t.Errorf("cycle %d: Run returned before RUNNING: %v", cycle, err)
			return
		case <-time.After(5 * time.Millisecond):
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	var recs []*kgo.Record
	for k := range keys {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", k), Value: []byte("g")})
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	perr := cl.ProduceSync(pctx, recs...).FirstErr()
	pcancel()
	cl.Close()
	if perr != nil {
		t.Errorf("cycle %d: producing: %v", cycle, perr)
		_ = stop()
		return
	}

	// This cycle's outputs are the last keys records of out: read it from the start.
	want := (cycle + 1) * keys
	cons, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	last := map[string][]int64{}
	got := 0
	for got < want && cctx.Err() == nil {
		fs := cons.PollFetches(cctx)
		fs.EachRecord(func(r *kgo.Record) {
			n, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				n = -1
			}
			last[string(r.Key)] = append(last[string(r.Key)], n)
			got++
		})
	}
	ccancel()
	cons.Close()

	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("cycle %d: Run returned %v after cancel, want nil", cycle, err)
	}
	if got != want {
		t.Errorf("cycle %d: out holds %d records, want %d", cycle, got, want)
		return
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		s := last[key]
		ok := len(s) == cycle+1
		for i := 0; ok && i < len(s); i++ {
			ok = s[i] == int64(i+1)
		}
		if !ok {
			t.Errorf("cycle %d: key %s: counts %v, want 1..%d", cycle, key, s, cycle+1)
		}
	}
	if st := app.State(); st != kstream.StateNotRunning {
		t.Errorf("cycle %d: state after stop %v, want NOT_RUNNING", cycle, st)
	}
}
