package kstreamtest_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// at is t0 plus ms milliseconds.
func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// driverWith builds b with cfg or fails the test; the driver is closed at the end.
func driverWith(t *testing.T, b *kstream.Builder, cfg kstream.Config, opts ...kstreamtest.Option) *kstreamtest.Driver {
	t.Helper()
	d, err := kstreamtest.New(b, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// ticker is a processor that forwards its input and schedules two punctuators in Init: a
// wall-clock one that forwards ("wall", "<task>#<n>") and a stream-time one that forwards
// ("stream", "<task>#<n>"), both every 10s, neither setting a timestamp.
func ticker() kstream.Processor[string, string, string, string] {
	return &tickProc{}
}

type tickProc struct{ wall, stream int }

func (p *tickProc) Init(ctx kstream.ProcessorContext[string, string]) error {
	id := ctx.TaskID().String()
	if _, err := ctx.Schedule(10*time.Second, kstream.WallClockTime, func(time.Time) error {
		p.wall++
		ctx.Forward(kstream.Record[string, string]{Key: "wall", Value: fmt.Sprintf("%s#%d", id, p.wall)})
		return nil
	}); err != nil {
		return err
	}
	_, err := ctx.Schedule(10*time.Second, kstream.StreamTime, func(time.Time) error {
		p.stream++
		ctx.Forward(kstream.Record[string, string]{Key: "stream", Value: fmt.Sprintf("%s#%d", id, p.stream)})
		return nil
	})
	return err
}

func (p *tickProc) Process(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
	ctx.Forward(r)
	return nil
}

// A wall-clock punctuator fires when the driver's clock passes its schedule, in every task,
// also one that never got a record; a stream-time one fires only in a task whose records
// move its stream time. Punctuator outputs get the punctuation time.
func TestDriverWallClockPunctuatorOnIdlePartition(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), ticker).To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{}, kstreamtest.Partitions(2), kstreamtest.WallClock(t0))
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())

	// Key "a" goes to partition 0 (murmur2), so task 0_1 stays idle.
	if err := in.PipeAt("a", "x", at(1000)); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out),
		kvts{"a", "x", 1000, ""},
		kvts{"stream", "0_0#1", 1000, ""}, // stream time 1s is past the first due time, 0
	)
	if err := d.AdvanceWallClockTime(9 * time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out)) // not due before 10s
	if err := d.AdvanceWallClockTime(time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out),
		kvts{"wall", "0_0#1", 10_000, ""}, // the idle task punctuates too
		kvts{"wall", "0_1#1", 10_000, ""},
	)
	// 25s later, two punctuations late: each fires once, at the time it is run, and the
	// schedule skips to 40s.
	if err := d.AdvanceWallClockTime(25 * time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out),
		kvts{"wall", "0_0#2", 35_000, ""},
		kvts{"wall", "0_1#2", 35_000, ""},
	)
	if err := d.AdvanceWallClockTime(4 * time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out))
	if err := d.AdvanceWallClockTime(time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out),
		kvts{"wall", "0_0#3", 40_000, ""},
		kvts{"wall", "0_1#3", 40_000, ""},
	)
}

// Stream-time punctuation follows the records: aligned to the epoch, at most once per
// record however far stream time jumps, not moved by a late record, and its outputs get the
// stream time.
func TestDriverStreamTimePunctuation(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), ticker).To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{}, kstreamtest.WallClock(t0))
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	for _, r := range []struct {
		v  string
		ms int64
	}{{"r1", 1000}, {"r2", 5000}, {"r3", 12_000}, {"late", 8000}, {"r4", 19_999}, {"r5", 20_000}, {"r6", 55_000}} {
		if err := in.PipeAt("k", r.v, at(r.ms)); err != nil {
			t.Fatal(err)
		}
	}
	// t0 is a multiple of 10s, so the due times are t0, t0+10s, t0+20s, ...
	expect(t, readAll(t, out),
		kvts{"k", "r1", 1000, ""},
		kvts{"stream", "0_0#1", 1000, ""}, // due at t0 (and at every 10s before it): once
		kvts{"k", "r2", 5000, ""},
		kvts{"k", "r3", 12_000, ""},
		kvts{"stream", "0_0#2", 12_000, ""},
		kvts{"k", "late", 8000, ""}, // stream time stays 12s
		kvts{"k", "r4", 19_999, ""},
		kvts{"k", "r5", 20_000, ""},
		kvts{"stream", "0_0#3", 20_000, ""},
		kvts{"k", "r6", 55_000, ""},
		kvts{"stream", "0_0#4", 55_000, ""}, // 30s, 40s and 50s missed: one punctuation
	)
	// The wall clock does not drive stream-time punctuators.
	if err := d.AdvanceWallClockTime(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, out); len(got) != 1 || got[0].K != "wall" {
		t.Fatalf("after an hour of wall-clock time: %v, want one wall-clock punctuation", got)
	}
}

