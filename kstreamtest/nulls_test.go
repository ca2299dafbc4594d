package kstreamtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Null keys and null values (nil bytes on the wire) through the DSL, checked against what
// Kafka Streams 4.4.0's TopologyTestDriver does with the same topology and input (see
// docs/semantics.md for the rules). Records are piped as raw bytes, so a nil key or value is a
// Kafka null whatever the serdes, and output is read as raw bytes, so a null stays visible.

// nb returns the bytes of s, or nil (a Kafka null) for the string "<null>".
func nb(s string) []byte {
	if s == "<null>" {
		return nil
	}
	return []byte(s)
}

// ns shows bytes as the Java side prints them: "<null>" for nil.
func ns(b []byte) string {
	if b == nil {
		return "<null>"
	}
	return string(b)
}

// readRaw reads every record of topic as "key|value|ms", "<null>" for a nil key or value,
// with timestamps relative to t0.
func readRaw(t *testing.T, d *kstreamtest.Driver, topic string, t0 int64) []string {
	t.Helper()
	recs, err := kstreamtest.CreateOutputTopic(d, topic, serde.Bytes(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s|%s|%d", ns(r.Key), ns(r.Value), r.Timestamp.UnixMilli()-t0)
	}
	return out
}

// pipeNull pipes "key|value" (either may be "<null>") into topic at ts ms.
func pipeNull(t *testing.T, d *kstreamtest.Driver, topic, kv string, ts int64) {
	t.Helper()
	k, v, _ := strings.Cut(kv, "|")
	in := kstreamtest.CreateInputTopic(d, topic, serde.Bytes(), serde.Bytes())
	if err := in.PipeRaw(nb(k), nb(v), time.UnixMilli(ts)); err != nil {
		t.Fatalf("piping %s into %s: %v", kv, topic, err)
	}
}

// A stream record with a null value is not joined with a global table, by the inner nor the
// left join: KStreamKTableJoinProcessor (which both global joins use) drops it.
func TestNullValueGlobalJoin(t *testing.T) {
	b := kstream.NewBuilder()
	g := kstream.GlobalTable(b, "global", serde.String(), serde.String(), "glb")
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	toA := func(string, string) string { return "a" }
	kstream.JoinGlobal(s, g, toA, func(_, v, gv string) string { return v + "/" + gv }).To("out", nil, serde.String())
	kstream.LeftJoinGlobal(s, g, toA, func(_, v, gv string, found bool) string {
		if !found {
			gv = "null"
		}
		return v + "/" + gv
	}).To("out", nil, serde.String())
	d := newDriver(t, b)
	pipeNull(t, d, "global", "a|GA", 0)
	pipeNull(t, d, "in", "k|x", 1)
	pipeNull(t, d, "in", "k|<null>", 2)
	pipeNull(t, d, "in", "<null>|<null>", 3)
	pipeNull(t, d, "in", "<null>|y", 4)
	wantRecords(t, "global joins", readRaw(t, d, "out", 0), []string{"k|x/GA|1", "k|x/GA|1", "<null>|y/GA|4", "<null>|y/GA|4"})
}

// Repartition drops records with a null key before its sink (Kafka Streams' repartition
// filter, when no left join downstream keeps them), and writes the others as they are.
func TestNullKeyRepartition(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).Repartition("rp").To("out", nil, nil)
	d := newDriver(t, b)
	for i, kv := range []string{"a|x", "<null>|y", "b|<null>", "<null>|<null>", "a|z"} {
		pipeNull(t, d, "in", kv, int64(i))
	}
	wantRecords(t, "repartitioned", readRaw(t, d, "out", 0), []string{"a|x|0", "b|<null>|2", "a|z|4"})
}

