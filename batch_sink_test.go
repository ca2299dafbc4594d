package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// batchLog keeps the batches a ForeachBatch function was handed, each formatted as
// "[topic/partition/offset key=value ...]". It is safe for concurrent use.
type batchLog struct {
	mu      sync.Mutex
	batches []string
	recs    []kstream.BatchRecord[string, string]
}

func (l *batchLog) add(batch []kstream.BatchRecord[string, string]) {
	var parts []string
	for _, r := range batch {
		parts = append(parts, fmt.Sprintf("%s/%d/%d %s=%s", r.Topic, r.Partition, r.Offset, r.Key, r.Value))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, "["+strings.Join(parts, " ")+"]")
	l.recs = append(l.recs, batch...)
}

// take returns the batches so far and forgets them.
func (l *batchLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.batches
	l.batches = nil
	return b
}

func (l *batchLog) records() []kstream.BatchRecord[string, string] {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

func (l *batchLog) fn(_ context.Context, batch []kstream.BatchRecord[string, string]) error {
	l.add(batch)
	return nil
}

func wantBatches(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got batches\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// batchDriver builds in -> ForeachBatch(fn, cfg) on the test driver.
func batchDriver(t *testing.T, cfg kstream.BatchConfig, fn func(context.Context, []kstream.BatchRecord[string, string]) error, acfg kstream.Config, opts ...kstreamtest.Option) (*kstreamtest.Driver, *kstreamtest.InputTopic[string, string]) {
	t.Helper()
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).ForeachBatch(fn, cfg, kstream.Named("bulk"))
	d, err := kstreamtest.New(b, acfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
}

// A batch is handed over when it has MaxRecords records; the rest waits for the commit
// (Driver.Commit) or for Close. Every record carries its value, timestamp, headers and
// input coordinates.
func TestForeachBatchBySize(t *testing.T) {
	var log batchLog
	var got []kstream.BatchRecord[string, string]
	fn := func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		got = append(got, batch...)
		return log.fn(ctx, batch)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 3, MaxWait: time.Hour}, fn, kstream.Config{}, kstreamtest.WallClock(start))
	for i := range 7 {
		r := kstream.Record[string, string]{Key: fmt.Sprint("k", i), Value: fmt.Sprint("v", i), Timestamp: start.Add(time.Duration(i) * time.Second)}
		if i == 1 {
			r = r.WithHeader("h", []byte("x"))
		}
		if err := in.PipeRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	wantBatches(t, "after 7 records", log.take(),
		"[in/0/0 k0=v0 in/0/1 k1=v1 in/0/2 k2=v2]",
		"[in/0/3 k3=v3 in/0/4 k4=v4 in/0/5 k5=v5]")
	if !got[1].Timestamp.Equal(start.Add(time.Second)) || len(got[1].Headers) != 1 || got[1].Headers[0].Key != "h" || string(got[1].Headers[0].Value) != "x" {
		t.Fatalf("record 1: timestamp %v headers %v", got[1].Timestamp, got[1].Headers)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBatches(t, "after the commit", log.take(), "[in/0/6 k6=v6]")
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBatches(t, "after a commit with nothing pending", log.take())
	_ = in.Pipe("k7", "v7")
	_ = in.Pipe("k8", "v8")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wantBatches(t, "after Close", log.take(), "[in/0/7 k7=v7 in/0/8 k8=v8]")
}

// A partial batch is handed over once its first record has waited MaxWait of wall-clock
// time (the driver's clock), not earlier, and the next batch's wait starts at its own
// first record.
func TestForeachBatchByTime(t *testing.T) {
	var log batchLog
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 100, MaxWait: 10 * time.Second}, log.fn, kstream.Config{}, kstreamtest.WallClock(start))
	_ = in.Pipe("a", "1")
	must(t, d.AdvanceWallClockTime(4*time.Second))
	_ = in.Pipe("b", "2")
	must(t, d.AdvanceWallClockTime(5*time.Second)) // 9s after a
	wantBatches(t, "9s after the first record", log.take())
	must(t, d.AdvanceWallClockTime(time.Second)) // 10s after a
	wantBatches(t, "10s after the first record", log.take(), "[in/0/0 a=1 in/0/1 b=2]")
	must(t, d.AdvanceWallClockTime(30*time.Second)) // nothing pending: nothing handed over
	wantBatches(t, "idle", log.take())
	_ = in.Pipe("c", "3")
	must(t, d.AdvanceWallClockTime(9*time.Second))
	wantBatches(t, "9s after c", log.take())
	must(t, d.AdvanceWallClockTime(2*time.Second))
	wantBatches(t, "11s after c", log.take(), "[in/0/2 c=3]")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// With two partitions each task has its own batches: a batch holds the records of one task,
// in the order it processed them, and a commit hands over every task's partial batch.
func TestForeachBatchPerTaskOrder(t *testing.T) {
	var log batchLog
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 4, MaxWait: time.Hour}, log.fn, kstream.Config{}, kstreamtest.Partitions(2))
	for i := range 20 {
		k, v := fmt.Sprint("key", i%5), fmt.Sprint(i)
		if err := in.Pipe(k, v); err != nil {
			t.Fatal(err)
		}
	}
	must(t, d.Commit())
	batches := log.take()
	// Rebuild what each partition holds from the records handed over, and check each
	// batch: one partition, offsets consecutive from where the partition's previous batch
	// ended, at most 4 records, full except the partition's last.
	next := map[int32]int64{}
	lastSize := map[int32]int{}
	for _, b := range batches {
		fields := strings.Fields(strings.Trim(b, "[]"))
		var part int32 = -1
		n := 0
		for i := 0; i < len(fields); i += 2 {
			var p int32
			var off int64
			if _, err := fmt.Sscanf(fields[i], "in/%d/%d", &p, &off); err != nil {
				t.Fatalf("batch %s: %v", b, err)
			}
			if part >= 0 && p != part {
				t.Fatalf("batch %s mixes partitions", b)
			}
			part = p
			if off != next[p] {
				t.Fatalf("batch %s: offset %d, want %d (order within the task)", b, off, next[p])
			}
			next[p]++
			n++
		}
		if lastSize[part] != 0 && lastSize[part] != 4 {
			t.Fatalf("partition %d: a batch of %d records before batch %s", part, lastSize[part], b)
		}
		lastSize[part] = n
	}
	if len(next) != 2 || next[0]+next[1] != 20 {
		t.Fatalf("records handed over by partition: %v, want 20 over 2 partitions; batches %v", next, batches)
	}
	// Each key is in one partition: the key's values come in the order piped.
	byKey := map[string][]string{}
	for _, r := range log.records() {
		byKey[r.Key] = append(byKey[r.Key], r.Value)
	}
	for i := range 5 {
		k := fmt.Sprint("key", i)
		want := []string{fmt.Sprint(i), fmt.Sprint(i + 5), fmt.Sprint(i + 10), fmt.Sprint(i + 15)}
		if !slices.Equal(byKey[k], want) {
			t.Fatalf("key %s: values %v, want %v", k, byKey[k], want)
		}
	}
}