// A punctuator can cancel its schedule, also from within itself; a schedule with an
// interval under 1ms is refused.
func TestDriverPunctuatorCancel(t *testing.T) {
	b := kstream.NewBuilder()
	var schedErr error
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
		n := 0
		var c kstream.Cancellable
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			if c == nil {
				_, schedErr = ctx.Schedule(time.Microsecond, kstream.StreamTime, func(time.Time) error { return nil })
				var err error
				c, err = ctx.Schedule(time.Second, kstream.StreamTime, func(ts time.Time) error {
					n++
					ctx.Forward(kstream.Record[string, string]{Key: "p", Value: strconv.Itoa(n)})
					if n == 2 {
						c.Cancel()
					}
					return nil
				})
				return err
			}
			return nil
		})
	}).To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for i := range 5 {
		if err := in.PipeAt("k", "v", at(int64(i)*1000)); err != nil {
			t.Fatal(err)
		}
	}
	// The schedule made while processing the first record fires right after it (due at 0).
	expect(t, readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())),
		kvts{"p", "1", 0, ""}, kvts{"p", "2", 1000, ""})
	if schedErr == nil || !strings.Contains(schedErr.Error(), "1ms") {
		t.Fatalf("Schedule(1µs) = %v, want an error about the 1ms minimum", schedErr)
	}
}

// A punctuator that returns an error or panics goes to the processing error handler, with
// its operator and no input record; LogAndFail (the default) stops the driver.
func TestDriverPunctuatorErrors(t *testing.T) {
	build := func(fail func(n int) error) *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
			return &failingTicker{fail: fail}
		}, kstream.Named("ticking")).To("out", serde.String(), serde.String())
		return b
	}
	var seen []kstream.ErrorContext
	cfg := kstream.Config{ProcessingErrorHandler: kstream.ErrorHandlerFunc(func(ec kstream.ErrorContext) kstream.ErrorResponse {
		seen = append(seen, ec)
		return kstream.Continue()
	})}
	d := driverWith(t, build(func(n int) error {
		switch n {
		case 2:
			return errors.New("tick failed")
		case 3:
			panic("tick panicked")
		}
		return nil
	}), cfg, kstreamtest.WallClock(t0))
	for range 4 {
		if err := d.AdvanceWallClockTime(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())),
		kvts{"t", "1", 1000, ""}, kvts{"t", "4", 4000, ""})
	if len(seen) != 2 {
		t.Fatalf("handler saw %d errors, want 2: %+v", len(seen), seen)
	}
	for i, ec := range seen {
		if ec.Kind != kstream.ProcessingError || ec.Operator != "ticking" || ec.Topic != "" || ec.Partition != -1 || ec.Offset != -1 || !ec.Timestamp.Equal(at(int64(i+2)*1000)) {
			t.Fatalf("error context %d: %+v", i, ec)
		}
	}
	if !strings.Contains(seen[0].Err.Error(), "tick failed") || !strings.Contains(seen[1].Err.Error(), "tick panicked") {
		t.Fatalf("errors: %v, %v", seen[0].Err, seen[1].Err)
	}

	d2 := driverWith(t, build(func(n int) error { return errors.New("boom") }), kstream.Config{}, kstreamtest.WallClock(t0))
	err := d2.AdvanceWallClockTime(time.Second)
	var re *kstream.RecordError
	if !errors.As(err, &re) || re.Operator != "ticking" || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("LogAndFail: AdvanceWallClockTime = %v, want the punctuator's error", err)
	}
	if !errors.Is(d2.Err(), err) {
		t.Fatalf("Err() = %v after a fatal punctuation", d2.Err())
	}
}

// failingTicker forwards ("t", n) from a 1s wall-clock punctuator, n counting its calls,
// unless fail(n) fails first.
type failingTicker struct {
	n    int
	fail func(n int) error
}

