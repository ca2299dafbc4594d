package kstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// asyncInputs produces n records over keys keys to topic (partitioned by key), each value
// "<key>-<seq>" with the key's sequence number, and returns how many each key got.
func asyncInputs(t *testing.T, topic string, n, keys int) map[string]int {
	t.Helper()
	next := map[string]int{}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		k := "k" + strconv.Itoa(rand.IntN(keys))
		if i < keys {
			k = "k" + strconv.Itoa(i)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(k + "-" + strconv.Itoa(next[k]))})
		next[k]++
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...) // partitioned by key
	return next
}

// checkAsyncOutputs checks that every key's outputs are its inputs' sequence numbers in
// order, each exactly once ("out-" prefixed).
func checkAsyncOutputs(t *testing.T, recs []*kgo.Record, want map[string]int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range recs {
		k, v := string(r.Key), string(r.Value)
		if exp := fmt.Sprintf("out-%s-%d", k, seen[k]); v != exp {
			t.Fatalf("key %s: output %q, want %q (outputs of a key must leave once each, in input order)", k, v, exp)
		}
		seen[k]++
	}
	for k, n := range want {
		if seen[k] != n {
			t.Fatalf("key %s: %d outputs, want %d", k, seen[k], n)
		}
	}
}

// On the broker: 1,000 keys over 6 partitions, random call latencies, 32 calls per task:
// every key's outputs leave in input order, once each; the counters show the calls.
func TestAsyncPerKeyOrderOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 6, nil)
	out := kafkatest.CreateTopic(t, "out", 6, nil)
	const n, keys = 6000, 1000
	want := asyncInputs(t, in, n, keys)
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		select {
		case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(32), kstream.Named("enrich")).To(out, nil, nil)
	app := newApp(t, b, testConfig(t))
	start(t, app)
	recs := kafkatest.Consume(t, out, n, 60*time.Second)
	checkAsyncOutputs(t, recs, want)
	st := app.Stats().Async
	if len(st) != 1 || st[0].Operator != "enrich" || st[0].Calls < n || st[0].CallLatencyAvg <= 0 {
		t.Fatalf("async stats %+v", st)
	}
}

// A task whose window is full (its calls hang) takes no more records and its partition
// pauses; the other tasks go on.
func TestAsyncBackpressureOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	release := make(chan struct{})
	var blockedCalls atomic.Int64
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		if strings.HasPrefix(k, "slow") {
			blockedCalls.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(4)).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.BufferedRecordsPerPartition = 20
	app := newApp(t, b, cfg)
	start(t, app)
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "slow%d", i), Value: []byte("v")},
			&kgo.Record{Topic: in, Partition: 1, Key: fmt.Appendf(nil, "fast%d", i), Value: []byte("v")})
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	// Partition 1's task goes on: all its outputs arrive.
	got := kafkatest.Consume(t, out, 300, 60*time.Second)
	for _, r := range got {
		if strings.HasPrefix(string(r.Key), "slow") {
			t.Fatalf("an output of the blocked task: %s", r.Key)
		}
	}
	// Partition 0's task holds 4 records (4 calls hang) and its partition is paused.
	kafkatest.Eventually(t, 30*time.Second, "partition 0 paused with 4 calls in flight", func() bool {
		for _, task := range app.Status().Active {
			for _, p := range task.Partitions {
				if p.Topic == in && p.Partition == 0 && p.Paused {
					return blockedCalls.Load() == 4
				}
			}
		}
		return false
	})
	if n := blockedCalls.Load(); n != 4 {
		t.Fatalf("%d calls started on the full task, want 4", n)
	}
	close(release)
	kafkatest.Consume(t, out, 600, 60*time.Second)
}