// A batch the function fails is handed over again, the same records, until it is accepted.
func TestForeachBatchRetry(t *testing.T) {
	var log batchLog
	calls := 0
	fn := func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		calls++
		log.add(batch)
		if calls <= 2 {
			return errors.New("database unavailable")
		}
		return nil
	}
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 2, Retry: kstream.BatchRetry{MaxAttempts: 3, InitialBackoff: time.Millisecond}}, fn, kstream.Config{})
	_ = in.Pipe("a", "1")
	if err := in.Pipe("b", "2"); err != nil {
		t.Fatal(err)
	}
	wantBatches(t, "two failures, then accepted", log.take(),
		"[in/0/0 a=1 in/0/1 b=2]", "[in/0/0 a=1 in/0/1 b=2]", "[in/0/0 a=1 in/0/1 b=2]")
	_ = in.Pipe("c", "3")
	must(t, d.Commit())
	wantBatches(t, "the next batch", log.take(), "[in/0/2 c=3]")
}

// A batch still failing after its attempts goes to the processing error handler: the
// default fails, naming the operator, topic, partition and offsets of the batch.
func TestForeachBatchFails(t *testing.T) {
	calls := 0
	fn := func(context.Context, []kstream.BatchRecord[string, string]) error {
		calls++
		return errors.New("bulk insert: constraint violated")
	}
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 3, Retry: kstream.BatchRetry{MaxAttempts: 2, InitialBackoff: time.Millisecond}}, fn, kstream.Config{})
	_ = in.Pipe("a", "1")
	_ = in.Pipe("b", "2")
	err := in.Pipe("c", "3")
	const want = `kstream: processing error in operator bulk at topic "in" partition 0 offset 0: batch sink bulk: a batch of 3 records (topic "in" partition 0 offsets 0-2) failed after 2 attempts: bulk insert: constraint violated (Config.ProcessingErrorHandler is LogAndFail, the default: set it to kstream.LogAndContinue() to skip such a record, or to kstream.DeadLetterQueue(topic) to write it to a dead-letter topic)`
	if err == nil || err.Error() != want {
		t.Fatalf("Pipe: %v\nwant %s", err, want)
	}
	var be *kstream.BatchError
	var re *kstream.RecordError
	if !errors.As(err, &be) || !errors.As(err, &re) {
		t.Fatalf("%v: not a RecordError wrapping a BatchError", err)
	}
	if be.Records != 3 || be.Attempts != 2 || !slices.Equal(be.Ranges, []kstream.OffsetRange{{Topic: "in", Partition: 0, First: 0, Last: 2}}) || calls != 2 {
		t.Fatalf("BatchError %+v, calls %d", be, calls)
	}
	if err := d.Commit(); err == nil || err.Error() != want {
		t.Fatalf("Commit after the failure: %v", err)
	}
}

