package kstreamtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// captured is a slog handler that keeps the records logged at warn and above, with their
// attributes.
type captured struct {
	mu   *sync.Mutex
	recs *[]logLine
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func newCaptured() captured { return captured{mu: &sync.Mutex{}, recs: &[]logLine{}} }

func (c captured) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c captured) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c captured) WithGroup(string) slog.Handler                { return c }
func (c captured) Handle(_ context.Context, r slog.Record) error {
	l := logLine{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value.Any(); return true })
	c.mu.Lock()
	*c.recs = append(*c.recs, l)
	c.mu.Unlock()
	return nil
}

// lines returns the captured lines of operator op.
func (c captured) lines(op string) []logLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logLine
	for _, l := range *c.recs {
		if l.attrs["operator"] == op {
			out = append(out, l)
		}
	}
	return out
}

// checkAttrs fails unless line l has every attribute of want (numbers compared as int64).
func checkAttrs(t *testing.T, l logLine, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got := l.attrs[k]
		if n, ok := v.(int); ok {
			v = int64(n)
		}
		if fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("log line %q: %s = %v, want %v (all: %v)", l.msg, k, got, v, l.attrs)
		}
	}
}

func loss(op, reason string, lost bool, n int64) kstream.OperatorLoss {
	return kstream.OperatorLoss{Operator: op, Reason: reason, LostResults: lost, Count: n}
}

func checkLosses(t *testing.T, d *kstreamtest.Driver, want ...kstream.OperatorLoss) {
	t.Helper()
	if got := d.Losses(); !slices.Equal(got, want) {
		t.Errorf("losses:\n got %+v\nwant %+v", got, want)
	}
}