func (p *failingTicker) Init(ctx kstream.ProcessorContext[string, string]) error {
	_, err := ctx.Schedule(time.Second, kstream.WallClockTime, func(time.Time) error {
		p.n++
		if err := p.fail(p.n); err != nil {
			return err
		}
		ctx.Forward(kstream.Record[string, string]{Key: "t", Value: strconv.Itoa(p.n)})
		return nil
	})
	return err
}

func (p *failingTicker) Process(kstream.ProcessorContext[string, string], kstream.Record[string, string]) error {
	return nil
}

// With Config.MaxTaskIdle, a task with two input partitions holds a record back while the
// other partition is empty, processes the buffered records of both in the order of their
// timestamps, and once the idle time passed on the wall clock processes what it holds
// (enforced processing).
func TestDriverTimestampOrderAcrossPartitions(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.StreamTopics(b, []string{"a", "b"}, serde.String(), serde.String()).To("out", nil, nil)
	d := driverWith(t, b, kstream.Config{MaxTaskIdle: time.Minute}, kstreamtest.WallClock(t0))
	a := kstreamtest.CreateInputTopic(d, "a", serde.String(), serde.String())
	bt := kstreamtest.CreateInputTopic(d, "b", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	for _, r := range []struct {
		in   *kstreamtest.InputTopic[string, string]
		v    string
		ms   int64
		want []kvts
	}{
		{a, "a5", 5000, nil}, // b is empty: wait
		{a, "a6", 6000, nil},
		{bt, "b2", 2000, []kvts{{"k", "b2", 2000, ""}}}, // lower than a5: first, then b is empty
		{bt, "b3", 3000, []kvts{{"k", "b3", 3000, ""}}},
		{bt, "b9", 9000, []kvts{{"k", "a5", 5000, ""}, {"k", "a6", 6000, ""}}}, // a empty again: b9 waits
		{a, "a7", 7000, []kvts{{"k", "a7", 7000, ""}}},
	} {
		if err := r.in.PipeAt("k", r.v, at(r.ms)); err != nil {
			t.Fatal(err)
		}
		expect(t, readAll(t, out), r.want...)
	}
	if n := d.EnforcedProcessing(); n != 0 {
		t.Fatalf("EnforcedProcessing = %d before the idle time passed", n)
	}
	if err := d.AdvanceWallClockTime(59 * time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out))
	if err := d.AdvanceWallClockTime(time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, readAll(t, out), kvts{"k", "b9", 9000, ""})
	if n := d.EnforcedProcessing(); n != 1 {
		t.Fatalf("EnforcedProcessing = %d, want 1", n)
	}

	// Without MaxTaskIdle, a caught-up partition holds nothing back: each record is
	// processed when piped, as in TopologyTestDriver.
	b2 := kstream.NewBuilder()
	kstream.StreamTopics(b2, []string{"a", "b"}, serde.String(), serde.String()).To("out", nil, nil)
	d2 := driverWith(t, b2, kstream.Config{})
	_ = kstreamtest.CreateInputTopic(d2, "a", serde.String(), serde.String()).PipeAt("k", "a5", at(5000))
	_ = kstreamtest.CreateInputTopic(d2, "b", serde.String(), serde.String()).PipeAt("k", "b2", at(2000))
	expect(t, readAll(t, kstreamtest.CreateOutputTopic(d2, "out", serde.String(), serde.String())),
		kvts{"k", "a5", 5000, ""}, kvts{"k", "b2", 2000, ""})
	if n := d2.EnforcedProcessing(); n != 2 {
		t.Fatalf("EnforcedProcessing = %d, want 2 (each record processed with the other topic empty)", n)
	}
}

// Records written by the topology to a repartition topic that a task reads with another
// partition are ordered by timestamp with that partition's: a re-keyed stream joined with
// a table, where a record and the table update it needs arrive through different topics.
func TestDriverRepartitionOrderedByTimestamp(t *testing.T) {
	b := kstream.NewBuilder()
	table := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
	s := kstream.SelectKey(kstream.Stream(b, "in", serde.String(), serde.String()), func(_, v string) string { return v }).WithSerdes(serde.String(), nil)
	kstream.LeftJoin(s, table, func(_, v, vt string, found bool) string {
		if !found {
			return v + "+none"
		}
		return v + "+" + vt
	}).To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{MaxTaskIdle: time.Hour})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	tbl := kstreamtest.CreateInputTopic(d, "table", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	// The stream record at 5s reaches the join's task through the repartition topic and
	// waits there for the table topic; the table updates at 3s and 8s then come, and the
	// join sees the one before it and not the one after.
	_ = in.PipeAt("x", "k1", at(5000))
	_ = tbl.PipeAt("k1", "T3", at(3000))
	_ = tbl.PipeAt("k1", "T8", at(8000))
	_ = in.PipeAt("y", "k1", at(9000))
	_ = tbl.PipeAt("k1", "T10", at(10_000))
	expect(t, readAll(t, out), kvts{"k1", "k1+T3", 5000, ""}, kvts{"k1", "k1+T8", 9000, ""})
}