// Under a dead-letter handler, each record of a failed batch goes to the dead-letter topic
// with the batch's error, and processing goes on; a panic in the function is a failure too.
func TestForeachBatchDeadLetter(t *testing.T) {
	fails := true
	var log batchLog
	fn := func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		if fails {
			fails = false
			panic("boom")
		}
		return log.fn(ctx, batch)
	}
	d, in := batchDriver(t, kstream.BatchConfig{MaxRecords: 2, Retry: kstream.BatchRetry{MaxAttempts: 1}}, fn,
		kstream.Config{ProcessingErrorHandler: kstream.DeadLetterQueue("dlq")})
	for _, kv := range []string{"a", "b", "c", "d"} {
		if err := in.Pipe(kv, kv+"v"); err != nil {
			t.Fatal(err)
		}
	}
	wantBatches(t, "after the dead-lettered batch", log.take(), "[in/0/2 c=cv in/0/3 d=dv]")
	dlq := kstreamtest.CreateOutputTopic(d, "dlq", serde.String(), serde.String())
	recs, err := dlq.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		off, _ := r.Header(kstream.HeaderErrorOffset)
		op, _ := r.Header(kstream.HeaderErrorOperator)
		msg, _ := r.Header(kstream.HeaderErrorMessage)
		got = append(got, fmt.Sprintf("%s=%s offset %s operator %s: %s", r.Key, r.Value, off, op, msg))
	}
	wantLines := []string{
		`a=av offset 0 operator bulk: batch sink bulk: a batch of 2 records (topic "in" partition 0 offsets 0-1) failed after 1 attempt: in the batch function: panic: boom`,
		`b=bv offset 1 operator bulk: batch sink bulk: a batch of 2 records (topic "in" partition 0 offsets 0-1) failed after 1 attempt: in the batch function: panic: boom`,
	}
	if !slices.Equal(got, wantLines) {
		t.Fatalf("dead letters:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantLines, "\n  "))
	}
}

