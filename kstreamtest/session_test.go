package kstreamtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// sessionInput is the input of the session aggregation tests (inactivity gap 10ms, grace
// 5ms): new sessions, an extension, out-of-order merges, a null value, a record within the
// grace period, two late records, a null key and a record bridging two live sessions (d@77).
// An empty key is a null key and "-" a null value.
var sessionInput = []struct {
	k  string
	ms int64
	v  string
}{
	{"a", 0, "A"}, {"a", 5, "B"}, {"b", 3, "C"}, {"a", 20, "D"}, {"a", 13, "E"},
	{"a", 22, "-"}, {"b", 40, "F"}, {"a", 26, "G"}, {"c", 10, "H"}, {"", 45, "I"},
	{"b", 60, "J"}, {"a", 30, "K"}, {"a", 61, "L"}, {"d", 70, "N"}, {"d", 84, "O"},
	{"d", 77, "P"}, {"c", 84, "Q"}, {"b", 100, "M"},
}

// The expected outputs below come from running sessionInput through Kafka Streams 4.4's
// TopologyTestDriver (statestore.cache.max.bytes 0, the emit interval of windowed
// aggregations 0) with the same topologies: "key@start/end=value@timestamp", null for a
// tombstone. Each run drops 3 records: c@10 and a@30 (late) and the null key.

var javaSessionCount = []string{
	"a@0/0=1@0", "a@0/0=null@0", "a@0/5=2@5", "b@3/3=1@3", "a@20/20=1@20", "a@20/20=null@20",
	"a@13/20=2@20", "a@13/20=null@20", "a@13/22=3@22", "b@40/40=1@40", "a@26/26=1@26",
	"b@60/60=1@60", "a@61/61=1@61", "d@70/70=1@70", "d@84/84=1@84", "d@70/70=null@70",
	"d@84/84=null@84", "d@70/84=3@84", "c@84/84=1@84", "b@100/100=1@100",
}

var javaSessionReduce = []string{
	"a@0/0=A@0", "a@0/0=null@0", "a@0/5=A+B@5", "b@3/3=C@3", "a@20/20=D@20", "a@20/20=null@20",
	"a@13/20=D+E@20", "a@13/20=null@20", "a@13/22=D+E+_@22", "b@40/40=F@40", "a@26/26=G@26",
	"b@60/60=J@60", "a@61/61=L@61", "d@70/70=N@70", "d@84/84=O@84", "d@70/70=null@70",
	"d@84/84=null@84", "d@70/84=N+O+P@84", "c@84/84=Q@84", "b@100/100=M@100",
}

var javaSessionAggregate = []string{
	"a@0/0=A@0", "a@0/0=null@0", "a@0/5=|AB@5", "b@3/3=C@3", "a@20/20=D@20", "a@20/20=null@20",
	"a@13/20=|DE@20", "a@13/20=null@20", "a@13/22=||DE_@22", "b@40/40=F@40", "a@26/26=G@26",
	"b@60/60=J@60", "a@61/61=L@61", "d@70/70=N@70", "d@84/84=O@84", "d@70/70=null@70",
	"d@84/84=null@84", "d@70/84=|N|OP@84", "c@84/84=Q@84", "b@100/100=M@100",
}

// On window close, the sessions come by end, then start, then key (d@70/84 before
// c@84/84), each when stream time passes its end plus gap plus grace.
var (
	javaSessionCountOnClose = []string{
		"b@3/3=1@3", "a@0/5=2@5", "a@13/22=3@22", "a@26/26=1@26", "b@40/40=1@40", "b@60/60=1@60",
		"a@61/61=1@61", "d@70/84=3@84", "c@84/84=1@84",
	}
	javaSessionReduceOnClose = []string{
		"b@3/3=C@3", "a@0/5=A+B@5", "a@13/22=D+E+_@22", "a@26/26=G@26", "b@40/40=F@40", "b@60/60=J@60",
		"a@61/61=L@61", "d@70/84=N+O+P@84", "c@84/84=Q@84",
	}
	javaSessionAggregateOnClose = []string{
		"b@3/3=C@3", "a@0/5=|AB@5", "a@13/22=||DE_@22", "a@26/26=G@26", "b@40/40=F@40", "b@60/60=J@60",
		"a@61/61=L@61", "d@70/84=|N|OP@84", "c@84/84=Q@84",
	}
)

// nullDash renders a null value, which the functions below get as "", as Java's do.
func nullDash(v string) string {
	if v == "" {
		return "_"
	}
	return v
}

