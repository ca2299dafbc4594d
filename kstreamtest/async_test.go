package kstreamtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// asyncSeq is the value of the async tests: a key's sequence number.
func asyncSeq(v string) int {
	n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
	return n
}

// TestAsyncPerKeyOrder: 1,000 keys, random call latencies, 64 calls per task: every key's
// outputs leave in input order, each exactly once, and calls of different keys overlap.
func TestAsyncPerKeyOrder(t *testing.T) {
	for _, order := range []kstream.AsyncOrder{kstream.PerKeyOrder, kstream.PartitionOrder} {
		t.Run(order.String(), func(t *testing.T) {
			var running, peak atomic.Int64
			var perKey sync.Map // key -> *atomic.Int64 calls running for it
			b := kstream.NewBuilder()
			in := kstream.Stream(b, "in", serde.String(), serde.String())
			kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
				c, _ := perKey.LoadOrStore(k, new(atomic.Int64))
				if c.(*atomic.Int64).Add(1) != 1 {
					return "", fmt.Errorf("two calls of key %s at once", k)
				}
				defer c.(*atomic.Int64).Add(-1)
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				defer running.Add(-1)
				select {
				case <-time.After(time.Duration(rand.IntN(300)) * time.Microsecond):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				return "out-" + v, nil
			}, kstream.WithConcurrency(64), kstream.WithOutputOrder(order)).To("out", nil, nil)
			d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-order"}, kstreamtest.Partitions(2))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
			const keys, records = 1000, 10000
			next := map[string]int{}
			for i := range records {
				k := "k" + strconv.Itoa(rand.IntN(keys))
				if i < keys {
					k = "k" + strconv.Itoa(i)
				}
				if err := input.Pipe(k, k+"-"+strconv.Itoa(next[k])); err != nil {
					t.Fatal(err)
				}
				next[k]++
			}
			if err := d.Commit(); err != nil { // waits for every call
				t.Fatal(err)
			}
			recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != records {
				t.Fatalf("%d outputs, want %d", len(recs), records)
			}
			seen := map[string]int{}
			for _, r := range recs {
				if want := seen[r.Key]; asyncSeq(r.Value) != want {
					t.Fatalf("key %s: output %q, want sequence %d", r.Key, r.Value, want)
				}
				seen[r.Key]++
			}
			if peak.Load() < 8 {
				t.Errorf("at most %d calls ran at once; want concurrency", peak.Load())
			}
			if peak.Load() > 2*64 {
				t.Errorf("%d calls ran at once over 2 tasks of 64", peak.Load())
			}
		})
	}
}

