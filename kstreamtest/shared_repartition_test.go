package kstreamtest_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// sharedRepartition is a stream re-keyed once, then joined with a table (inner and left) and
// counted. In Java (Kafka Streams 4.4) it is, in the conformance program's terms:
//
//	KTable<String, String> t = right(b);
//	KStream<String, String> s = b.stream("left", Consumed.with(STRING, STRING))
//	        .selectKey((k, v) -> "k" + (v == null ? 0 : v.length() % 5));
//	s.join(t, (v, vt) -> v + "|" + vt).to("out");
//	s.leftJoin(t, (v, vt) -> v + "|" + orDash(vt)).to("out");
//	s.groupByKey().count(Materialized.as("letter-counts")).toStream().mapValues(n -> "count " + n).to("out");
//
// Java's output through its TopologyTestDriver, with the input of the table scenarios, is
// testdata/shared-repartition.txt (the same with and without topology.optimization=all).
func sharedRepartition(b *kstream.Builder) {
	t := confRight(b)
	s := kstream.SelectKey(kstream.Stream(b, "left", serde.String(), serde.String()), func(_, v string) string {
		return "k" + strconv.Itoa(len(v)%5) // a null value is "" here
	}).WithSerdes(serde.String(), nil)
	kstream.Join(s, t, func(_, v, vt string) string { return v + "|" + vt }).To("out", serde.String(), serde.String())
	kstream.LeftJoin(s, t, func(_, v, vt string, ok bool) string { return v + "|" + confOrDash(vt, ok) }).To("out", serde.String(), serde.String())
	counts := kstream.Count(s.GroupByKey(), "letter-counts")
	kstream.MapValues(counts.ToStream(), func(n int64) string { return "count " + strconv.FormatInt(n, 10) }).To("out", serde.String(), serde.String())
}