// A TableReduce adder that returns nil deletes the group's row (KTableReduce stores the null
// it forwards), so the next row added to the group starts afresh.
func TestTableReduceNilAdder(t *testing.T) {
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, "table", serde.String(), serde.String(), "t")
	grouped := kstream.TableGroupBy(tbl, func(_, v string) kstream.KeyValue[string, *string] { return kstream.KV("g", &v) },
		serde.String(), serde.Nullable(serde.String()))
	kstream.TableReduce(grouped, func(acc, v *string) *string {
		if *v == "TB" {
			return nil
		}
		s := *acc + "+" + *v
		return &s
	}, func(acc, v *string) *string {
		s := *acc + "-" + *v
		return &s
	}, "tr").ToStream().To("out", nil, nil)
	d := newDriver(t, b)
	pipeNull(t, d, "table", "a|TA", 0)
	pipeNull(t, d, "table", "b|TB", 1)
	pipeNull(t, d, "table", "c|TC", 2)
	// Java: g|TA, then the adder's null (a delete), then TC alone.
	wantRecords(t, "reduced", readRaw(t, d, "out", 0), []string{"g|TA|0", "g|<null>|1", "g|TC|2"})
}

// Aggregations drop records with a null key, whatever the key serde made of it (a string
// serde reads a null key as ""), and records with a null value.
func TestNullKeyAggregations(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	itoa := func(n int64) string { return fmt.Sprint(n) }
	kstream.TableMapValues(kstream.Count(s.GroupByKey(), "cnt"), itoa).ToStream().To("count", nil, serde.String())
	kstream.Reduce(s.GroupByKey(), func(acc, v string) string { return acc + "+" + v }, "red").ToStream().To("reduce", nil, nil)
	kstream.Aggregate(s.GroupByKey(), func() string { return "" }, func(_, v, acc string) string { return acc + "+" + v },
		serde.String(), "agg").ToStream().To("aggregate", nil, nil)
	// Re-keyed by a processor that keeps each record as it is: grouping repartitions first.
	same := kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			ctx.Forward(r)
			return nil
		})
	}).WithSerdes(serde.String(), serde.String())
	kstream.TableMapValues(kstream.Count(same.GroupByKey(), "cnt2"), itoa).ToStream().To("count2", nil, serde.String())
	d := newDriver(t, b)
	for i, kv := range []string{"a|x", "<null>|y", "b|<null>", "<null>|<null>", "a|z"} {
		pipeNull(t, d, "in", kv, int64(i))
	}
	wantRecords(t, "count", readRaw(t, d, "count", 0), []string{"a|1|0", "a|2|4"})
	wantRecords(t, "reduce", readRaw(t, d, "reduce", 0), []string{"a|x|0", "a|x+z|4"})
	wantRecords(t, "aggregate", readRaw(t, d, "aggregate", 0), []string{"a|+x|0", "a|+x+z|4"})
	wantRecords(t, "count after a repartition", readRaw(t, d, "count2", 0), []string{"a|1|0", "a|2|4"})
}

// Merging a stream with itself gives each record once: Kafka Streams' merge node has the
// stream as its parent once.
func TestMergeSelf(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	s.Merge(s).To("out", nil, nil)
	s.Merge(s.Filter(func(string, string) bool { return true })).To("two", nil, nil)
	d := newDriver(t, b)
	pipeNull(t, d, "in", "a|x", 0)
	pipeNull(t, d, "in", "<null>|<null>", 1)
	wantRecords(t, "merged with itself", readRaw(t, d, "out", 0), []string{"a|x|0", "<null>|<null>|1"})
	wantRecords(t, "merged with a filter of itself", readRaw(t, d, "two", 0), []string{"a|x|0", "a|x|0", "<null>|<null>|1", "<null>|<null>|1"})
}