// TestAsyncPartitionOrder: with PartitionOrder, outputs leave in the order of the input
// although later records' calls finish first.
func TestAsyncPartitionOrder(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.Int64())
	kstream.MapValuesAsync(in, func(ctx context.Context, _ string, v int64) (int64, error) {
		// Earlier records take longer.
		time.Sleep(time.Duration(100-v) * 50 * time.Microsecond)
		return v, nil
	}, kstream.WithConcurrency(100), kstream.WithOutputOrder(kstream.PartitionOrder)).To("out", nil, nil)
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-partition-order"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64())
	for i := range 100 {
		if err := input.Pipe("k"+strconv.Itoa(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	vals, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadValues()
	if len(vals) != 100 {
		t.Fatalf("%d outputs", len(vals))
	}
	for i, v := range vals {
		if v != int64(i) {
			t.Fatalf("output %d is %d: %v", i, v, vals)
		}
	}
}

// TestAsyncRetryThenDeadLetter: a retriable failure is called again after a backoff, then
// the record goes to the dead-letter topic with an AsyncError; a non-retriable one at once.
// Time is synctest's: the backoffs take no real time.
func TestAsyncRetryThenDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := map[string]int{}
		b := kstream.NewBuilder()
		in := kstream.Stream(b, "in", serde.String(), serde.String())
		kstream.FlatMapValuesAsync(in, func(ctx context.Context, k, v string) ([]string, error) {
			mu.Lock()
			calls[k]++
			n := calls[k]
			mu.Unlock()
			switch {
			case k == "flaky" && n < 3:
				return nil, kstream.Retriable(errors.New("503"))
			case k == "down":
				return nil, kstream.Retriable(errors.New("connection refused"))
			case k == "bad":
				return nil, errors.New("400 bad request")
			}
			return []string{v, v + "!"}, nil
		}, kstream.WithAsyncRetry(kstream.AsyncRetry{MaxAttempts: 4, InitialBackoff: time.Second, MaxBackoff: 2 * time.Second}),
			kstream.Named("enrich")).To("out", nil, nil)
		d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-retry", ProcessingErrorHandler: kstream.DeadLetterQueue("dlq")})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
		for _, k := range []string{"flaky", "down", "bad", "ok"} {
			if err := input.Pipe(k, "v-"+k); err != nil {
				t.Fatal(err)
			}
		}
		began := time.Now()
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		// down: 4 attempts, backoffs 1s + 2s + 2s.
		if took := time.Since(began); took != 5*time.Second {
			t.Errorf("the commit waited %s of fake time, want 5s (the backoffs of the record retried most)", took)
		}
		kvs, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadKeyValues()
		got := map[string][]string{}
		for _, kv := range kvs {
			got[kv.Key] = append(got[kv.Key], kv.Value)
		}
		if fmt.Sprint(got) != "map[flaky:[v-flaky v-flaky!] ok:[v-ok v-ok!]]" {
			t.Errorf("outputs %v", got)
		}
		mu.Lock()
		if calls["flaky"] != 3 || calls["down"] != 4 || calls["bad"] != 1 {
			t.Errorf("calls %v", calls)
		}
		mu.Unlock()
		dl, _ := kstreamtest.CreateOutputTopic(d, "dlq", serde.String(), serde.String()).ReadRecords()
		if len(dl) != 2 {
			t.Fatalf("%d dead letters, want 2", len(dl))
		}
		for _, r := range dl {
			msg := ""
			for _, h := range r.Headers {
				if strings.Contains(h.Key, "message") {
					msg = string(h.Value)
				}
			}
			if !strings.Contains(msg, "async operator enrich") {
				t.Errorf("dead letter of %s: message header %q", r.Key, msg)
			}
		}
		st := d.Losses()
		if len(st) == 0 {
			t.Errorf("no losses counted for the dead letters")
		}
	})
}

// TestAsyncFail: under the default handler, a failed call stops the topology with a
// RecordError wrapping the AsyncError, naming the input record.
func TestAsyncFail(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
		return "", errors.New("boom")
	}, kstream.Named("call")).To("out", nil, nil)
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-fail"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_ = kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String()).Pipe("k", "v")
	err = d.Commit()
	var re *kstream.RecordError
	var ae *kstream.AsyncError
	if !errors.As(err, &re) || !errors.As(err, &ae) || re.Topic != "in" || re.Offset != 0 || ae.Operator != "call" || ae.Attempts != 1 {
		t.Fatalf("err %v", err)
	}
}

// TestAsyncBackpressure: a task whose operator holds WithConcurrency records takes no more
// until a call finishes.
func TestAsyncBackpressure(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int64
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
		started.Add(1)
		<-release
		return v, nil
	}, kstream.WithConcurrency(3)).To("out", nil, nil)
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-backpressure"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for i := range 3 {
		if err := input.Pipe("k"+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	piped := make(chan error)
	go func() { piped <- input.Pipe("k3", "v") }()
	kafkatest.Eventually(t, 5*time.Second, "three calls started", func() bool { return started.Load() == 3 })
	select {
	case err := <-piped:
		t.Fatalf("the fourth record was taken with the window full (err %v)", err)
	default:
	}
	close(release)
	if err := <-piped; err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if started.Load() != 4 {
		t.Fatalf("%d calls", started.Load())
	}
}

// TestAsyncOptions: options out of range are build errors naming the operator.
func TestAsyncOptions(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.MapValuesAsync(in, func(context.Context, string, string) (string, error) { return "", nil }, kstream.WithConcurrency(-1), kstream.Named("x"))
	in.Filter(func(string, string) bool { return true }, kstream.WithConcurrency(3))
	_, err := b.Build()
	if err == nil || !strings.Contains(err.Error(), "MapValuesAsync (operator x): WithConcurrency(-1)") || !strings.Contains(err.Error(), "option WithConcurrency does not apply to Filter") {
		t.Fatalf("err %v", err)
	}
}