// The timestamp extractors: the default fails on a negative timestamp naming the record;
// LogAndSkipOnInvalidTimestamp drops it and counts it; UsePartitionTimeOnInvalidTimestamp
// gives it the partition time, and fails while that is unknown; a source's own extractor
// and Config.DefaultTimestampExtractor give records the timestamps that the outputs carry.
func TestDriverTimestampExtractors(t *testing.T) {
	pipe := func(cfg kstream.Config, opts []kstream.Option, recs ...int64) (*kstreamtest.Driver, []kvts, error) {
		b := kstream.NewBuilder()
		kstream.Stream(b, "in", serde.String(), serde.String(), opts...).To("out", nil, nil)
		d := driverWith(t, b, cfg)
		in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
		var err error
		for i, ms := range recs {
			if err = in.PipeRaw([]byte("k"), []byte(fmt.Sprintf("v%d", i)), time.UnixMilli(t0.UnixMilli()+ms)); err != nil {
				break
			}
		}
		return d, readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())), err
	}
	neg := -t0.UnixMilli() - 1 // t0 + neg is -1: no timestamp

	_, got, err := pipe(kstream.Config{}, nil, 1000, neg, 2000)
	expect(t, got, kvts{"k", "v0", 1000, ""})
	if !errors.Is(err, kstream.ErrInvalidTimestamp) || !strings.Contains(err.Error(), `topic "in" partition 0 offset 1`) {
		t.Fatalf("FailOnInvalidTimestamp: %v, want ErrInvalidTimestamp naming topic, partition and offset", err)
	}

	d, got, err := pipe(kstream.Config{}, []kstream.Option{kstream.WithTimestampExtractor(kstream.LogAndSkipOnInvalidTimestamp{})}, 1000, neg, 2000)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got, kvts{"k", "v0", 1000, ""}, kvts{"k", "v2", 2000, ""})
	if n := d.DroppedRecords(); n != 1 {
		t.Fatalf("DroppedRecords = %d, want 1", n)
	}

	_, got, err = pipe(kstream.Config{DefaultTimestampExtractor: kstream.UsePartitionTimeOnInvalidTimestamp{}}, nil, 3000, 1000, neg, 4000)
	if err != nil {
		t.Fatal(err)
	}
	// The partition time is the largest timestamp so far, 3s, not the last one.
	expect(t, got, kvts{"k", "v0", 3000, ""}, kvts{"k", "v1", 1000, ""}, kvts{"k", "v2", 3000, ""}, kvts{"k", "v3", 4000, ""})
	_, got, err = pipe(kstream.Config{DefaultTimestampExtractor: kstream.UsePartitionTimeOnInvalidTimestamp{}}, nil, neg)
	expect(t, got)
	if !errors.Is(err, kstream.ErrInvalidTimestamp) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("UsePartitionTimeOnInvalidTimestamp without a partition time: %v", err)
	}

	// An extractor of the source wins over the default one; it reads the value's bytes.
	fromValue := kstream.TimestampExtractorFunc(func(r kstream.ConsumedRecord, _ int64) (int64, error) {
		n, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "v"))
		return t0.UnixMilli() + int64(n)*100, err
	})
	_, got, err = pipe(kstream.Config{DefaultTimestampExtractor: kstream.LogAndSkipOnInvalidTimestamp{}}, []kstream.Option{kstream.WithTimestampExtractor(fromValue)}, neg, 7)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, got, kvts{"k", "v0", 0, ""}, kvts{"k", "v1", 100, ""})

	before := time.Now()
	_, got, err = pipe(kstream.Config{DefaultTimestampExtractor: kstream.WallclockTimestampExtractor{}}, nil, 5)
	if err != nil || len(got) != 1 || got[0].Ms < before.Sub(t0).Milliseconds() || got[0].Ms > time.Since(t0).Milliseconds() {
		t.Fatalf("WallclockTimestampExtractor: %v %v", got, err)
	}
}