// Typed records carry a null key or value in and out of the driver: PipeRecord writes a
// record made with AsNullKey or AsTombstone with nil bytes, and ReadRecord marks what it
// reads. An operator that keeps the key (MapValues) keeps a null key; one that computes a
// key (Map) makes a non-null one, here "" written as empty bytes.
func TestTypedNullRecords(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	s.To("out", nil, nil)
	kstream.MapValues(s, func(v string) string { return v + "!" }).To("mapped-values", nil, nil)
	kstream.Map(s, func(k, v string) (string, string) { return k, v }).To("mapped", nil, nil)
	d := newDriver(t, b)
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range []kstream.Record[string, string]{
		{Key: "a", Value: "x"},
		kstream.Record[string, string]{Value: "y"}.AsNullKey(),
		kstream.Record[string, string]{Key: "b"}.AsTombstone(),
		kstream.Record[string, string]{}.AsNullKey().AsTombstone(),
		{Key: "", Value: ""}, // empty, not null
	} {
		if err := in.PipeRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	show := func(topic string) []string {
		recs, err := kstreamtest.CreateOutputTopic(d, topic, serde.String(), serde.String()).ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			k, v := r.Key, r.Value
			if r.HasNullKey() {
				k = "<null>"
			}
			if r.IsTombstone() {
				v = "<null>"
			}
			out = append(out, k+"|"+v)
		}
		return out
	}
	wantRecords(t, "as piped", show("out"), []string{"a|x", "<null>|y", "b|<null>", "<null>|<null>", "|"})
	wantRecords(t, "MapValues", show("mapped-values"), []string{"a|x!", "<null>|y!", "b|!", "<null>|!", "|!"})
	wantRecords(t, "Map", show("mapped"), []string{"a|x", "|y", "b|", "|", "|"})
	raw, err := kstreamtest.CreateOutputTopic(d, "mapped", serde.Bytes(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if raw[1].Key == nil || len(raw[1].Key) != 0 {
		t.Errorf("Map's key for a null-key record is written as %q, want empty bytes (a non-null \"\")", raw[1].Key)
	}
}

// nullsInput is the input of every scenario of TestNullsAsKafkaStreams, in order: topic,
// then "key|value" with "<null>" for a Kafka null. A scenario gets the records of the
// topics it reads, one second apart.
var nullsInput = [][2]string{
	{"table", "a|TA"},
	{"table", "<null>|TN"},
	{"table", "b|TB"},
	{"table", "b|<null>"},
	{"table", "c|<null>"},
	{"global", "a|GA"},
	{"global", "<null>|GN"},
	{"global", "x|GX"},
	{"in", "a|x"},
	{"in", "<null>|y"},
	{"in", "b|<null>"},
	{"in", "<null>|<null>"},
	{"in", "a|z"},
}

// The Go side of the scenarios. A Java function that gets a null key or value sees the
// zero value here ("" for a string); the input has no empty keys or values, so "" stands for
// null in these functions, and a Java function that returns null returns nil here.
func nullsScenarios() map[string]func(b *kstream.Builder) {
	in := func(b *kstream.Builder) kstream.KStream[string, string] {
		return kstream.Stream(b, "in", serde.String(), serde.String())
	}
	table := func(b *kstream.Builder) kstream.KTable[string, string] {
		return kstream.Table(b, "table", serde.String(), serde.String(), "tbl")
	}
	str := serde.String()
	ptr := serde.Nullable(serde.String())
	// or returns s, or "null" for "" (Java's string concatenation of a null).
	or := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	// orNil returns &s, or nil for "".
	orNil := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	// rekey is Java's selectKey((k, v) -> k): it keeps every record as it is (a null key
	// too) and marks the stream as re-keyed, so that key-dependent operators repartition.
	rekey := func(s kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.Process(s, func() kstream.Processor[string, string, string, string] {
			return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
				ctx.Forward(r)
				return nil
			})
		}).WithSerdes(str, str)
	}
	itoa := func(n int64) string { return fmt.Sprint(n) }
	join := func(_, v, t string) string { return v + "/" + t }
	leftJoin := func(_, v, t string, found bool) string {
		if !found {
			t = "null"
		}
		return v + "/" + t
	}
	global := func(b *kstream.Builder) kstream.GlobalKTable[*string, string] {
		return kstream.GlobalTable(b, "global", ptr, str, "glb")
	}
	globalByKey := func(k, _ string) *string { return orNil(k) }
	toA := func(string, string) string { return "a" }
	nullAdder := func(acc, v *string) *string {
		if *v == "TB" {
			return nil
		}
		s := *acc + "+" + *v
		return &s
	}
	subtract := func(acc, v *string) *string {
		s := *acc + "-" + *v
		return &s
	}
	toG := func(_, v string) kstream.KeyValue[string, *string] { return kstream.KV("g", &v) }
	tableReduce := func(b *kstream.Builder) {
		kstream.TableReduce(kstream.TableGroupBy(table(b), toG, str, ptr), nullAdder, subtract, "tr").ToStream().To("out", nil, nil)
	}
	tableAggregate := func(b *kstream.Builder) {
		kstream.TableAggregate(kstream.TableGroupBy(table(b), toG, str, ptr),
			func() *string { return new(string) },
			func(_ string, v, acc *string) *string { return nullAdder(acc, v) },
			func(_ string, v, acc *string) *string { return subtract(acc, v) },
			ptr, "tr").ToStream().To("out", nil, nil)
	}
	return map[string]func(b *kstream.Builder){
		"stateless": func(b *kstream.Builder) {
			s := in(b)
			s.Filter(func(string, string) bool { return true }).Peek(func(string, string) {}).To("out", nil, nil)
			kstream.MapValues(s, func(v string) string { return "mv-" + or(v) }).To("out", nil, nil)
			kstream.SelectKey(s, func(k, _ string) string { return "sk-" + or(k) }).To("out", nil, nil)
			kstream.FlatMapValues(s, func(v string) []string { return []string{"fmv-" + or(v)} }).To("out", nil, nil)
			for _, br := range s.Split().Branch("all", func(string, string) bool { return true }).NoDefaultBranch() {
				br.To("out", nil, nil)
			}
		},
		"merge-self": func(b *kstream.Builder) { s := in(b); s.Merge(s).To("out", nil, nil) },
		"merge-two": func(b *kstream.Builder) {
			s := in(b)
			s.Merge(s.Filter(func(string, string) bool { return true })).To("out", nil, nil)
		},
		"repartition": func(b *kstream.Builder) { in(b).Repartition("rp").To("out", nil, nil) },
		"selectkey-null-repartition": func(b *kstream.Builder) {
			kstream.SelectKey(in(b), func(k, v string) *string {
				if v == "" {
					return nil
				}
				return orNil(k)
			}).WithSerdes(ptr, str).Repartition("rp").To("out", nil, nil)
		},
		"count": func(b *kstream.Builder) {
			kstream.TableMapValues(kstream.Count(in(b).GroupByKey(), "cnt"), itoa).ToStream().To("out", nil, str)
		},
		"reduce": func(b *kstream.Builder) {
			kstream.Reduce(in(b).GroupByKey(), func(acc, v string) string { return acc + "+" + v }, "red").ToStream().To("out", nil, nil)
		},
		"aggregate": func(b *kstream.Builder) {
			kstream.Aggregate(in(b).GroupByKey(), func() string { return "" }, func(_, v, acc string) string { return acc + "+" + v },
				str, "agg").ToStream().To("out", nil, nil)
		},
		"groupby-count": func(b *kstream.Builder) {
			g := kstream.GroupBy(in(b), func(k, _ string) *string { return orNil(k) }, ptr)
			kstream.TableMapValues(kstream.Count(g, "cnt"), itoa).ToStream().To("out", nil, str)
		},
		"groupby-value-count": func(b *kstream.Builder) {
			g := kstream.GroupBy(in(b), func(_, v string) *string { return orNil(v) }, ptr)
			kstream.TableMapValues(kstream.Count(g, "cnt"), itoa).ToStream().To("out", nil, str)
		},
		"join":               func(b *kstream.Builder) { kstream.Join(in(b), table(b), join).To("out", nil, str) },
		"leftjoin":           func(b *kstream.Builder) { kstream.LeftJoin(in(b), table(b), leftJoin).To("out", nil, str) },
		"selectkey-leftjoin": func(b *kstream.Builder) { kstream.LeftJoin(rekey(in(b)), table(b), leftJoin).To("out", nil, str) },
		"repartition-leftjoin-sibling": func(b *kstream.Builder) {
			r := in(b).Repartition("rp")
			r.To("out", nil, nil)
			kstream.LeftJoin(r, table(b), leftJoin).To("out", nil, str)
		},
		"repartition-rekey-leftjoin": func(b *kstream.Builder) {
			kstream.LeftJoin(rekey(in(b).Repartition("rp")), table(b), leftJoin).To("out", nil, str)
		},
		"rekey-count-and-leftjoin": func(b *kstream.Builder) {
			s := rekey(in(b))
			kstream.TableMapValues(kstream.Count(s.GroupByKey(), "cnt"), itoa).ToStream().To("out", nil, str)
			kstream.LeftJoin(s, table(b), leftJoin).To("out", nil, str)
		},
		"global-join-key": func(b *kstream.Builder) {
			kstream.JoinGlobal(in(b), global(b), globalByKey, join).To("out", nil, str)
		},
		"global-leftjoin-key": func(b *kstream.Builder) {
			kstream.LeftJoinGlobal(in(b), global(b), globalByKey, leftJoin).To("out", nil, str)
		},
		"global-join-const": func(b *kstream.Builder) {
			g := kstream.GlobalTable(b, "global", str, str, "glb")
			kstream.JoinGlobal(in(b), g, toA, join).To("out", nil, str)
		},
		"global-leftjoin-const": func(b *kstream.Builder) {
			g := kstream.GlobalTable(b, "global", str, str, "glb")
			kstream.LeftJoinGlobal(in(b), g, toA, leftJoin).To("out", nil, str)
		},
		"totable":                    func(b *kstream.Builder) { in(b).ToTable("tt").ToStream().To("out", nil, nil) },
		"selectkey-totable":          func(b *kstream.Builder) { rekey(in(b)).ToTable("tt").ToStream().To("out", nil, nil) },
		"table-source":               func(b *kstream.Builder) { table(b).ToStream().To("out", nil, nil) },
		"table-reduce-null-adder":    tableReduce,
		"table-aggregate-null-adder": tableAggregate,
		"table-reduce-seq":           tableReduce,
		"table-aggregate-seq":        tableAggregate,
	}
}

