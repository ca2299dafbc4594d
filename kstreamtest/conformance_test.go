package kstreamtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The scenarios of the conformance test, mirrored one for one in
// testing/conformance/src/main/java/conformance/Main.java, whose output through Java's
// TopologyTestDriver is in testdata/conformance/<name>.txt (see the README there).
var confScenarios = []struct {
	name  string
	build func(s kstream.KStream[string, string])
}{
	{"stateless", func(s kstream.KStream[string, string]) { confStateless(s, "out", false) }},
	{"repartition", func(s kstream.KStream[string, string]) { confStateless(s, "out", true) }},
	{"siblings", func(s kstream.KStream[string, string]) {
		s.Filter(func(string, string) bool { return false }).To("out", nil, nil)
		s.Split().Branch("never", func(string, string) bool { return false }).NoDefaultBranch()["never"].To("out", nil, nil)
		kstream.MapValues(s, strings.ToUpper).To("out", serde.String(), serde.String())
	}},
	{"flatmap-selectkey", func(s kstream.KStream[string, string]) {
		fm := kstream.FlatMap(s, func(k, v string) []kstream.KeyValue[string, string] {
			if v == "" {
				return nil
			}
			return []kstream.KeyValue[string, string]{kstream.KV(v[:1], k), kstream.KV(k, v)}
		})
		kstream.SelectKey(fm, func(k, _ string) string { return k + "!" }).To("out", serde.String(), serde.String())
	}},
}

// The table scenarios, mirrored in Main.java's table scenarios: they read topics "left" and
// "right" (those listed in inputs) with confTableInput, and write "out". Every table has a
// store, as Java's Materialized.as gives one.
var confTableScenarios = []struct {
	name   string
	inputs []string
	build  func(b *kstream.Builder)
}{
	{"table-filter-mapvalues", []string{"left"}, func(b *kstream.Builder) {
		t := confLeft(b)
		kstream.TableMapValues(t.Filter(func(_, v string) bool { return len(v) > 4 }), strings.ToUpper).ToStream().To("out", nil, nil)
		kstream.TableMapValuesWithKey(t.FilterNot(func(_, v string) bool { return strings.HasPrefix(v, "s") }), func(k, v string) string { return k + ":" + v }).
			Filter(func(_, v string) bool { return !strings.HasSuffix(v, ":") }).
			ToStream().To("out", nil, nil)
	}},
	{"table-groupby-count", []string{"left"}, func(b *kstream.Builder) {
		g := kstream.TableGroupBy(confLeft(b), func(_, v string) kstream.KeyValue[string, string] { return kstream.KV(confLetter(v), v) }, nil, nil)
		kstream.TableMapValues(kstream.TableCount(g, "letters"), func(n int64) string { return strconv.FormatInt(n, 10) }).
			ToStream().To("out", serde.String(), serde.String())
	}},
	{"table-groupby-aggregate", []string{"left"}, func(b *kstream.Builder) {
		g := kstream.TableGroupBy(confLeft(b), func(k, v string) kstream.KeyValue[string, string] { return kstream.KV("len"+strconv.Itoa(len(v)), k) }, nil, nil)
		kstream.TableAggregate(g, func() string { return "" },
			func(_, k, agg string) string { return agg + "+" + k },
			func(_, k, agg string) string { return agg + "-" + k },
			serde.String(), "by-length").ToStream().To("out", nil, nil)
	}},
	{"table-groupby-reduce", []string{"left"}, func(b *kstream.Builder) {
		g := kstream.TableGroupBy(confLeft(b), func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(confLetter(v), k+"="+v) }, nil, nil)
		kstream.TableReduce(g, func(agg, v string) string { return agg + "+" + v }, func(agg, v string) string { return agg + "-" + v }, "reduced").
			ToStream().To("out", nil, nil)
	}},
	{"table-join-inner", []string{"left", "right"}, func(b *kstream.Builder) {
		kstream.TableJoin(confLeft(b), confRight(b), func(_, a, c string) string { return a + "/" + c }).ToStream().To("out", serde.String(), serde.String())
	}},
	{"table-join-left", []string{"left", "right"}, func(b *kstream.Builder) {
		kstream.TableLeftJoin(confLeft(b), confRight(b), func(_, a, c string, ok bool) string { return a + "/" + confOrDash(c, ok) }).
			ToStream().To("out", serde.String(), serde.String())
	}},
	{"table-join-outer", []string{"left", "right"}, func(b *kstream.Builder) {
		kstream.TableOuterJoin(confLeft(b), confRight(b), func(_, a string, aok bool, c string, cok bool) string {
			return confOrDash(a, aok) + "/" + confOrDash(c, cok)
		}).ToStream().To("out", serde.String(), serde.String())
	}},
	{"table-join-derived", []string{"left", "right"}, func(b *kstream.Builder) {
		l, r := confLeft(b), confRight(b)
		lf := l.Filter(func(_, v string) bool { return len(v) > 2 })
		rm := kstream.TableMapValues(r, strings.ToUpper)
		j1 := kstream.TableLeftJoin(lf, rm, func(_, a, c string, ok bool) string { return a + "/" + confOrDash(c, ok) },
			kstream.Materialized("j1", serde.String()))
		j1.ToStream().To("out", nil, nil)
		rf := r.Filter(func(_, v string) bool { return v != "" }, kstream.Materialized[string]("right-filtered", nil))
		kstream.TableOuterJoin(j1, kstream.TableMapValuesWithKey(rf, func(k, v string) string { return k + strconv.Itoa(len(v)) }),
			func(_, a string, aok bool, c string, cok bool) string {
				return confOrDash(a, aok) + "&" + confOrDash(c, cok)
			}).
			Filter(func(_, v string) bool { return !strings.HasPrefix(v, "-") }).
			ToStream().To("out", serde.String(), serde.String())
	}},
	{"stream-totable", []string{"left"}, func(b *kstream.Builder) {
		s := kstream.Stream(b, "left", serde.String(), serde.String())
		kstream.SelectKey(s, func(_, v string) string { return confLetter(v) }).ToTable("by-letter").ToStream().To("out", nil, nil)
	}},
	{"stream-totable-join", []string{"left", "right"}, func(b *kstream.Builder) {
		t := kstream.Stream(b, "left", serde.String(), serde.String()).ToTable("as-table")
		kstream.TableJoin(t, confRight(b), func(_, a, c string) string { return a + "*" + c }).ToStream().To("out", serde.String(), serde.String())
	}},
	{"stream-table-join-derived", []string{"left", "right"}, func(b *kstream.Builder) {
		s := kstream.Stream(b, "left", serde.String(), serde.String())
		rt := confRight(b).Filter(func(_, v string) bool { return v != "" })
		kstream.Join(s, rt, func(_, a, c string) string { return a + "|" + c }).To("out", serde.String(), serde.String())
		kstream.LeftJoin(s, rt, func(_, a, c string, ok bool) string { return a + "|" + confOrDash(c, ok) }).To("out", serde.String(), serde.String())
	}},
	{"stream-count-filter", []string{"left"}, func(b *kstream.Builder) {
		counts := kstream.Count(kstream.Stream(b, "left", serde.String(), serde.String()).GroupByKey(), "counts")
		kstream.TableMapValues(counts, func(n int64) string { return "count " + strconv.FormatInt(n, 10) }).ToStream().To("out", serde.String(), serde.String())
		kstream.TableMapValues(counts.Filter(func(_ string, n int64) bool { return n%2 == 0 }), func(n int64) string { return "even " + strconv.FormatInt(n, 10) }).
			ToStream().To("out", serde.String(), serde.String())
	}},
	{"stream-groupby-reduce", []string{"left"}, func(b *kstream.Builder) {
		s := kstream.Stream(b, "left", serde.String(), serde.String())
		g := kstream.GroupBy(s, func(_, v string) string { return confLetter(v) }, serde.String())
		kstream.Reduce(g, func(agg, v string) string { return agg + "+" + v }, "reduced-stream").ToStream().To("out", nil, nil)
	}},
}