// Shutdown with calls in flight: the final commit waits for them up to CloseTimeout, then
// the calls are cancelled and nothing past them is committed; the next instance resumes
// from the committed offset and outputs every record.
func TestAsyncShutdownWithCallsInFlight(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var started, cancelled atomic.Int64
	build := func(hang bool) *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
			if hang && k == "k5" {
				started.Add(1)
				<-ctx.Done() // hangs until cancelled
				cancelled.Add(1)
				return "", ctx.Err()
			}
			return "out-" + v, nil
		}, kstream.WithConcurrency(8)).To(out, nil, nil)
		return b
	}
	var recs []*kgo.Record
	want := map[string]int{}
	for i := range 10 {
		k := "k" + strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(k + "-0")})
		want[k] = 1
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	cfg := testConfig(t)
	cfg.CloseTimeout = 2 * time.Second
	first := start(t, newApp(t, build(true), cfg))
	kafkatest.Eventually(t, 30*time.Second, "the hanging call started", func() bool { return started.Load() == 1 })
	began := time.Now()
	if err := first.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("shutdown took %s with CloseTimeout 2s", took)
	}
	if cancelled.Load() != 1 {
		t.Fatalf("the hanging call's context was not cancelled")
	}
	adm := kadm.NewClient(kafkatest.Client(t))
	offs, err := adm.FetchOffsets(context.Background(), cfg.ApplicationID)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(in, 0); ok && o.At > 5 {
		t.Fatalf("committed offset %d passes the unfinished call of offset 5", o.At)
	}
	second := start(t, newApp(t, build(false), cfg))
	got := kafkatest.Consume(t, out, 10, 60*time.Second)
	_ = second
	// Records before k5 may have been output by the first instance (at-least-once: the
	// final commit did not happen): keep the last output of each key.
	last := map[string]*kgo.Record{}
	for _, r := range got {
		last[string(r.Key)] = r
	}
	if len(last) != 10 {
		t.Fatalf("outputs of %d keys, want 10", len(last))
	}
}

// A rebalance while calls run: the revoked task waits for its calls and commits their
// outputs before its partitions move; every record is output, and none twice.
func TestAsyncRevocationDrains(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	const n, keys = 2000, 200
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
			select {
			case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return "out-" + v, nil
		}, kstream.WithConcurrency(16)).To(out, nil, nil)
		return b
	}
	cfg := testConfig(t)
	cfg.CommitInterval = 10 * time.Second // only the revocation commits before the end
	start(t, newApp(t, build(), cfg))
	want := asyncInputs(t, in, n, keys)
	kafkatest.Eventually(t, 30*time.Second, "the first instance outputs", func() bool {
		return len(kafkatest.ConsumeAtMost(t, out, 100, time.Second)) >= 100
	})
	cfg2 := cfg
	cfg2.StateDir = t.TempDir()
	start(t, newApp(t, build(), cfg2))
	recs := kafkatest.Consume(t, out, n, 90*time.Second)
	recs = withTail(t, recs, kafkatest.Drain(t, out, time.Second, 10*time.Second))
	checkAsyncOutputs(t, recs, want)
}

// withTail returns recs followed by the records of again (a second read of the topic from its
// start) past the first len(recs): the outputs written after recs were read. A second read
// shorter than the first fails the test with the two counts.
func withTail(t *testing.T, recs, again []*kgo.Record) []*kgo.Record {
	t.Helper()
	if len(again) < len(recs) {
		t.Fatalf("a second read of the output returned %d records, fewer than the %d of the first", len(again), len(recs))
	}
	return append(recs, again[len(recs):]...)
}

func init() { kafkatest.RegisterChild("async-app", runAsyncChild) }