// BatchConfig values out of range are build errors.
func TestForeachBatchConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  kstream.BatchConfig
		want string
	}{
		{kstream.BatchConfig{MaxRecords: -1}, "BatchConfig.MaxRecords is -1"},
		{kstream.BatchConfig{MaxWait: -time.Second}, "BatchConfig.MaxWait is -1s"},
		{kstream.BatchConfig{Retry: kstream.BatchRetry{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}}, "BatchRetry.MaxBackoff (1ms) is less than InitialBackoff (1s)"},
	} {
		b := kstream.NewBuilder()
		kstream.Stream(b, "in", serde.String(), serde.String()).ForeachBatch(func(context.Context, []kstream.BatchRecord[string, string]) error { return nil }, c.cfg, kstream.Named("bulk"))
		_, err := kstreamtest.New(b, kstream.Config{})
		if err == nil || !strings.Contains(err.Error(), "ForeachBatch (operator bulk): "+c.want) {
			t.Fatalf("%+v: %v, want an error with %q", c.cfg, err, c.want)
		}
	}
}

// batchCommitted reads the group's committed offset of each partition of topic (-1: none).
func batchCommitted(t *testing.T, adm *kadm.Client, group, topic string, partitions int32) []int64 {
	t.Helper()
	out := make([]int64, partitions)
	for p := range out {
		out[p] = -1
	}
	offs, err := adm.FetchOffsets(kafkatest.Context(t, 10*time.Second), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // the group has not formed yet: nothing committed
	}
	if err != nil {
		t.Fatalf("fetching the committed offsets of %s: %v", group, err)
	}
	for p := range partitions {
		if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

func produceN(t *testing.T, topic string, from, to int) {
	t.Helper()
	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	kafkatest.Produce(t, cl, recs...)
}

// On the broker, the group's committed offset never covers a record whose batch the function
// has not accepted: while the function blocks on a batch, the committed offset stays at the
// end of the last accepted batch; a partial batch (MaxWait one hour) is handed over by the
// commit, and after that every record was handed over, each once.
func TestForeachBatchCommitsOnlyAccepted(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.CommitInterval = 50 * time.Millisecond
	var log batchLog
	var calls atomic.Int32
	blocked := make(chan struct{})
	release := make(chan struct{})
	var maxAccepted atomic.Int64 // the offset after the last record accepted
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).ForeachBatch(func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		if calls.Add(1) == 2 {
			close(blocked)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		log.add(batch)
		maxAccepted.Store(batch[len(batch)-1].Offset + 1)
		return nil
	}, kstream.BatchConfig{MaxRecords: 4, MaxWait: time.Hour}, kstream.Named("bulk"))
	app := newApp(t, b, cfg)

	// An invariant checked all along: the committed offset, read first, never passes the
	// end of the accepted records, read after it (acceptance comes before the commit).
	stopCheck := make(chan struct{})
	checkDone := make(chan string, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopCheck:
				checkDone <- ""
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			offs, err := adm.FetchOffsets(ctx, cfg.ApplicationID)
			cancel()
			if err != nil {
				continue
			}
			o, ok := offs.Lookup(in, 0)
			if acc := maxAccepted.Load(); ok && o.Err == nil && o.At > acc {
				checkDone <- fmt.Sprintf("committed offset %d passes the accepted records (up to %d)", o.At, acc)
				return
			}
		}
	}()

	produceN(t, in, 0, 4)
	start(t, app)
	kafkatest.Eventually(t, 30*time.Second, "first batch accepted and committed", func() bool {
		return batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0] == 4
	})
	produceN(t, in, 4, 10) // a full batch (4-7), on which the function blocks, and 8-9
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the second batch was not handed over")
	}
	// The function holds the batch 4-7 (the loop waits for it): whatever the commit
	// interval, nothing past 4 is committed.
	for range 3 {
		if got := batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0]; got != 4 {
			t.Fatalf("committed offset %d while the batch 4-7 is not accepted, want 4", got)
		}
	}
	close(release)
	kafkatest.Eventually(t, 30*time.Second, "every record committed", func() bool {
		return batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0] == 10
	})
	close(stopCheck)
	if msg := <-checkDone; msg != "" {
		t.Fatal(msg)
	}
	wantBatches(t, "batches", log.take(),
		"["+in+"/0/0 k0=v0 "+in+"/0/1 k1=v1 "+in+"/0/2 k2=v2 "+in+"/0/3 k3=v3]",
		"["+in+"/0/4 k4=v4 "+in+"/0/5 k5=v5 "+in+"/0/6 k6=v6 "+in+"/0/7 k7=v7]",
		"["+in+"/0/8 k8=v8 "+in+"/0/9 k9=v9]")
}