// nullsSeqInput is the input of the -seq scenarios: the adder's null for TB deletes the
// group, and TC starts it again.
var nullsSeqInput = [][2]string{{"table", "a|TA"}, {"table", "b|TB"}, {"table", "c|TC"}}

// runNullsScenario runs build over input and prints, as the Java side does, each input
// record with the output it caused ("<null>" for a Kafka null, timestamps in ms from the
// first record), then the dropped-records count.
func runNullsScenario(t *testing.T, build func(b *kstream.Builder), input [][2]string) string {
	t.Helper()
	b := kstream.NewBuilder()
	build(b)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	desc := topo.Describe()
	d := newDriverNoCache(t, b) // the Java side's caching is disabled
	out := kstreamtest.CreateOutputTopic(d, "out", serde.Bytes(), serde.Bytes())
	const t0 = 1_700_000_000_000
	ts := int64(t0)
	var sb strings.Builder
	sb.WriteString("\n")
	for _, r := range input {
		if !strings.Contains(desc, "["+r[0]+"]") {
			continue
		}
		pipeNull(t, d, r[0], r[1], ts)
		ts += 1000
		recs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		lines := make([]string, len(recs))
		for i, o := range recs {
			lines[i] = fmt.Sprintf("%s|%s|%d", ns(o.Key), ns(o.Value), o.Timestamp.UnixMilli()-t0)
		}
		fmt.Fprintf(&sb, "  %s %s -> [%s]\n", r[0], r[1], strings.Join(lines, ", "))
	}
	fmt.Fprintf(&sb, "  dropped-records-total=%d.0\n", d.DroppedRecords())
	return sb.String()
}