// Two joins and a count of one re-keyed stream build, share one repartition topic (each
// input record is written to it once), and give Java's output record for record.
func TestSharedRepartition(t *testing.T) {
	const topic = "KSTREAM-KEY-SELECT-0000000003-repartition" // Java's name for it
	b := kstream.NewBuilder()
	sharedRepartition(b)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var repartitions []string
	for _, line := range strings.Split(topo.Describe(), "\n") {
		if i := strings.Index(line, "(topic: "); i >= 0 && strings.HasSuffix(line, "-repartition)") {
			repartitions = append(repartitions, strings.TrimSuffix(line[i+len("(topic: "):], ")"))
		}
	}
	if !slices.Equal(repartitions, []string{topic}) {
		t.Fatalf("repartition topics %q, want one, %s:\n%s", repartitions, topic, topo.Describe())
	}

	wantJava(t, confRunTables(t, []string{"left", "right"}, sharedRepartition), "testdata/shared-repartition.txt")

	// Each record of "left" went through the topic once.
	d, err := kstreamtest.New(func() *kstream.Builder { b := kstream.NewBuilder(); sharedRepartition(b); return b }(), kstream.Config{ApplicationID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "left", serde.String(), serde.String())
	left := 0
	for _, r := range confTableInput() {
		if r.topic != "left" {
			continue
		}
		left++
		var v []byte
		if r.value != nil {
			v = []byte(*r.value)
		}
		if err := in.PipeRaw([]byte(r.key), v, r.ts, r.headers...); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "shared-"+topic, serde.String(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != left {
		t.Errorf("%d records in the repartition topic for %d input records", len(recs), left)
	}
}

// The path between the key-changing operator and the aggregation moves below the shared
// repartition, as Java's optimizer moves it: the sink under the filter reads the
// repartitioned stream (its records come after the direct sink's), the sink under SelectKey
// does not. Java (topology.optimization=all; without it the order differs):
//
//	KStream<String, String> k = b.stream("left", Consumed.with(STRING, STRING)).selectKey((x, v) -> letter(v));
//	KStream<String, String> f = k.filter((x, v) -> v == null || !v.startsWith("o"));
//	f.groupByKey().count(Materialized.as("filtered-counts")).toStream().mapValues(n -> "count " + n).to("out");
//	f.to("out");
//	k.to("out");
func TestSharedRepartitionMovesThePath(t *testing.T) {
	got := confRunTables(t, []string{"left"}, func(b *kstream.Builder) {
		k := kstream.SelectKey(kstream.Stream(b, "left", serde.String(), serde.String()), func(_, v string) string { return confLetter(v) }).
			WithSerdes(serde.String(), nil)
		f := k.Filter(func(_, v string) bool { return !strings.HasPrefix(v, "o") })
		counts := kstream.Count(f.GroupByKey(), "filtered-counts")
		kstream.MapValues(counts.ToStream(), func(n int64) string { return "count " + strconv.FormatInt(n, 10) }).To("out", serde.String(), serde.String())
		f.To("out", nil, nil)
		k.To("out", nil, nil)
	})
	wantJava(t, got, "testdata/shared-repartition-moved.txt")
}

// Two re-keyed streams merged and counted: the shared repartition follows the merge. Java:
//
//	KStream<String, String> a = b.stream("left", Consumed.with(STRING, STRING)).selectKey((k, v) -> letter(v));
//	KStream<String, String> c = b.stream("right", Consumed.with(STRING, STRING)).selectKey((k, v) -> letter(v));
//	a.merge(c).groupByKey().count(Materialized.as("merged-counts")).toStream().mapValues(n -> "count " + n).to("out");
func TestSharedRepartitionAfterMerge(t *testing.T) {
	got := confRunTables(t, []string{"left", "right"}, func(b *kstream.Builder) {
		letter := func(_, v string) string { return confLetter(v) }
		a := kstream.SelectKey(kstream.Stream(b, "left", serde.String(), serde.String()), letter).WithSerdes(serde.String(), nil)
		c := kstream.SelectKey(kstream.Stream(b, "right", serde.String(), serde.String()), letter).WithSerdes(serde.String(), nil)
		counts := kstream.Count(a.Merge(c).GroupByKey(), "merged-counts")
		kstream.MapValues(counts.ToStream(), func(n int64) string { return "count " + strconv.FormatInt(n, 10) }).To("out", serde.String(), serde.String())
	})
	wantJava(t, got, "testdata/shared-repartition-merge.txt")
}

// wantJava compares output lines with Java's in golden file path.
func wantJava(t *testing.T, got []string, path string) {
	t.Helper()
	want := confGolden(t, path)
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("output differs from Java's (%d records, want %d)", len(got), len(want))
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("record %d: got %q, want %q", i, g, w)
		}
	}
}

// The filter before a repartition sink drops records with a null key, unless a left join
// (which takes null keys, KIP-962) is downstream of the topic. Kafka Streams 4.4:
//
//	KTable<String, String> t = b.table("right", ..., Materialized.as("right-store"));
//	KStream<String, String> s = b.stream("left", ...);
//	s.repartition(Repartitioned.as("plain")).to("out");
//	s.repartition(Repartitioned.as("joined")).leftJoin(t, (v, vt) -> v + "|" + vt).to("out2");
//
// with (null, "nokey") then ("k", "withkey") gives out [k=withkey] and out2
// [null=nokey|null, k=withkey|null].
func TestRepartitionFilterNullKeys(t *testing.T) {
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
	s := kstream.Stream(b, "left", serde.String(), serde.String())
	s.Repartition("plain").To("out", nil, nil)
	kstream.LeftJoin(s.Repartition("joined"), tbl, func(_, v, vt string, ok bool) string {
		if !ok {
			vt = "null"
		}
		return v + "|" + vt
	}).To("out2", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "nk"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "left", serde.String(), serde.String())
	if err := in.PipeRaw(nil, []byte("nokey"), time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	if err := in.PipeRaw([]byte("k"), []byte("withkey"), time.UnixMilli(2)); err != nil {
		t.Fatal(err)
	}
	values := func(topic string) []string {
		recs, err := kstreamtest.CreateOutputTopic(d, topic, serde.String(), serde.String()).ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, r := range recs {
			vs = append(vs, r.Value)
		}
		return vs
	}
	if got, want := values("out"), []string{"withkey"}; !slices.Equal(got, want) {
		t.Errorf("out: %q, want %q (the null key dropped before the repartition sink)", got, want)
	}
	if got, want := values("out2"), []string{"nokey|null", "withkey|null"}; !slices.Equal(got, want) {
		t.Errorf("out2: %q, want %q (a left join downstream keeps null keys)", got, want)
	}
}