// On the broker: a function that fails twice and then succeeds gets the same batch three
// times; the records are committed once it was accepted, and not before.
func TestForeachBatchRetryOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.CommitInterval = 50 * time.Millisecond
	var log batchLog
	var calls atomic.Int32
	failing := make(chan struct{}) // closed when the second failure is returned
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).ForeachBatch(func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		log.add(batch)
		switch calls.Add(1) {
		case 1:
			return errors.New("HTTP 503")
		case 2:
			close(failing)
			return errors.New("HTTP 503")
		}
		return nil
	}, kstream.BatchConfig{MaxRecords: 3, MaxWait: time.Hour, Retry: kstream.BatchRetry{MaxAttempts: 3, InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second}}, kstream.Named("bulk"))
	app := newApp(t, b, cfg)
	produceN(t, in, 0, 3)
	start(t, app)
	select {
	case <-failing:
	case <-time.After(30 * time.Second):
		t.Fatal("the batch was not retried")
	}
	// Waiting 400ms for the third attempt: nothing is committed meanwhile.
	if got := batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0]; got != -1 {
		t.Fatalf("committed offset %d before the batch was accepted, want none", got)
	}
	kafkatest.Eventually(t, 30*time.Second, "records committed after the third attempt", func() bool {
		return batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0] == 3
	})
	one := "[" + in + "/0/0 k0=v0 " + in + "/0/1 k1=v1 " + in + "/0/2 k2=v2]"
	wantBatches(t, "attempts", log.take(), one, one, one)
}

// A rebalance flushes: an instance holds partial batches (MaxWait and the commit interval an
// hour); when a second instance joins, the first hands over the batches of the partitions
// it gives up and commits them before they move, so the new owner starts after them and
// hands over nothing of the records the first had.
func TestForeachBatchRevocationFlushes(t *testing.T) {
	t.Parallel()
	const partitions = 4
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.CommitInterval = time.Hour
	var logs [2]batchLog
	var processed atomic.Int64
	build := func(member int) *kstream.App {
		b := kstream.NewBuilder()
		kstream.Stream(b, in, serde.String(), serde.String()).
			Peek(func(string, string) { processed.Add(1) }).
			ForeachBatch(logs[member].fn, kstream.BatchConfig{MaxRecords: 1000, MaxWait: time.Hour}, kstream.Named("bulk"))
		return newApp(t, b, cfg)
	}
	cl := kafkatest.ManualProducer(t)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	kafkatest.Produce(t, cl, recs...)
	app1 := build(0)
	r1 := start(t, app1)
	kafkatest.Eventually(t, 30*time.Second, "instance 1 processed every record", func() bool { return processed.Load() == 40 })
	if got := logs[0].take(); len(got) != 0 {
		t.Fatalf("instance 1 handed over %v before any commit", got)
	}
	app2 := build(1)
	r2 := start(t, app2)
	kafkatest.Eventually(t, 60*time.Second, "the tasks split between the instances", func() bool {
		a, b := len(app1.Tasks()), len(app2.Tasks())
		return a > 0 && b > 0 && a+b == partitions
	})
	moved := map[int32]bool{}
	for _, id := range app2.Tasks() {
		moved[id.Partition] = true
	}
	// The revocation's commit handed over every partial batch of instance 1 (those of the
	// partitions it keeps too), each partition's records in offset order, and committed them.
	got := logs[0].records()
	byPart := map[int32][]int64{}
	for _, r := range got {
		byPart[r.Partition] = append(byPart[r.Partition], r.Offset)
	}
	for p := range int32(partitions) {
		if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(byPart[p], want) {
			t.Fatalf("instance 1 handed over offsets %v of partition %d, want %v", byPart[p], p, want)
		}
	}
	for p, o := range batchCommitted(t, adm, cfg.ApplicationID, in, partitions) {
		if moved[int32(p)] && o != 10 {
			t.Fatalf("partition %d moved to instance 2 with committed offset %d, want 10", p, o)
		}
	}
	// The new owner starts after the committed records: it hands over only new ones.
	var more []*kgo.Record
	for p := range int32(partitions) {
		more = append(more, &kgo.Record{Topic: in, Partition: p, Key: []byte("late"), Value: fmt.Appendf(nil, "p%d", p)})
	}
	kafkatest.Produce(t, cl, more...)
	kafkatest.Eventually(t, 30*time.Second, "every late record processed", func() bool { return processed.Load() == 40+partitions })
	if got := logs[1].take(); len(got) != 0 {
		t.Fatalf("instance 2 handed over %v before any commit", got)
	}
	// Stopping instance 2 commits its late records (its partitions go back to instance 1,
	// which starts after them); stopping instance 1 then commits the others. Each late
	// record is handed over once, by the owner of its partition.
	if err := r2.stop(); err != nil {
		t.Fatalf("instance 2: %v", err)
	}
	kafkatest.Eventually(t, 60*time.Second, "instance 1 owns every task again", func() bool { return len(app1.Tasks()) == partitions })
	if err := r1.stop(); err != nil {
		t.Fatalf("instance 1: %v", err)
	}
	for member, l := range []*batchLog{&logs[0], &logs[1]} {
		var late []string
		for _, r := range l.records() {
			if r.Key == "late" {
				late = append(late, fmt.Sprintf("%d/%d %s", r.Partition, r.Offset, r.Value))
			}
		}
		var want []string
		for p := range int32(partitions) {
			if moved[p] == (member == 1) {
				want = append(want, fmt.Sprintf("%d/10 p%d", p, p))
			}
		}
		slices.Sort(late)
		if !slices.Equal(late, want) {
			t.Fatalf("instance %d handed over the late records %v, want %v", member+1, late, want)
		}
	}
	if got := batchCommitted(t, adm, cfg.ApplicationID, in, partitions); !slices.Equal(got, []int64{11, 11, 11, 11}) {
		t.Fatalf("committed offsets %v, want 11 each", got)
	}
}