// Every scenario gives, input record by input record, the output and the dropped-records
// count that Kafka Streams 4.4.0's TopologyTestDriver gives for the same topology (the
// golden text below is its output, printed in the same format by testdata/nulls/Main.java,
// which builds each scenario with the Java DSL and topology.optimization=all, as kstream
// shares repartition topics the way Java's optimizer merges them; run it with the classpath
// of testing/conformance after testing/conformance/run.sh has built it).
func TestNullsAsKafkaStreams(t *testing.T) {
	scenarios := nullsScenarios()
	for name, want := range nullsGolden {
		t.Run(name, func(t *testing.T) {
			build, ok := scenarios[name]
			if !ok {
				t.Fatalf("no Go side for scenario %s", name)
			}
			input := nullsInput
			if strings.HasSuffix(name, "-seq") {
				input = nullsSeqInput
			}
			if got := runNullsScenario(t, build, input); got != want {
				t.Errorf("scenario %s:\ngot:%s\nwant (Kafka Streams):%s", name, got, want)
			}
		})
	}
	if len(scenarios) != len(nullsGolden) {
		t.Errorf("%d Go scenarios, %d golden outputs", len(scenarios), len(nullsGolden))
	}
}

// nullsGolden is the output of Kafka Streams 4.4.0's TopologyTestDriver for each scenario.
var nullsGolden = map[string]string{
	"stateless": `
  in a|x -> [a|x|0, a|mv-x|0, sk-a|x|0, a|fmv-x|0, a|x|0]
  in <null>|y -> [<null>|y|1000, <null>|mv-y|1000, sk-null|y|1000, <null>|fmv-y|1000, <null>|y|1000]
  in b|<null> -> [b|<null>|2000, b|mv-null|2000, sk-b|<null>|2000, b|fmv-null|2000, b|<null>|2000]
  in <null>|<null> -> [<null>|<null>|3000, <null>|mv-null|3000, sk-null|<null>|3000, <null>|fmv-null|3000, <null>|<null>|3000]
  in a|z -> [a|z|4000, a|mv-z|4000, sk-a|z|4000, a|fmv-z|4000, a|z|4000]
  dropped-records-total=0.0
`,
	"merge-self": `
  in a|x -> [a|x|0]
  in <null>|y -> [<null>|y|1000]
  in b|<null> -> [b|<null>|2000]
  in <null>|<null> -> [<null>|<null>|3000]
  in a|z -> [a|z|4000]
  dropped-records-total=0.0
`,
	"merge-two": `
  in a|x -> [a|x|0, a|x|0]
  in <null>|y -> [<null>|y|1000, <null>|y|1000]
  in b|<null> -> [b|<null>|2000, b|<null>|2000]
  in <null>|<null> -> [<null>|<null>|3000, <null>|<null>|3000]
  in a|z -> [a|z|4000, a|z|4000]
  dropped-records-total=0.0
`,
	"repartition": `
  in a|x -> [a|x|0]
  in <null>|y -> []
  in b|<null> -> [b|<null>|2000]
  in <null>|<null> -> []
  in a|z -> [a|z|4000]
  dropped-records-total=0.0
`,
	"selectkey-null-repartition": `
  in a|x -> [a|x|0]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z|4000]
  dropped-records-total=0.0
`,
	"count": `
  in a|x -> [a|1|0]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|2|4000]
  dropped-records-total=3.0
`,
	"reduce": `
  in a|x -> [a|x|0]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|x+z|4000]
  dropped-records-total=3.0
`,
	"aggregate": `
  in a|x -> [a|+x|0]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|+x+z|4000]
  dropped-records-total=3.0
`,
	"groupby-count": `
  in a|x -> [a|1|0]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|2|4000]
  dropped-records-total=1.0
`,
	"groupby-value-count": `
  in a|x -> [x|1|0]
  in <null>|y -> [y|1|1000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [z|1|4000]
  dropped-records-total=0.0
`,
	"join": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|x/TA|5000]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/TA|9000]
  dropped-records-total=4.0