// A table's extractor (TableTimestampExtractor) gives its rows their timestamps; the
// option applies to Table only.
func TestDriverTableTimestampExtractor(t *testing.T) {
	plus := kstream.TimestampExtractorFunc(func(r kstream.ConsumedRecord, _ int64) (int64, error) { return r.Timestamp + 500, nil })
	b := kstream.NewBuilder()
	kstream.Table(b, "t", serde.String(), serde.String(), "t-store", kstream.TableTimestampExtractor(plus)).ToStream().To("out", nil, nil)
	d := driverWith(t, b, kstream.Config{})
	_ = kstreamtest.CreateInputTopic(d, "t", serde.String(), serde.String()).PipeAt("k", "v", at(1000))
	expect(t, readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())), kvts{"k", "v", 1500, ""})

	b2 := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b2, "in", serde.String(), serde.String()).GroupByKey(), "c", kstream.TableTimestampExtractor(plus))
	if _, err := b2.Build(); err == nil || !strings.Contains(err.Error(), "TableTimestampExtractor applies to Table only") {
		t.Fatalf("TableTimestampExtractor on Count: %v", err)
	}
}

// ProcessValues keeps the key of every record it forwards, so the aggregation below it
// needs no repartition; it may change values, timestamps and headers, and punctuate.
func TestDriverProcessValues(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	lens := kstream.ProcessValues(s, func() kstream.FixedKeyProcessor[string, string, int64] {
		return kstream.FixedKeyProcessorFunc[string, string, int64](func(ctx kstream.FixedKeyProcessorContext[string, int64], r kstream.FixedKeyRecord[string, string]) error {
			out := kstream.WithValue(r, int64(len(r.Value)))
			out.Timestamp = r.Timestamp.Add(time.Second)
			ctx.Forward(out.WithHeader("k", []byte(r.Key())))
			if r.Value == "bad" {
				ctx.Forward(kstream.FixedKeyRecord[string, int64]{Value: 1}) // no key to keep
			}
			return nil
		})
	})
	lens.WithSerdes(nil, serde.Int64()).To("lens", nil, nil)
	kstream.Count(kstream.ProcessValues(s, func() kstream.FixedKeyProcessor[string, string, string] {
		return kstream.FixedKeyProcessorFunc[string, string, string](func(ctx kstream.FixedKeyProcessorContext[string, string], r kstream.FixedKeyRecord[string, string]) error {
			ctx.Forward(r)
			return nil
		})
	}).GroupByKey(), "counts").ToStream().WithSerdes(serde.String(), serde.Int64()).To("counts", nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(topo.Describe(), "repartition") {
		t.Fatalf("ProcessValues then GroupByKey repartitions:\n%s", topo.Describe())
	}
	var seen []kstream.ErrorContext
	d := driverWith(t, b, kstream.Config{ProcessingErrorHandler: kstream.ErrorHandlerFunc(func(ec kstream.ErrorContext) kstream.ErrorResponse {
		seen = append(seen, ec)
		return kstream.Continue()
	})})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	_ = in.PipeAt("a", "xyz", at(0))
	_ = in.PipeAt("b", "bad", at(1000))
	_ = in.PipeAt("a", "xy", at(2000))
	lensOut, err := kstreamtest.CreateOutputTopic(d, "lens", serde.String(), serde.Int64()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range lensOut {
		got = append(got, fmt.Sprintf("%s=%d@%d h=%s", r.Key, r.Value, r.Timestamp.Sub(t0).Milliseconds(), r.Headers[0].Value))
	}
	want := []string{"a=3@1000 h=a", "b=3@2000 h=b", "a=2@3000 h=a"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("lens: %v, want %v", got, want)
	}
	counts, _ := kstreamtest.CreateOutputTopic(d, "counts", serde.String(), serde.Int64()).ReadKeyValues()
	if fmt.Sprint(counts) != "[{a 1} {b 1} {a 2}]" {
		t.Fatalf("counts: %v", counts)
	}
	if len(seen) != 1 || !strings.Contains(seen[0].Err.Error(), "not derived from an input record") || seen[0].Offset != 1 {
		t.Fatalf("forwarding a FixedKeyRecord made anew: %+v", seen)
	}
}