// runSession builds a session aggregation of kind count, reduce or aggregate over
// sessionInput, pipes the input and returns the output lines and the driver.
func runSession(t *testing.T, kind string, onClose bool) ([]string, *kstreamtest.Driver) {
	t.Helper()
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	w := s.GroupByKey().WindowedBySession(kstream.SessionWindowsOf(10 * time.Millisecond).WithGrace(5 * time.Millisecond))
	if onClose {
		w = w.EmitOnWindowClose()
	}
	var out kstream.KStream[serde.Windowed[string], string]
	switch kind {
	case "count":
		// Counts go out as they are: a tombstone stays one.
		kstream.SessionCount(w, "sess").ToStream().To("out", serde.SessionWindowed(serde.String()), serde.Int64())
	case "reduce":
		out = kstream.SessionReduce(w, func(acc, v string) string { return acc + "+" + nullDash(v) }, "sess").ToStream()
	default:
		out = kstream.SessionAggregate(w, func() string { return "" },
			func(_ string, v, acc string) string { return acc + nullDash(v) },
			func(_ string, x, y string) string { return x + "|" + y }, serde.String(), "sess").ToStream()
	}
	if kind != "count" {
		out.To("out", serde.SessionWindowed(serde.String()), serde.String())
	}
	d := driverWith(t, b, kstream.Config{ApplicationID: "sess"})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range sessionInput {
		var k, v []byte
		if r.k != "" {
			k = []byte(r.k)
		}
		if r.v != "-" {
			v = []byte(r.v)
		}
		if err := in.PipeRaw(k, v, time.UnixMilli(r.ms)); err != nil {
			t.Fatal(err)
		}
	}
	if kind == "count" {
		return sessionLines(t, kstreamtest.CreateOutputTopic(d, "out", serde.SessionWindowed(serde.String()), serde.Int64())), d
	}
	return sessionLines(t, kstreamtest.CreateOutputTopic(d, "out", serde.SessionWindowed(serde.String()), serde.String())), d
}

// sessionLines reads the records of out as "key@start/end=value@timestamp" lines, null for
// a tombstone.
func sessionLines[V any](t *testing.T, out *kstreamtest.OutputTopic[serde.Windowed[string], V]) []string {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range recs {
		v := fmt.Sprint(r.Value)
		if r.IsTombstone() {
			v = "null"
		}
		lines = append(lines, fmt.Sprintf("%s@%d/%d=%s@%d", r.Key.Key, r.Key.StartMs(), r.Key.EndMs(), v, r.Timestamp.UnixMilli()))
	}
	return lines
}

func TestSessionAggregationsMatchJava(t *testing.T) {
	for _, c := range []struct {
		kind    string
		onClose bool
		want    []string
	}{
		{"count", false, javaSessionCount},
		{"count", true, javaSessionCountOnClose},
		{"reduce", false, javaSessionReduce},
		{"reduce", true, javaSessionReduceOnClose},
		{"aggregate", false, javaSessionAggregate},
		{"aggregate", true, javaSessionAggregateOnClose},
	} {
		t.Run(fmt.Sprintf("%s/onClose=%v", c.kind, c.onClose), func(t *testing.T) {
			got, d := runSession(t, c.kind, c.onClose)
			if !slices.Equal(got, c.want) {
				t.Errorf("output differs from Kafka Streams'\n got: %s\nwant: %s", strings.Join(got, " "), strings.Join(c.want, " "))
			}
			if n := d.DroppedRecords(); n != 3 {
				t.Errorf("dropped %d records, want 3 (two late, one null key)", n)
			}
		})
	}
}

func TestSessionDefinitionErrors(t *testing.T) {
	for name, def := range map[string]func(kstream.KGroupedStream[string, string]){
		"retention below gap plus grace": func(g kstream.KGroupedStream[string, string]) {
			w := g.WindowedBySession(kstream.SessionWindowsOf(10 * time.Millisecond).WithGrace(5 * time.Millisecond))
			kstream.SessionCount(w, "sess", kstream.WithRetention(14*time.Millisecond))
		},
		"zero session windows": func(g kstream.KGroupedStream[string, string]) {
			kstream.SessionCount(g.WindowedBySession(kstream.SessionWindows{}), "sess")
		},
	} {
		b := kstream.NewBuilder()
		def(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey())
		if d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "sess"}); err == nil {
			d.Close()
			t.Errorf("%s: the topology was accepted", name)
		} else if !strings.Contains(err.Error(), `SessionCount "sess"`) {
			t.Errorf("%s: error %q does not name the operator", name, err)
		}
	}
	// A retention of exactly gap + grace is accepted.
	b := kstream.NewBuilder()
	w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
		WindowedBySession(kstream.SessionWindowsOf(10 * time.Millisecond).WithGrace(5 * time.Millisecond))
	kstream.SessionCount(w, "sess", kstream.WithRetention(15*time.Millisecond))
	driverWith(t, b, kstream.Config{ApplicationID: "sess"})
}

// A session aggregation of a re-keyed stream reads through the repartition topic named
// after its store.
func TestSessionCountAfterGroupBy(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	g := kstream.GroupBy(s, func(k, _ string) string { return strings.ToUpper(k) }, serde.String())
	kstream.SessionCount(g.WindowedBySession(kstream.SessionWindowsOf(10*time.Millisecond)), "sess").
		ToStream().To("out", serde.SessionWindowed(serde.String()), serde.Int64())
	d := driverWith(t, b, kstream.Config{ApplicationID: "sess"})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range []struct {
		k  string
		ms int64
	}{{"a", 0}, {"A", 5}, {"b", 30}} {
		if err := in.PipeAt(r.k, "v", time.UnixMilli(r.ms)); err != nil {
			t.Fatal(err)
		}
	}
	got := sessionLines(t, kstreamtest.CreateOutputTopic(d, "out", serde.SessionWindowed(serde.String()), serde.Int64()))
	want := []string{"A@0/0=1@0", "A@0/0=null@0", "A@0/5=2@5", "B@30/30=1@30"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if n := kstreamtest.CreateOutputTopic(d, "sess-sess-repartition", serde.String(), serde.String()).QueueSize(); n != 3 {
		t.Errorf("the repartition topic has %d records, want 3", n)
	}
}
