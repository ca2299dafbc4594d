package kstreamtest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The expected outputs of these tests are those of Kafka Streams 4.4's TopologyTestDriver
// (caching disabled) running the same topologies on the same inputs: the output records
// read after each input record, as "after <key>@<ms>: <key> = <value> @<ms> [header=value]"
// ("null" for a tombstone).

// supConfig is the driver's Config in these tests: caching disabled, as on the Java side.
var supConfig = kstream.Config{ApplicationID: "sup", CacheMaxBytes: -1}

// supIn is one input record of a suppression test: key, value (nil: a Kafka null), timestamp
// in ms, and an optional header.
type supIn struct {
	k  string
	v  *string
	ms int64
	h  string // "key=value", or ""
}

// runSuppress pipes ins into topic "in" or whatever topic in writes to, reading topic "out"
// after each record, and returns the outputs in the format above. It stops at the first
// error, which it returns.
func runSuppress(t *testing.T, d *kstreamtest.Driver, topic string, ins []supIn) (string, error) {
	t.Helper()
	in := kstreamtest.CreateInputTopic(d, topic, serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	var sb strings.Builder
	for _, r := range ins {
		rec := kstream.Record[string, string]{Key: r.k, Timestamp: time.UnixMilli(r.ms)}
		if r.v == nil {
			rec = rec.AsTombstone()
		} else {
			rec.Value = *r.v
		}
		if r.h != "" {
			hk, hv, _ := strings.Cut(r.h, "=")
			rec = rec.WithHeader(hk, []byte(hv))
		}
		if err := in.PipeRecord(rec); err != nil {
			return sb.String(), err
		}
		recs, err := out.ReadRecords()
		if err != nil {
			return sb.String(), err
		}
		for _, o := range recs {
			v := o.Value
			if o.IsTombstone() {
				v = "null"
			}
			fmt.Fprintf(&sb, "after %s@%d: %s = %s @%d", r.k, r.ms, o.Key, v, o.Timestamp.UnixMilli())
			for _, h := range o.Headers {
				fmt.Fprintf(&sb, " %s=%s", h.Key, h.Value)
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String(), nil
}

func checkOutput(t *testing.T, got, want string) {
	t.Helper()
	want = strings.TrimLeft(want, "\n")
	if got != want {
		t.Errorf("output:\n%s\nwant (Kafka Streams 4.4):\n%s", got, want)
	}
}

// UntilWindowCloses on a tumbling windowed count (10s windows, 5s grace): each window is
// emitted once, when stream time reaches its end plus the grace, with its final count, the
// timestamp of its latest record (the window's largest timestamp) and that record's
// headers; an out-of-order record within the grace is counted, late ones are dropped, and a
// window that only got late records emits nothing.
func TestSuppressUntilWindowCloses(t *testing.T) {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
	counts := kstream.WindowedCount(w, "counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded()))
	kstream.Map(counts.ToStream(), func(k serde.Windowed[string], n int64) (string, string) {
		return fmt.Sprintf("%s@%d/%d", k.Key, k.StartMs(), k.EndMs()), fmt.Sprint(n)
	}).To("out", serde.String(), serde.String())
	d := driverWith(t, b, supConfig)
	got, err := runSuppress(t, d, "in", []supIn{
		{"a", sv("v"), 1000, ""}, {"b", sv("v"), 2000, "h=b1"}, {"a", sv("v"), 11000, ""}, {"a", sv("v"), 3000, "h=a3"},
		{"b", sv("v"), 14000, ""}, {"a", sv("v"), 16000, ""}, {"a", sv("v"), 4000, ""}, {"c", sv("v"), 5000, ""},
		{"a", sv("v"), 26000, ""}, {"c", sv("v"), 100000, ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, got, `
after a@16000: a@0/10000 = 2 @3000 h=a3
after a@16000: b@0/10000 = 1 @2000 h=b1
after a@26000: a@10000/20000 = 2 @16000
after a@26000: b@10000/20000 = 1 @14000
after c@100000: a@20000/30000 = 1 @26000
`)
	if n := d.DroppedRecords(); n != 2 {
		t.Errorf("dropped records: %d, want the 2 late ones", n)
	}
}

// Final results drop deletes: a window whose reduce result became a delete (nil) emits
// nothing when it closes, and one deleted then aggregated again emits its new value.
func TestSuppressUntilWindowClosesDropsDeletes(t *testing.T) {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.Nullable(serde.String())).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
	reduced := kstream.WindowedReduce(w, func(acc, v *string) *string {
		if *v == "del" {
			return nil
		}
		s := *acc + *v
		return &s
	}, "r")
	kstream.Map(reduced.Suppress(kstream.UntilWindowCloses(kstream.Unbounded())).ToStream(), func(k serde.Windowed[string], v *string) (string, string) {
		return fmt.Sprintf("%s@%d/%d", k.Key, k.StartMs(), k.EndMs()), *v
	}).To("out", serde.String(), serde.String())
	d := driverWith(t, b, supConfig)
	got, err := runSuppress(t, d, "in", []supIn{
		{"x", sv("1"), 1000, ""}, {"x", sv("del"), 2000, ""}, {"y", sv("2"), 3000, ""}, {"y", sv("3"), 4000, ""},
		{"x", sv("4"), 5000, ""}, {"w", sv("5"), 6000, ""}, {"w", sv("del"), 7000, ""}, {"z", sv("9"), 16000, ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, got, `
after z@16000: x@0/10000 = 4 @5000
after z@16000: y@0/10000 = 23 @4000
`)
}

// countSuppressed builds in -> Count -> Suppress(UntilTimeLimit(10s, c)) -> out.
func countSuppressed(c kstream.BufferConfig) *kstream.Builder {
	b := kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	kstream.MapValues(counts.Suppress(kstream.UntilTimeLimit(10*time.Second, c)).ToStream(), func(n int64) string { return fmt.Sprint(n) }).
		To("out", serde.String(), serde.String())
	return b
}

var limitInputs = []supIn{
	{"a", sv("v"), 0, ""}, {"a", sv("v"), 1000, ""}, {"b", sv("v"), 2000, ""}, {"a", sv("v"), 5000, "h=a5"}, {"c", sv("v"), 12000, ""},
	{"b", sv("v"), 13000, ""}, {"a", sv("v"), 30000, ""}, {"d", sv("v"), 30500, ""}, {"e", sv("v"), 31000, ""},
}

// UntilTimeLimit on a count: a key's latest count is emitted when stream time passes the
// time limit after the key's first buffered update (a's buffer time stays 0 although it was
// updated at 5000), in buffer-time order; with MaxRecords(2).EmitEarlyWhenFull the oldest
// record is emitted early when a third key arrives; with MaxBytes(100) it is emitted as soon
// as Java's size estimate of the buffer passes 100 bytes.
func TestSuppressUntilTimeLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    kstream.BufferConfig
		want string
	}{
		{"unbounded", kstream.Unbounded(), `
after c@12000: a = 3 @5000 h=a5
after c@12000: b = 1 @2000
after a@30000: c = 1 @12000
after a@30000: b = 2 @13000
`},
		{"maxrecords2", kstream.MaxRecords(2).EmitEarlyWhenFull(), `
after c@12000: a = 3 @5000 h=a5
after c@12000: b = 1 @2000
after a@30000: c = 1 @12000
after a@30000: b = 2 @13000
after e@31000: a = 4 @30000
`},
		{"maxbytes100", kstream.MaxBytes(100), `
after b@2000: a = 2 @1000
after c@12000: b = 1 @2000
after b@13000: a = 3 @5000 h=a5
after a@30000: c = 1 @12000
after a@30000: b = 2 @13000
after e@31000: a = 4 @30000
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := driverWith(t, countSuppressed(tc.c), supConfig)
			got, err := runSuppress(t, d, "in", limitInputs)
			if err != nil {
				t.Fatal(err)
			}
			checkOutput(t, got, tc.want)
		})
	}
}

// A strict buffer over its limit fails the operator with Java's message, whose byte count
// is Java's size estimate (47 bytes a record here: a count sends its initial 0 as the old
// value of a key's first update).
func TestSuppressShutDownWhenFull(t *testing.T) {
	d := driverWith(t, countSuppressed(kstream.MaxRecords(1).ShutDownWhenFull()), supConfig)
	_, err := runSuppress(t, d, "in", limitInputs)
	var full *kstream.BufferFullError
	if !errors.As(err, &full) {
		t.Fatalf("error %v, want a BufferFullError", err)
	}
	const want = "KTABLE-SUPPRESS-0000000002 buffer exceeded its max capacity. Currently [2/1] records and [102/9223372036854775807] bytes."
	if full.Error() != want {
		t.Errorf("error %q,\nwant %q", full.Error(), want)
	}
}

// Deletes pass through a time-limit suppression as tombstones (a delete of a key never
// seen too), and a buffered update replaced by a delete is emitted as the delete.
func TestSuppressTombstones(t *testing.T) {
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, "tin", serde.String(), serde.String(), "tstore")
	tbl.Suppress(kstream.UntilTimeLimit(time.Second, kstream.Unbounded())).ToStream().To("out", serde.String(), serde.String())
	d := driverWith(t, b, supConfig)
	got, err := runSuppress(t, d, "tin", []supIn{
		{"a", sv("x"), 0, ""}, {"a", nil, 500, ""}, {"c", nil, 600, ""}, {"b", sv("y"), 1000, ""},
		{"b", nil, 1200, ""}, {"b", sv("z"), 1300, ""}, {"d", sv("w"), 5000, ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, got, `
after b@1000: a = null @500
after d@5000: c = null @600
after d@5000: b = z @1300
`)
}

// Build errors: UntilWindowCloses on a table that is not windowed, with an eager buffer,
// and on a windowed-key table with no windowed aggregation upstream.
func TestSuppressBuildErrors(t *testing.T) {
	b := kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	counts.Suppress(kstream.UntilWindowCloses(kstream.Unbounded()))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "UntilWindowCloses applies to windowed tables") {
		t.Errorf("non-windowed table: %v", err)
	}

	b = kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Second))
	kstream.WindowedCount(w, "counts").Suppress(kstream.UntilWindowCloses(kstream.MaxRecords(3)))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "strict buffer") {
		t.Errorf("eager buffer: %v", err)
	}

	b = kstream.NewBuilder()
	ws := serde.TimeWindowed(serde.String(), time.Second)
	kstream.Table(b, "wt", ws, serde.String(), "wstore").Suppress(kstream.UntilWindowCloses(kstream.Unbounded()))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "Window close time is only defined for windowed computations. Got [root->KTABLE-SOURCE-0000000001].") {
		t.Errorf("no windowed aggregation: %v", err)
	}
}

// Describe shows the suppression and its buffer store as Kafka Streams 4.4 does, named and
// unnamed.
func TestSuppressDescribe(t *testing.T) {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
	kstream.Map(kstream.WindowedCount(w, "counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded())).ToStream(),
		func(k serde.Windowed[string], n int64) (string, string) { return k.Key, fmt.Sprint(n) }).
		To("out", serde.String(), serde.String())
	checkDescribe(t, b, `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [counts])
      --> KTABLE-SUPPRESS-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SUPPRESS-0000000002 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000003])
      --> KTABLE-TOSTREAM-0000000004
      <-- KSTREAM-AGGREGATE-0000000001
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-MAP-0000000005
      <-- KTABLE-SUPPRESS-0000000002
    Processor: KSTREAM-MAP-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KTABLE-TOSTREAM-0000000004
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KSTREAM-MAP-0000000005

`)

	b = kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	kstream.MapValues(counts.Suppress(kstream.UntilTimeLimit(10*time.Second, kstream.Unbounded()).WithName("sup")).ToStream(),
		func(n int64) string { return fmt.Sprint(n) }).To("out", serde.String(), serde.String())
	checkDescribe(t, b, `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [counts])
      --> sup
      <-- KSTREAM-SOURCE-0000000000
    Processor: sup (stores: [sup-store])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-AGGREGATE-0000000001
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-MAPVALUES-0000000003
      <-- sup
    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KTABLE-TOSTREAM-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000003

`)
}

func checkDescribe(t *testing.T, b *kstream.Builder, want string) {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Describe(); got != want {
		t.Errorf("Describe:\n%s\nwant (Kafka Streams 4.4):\n%s", got, want)
	}
}

// A stream joined with a suppressed table reads, for a key with buffered updates, the value
// the key had before them (for a count, the initial 0 that its first update replaced), and
// otherwise the upstream table's value (Java's KTableSuppressProcessorSupplier.view).
func TestSuppressJoinReadsPriorValue(t *testing.T) {
	b := kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "c").
		Suppress(kstream.UntilTimeLimit(10*time.Second, kstream.Unbounded()))
	probe := kstream.Stream(b, "probe", serde.String(), serde.String())
	kstream.LeftJoin(probe, counts, func(_ string, v string, n int64, found bool) string {
		if !found {
			return v + ":null"
		}
		return fmt.Sprintf("%s:%d", v, n)
	}).To("out", serde.String(), serde.String())
	checkDescribe(t, b, `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001
    Source: KSTREAM-SOURCE-0000000004 (topics: [probe])
      --> KSTREAM-LEFTJOIN-0000000005
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [c])
      --> KTABLE-SUPPRESS-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-LEFTJOIN-0000000005 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000003, c])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-SOURCE-0000000004
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KSTREAM-LEFTJOIN-0000000005
    Processor: KTABLE-SUPPRESS-0000000002 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000003])
      --> none
      <-- KSTREAM-AGGREGATE-0000000001

`)
	d := driverWith(t, b, supConfig)
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	pr := kstreamtest.CreateInputTopic(d, "probe", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	var got []string
	for _, s := range []struct {
		probe bool
		k     string
		ms    int64
	}{{false, "a", 0}, {true, "a", 1}, {false, "a", 1000}, {true, "a", 1001}, {false, "b", 12000}, {true, "a", 12001},
		{false, "a", 13000}, {true, "a", 13001}, {true, "c", 13002}} {
		topic := in
		if s.probe {
			topic = pr
		}
		if err := topic.PipeAt(s.k, "p", time.UnixMilli(s.ms)); err != nil {
			t.Fatal(err)
		}
		recs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range recs {
			got = append(got, fmt.Sprintf("%s = %s @%d", o.Key, o.Value, o.Timestamp.UnixMilli()))
		}
	}
	want := []string{"a = p:0 @1", "a = p:0 @1001", "a = p:2 @12001", "a = p:2 @13001", "c = p:null @13002"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("join output:\n%s\nwant (Kafka Streams 4.4):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