// runAsyncChild runs in -> MapValuesAsync (random 10-30 ms calls, 4 per task) -> out in a
// child process until it is killed, under exactly-once if GUARANTEE=eos. Configured by
// APP_ID, STATE_DIR, IN, OUT, GUARANTEE.
func runAsyncChild() error {
	cfg := childConfig()
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, os.Getenv("IN"), serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		select {
		case <-time.After(time.Duration(10+rand.IntN(20)) * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(4)).To(os.Getenv("OUT"), nil, nil)
	app, err := kstream.New(b, cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// asyncFeed produces records of keys keys to topic in phases, partitioned by key, each value
// "<key>-<seq>" with the key's sequence number; want counts each key's records, byOffset
// maps each record's partition and offset to its value.
type asyncFeed struct {
	topic    string
	keys     int
	want     map[string]int
	byOffset map[[2]int64]string
}

func (f *asyncFeed) produce(t *testing.T, n int) {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for range n {
		k := "k" + strconv.Itoa(rand.IntN(f.keys))
		recs = append(recs, &kgo.Record{Topic: f.topic, Key: []byte(k), Value: []byte(k + "-" + strconv.Itoa(f.want[k]))})
		f.want[k]++
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	for _, r := range recs {
		f.byOffset[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
	}
}

// asyncCrashRun runs the async child over three phases of input, killing it with SIGKILL in
// the middle of each of the first kills phases (calls in flight), then lets a last child
// finish. After each kill, check gets the feed, the application id and the output topic.
// It returns every output (read_committed under exactly-once).
func asyncCrashRun(t *testing.T, guarantee string, kills int, check func(f *asyncFeed, app, out string)) (*asyncFeed, []*kgo.Record) {
	const partitions, perPhase = 3, 1000
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	f := &asyncFeed{topic: in, keys: 300, want: map[string]int{}, byOffset: map[[2]int64]string{}}
	var opts []kgo.Opt
	if guarantee == "eos" {
		opts = append(opts, readCommitted)
	}
	app := kafkatest.Name(t, "app")
	env := []string{"APP_ID=" + app, "STATE_DIR=" + t.TempDir(), "IN=" + in, "OUT=" + out, "GUARANTEE=" + guarantee}
	outputs := func() int { return len(kafkatest.ConsumeAtMost(t, out, 1<<20, 300*time.Millisecond, opts...)) }
	for i := range kills {
		before := outputs()
		f.produce(t, perPhase)
		ch := kafkatest.StartChild(t, "async-app", env...)
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d outputs", i), func() bool { return outputs() >= before+200 })
		ch.Kill(t)
		t.Logf("after kill %d: %d inputs, %d outputs", i+1, len(f.byOffset), outputs())
		check(f, app, out)
	}
	f.produce(t, perPhase)
	n := len(f.byOffset)
	ch := kafkatest.StartChild(t, "async-app", env...)
	// Until every input has an output: at least once, the output holds replays too, so a
	// count of records can be reached before the last inputs are done, and the child may
	// pause longer than a quiet period (a rebalance when the killed member's session ends).
	cl := kafkatest.Client(t, append([]kgo.Opt{kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var recs []*kgo.Record
	distinct := map[string]bool{}
	for len(distinct) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			distinct[string(r.Value)] = true
		})
	}
	if len(distinct) < n {
		t.Fatalf("%d distinct outputs after two minutes, want one for each of the %d inputs", len(distinct), n)
	}
	// Then whatever the child still writes (at least once, replays of its last batch) until a
	// second passes without a record. The same client reads on: a second client reading the
	// topic again from its start can return fewer records than this one has (a busy broker).
	tail, cancelTail := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelTail()
	for tail.Err() == nil {
		quiet, cancelQuiet := context.WithTimeout(tail, time.Second)
		more := cl.PollFetches(quiet).Records()
		cancelQuiet()
		if len(more) == 0 {
			break
		}
		recs = append(recs, more...)
	}
	ch.Kill(t)
	return f, recs
}

// Exactly-once across crashes: the async pipeline's process is killed with SIGKILL while
// calls are in flight, twice, and restarted. In the committed output every input has
// exactly one output, every key's in input order.
func TestAsyncExactlyOnceSurvivesKills(t *testing.T) {
	t.Parallel()
	f, recs := asyncCrashRun(t, "eos", 2, func(*asyncFeed, string, string) {})
	checkAsyncOutputs(t, recs, f.want)
}

// At-least-once across a crash: after a SIGKILL with calls in flight, every input below the
// group's committed offsets has its output (a periodic commit holds a partition's offset
// back at its first unfinished call); at the end every input has an output, and each key's
// outputs are in input order once the replays after the crash are left out.
func TestAsyncAtLeastOnceSurvivesKill(t *testing.T) {
	t.Parallel()
	adm := kadm.NewClient(kafkatest.Client(t))
	f, recs := asyncCrashRun(t, "alos", 1, func(f *asyncFeed, app, out string) {
		offs, err := adm.FetchOffsets(context.Background(), app)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range kafkatest.Drain(t, out, time.Second, 30*time.Second) {
			got[string(r.Value)] = true
		}
		below := 0
		for po, v := range f.byOffset {
			o, ok := offs.Lookup(f.topic, int32(po[0]))
			if !ok || po[1] >= o.At {
				continue
			}
			below++
			if !got["out-"+v] {
				t.Fatalf("partition %d offset %d (%s) is below the committed offset %d but has no output", po[0], po[1], v, o.At)
			}
		}
		t.Logf("after the kill: %d inputs below the committed offsets, each with its output", below)
	})
	seen, next := map[string]bool{}, map[string]int{}
	for _, r := range recs {
		k, v := string(r.Key), string(r.Value)
		if seen[v] {
			continue // a replay after the crash
		}
		seen[v] = true
		if exp := fmt.Sprintf("out-%s-%d", k, next[k]); v != exp {
			t.Fatalf("key %s: output %q, want %q", k, v, exp)
		}
		next[k]++
	}
	for k, n := range f.want {
		if next[k] != n {
			t.Fatalf("key %s: %d distinct outputs, want %d", k, next[k], n)
		}
	}
}

// The async options in a real application: Config.AsyncMaxInFlight caps the calls of the
// instance.
func TestAsyncMaxInFlight(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	var running, peak atomic.Int64
	var mu sync.Mutex
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		n := running.Add(1)
		mu.Lock()
		peak.Store(max(peak.Load(), n))
		mu.Unlock()
		defer running.Add(-1)
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(16)).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.AsyncMaxInFlight = 5
	start(t, newApp(t, b, cfg))
	want := asyncInputs(t, in, 1000, 100)
	checkAsyncOutputs(t, kafkatest.Consume(t, out, 1000, 60*time.Second), want)
	if p := peak.Load(); p > 5 || p < 2 {
		t.Fatalf("peak of %d calls at once, want 2 to 5", p)
	}
}

// At-least-once: periodic commits do not wait for the calls; a partition's committed offset
// stays at its first record whose call runs (here one that hangs), while the records after
// it are processed and output, and moves on once the call finishes.
func TestAsyncCommitHoldsBackOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	release := make(chan struct{})
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		if k == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(100)).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 50 * time.Millisecond
	app := newApp(t, b, cfg)
	start(t, app)
	var recs []*kgo.Record
	for i := range 50 {
		k := "k" + strconv.Itoa(i)
		if i == 10 {
			k = "slow"
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(k + "-0")})
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	adm := kadm.NewClient(kafkatest.Client(t))
	committed := func() int64 {
		offs, err := adm.FetchOffsets(context.Background(), cfg.ApplicationID)
		if err != nil {
			return -1
		}
		if o, ok := offs.Lookup(in, 0); ok {
			return o.At
		}
		return -1
	}
	kafkatest.Consume(t, out, 49, 30*time.Second) // every record but the slow one's
	commits := app.Stats().Commits
	kafkatest.Eventually(t, 30*time.Second, "the offset of the slow record committed", func() bool { return committed() == 10 })
	kafkatest.Eventually(t, 30*time.Second, "more commits", func() bool { return app.Stats().Commits > commits+2 })
	if c := committed(); c != 10 {
		t.Fatalf("committed offset %d with the call of offset 10 unfinished", c)
	}
	close(release)
	kafkatest.Eventually(t, 30*time.Second, "every offset committed", func() bool { return committed() == 50 })
	kafkatest.Consume(t, out, 50, 30*time.Second)
}

// Exactly-once: a call that outlives the commit's bound (half the transaction timeout)
// makes the transaction abort; the operator cancels its calls, the records are processed
// again, and each input's output is committed exactly once.
func TestAsyncExactlyOnceAbortsOnSlowCall(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var slowCalls, cancelled atomic.Int64
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		if k == "k3" && slowCalls.Add(1) == 1 {
			<-ctx.Done() // the first call hangs until the abort cancels it
			cancelled.Add(1)
			return "", ctx.Err()
		}
		return "out-" + v, nil
	}, kstream.WithConcurrency(16)).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.TransactionTimeout = 2 * time.Second // the commit waits 1 s for the calls
	app := newApp(t, b, cfg)
	start(t, app)
	var recs []*kgo.Record
	want := map[string]int{}
	for i := range 10 {
		k := "k" + strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(k + "-0")})
		want[k] = 1
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	got := kafkatest.Consume(t, out, 10, 60*time.Second, readCommitted)
	got = withTail(t, got, kafkatest.Drain(t, out, time.Second, 10*time.Second, readCommitted))
	checkAsyncOutputs(t, got, want)
	if cancelled.Load() != 1 || slowCalls.Load() < 2 {
		t.Fatalf("slow calls %d, cancelled %d: want the first cancelled by the abort and the record called again", slowCalls.Load(), cancelled.Load())
	}
	if st := app.Stats(); st.TransactionsAborted == 0 {
		t.Fatalf("no transaction aborted: %+v", st)
	}
}