// Under exactly-once the pending batch is handed over before the transaction that commits
// its offsets: a partial batch (MaxWait an hour) is handed over by the transaction's commit.
func TestForeachBatchExactlyOnce(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.CommitInterval = 50 * time.Millisecond
	var log batchLog
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).ForeachBatch(log.fn, kstream.BatchConfig{MaxRecords: 4, MaxWait: time.Hour}, kstream.Named("bulk"))
	produceN(t, in, 0, 6)
	start(t, newApp(t, b, cfg))
	kafkatest.Eventually(t, 30*time.Second, "every record committed", func() bool {
		return batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0] == 6
	})
	wantBatches(t, "batches", log.take(),
		"["+in+"/0/0 k0=v0 "+in+"/0/1 k1=v1 "+in+"/0/2 k2=v2 "+in+"/0/3 k3=v3]",
		"["+in+"/0/4 k4=v4 "+in+"/0/5 k5=v5]")
}

// On the broker, a partial batch is handed over when its MaxWait is up, without waiting for
// a commit (the commit interval is an hour): the runtime wakes the task for it.
func TestForeachBatchMaxWaitOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.CommitInterval = time.Hour
	var log batchLog
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).ForeachBatch(log.fn, kstream.BatchConfig{MaxRecords: 100, MaxWait: 200 * time.Millisecond}, kstream.Named("bulk"))
	produceN(t, in, 0, 3)
	start(t, newApp(t, b, cfg))
	kafkatest.Eventually(t, 30*time.Second, "the partial batch handed over", func() bool { return len(log.records()) == 3 })
	wantBatches(t, "batches", log.take(), "["+in+"/0/0 k0=v0 "+in+"/0/1 k1=v1 "+in+"/0/2 k2=v2]")
	if got := batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0]; got != -1 {
		t.Fatalf("committed offset %d, want none yet (the commit interval is an hour)", got)
	}
	produceN(t, in, 3, 4)
	kafkatest.Eventually(t, 30*time.Second, "the next partial batch handed over", func() bool { return len(log.records()) == 4 })
	wantBatches(t, "batches", log.take(), "["+in+"/0/3 k3=v3]")
}