// TestProcessAsync: the Processor API's async operator sees the whole record and forwards
// records with other keys, headers and timestamps (a zero one takes the input's); a key
// change repartitions before a grouping.
func TestProcessAsync(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	out := kstream.ProcessAsync(in, func(ctx context.Context, r kstream.Record[string, string]) ([]kstream.Record[string, int64], error) {
		return []kstream.Record[string, int64]{
			{Key: r.Value, Value: r.Timestamp.UnixMilli(), Headers: append(r.Headers, kstream.Header{Key: "seen", Value: []byte(r.Key)})},
			{Key: r.Value, Value: -1, Timestamp: r.Timestamp.Add(time.Second)},
		}, nil
	}, kstream.WithConcurrency(4))
	out.To("out", serde.String(), serde.Int64())
	kstream.Count(out.WithSerdes(serde.String(), serde.Int64()).GroupByKey(), "counts").ToStream().To("counts", serde.String(), serde.Int64())
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "process-async"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	start := time.UnixMilli(1_000_000)
	input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String(), kstreamtest.StartTime(start), kstreamtest.AutoAdvance(time.Millisecond))
	for _, kv := range [][2]string{{"a", "x"}, {"b", "y"}, {"a", "x"}} {
		if err := input.Pipe(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	recs, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadRecords()
	if len(recs) != 6 {
		t.Fatalf("%d outputs", len(recs))
	}
	byKey := map[string][]string{}
	for _, r := range recs {
		h := ""
		for _, x := range r.Headers {
			h += x.Key + "=" + string(x.Value)
		}
		byKey[r.Key] = append(byKey[r.Key], fmt.Sprintf("%d@%d%s", r.Value, r.Timestamp.UnixMilli()-start.UnixMilli(), h))
	}
	if fmt.Sprint(byKey["x"]) != "[1000000@0seen=a -1@1000 1000002@2seen=a -1@1002]" || fmt.Sprint(byKey["y"]) != "[1000001@1seen=b -1@1001]" {
		t.Errorf("outputs %v", byKey)
	}
	counts, _ := kstreamtest.CreateOutputTopic(d, "counts", serde.String(), serde.Int64()).ReadKeyValues()
	last := map[string]int64{}
	for _, kv := range counts {
		last[kv.Key] = kv.Value
	}
	if last["x"] != 4 || last["y"] != 2 {
		t.Errorf("counts %v", last)
	}
}

// asyncKey is a comparable key type holding an interface.
type asyncKey struct{ v any }

// TestAsyncKeys: []byte keys are told apart by their bytes; a key type holding an
// interface with an uncomparable dynamic value is a processing error (not a panic).
func TestAsyncKeys(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.Bytes(), serde.String())
	var mu sync.Mutex
	running := map[string]bool{}
	kstream.MapValuesAsync(in, func(ctx context.Context, k []byte, v string) (string, error) {
		mu.Lock()
		if running[string(k)] {
			mu.Unlock()
			return "", errors.New("two calls of one key")
		}
		running[string(k)] = true
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		running[string(k)] = false
		mu.Unlock()
		return v, nil
	}, kstream.WithConcurrency(8)).To("out", nil, nil)
	weird := kstream.Map(in, func(k []byte, v string) (asyncKey, string) {
		if v == "bad" {
			return asyncKey{[]int{1}}, v
		}
		return asyncKey{string(k)}, v
	})
	kstream.MapValuesAsync(weird, func(ctx context.Context, k asyncKey, v string) (string, error) { return v, nil }).
		Foreach(func(asyncKey, string) {})
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-keys", ProcessingErrorHandler: kstream.LogAndContinue()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := kstreamtest.CreateInputTopic(d, "in", serde.Bytes(), serde.String())
	for i := range 50 {
		if err := input.Pipe([]byte{byte(i % 3)}, strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := input.Pipe([]byte{9}, "bad"); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	vals, _ := kstreamtest.CreateOutputTopic(d, "out", serde.Bytes(), serde.String()).ReadValues()
	if len(vals) != 51 {
		t.Fatalf("%d outputs: %v", len(vals), vals)
	}
	if l := d.Losses(); len(l) != 1 || l[0].Reason != "skipped_processing_error" {
		t.Fatalf("losses %+v", l)
	}
}

// TestAsyncCallTimeout: a call that outlives WithCallTimeout has its context done and is
// retried like a Retriable error (synctest's clock: the waits take no real time).
func TestAsyncCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		b := kstream.NewBuilder()
		in := kstream.Stream(b, "in", serde.String(), serde.String())
		kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // the first call hangs: its timeout ends it
				return "", ctx.Err()
			}
			return v + "!", nil
		}, kstream.WithCallTimeout(3*time.Second), kstream.WithAsyncRetry(kstream.AsyncRetry{InitialBackoff: time.Second})).To("out", nil, nil)
		d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-timeout"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String()).Pipe("k", "v"); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took != 4*time.Second {
			t.Errorf("the commit waited %s, want 4s (the 3s timeout, then a 1s backoff)", took)
		}
		vals, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadValues()
		if fmt.Sprint(vals) != "[v!]" || calls.Load() != 2 {
			t.Errorf("outputs %v after %d calls", vals, calls.Load())
		}
	})
}