`,
	"leftjoin": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|x/TA|5000]
  in <null>|y -> [<null>|y/null|6000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/TA|9000]
  dropped-records-total=3.0
`,
	"selectkey-leftjoin": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|x/TA|5000]
  in <null>|y -> [<null>|y/null|6000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/TA|9000]
  dropped-records-total=3.0
`,
	"global-join-key": `
  global a|GA -> []
  global <null>|GN -> []
  global x|GX -> []
  in a|x -> [a|x/GA|3000]
  in <null>|y -> []
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/GA|7000]
  dropped-records-total=4.0
`,
	"global-leftjoin-key": `
  global a|GA -> []
  global <null>|GN -> []
  global x|GX -> []
  in a|x -> [a|x/GA|3000]
  in <null>|y -> [<null>|y/null|4000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/GA|7000]
  dropped-records-total=3.0
`,
	"global-join-const": `
  global a|GA -> []
  global <null>|GN -> []
  global x|GX -> []
  in a|x -> [a|x/GA|3000]
  in <null>|y -> [<null>|y/GA|4000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/GA|7000]
  dropped-records-total=3.0
`,
	"global-leftjoin-const": `
  global a|GA -> []
  global <null>|GN -> []
  global x|GX -> []
  in a|x -> [a|x/GA|3000]
  in <null>|y -> [<null>|y/GA|4000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/GA|7000]
  dropped-records-total=3.0