// A batch sink for bulk writes, on the test driver: batches by size, a partial batch by
// time, and the rest at the commit.
func ExampleKStream_ForeachBatch() {
	b := kstream.NewBuilder()
	kstream.Stream(b, "orders", serde.String(), serde.String()).
		ForeachBatch(func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
			// One bulk write per batch; topic, partition and offset make an idempotent key.
			var rows []string
			for _, r := range batch {
				rows = append(rows, fmt.Sprintf("%s-%d-%d:%s", r.Topic, r.Partition, r.Offset, r.Value))
			}
			fmt.Println("bulk insert", rows)
			return nil
		}, kstream.BatchConfig{MaxRecords: 3, MaxWait: 10 * time.Second}, kstream.Named("orders-to-db"))

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "orders"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	for _, v := range []string{"a", "b", "c", "d"} {
		_ = in.Pipe("k", v) // a, b, c: a full batch
	}
	fmt.Println("10s later:")
	_ = d.AdvanceWallClockTime(10 * time.Second) // d waited MaxWait
	_ = in.Pipe("k", "e")
	fmt.Println("commit:")
	_ = d.Commit() // e: the pending batch goes before the commit
	// Output:
	// bulk insert [orders-0-0:a orders-0-1:b orders-0-2:c]
	// 10s later:
	// bulk insert [orders-0-3:d]
	// commit:
	// bulk insert [orders-0-4:e]
}

// On the broker, a batch that still fails after its attempts stops the application under the
// default handler: Run returns an error naming the operator, topic, partition and offsets of
// the batch, and the group's committed offset stays before the batch.
func TestForeachBatchFailStopsOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	cfg := testConfig(t)
	cfg.CommitInterval = 50 * time.Millisecond
	var fail atomic.Bool
	var calls atomic.Int32
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).ForeachBatch(func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		if fail.Load() {
			calls.Add(1)
			return errors.New("disk full")
		}
		return nil
	}, kstream.BatchConfig{MaxRecords: 2, MaxWait: time.Hour, Retry: kstream.BatchRetry{MaxAttempts: 2, InitialBackoff: time.Millisecond}}, kstream.Named("bulk"))
	produceN(t, in, 0, 2)
	r := start(t, newApp(t, b, cfg))
	kafkatest.Eventually(t, 30*time.Second, "the first batch committed", func() bool {
		return batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0] == 2
	})
	fail.Store(true)
	produceN(t, in, 2, 4)
	err, stopped := r.wait(30 * time.Second)
	if !stopped {
		t.Fatal("the application did not stop")
	}
	want := fmt.Sprintf(`kstream: processing error in operator bulk at topic %q partition 0 offset 2: batch sink bulk: a batch of 2 records (topic %q partition 0 offsets 2-3) failed after 2 attempts: disk full (Config.ProcessingErrorHandler is LogAndFail, the default: set it to kstream.LogAndContinue() to skip such a record, or to kstream.DeadLetterQueue(topic) to write it to a dead-letter topic)`, in, in)
	var be *kstream.BatchError
	if err == nil || err.Error() != want || !errors.As(err, &be) {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
	if got := batchCommitted(t, adm, cfg.ApplicationID, in, 1)[0]; got != 2 || calls.Load() != 2 {
		t.Fatalf("committed offset %d after the failure (want 2), %d failed calls (want 2)", got, calls.Load())
	}
}

func init() { kafkatest.RegisterChild("batch-app", runBatchChild) }