// TestAsyncChained: two async operators one after the other, the second in partition
// order: every record goes through both, each key's outputs in order.
func TestAsyncChained(t *testing.T) {
	b := kstream.NewBuilder()
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	jitter := func(ctx context.Context) {
		select {
		case <-time.After(time.Duration(rand.IntN(200)) * time.Microsecond):
		case <-ctx.Done():
		}
	}
	first := kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
		jitter(ctx)
		return v, nil
	}, kstream.WithConcurrency(16))
	kstream.FlatMapValuesAsync(first, func(ctx context.Context, k, v string) ([]string, error) {
		jitter(ctx)
		return []string{"out-" + v}, nil
	}, kstream.WithConcurrency(8), kstream.WithOutputOrder(kstream.PartitionOrder)).To("out", nil, nil)
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-chained"}, kstreamtest.Partitions(3))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	next := map[string]int{}
	for range 2000 {
		k := "k" + strconv.Itoa(rand.IntN(50))
		if err := input.Pipe(k, k+"-"+strconv.Itoa(next[k])); err != nil {
			t.Fatal(err)
		}
		next[k]++
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	recs, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadRecords()
	seen := map[string]int{}
	for _, r := range recs {
		if exp := fmt.Sprintf("out-%s-%d", r.Key, seen[r.Key]); r.Value != exp {
			t.Fatalf("key %s: %q, want %q", r.Key, r.Value, exp)
		}
		seen[r.Key]++
	}
	if len(recs) != 2000 {
		t.Fatalf("%d outputs", len(recs))
	}
}

// asyncWorkers counts the goroutines of async operators' workers (idle or calling).
func asyncWorkers() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	n := 0
	for _, stack := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(stack, ").worker") {
			continue
		}
		for _, line := range strings.Split(stack, "\n") {
			if count, _, ok := strings.Cut(line, " @ "); ok {
				c, _ := strconv.Atoi(count)
				n += c
			}
		}
	}
	return n
}

// TestAsyncIdleWorkersEnd: an operator's calls run on worker goroutines that wait for the
// next call; once the calls stop, they end within a second (and all of them at Close).
func TestAsyncIdleWorkersEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := kstream.NewBuilder()
		in := kstream.Stream(b, "in", serde.String(), serde.String())
		kstream.MapValuesAsync(in, func(ctx context.Context, k, v string) (string, error) {
			time.Sleep(20 * time.Millisecond)
			return v, nil
		}, kstream.WithConcurrency(16)).To("out", nil, nil)
		d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "async-idle"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		input := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
		for i := range 16 {
			if err := input.Pipe(fmt.Sprint("k", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		busy := asyncWorkers()
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if idle := asyncWorkers(); busy-idle < 16 {
			t.Errorf("%d workers after 16 concurrent calls, %d a second later: want 16 fewer", busy, idle)
		}
	})
}