`,
	"totable": `
  in a|x -> [a|x|0]
  in <null>|y -> []
  in b|<null> -> [b|<null>|2000]
  in <null>|<null> -> []
  in a|z -> [a|z|4000]
  dropped-records-total=2.0
`,
	"selectkey-totable": `
  in a|x -> [a|x|0]
  in <null>|y -> []
  in b|<null> -> [b|<null>|2000]
  in <null>|<null> -> []
  in a|z -> [a|z|4000]
  dropped-records-total=0.0
`,
	"table-source": `
  table a|TA -> [a|TA|0]
  table <null>|TN -> []
  table b|TB -> [b|TB|2000]
  table b|<null> -> [b|<null>|3000]
  table c|<null> -> [c|<null>|4000]
  dropped-records-total=1.0
`,
	"table-reduce-null-adder": `
  table a|TA -> [g|TA|0]
  table <null>|TN -> []
  table b|TB -> [g|<null>|2000]
  table b|<null> -> [g|<null>|3000]
  table c|<null> -> []
  dropped-records-total=1.0
`,
	"table-aggregate-null-adder": `
  table a|TA -> [g|+TA|0]
  table <null>|TN -> []
  table b|TB -> [g|<null>|2000]
  table b|<null> -> [g|<null>|3000]
  table c|<null> -> []
  dropped-records-total=1.0
`,
	"table-reduce-seq": `
  table a|TA -> [g|TA|0]
  table b|TB -> [g|<null>|1000]
  table c|TC -> [g|TC|2000]
  dropped-records-total=0.0
`,
	"table-aggregate-seq": `
  table a|TA -> [g|+TA|0]
  table b|TB -> [g|<null>|1000]
  table c|TC -> [g|+TC|2000]
  dropped-records-total=0.0
`,
	"repartition-leftjoin-sibling": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|x|5000, a|x/TA|5000]
  in <null>|y -> [<null>|y|6000, <null>|y/null|6000]
  in b|<null> -> [b|<null>|7000]
  in <null>|<null> -> [<null>|<null>|8000]
  in a|z -> [a|z|9000, a|z/TA|9000]
  dropped-records-total=3.0
`,
	"repartition-rekey-leftjoin": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|x/TA|5000]
  in <null>|y -> [<null>|y/null|6000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|z/TA|9000]
  dropped-records-total=3.0
`,
	"rekey-count-and-leftjoin": `
  table a|TA -> []
  table <null>|TN -> []
  table b|TB -> []
  table b|<null> -> []
  table c|<null> -> []
  in a|x -> [a|1|5000, a|x/TA|5000]
  in <null>|y -> [<null>|y/null|6000]
  in b|<null> -> []
  in <null>|<null> -> []
  in a|z -> [a|2|9000, a|z/TA|9000]
  dropped-records-total=6.0
`,
}