// runBatchChild runs in -> ForeachBatch in a child process until it is killed. Each batch
// is appended to the file OUT_FILE ("partition offset" lines, one write per batch) after
// BATCH_MS milliseconds, as a bulk write would take. Configured by APP_ID, IN, OUT_FILE,
// BATCH_MS.
func runBatchChild() error {
	f, err := os.OpenFile(os.Getenv("OUT_FILE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	batchMs, _ := strconv.Atoi(os.Getenv("BATCH_MS"))
	cfg := kstream.Config{
		ApplicationID:     os.Getenv("APP_ID"),
		Brokers:           strings.Split(os.Getenv(kafkatest.EnvBrokers), ","),
		CommitInterval:    100 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	b := kstream.NewBuilder()
	kstream.Stream(b, os.Getenv("IN"), serde.String(), serde.String()).ForeachBatch(func(ctx context.Context, batch []kstream.BatchRecord[string, string]) error {
		var buf []byte
		for _, r := range batch {
			buf = fmt.Appendf(buf, "%d %d\n", r.Partition, r.Offset)
		}
		time.Sleep(time.Duration(batchMs) * time.Millisecond) // the write's round trip
		_, err := f.Write(buf)
		return err
	}, kstream.BatchConfig{MaxRecords: 50, MaxWait: 100 * time.Millisecond}, kstream.Named("bulk"))
	app, err := kstream.New(b, cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// readBatchFile returns the (partition, offset) pairs written to the batch child's file and
// how often each was written; a line cut short by a kill is ignored.
func readBatchFile(t *testing.T, path string) map[[2]int64]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[[2]int64]int{}
	lines := strings.Split(string(data), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is "" or cut short
		var p, o int64
		if _, err := fmt.Sscanf(l, "%d %d", &p, &o); err == nil {
			out[[2]int64{p, o}]++
		}
	}
	return out
}

// At-least-once across crashes: the batch sink's process is killed with SIGKILL while it
// writes, twice, and restarted. After every kill, every record below the group's committed
// offsets is in the sink's file (a batch is written before its offsets are committed); at
// the end, every record is there.
func TestForeachBatchSurvivesKills(t *testing.T) {
	t.Parallel()
	const partitions, perPartition, kills = 3, 1000, 2
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	adm := kadm.NewClient(kafkatest.Client(t))
	app := kafkatest.Name(t, "app")
	file := filepath.Join(t.TempDir(), "sink.txt")
	cl := kafkatest.ManualProducer(t)
	var recs []*kgo.Record
	for i := range partitions * perPartition {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
	}
	kafkatest.Produce(t, cl, recs...)
	checkCommitted := func(when string) []int64 {
		committed := batchCommitted(t, adm, app, in, partitions)
		got := readBatchFile(t, file)
		for p, c := range committed {
			for o := int64(0); o < c; o++ {
				if got[[2]int64{int64(p), o}] == 0 {
					t.Fatalf("%s: partition %d offset %d is committed (offset %d) but was never written", when, p, o, c)
				}
			}
		}
		return committed
	}
	env := []string{"APP_ID=" + app, "IN=" + in, "OUT_FILE=" + file, "BATCH_MS=20"}
	sum := func(offs []int64) (n int64) {
		for _, o := range offs {
			n += max(o, 0)
		}
		return n
	}
	for i := range kills {
		before := len(readBatchFile(t, file))
		prev := sum(batchCommitted(t, adm, app, in, partitions))
		ch := kafkatest.StartChild(t, "batch-app", env...)
		// Kill it mid-stream, once it has written some 300 records more and committed some.
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d writing and committing", i), func() bool {
			return len(readBatchFile(t, file)) >= before+300 && sum(batchCommitted(t, adm, app, in, partitions)) > prev
		})
		ch.Kill(t)
		t.Logf("after kill %d: committed %v, %d distinct records written", i+1, checkCommitted(fmt.Sprintf("after kill %d", i+1)), len(readBatchFile(t, file)))
	}
	ch := kafkatest.StartChild(t, "batch-app", env...)
	kafkatest.Eventually(t, 120*time.Second, "every record committed", func() bool {
		return slices.Equal(batchCommitted(t, adm, app, in, partitions), []int64{perPartition, perPartition, perPartition})
	})
	ch.Kill(t)
	checkCommitted("at the end")
	got := readBatchFile(t, file)
	twice := 0
	for _, n := range got {
		if n > 1 {
			twice++
		}
	}
	if len(got) != partitions*perPartition {
		t.Fatalf("%d distinct records written, want %d", len(got), partitions*perPartition)
	}
	t.Logf("%d records written, %d of them more than once (replayed after a kill)", len(got), twice)
}