func confLeft(b *kstream.Builder) kstream.KTable[string, string] {
	return kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
}

func confRight(b *kstream.Builder) kstream.KTable[string, string] {
	return kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
}

// confLetter is the first letter of v, or "_" for an empty value (or a tombstone, whose
// value is "" here and null in Java).
func confLetter(v string) string {
	if v == "" {
		return "_"
	}
	return v[:1]
}

func confOrDash(v string, ok bool) string {
	if !ok {
		return "-"
	}
	return v
}

// confTableRecord is one input record of the table scenarios; a nil value is a Kafka null.
type confTableRecord struct {
	topic, key string
	value      *string
	ts         time.Time
	headers    []kstream.Header
}

// confTableInput is the input of every table scenario (see Main.tableInput).
func confTableInput() []confTableRecord {
	words := []string{"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"}
	recs := make([]confTableRecord, 0, 60)
	for i := range 60 {
		r := confTableRecord{topic: "left", key: "k" + strconv.Itoa(i*7%5), ts: time.UnixMilli(1_700_000_000_000 + int64(i*13%40)*1000)}
		if i%3 == 2 {
			r.topic = "right"
		}
		if i%7 != 5 {
			r.value = &words[i%len(words)]
		}
		if i%4 == 0 {
			r.headers = []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}
		}
		recs = append(recs, r)
	}
	return recs
}

// confRunTables runs one table scenario through the driver.
func confRunTables(t *testing.T, inputs []string, build func(b *kstream.Builder)) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(b)
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ins := map[string]*kstreamtest.InputTopic[string, string]{}
	for _, topic := range inputs {
		ins[topic] = kstreamtest.CreateInputTopic(d, topic, serde.String(), serde.String())
	}
	for _, r := range confTableInput() {
		in, ok := ins[r.topic]
		if !ok {
			continue
		}
		var v []byte
		if r.value != nil {
			v = []byte(*r.value)
		}
		if err := in.PipeRaw([]byte(r.key), v, r.ts, r.headers...); err != nil {
			t.Fatal(err)
		}
	}
	lines := confReadOut(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// confReadOut reads topic out in the golden format; a null value is "<null>".
func confReadOut(t *testing.T, d *kstreamtest.Driver) []string {
	t.Helper()
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Nullable(serde.String())).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, 0, len(recs))
	for _, r := range recs {
		hs := make([]string, 0, len(r.Headers))
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		v := "<null>"
		if r.Value != nil {
			v = *r.Value
		}
		lines = append(lines, fmt.Sprintf("%s|%s|%d|%s", r.Key, v, r.Timestamp.UnixMilli(), strings.Join(hs, ",")))
	}
	return lines
}