// windowLines pipes (key, ms) pairs into in and returns what out got, as
// "key@start/end=value@timestamp".
func windowLines[V any](t *testing.T, in *kstreamtest.InputTopic[string, string], out *kstreamtest.OutputTopic[serde.Windowed[string], V], recs ...any) []string {
	t.Helper()
	for i := 0; i < len(recs); i += 2 {
		if err := in.PipeAt(recs[i].(string), "v", time.UnixMilli(int64(recs[i+1].(int)))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s@%d/%d=%v@%d", r.Key.Key, r.Key.StartMs(), r.Key.EndMs(), r.Value, r.Timestamp.UnixMilli()))
	}
	return lines
}

// Late records are counted by operator and reason (one time-window, one sliding-window and
// one session aggregation of the same stream each drop the same late record) and logged at
// warn with the operator, the record's timestamp, the stream time, how late it was and the
// window; the warn lines of one operator are limited to one per 10 s of the task's clock,
// the next one saying how many were left out.
func TestLateRecordsCountedAndLoggedByOperator(t *testing.T) {
	b := kstream.NewBuilder()
	g := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey()
	kstream.WindowedCount(g.WindowedBy(kstream.TimeWindowsOf(10*time.Second)), "tumbling")
	kstream.WindowedCount(g.WindowedBy(kstream.SlidingWindowsOf(10*time.Second)), "sliding")
	kstream.SessionCount(g.WindowedBySession(kstream.SessionWindowsOf(10*time.Second)), "sessions")
	logs := newCaptured()
	d := driverWith(t, b, kstream.Config{ApplicationID: "late", Logger: slog.New(logs)})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	pipe := func(ms int64) {
		t.Helper()
		if err := in.PipeAt("a", "v", time.UnixMilli(ms)); err != nil {
			t.Fatal(err)
		}
	}
	const tumbling, sliding, sessions = "KSTREAM-AGGREGATE-0000000001", "KSTREAM-AGGREGATE-0000000002", "KSTREAM-AGGREGATE-0000000003"
	pipe(30_000)
	pipe(1_000) // late for every aggregation
	checkLosses(t, d, loss(tumbling, "expired_window", false, 1), loss(sliding, "expired_window", false, 1), loss(sessions, "expired_window", false, 1))
	if n := d.DroppedRecords(); n != 3 {
		t.Errorf("DroppedRecords = %d, want 3", n)
	}
	for op, want := range map[string]map[string]any{
		// Time windows close at their end plus the grace (0): [0, 10000) closed at 10000.
		tumbling: {"timestamp": 1000, "stream_time": 30000, "late_by_ms": 20000, "window_start": 0, "window_end": 10000, "reason": "expired_window", "suppressed": 0, "topic": "in", "offset": 1},
		// A sliding window's end is inclusive; the record's latest window is [1000, 11000].
		sliding: {"timestamp": 1000, "stream_time": 30000, "late_by_ms": 19000, "window_start": 1000, "window_end": 11000},
		// Sessions close at their end plus the gap plus the grace: 30000 - 10000 = 20000.
		sessions: {"timestamp": 1000, "stream_time": 30000, "late_by_ms": 19000, "window_start": 1000, "window_end": 1000},
	} {
		ls := logs.lines(op)
		if len(ls) != 1 || ls[0].level != slog.LevelWarn {
			t.Fatalf("%s: %d warn lines, want 1: %+v", op, len(ls), ls)
		}
		checkAttrs(t, ls[0], want)
	}
	pipe(2_000)
	pipe(3_000)
	if ls := logs.lines(tumbling); len(ls) != 1 {
		t.Errorf("%d warn lines within 10 s, want 1: %+v", len(ls), ls)
	}
	if err := d.AdvanceWallClockTime(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	pipe(4_000)
	ls := logs.lines(tumbling)
	if len(ls) != 2 {
		t.Fatalf("%d warn lines after 10 s, want 2: %+v", len(ls), ls)
	}
	checkAttrs(t, ls[1], map[string]any{"timestamp": 4000, "suppressed": 2})
	checkLosses(t, d, loss(tumbling, "expired_window", false, 4), loss(sliding, "expired_window", false, 4), loss(sessions, "expired_window", false, 4))
}

// With EmitOnWindowClose and the default retention (size + grace), a record that moves
// stream time past a window's close and past its retention at once (a quiet period) expires
// the window before it is emitted. By default, as in Kafka Streams, its final result is not
// emitted, but it is counted and logged as lost; the windows that close with it and are
// still kept are emitted as before. EmitBeforeExpiry emits it, in window order.
func TestEmitOnWindowCloseWindowExpiringBeforeClose(t *testing.T) {
	const op = "KSTREAM-AGGREGATE-0000000001"
	for _, beforeExpiry := range []bool{false, true} {
		t.Run(fmt.Sprintf("EmitBeforeExpiry=%v", beforeExpiry), func(t *testing.T) {
			b := kstream.NewBuilder()
			// Size 10 s, grace 5 s: windows are kept 15 s after their start.
			w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
				WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
			if beforeExpiry {
				w = w.EmitOnWindowClose(kstream.EmitBeforeExpiry())
			} else {
				w = w.EmitOnWindowClose()
			}
			kstream.WindowedCount(w, "counts").ToStream().To("out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
			logs := newCaptured()
			d := driverWith(t, b, kstream.Config{ApplicationID: "jump", Logger: slog.New(logs)})
			in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
			out := kstreamtest.CreateOutputTopic(d, "out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
			// Nothing closes until 26000, which closes [0, 10000) and [10000, 20000) and
			// moves the store's stream time (the latest window start) to 20000: [0, 10000)
			// expires (20000 - 15000 > 0), [10000, 20000) is still kept.
			got := windowLines(t, in, out, "a", 1000, "a", 12000, "a", 26000)
			if beforeExpiry {
				sjCheck(t, "final results", got, "a@0/10000=1@1000", "a@10000/20000=1@12000")
				checkLosses(t, d)
				if ls := logs.lines(op); len(ls) != 0 {
					t.Errorf("warn lines: %+v", ls)
				}
				return
			}
			sjCheck(t, "final results", got, "a@10000/20000=1@12000")
			checkLosses(t, d, loss(op, "window_expired", true, 1))
			if n := d.LostResults(); n != 1 {
				t.Errorf("LostResults = %d, want 1", n)
			}
			if n := d.DroppedRecords(); n != 0 {
				t.Errorf("DroppedRecords = %d, want 0 (a lost result is no dropped record)", n)
			}
			ls := logs.lines(op)
			if len(ls) != 1 {
				t.Fatalf("%d warn lines, want 1: %+v", len(ls), ls)
			}
			// The window closed at 15000 (close time 10000); the close time is now 21000.
			checkAttrs(t, ls[0], map[string]any{"reason": "window_expired", "timestamp": 1000, "stream_time": 26000, "late_by_ms": 11000,
				"window_start": 0, "window_end": 10000, "store": "counts"})
		})
	}
}

// Hopping windows: a jump closes and expires four windows of two keys at once; with
// EmitBeforeExpiry they are emitted by window start, then key, as Kafka Streams' time-ordered
// store emits the windows it keeps; by default all four are counted as lost.
func TestEmitBeforeExpiryHoppingOrder(t *testing.T) {
	const op = "KSTREAM-AGGREGATE-0000000001"
	for _, beforeExpiry := range []bool{false, true} {
		b := kstream.NewBuilder()
		w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
			WindowedBy(kstream.TimeWindowsOf(10 * time.Second).AdvanceBy(5 * time.Second))
		if beforeExpiry {
			w = w.EmitOnWindowClose(kstream.EmitBeforeExpiry())
		} else {
			w = w.EmitOnWindowClose()
		}
		kstream.WindowedCount(w, "counts").ToStream().To("out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
		d := driverWith(t, b, kstream.Config{ApplicationID: "hop"})
		in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
		out := kstreamtest.CreateOutputTopic(d, "out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
		got := windowLines(t, in, out, "b", 1000, "a", 6000, "b", 7000, "a", 40000)
		if beforeExpiry {
			sjCheck(t, "final results", got, "a@0/10000=1@6000", "b@0/10000=2@7000", "a@5000/15000=1@6000", "b@5000/15000=1@7000")
			checkLosses(t, d)
		} else {
			sjCheck(t, "final results", got)
			checkLosses(t, d, loss(op, "window_expired", true, 4))
		}
	}
}

// Sliding and session windows lose their final results the same way when stream time jumps
// past their retention (sessions: past their store segment, of at least a minute), and
// EmitBeforeExpiry emits them.
func TestEmitOnWindowCloseSlidingAndSessionJump(t *testing.T) {
	const op = "KSTREAM-AGGREGATE-0000000001"
	for _, kind := range []string{"sliding", "session"} {
		for _, beforeExpiry := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/EmitBeforeExpiry=%v", kind, beforeExpiry), func(t *testing.T) {
				var opts []kstream.CloseOption
				if beforeExpiry {
					opts = append(opts, kstream.EmitBeforeExpiry())
				}
				b := kstream.NewBuilder()
				g := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey()
				var ks serde.Serde[serde.Windowed[string]]
				var jump []any
				var want string
				if kind == "sliding" {
					ks = serde.TimeWindowed(serde.String(), 10*time.Second)
					kstream.WindowedCount(g.WindowedBy(kstream.SlidingWindowsOf(10*time.Second)).EmitOnWindowClose(opts...), "counts").
						ToStream().To("out", ks, serde.Int64())
					// [5000, 15000] is kept 2 * 10 s after its start; 60000 puts [50000, 60000].
					jump, want = []any{"a", 15000, "a", 60000}, "a@5000/15000=1@15000"
				} else {
					ks = serde.SessionWindowed(serde.String())
					kstream.SessionCount(g.WindowedBySession(kstream.SessionWindowsOf(time.Second)).EmitOnWindowClose(opts...), "counts").
						ToStream().To("out", ks, serde.Int64())
					// The segment of 1000 (one minute) expires at 200000.
					jump, want = []any{"a", 1000, "a", 200000}, "a@1000/1000=1@1000"
				}
				d := driverWith(t, b, kstream.Config{ApplicationID: "jump"})
				in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
				out := kstreamtest.CreateOutputTopic(d, "out", ks, serde.Int64())
				got := windowLines(t, in, out, jump...)
				if beforeExpiry {
					sjCheck(t, "final results", got, want)
					checkLosses(t, d)
				} else {
					sjCheck(t, "final results", got)
					checkLosses(t, d, loss(op, "window_expired", true, 1))
				}
			})
		}
	}
}

// Suppress(UntilWindowCloses) keeps every window in its buffer until it is emitted: a jump
// of stream time loses nothing; the late record is dropped (and counted) by the
// aggregation, not by the suppression.
func TestSuppressJumpLosesNothing(t *testing.T) {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().WindowedBy(kstream.TimeWindowsOf(10 * time.Second))
	kstream.WindowedCount(w, "counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("final")).
		ToStream().To("out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
	d := driverWith(t, b, kstream.Config{ApplicationID: "sup"})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
	got := windowLines(t, in, out, "a", 1000, "a", 2000, "a", 500_000, "a", 3000)
	sjCheck(t, "final results", got, "a@0/10000=2@2000")
	checkLosses(t, d, loss("KSTREAM-AGGREGATE-0000000001", "expired_window", false, 1))
}

// A stream-stream join counts the record too late for its window store by the operator
// that keeps it (the side's KSTREAM-WINDOWED node), with its null-key drops; a left join's
// pending non-match is kept outside the segmented stores, so a jump of stream time past its
// window's retention still emits it.
func TestStreamJoinLossesByOperator(t *testing.T) {
	logs := newCaptured()
	b := kstream.NewBuilder()
	l, r := kstream.Stream(b, "l", serde.String(), serde.String()), kstream.Stream(b, "r", serde.String(), serde.String())
	kstream.LeftJoinWindowed(l, r, func(_ string, a, b string, ok bool) string { return a + "+" + b }, kstream.JoinWindowsOf(time.Second)).
		To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{ApplicationID: "sj", Logger: slog.New(logs)})
	li := kstreamtest.CreateInputTopic(d, "l", serde.String(), serde.String())
	ri := kstreamtest.CreateInputTopic(d, "r", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	pipe := func(in *kstreamtest.InputTopic[string, string], k string, ms int64) {
		t.Helper()
		if err := in.PipeAt(k, k+"1", time.UnixMilli(ms)); err != nil {
			t.Fatal(err)
		}
	}
	pipe(li, "a", 1000)
	pipe(ri, "b", 600_000) // a jump: a's window closed long ago
	pipe(li, "c", 600_000)
	pipe(li, "d", 1000) // too late for the left store (segments of a minute)
	got, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
	}
	sjCheck(t, "outputs", lines, "a=a1+@1000", "d=d1+@1000")
	const leftWindowed = "KSTREAM-WINDOWED-0000000002"
	checkLosses(t, d, loss(leftWindowed, "expired_window", false, 1))
	ls := logs.lines(leftWindowed)
	if len(ls) != 1 {
		t.Fatalf("%d warn lines, want 1: %+v", len(ls), ls)
	}
	// The left store's stream time is 600000 and its retention 2 s.
	checkAttrs(t, ls[0], map[string]any{"reason": "expired_window", "timestamp": 1000, "stream_time": 600000, "late_by_ms": 597000,
		"store": "KSTREAM-JOINTHIS-0000000004-store"})
}

// A versioned table drops a write older than its history retention (Kafka Streams'
// "Skipping record for expired put"): it is counted by the table's source operator, with
// the reason expired_history, and logged.
func TestVersionedTableLateWriteCounted(t *testing.T) {
	logs := newCaptured()
	b := kstream.NewBuilder()
	kstream.Table(b, "t", serde.String(), serde.String(), "vt", kstream.Versioned(10*time.Second)).ToStream().To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{ApplicationID: "vt", Logger: slog.New(logs)})
	in := kstreamtest.CreateInputTopic(d, "t", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	for _, ms := range []int64{100_000, 95_000, 1_000} {
		if err := in.PipeAt("k", fmt.Sprint(ms), time.UnixMilli(ms)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := out.ReadValues()
	if err != nil {
		t.Fatal(err)
	}
	sjCheck(t, "outputs", got, "100000", "95000")
	losses := d.Losses()
	if len(losses) != 1 || losses[0].Reason != "expired_history" || losses[0].Count != 1 || losses[0].LostResults {
		t.Fatalf("losses: %+v", losses)
	}
	ls := logs.lines(losses[0].Operator)
	if len(ls) != 1 {
		t.Fatalf("%d warn lines, want 1: %+v", len(ls), ls)
	}
	checkAttrs(t, ls[0], map[string]any{"timestamp": 1000, "stream_time": 100000, "late_by_ms": 89000, "store": "vt"})
}

// Records an error handler skips are counted by operator, with the reason of the error:
// a record the source cannot decode under LogAndContinue (skipped_deserialization_error, at
// the source) and one a processor fails on under a continuing processing handler
// (skipped_processing_error, at that processor). Neither counts in Stats.DroppedRecords,
// as in the task metric.
func TestSkippedRecordsByOperatorAndReason(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.Int64(), kstream.Named("numbers"))
	kstream.MapValues(s, func(v int64) int64 {
		if v < 0 {
			panic(fmt.Sprintf("negative: %d", v)) // a processing error
		}
		return v
	}, kstream.Named("check")).To("out", serde.String(), serde.Int64())
	d, err := kstreamtest.New(b, kstream.Config{
		DeserializationErrorHandler: kstream.LogAndContinue(),
		ProcessingErrorHandler:      kstream.LogAndContinue(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64())
	for _, err := range []error{
		in.Pipe("k", 1),
		in.PipeRaw([]byte("k"), []byte("abc"), time.Time{}),
		in.Pipe("k", -2),
		in.Pipe("k", -3),
		in.Pipe("k", 4),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	vals, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadValues()
	if err != nil || !slices.Equal(vals, []int64{1, 4}) {
		t.Fatalf("values %v (%v), want [1 4]", vals, err)
	}
	checkLosses(t, d, loss("check", "skipped_processing_error", false, 2), loss("numbers", "skipped_deserialization_error", false, 1))
}