// confStateless is also the topology of TestDriverMatchesRuntime, writing to out.
func confStateless(s kstream.KStream[string, string], out string, repartition bool) {
	br := s.Filter(func(_, v string) bool { return v != "" }).Split(kstream.Named("len-")).
		Branch("short", func(_, v string) bool { return len(v) <= 5 }).
		DefaultBranch("long")
	short := kstream.MapValues(br["len-short"], strings.ToUpper)
	long := kstream.FlatMapValues(br["len-long"], func(v string) []string { return []string{v[:3], v[3:]} })
	merged := short.Merge(long)
	if repartition {
		merged = kstream.SelectKey(merged, func(k, v string) string { return k + "/" + v[:1] }).
			WithSerdes(serde.String(), serde.String()).Repartition("eq")
	}
	merged.To(out, serde.String(), serde.String())
}

// confInput is the input of every scenario.
func confInput() []kstream.Record[string, string] {
	words := []string{"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"}
	recs := make([]kstream.Record[string, string], 0, 40)
	for i := range 40 {
		r := kstream.Record[string, string]{
			Key:       "k" + strconv.Itoa(i%7),
			Value:     words[i%len(words)],
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000),
		}
		if i%3 == 0 {
			r.Headers = []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}
		}
		recs = append(recs, r)
	}
	return recs
}

// confRun runs one scenario through the driver and returns its output in the golden format.
func confRun(t *testing.T, build func(s kstream.KStream[string, string])) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(kstream.Stream(b, "in", serde.String(), serde.String()))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range confInput() {
		if err := in.PipeRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	lines := confReadOut(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// confGolden reads a golden file as lines; it must end in a newline.
func confGolden(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate the golden files with testing/conformance/run.sh)", err)
	}
	s := string(data)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("%s: no final newline", path)
	}
	if strings.Contains(s, "\r") {
		t.Fatalf("%s: has \\r; lines must end in \\n", path)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// confDiff is a line diff of want (Java) and got (Go) with 3 lines of context: "-" marks a
// line only Java wrote, "+" one only Go wrote, each with its line number on that side.
func confDiff(want, got []string) string {
	// Longest common subsequence, from the end.
	lcs := make([][]int, len(want)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(got)+1)
	}
	for i := len(want) - 1; i >= 0; i-- {
		for j := len(got) - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		same bool
		text string
	}
	var ops []op
	for i, j := 0, 0; i < len(want) || j < len(got); {
		switch {
		case i < len(want) && j < len(got) && want[i] == got[j]:
			ops = append(ops, op{true, fmt.Sprintf("         %3d %3d  %s", i+1, j+1, want[i])})
			i++
			j++
		case i < len(want) && (j == len(got) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{false, fmt.Sprintf("  - java %3d      %s", i+1, want[i])})
			i++
		default:
			ops = append(ops, op{false, fmt.Sprintf("  + go       %3d  %s", j+1, got[j])})
			j++
		}
	}
	const context = 3
	show := make([]bool, len(ops))
	for k, o := range ops {
		if !o.same {
			for c := max(0, k-context); c <= min(len(ops)-1, k+context); c++ {
				show[c] = true
			}
		}
	}
	var sb strings.Builder
	for k, o := range ops {
		if !show[k] {
			if k > 0 && show[k-1] {
				sb.WriteString("         ...\n")
			}
			continue
		}
		sb.WriteString(o.text + "\n")
	}
	return sb.String()
}

// TestConformanceWithJava requires the driver's output to equal Java TopologyTestDriver's
// for the same topology and input, record for record and in order. The goldens are read
// from $KSTREAM_CONFORMANCE_DIR when set (CI regenerates them there with Java), otherwise
// from testdata/conformance.
func TestConformanceWithJava(t *testing.T) {
	dir := os.Getenv("KSTREAM_CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join("testdata", "conformance")
	}
	check := func(t *testing.T, name string, run func() []string) {
		path := filepath.Join(dir, name+".txt")
		want := confGolden(t, path)
		got := run()
		if slices.Equal(got, want) {
			return
		}
		t.Errorf("Go driver output differs from Java's %s: java %d records, go %d records\n"+
			"  (line numbers: java, go)\n%s", path, len(want), len(got), confDiff(want, got))
	}
	for _, sc := range confScenarios {
		t.Run(sc.name, func(t *testing.T) { check(t, sc.name, func() []string { return confRun(t, sc.build) }) })
	}
	for _, sc := range confTableScenarios {
		t.Run(sc.name, func(t *testing.T) {
			check(t, sc.name, func() []string { return confRunTables(t, sc.inputs, sc.build) })
		})
	}
}
