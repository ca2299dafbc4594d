package kstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// TestDescribeMatchesJava builds each of describeTopologies and compares Describe with the
// text that Kafka Streams 4.4 prints for the same topology (topology.describe().toString()),
// copied verbatim into describeJava. The Java side of every topology is in
// testdata/describe/Describe.java, under the same name; it was built with
//
//	props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
//	props.put("__enable.process.processValue.fix__", true);
//	new StreamsBuilder(new TopologyConfig(new StreamsConfig(props))) ... .build(props)
//
// because kstream shares repartition topics as Java's optimizer merges them, and treats
// Process as an operator that may change keys and values, as Java does with that fix.
func TestDescribeMatchesJava(t *testing.T) {
	for _, tc := range describeTopologies {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := describeJava[tc.name]
			if !ok {
				t.Fatal("no Java output for this topology")
			}
			b := kstream.NewBuilder()
			tc.build(b)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if got := topo.Describe(); got != want {
				t.Errorf("Describe differs from Java's\n%s", lineDiff(want, got))
			}
		})
	}
	if len(describeJava) != len(describeTopologies) {
		t.Errorf("%d Java outputs for %d topologies", len(describeJava), len(describeTopologies))
	}
}

// lineDiff shows want and got side by side from their first differing line.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "first difference at line %d\n--- want (Java):\n%s\n--- got:\n%s", i+1, strings.Join(w[max(0, i-3):], "\n"), strings.Join(g[max(0, i-3):], "\n"))
	return sb.String()
}

// describeTopologies are the topologies of TestDescribeMatchesJava, each written as
// testdata/describe/Describe.java writes it in Java (Kafka Streams 4.4,
// topology.optimization=all and __enable.process.processValue.fix__=true).
var describeTopologies = []struct {
	name  string
	build func(b *kstream.Builder)
}{
	{"stateless", func(b *kstream.Builder) {
		s := dIn(b).Filter(func(string, string) bool { return true }).FilterNot(func(string, string) bool { return false })
		s = kstream.MapValues(s, func(v string) string { return v })
		s = kstream.MapValuesWithKey(s, func(_, v string) string { return v })
		s = kstream.FlatMapValues(s, func(v string) []string { return []string{v} })
		s = kstream.FlatMapValuesWithKey(s, func(_, v string) []string { return []string{v} })
		s.Peek(func(string, string) {}).To("out", nil, nil)
	}},
	{"key-changing-sinks", func(b *kstream.Builder) {
		s := dIn(b)
		kstream.Map(s, func(k, v string) (string, string) { return v, k }).To("out", nil, nil)
		kstream.FlatMap(s, func(k, v string) []kstream.KeyValue[string, string] {
			return []kstream.KeyValue[string, string]{kstream.KV(v, k)}
		}).To("out", nil, nil)
		kstream.SelectKey(s, func(_, v string) string { return v }).To("out", nil, nil)
		s.Foreach(func(string, string) {})
	}},
	{"named-operators", func(b *kstream.Builder) {
		s := kstream.Stream(b, "orders", serde.String(), serde.String(), kstream.Named("orders-source"))
		big := s.Filter(func(string, string) bool { return true }, kstream.Named("big"))
		kstream.MapValues(big, func(v string) string { return v }, kstream.Named("ids")).To("ids", nil, nil, kstream.Named("ids-sink"))
		big.Peek(func(string, string) {}, kstream.Named("peeker")).Foreach(func(string, string) {}, kstream.Named("each"))
		r := kstream.SelectKey(s, func(_, v string) string { return v }, kstream.Named("rekey"))
		r = kstream.Map(r, func(k, v string) (string, string) { return k, v }, kstream.Named("remap"))
		r = kstream.FlatMap(r, func(k, v string) []kstream.KeyValue[string, string] {
			return []kstream.KeyValue[string, string]{kstream.KV(k, v)}
		}, kstream.Named("flat"))
		r.To("out", nil, nil, kstream.Named("out-sink"))
	}},
	{"split-named", func(b *kstream.Builder) {
		br := dIn(b).Split(kstream.Named("len-")).
			Branch("short", func(_, v string) bool { return len(v) <= 5 }).
			DefaultBranch("long")
		kstream.MapValues(br["len-short"], strings.ToUpper).To("short", nil, nil)
		br["len-long"].To("long", nil, nil)
	}},
	{"split-unnamed", func(b *kstream.Builder) {
		br := dIn(b).Filter(func(string, string) bool { return true }).Split().
			Branch("a", func(_, v string) bool { return strings.HasPrefix(v, "a") }).
			Branch("b", func(_, v string) bool { return strings.HasPrefix(v, "b") }).
			NoDefaultBranch()
		// Java iterates its branch map (a HashMap) to add the sinks; its order is a, b.
		br["a"].To("out-a", nil, nil)
		br["b"].To("out-b", nil, nil)
	}},
	{"merge", func(b *kstream.Builder) {
		a := kstream.Stream(b, "a", serde.String(), serde.String())
		c := kstream.Stream(b, "c", serde.String(), serde.String())
		a.Merge(c).To("out", nil, nil)
		a.Filter(func(string, string) bool { return true }).Merge(kstream.MapValues(c, func(v string) string { return v }), kstream.Named("merged")).To("out2", nil, nil)
	}},
	{"stream-topics", func(b *kstream.Builder) {
		s := kstream.StreamTopics(b, []string{"t1", "t2", "t0"}, serde.String(), serde.String())
		kstream.MapValues(s, func(v string) string { return v }).To("out", nil, nil)
	}},
	{"process-store", func(b *kstream.Builder) {
		seen := kstream.KeyValueStore("seen", serde.String(), serde.String())
		kstream.Process(dIn(b), dPass, kstream.WithStores(seen)).To("out", serde.String(), serde.String())
		kstream.Process(kstream.Stream(b, "in2", serde.String(), serde.String()), dPass, kstream.Named("sink-proc"))
	}},
	{"repartition-named", func(b *kstream.Builder) {
		kstream.SelectKey(dIn(b), func(_, v string) string { return v }).WithSerdes(serde.String(), nil).
			Repartition("by-value", kstream.NumPartitions(4)).To("out", nil, nil)
	}},
	{"process-window-stores", func(b *kstream.Builder) {
		ws := kstream.WindowStore("win-store", serde.String(), serde.String(), time.Hour, 10*time.Second)
		ss := kstream.SessionStore("sess-store", serde.String(), serde.String(), time.Hour)
		dups := kstream.WindowStore("dup-store", serde.String(), serde.String(), time.Minute, 10*time.Second, kstream.InMemory(), kstream.RetainDuplicates())
		kstream.Process(dIn(b), dPass, kstream.Named("windows"), kstream.WithStores(ws, ss)).To("out", nil, nil)
		kstream.Process(kstream.Stream(b, "in2", serde.String(), serde.String()), dPass, kstream.WithStores(dups)).To("out2", nil, nil)
	}},
	{"named-aggregations", func(b *kstream.Builder) {
		g := dIn(b).GroupByKey()
		kstream.Count(g, "counts", kstream.Named("counter")).ToStream().To("out", nil, nil)
		kstream.Reduce(g, func(a, c string) string { return a + c }, "reduced", kstream.Named("reducer")).ToStream().To("out", nil, nil)
		kstream.Aggregate(g, func() string { return "" }, func(_, v, a string) string { return a + v }, serde.String(), "aggregated", kstream.Named("aggregator")).ToStream().To("out", nil, nil)
		kstream.WindowedCount(g.WindowedBy(kstream.TimeWindowsOf(10*time.Second)), "win-counts", kstream.Named("win-counter")).ToStream().To("out", nil, nil)
		kstream.SessionReduce(g.WindowedBySession(kstream.SessionWindowsOf(5*time.Second)), func(a, c string) string { return a + c }, "sess-reduced", kstream.Named("sess-reducer")).ToStream().To("out", nil, nil)
	}},
	{"named-rekeyed-aggregation", func(b *kstream.Builder) {
		g := kstream.SelectKey(dIn(b), func(_, v string) string { return v }).GroupByKey()
		kstream.Aggregate(g, func() string { return "" }, func(_, v, a string) string { return a + v }, serde.String(), "by-value", kstream.Named("by-value-agg")).ToStream().To("out", nil, nil)
	}},
	{"named-table-aggregations", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		g := kstream.TableGroupBy(t, func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(v, k) }, serde.String(), serde.String())
		kstream.TableCount(g, "tcounts", kstream.Named("tcounter")).ToStream().To("out", nil, nil)
		kstream.TableReduce(g, func(a, c string) string { return a + c }, func(a, _ string) string { return a }, "treduced", kstream.Named("treducer")).ToStream().To("out", nil, nil)
	}},
	{"named-totable", func(b *kstream.Builder) {
		kstream.SelectKey(dIn(b), func(_, v string) string { return v }).ToTable("tt-store", kstream.Named("as-table")).ToStream().To("out", nil, nil)
	}},
	{"mapvalues-serde-suppress", func(b *kstream.Builder) {
		w := dIn(b).GroupByKey().WindowedBy(kstream.TimeWindowsOf(10 * time.Second))
		counts := kstream.WindowedCount(w, "wcounts").Filter(func(_ serde.Windowed[string], n int64) bool { return n > 0 }, kstream.Materialized("", serde.Int64()))
		texts := kstream.TableMapValues(counts, func(n int64) string { return fmt.Sprint("n=", n) }, kstream.Materialized("", serde.String()))
		texts.Suppress(kstream.UntilWindowCloses(kstream.Unbounded())).ToStream().To("out", nil, nil)
	}},
	{"groupbykey-count", func(b *kstream.Builder) {
		kstream.Count(dIn(b).GroupByKey(), "counts").ToStream().To("out", nil, nil)
	}},
	{"groupby-count", func(b *kstream.Builder) {
		kstream.Count(kstream.GroupBy(dIn(b), func(_, v string) string { return v }, serde.String()), "by-value").ToStream().To("out", nil, nil)
	}},
	{"groupby-named", func(b *kstream.Builder) {
		words := kstream.FlatMapValues(dIn(b), func(v string) []string { return strings.Split(v, " ") })
		g := kstream.GroupBy(words, func(_, w string) string { return w }, serde.String(), kstream.Named("by-word"))
		kstream.Count(g, "word-counts").ToStream().To("out", nil, nil)
	}},
	{"rekey-two-aggregations", func(b *kstream.Builder) {
		g := dRekey(dIn(b)).GroupByKey()
		kstream.Count(g, "c1").ToStream().To("out1", nil, nil)
		kstream.Reduce(g, func(a, c string) string { return a + c }, "r1").ToStream().To("out2", nil, nil)
	}},
	{"rekey-join-leftjoin", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		s := dRekey(dIn(b))
		kstream.Join(s, t, dJoin).To("out", serde.String(), serde.String())
		kstream.LeftJoin(s, t, dLeftJoin).To("out", serde.String(), serde.String())
	}},
	{"two-joins-and-count", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		s := dRekey(dIn(b))
		kstream.Join(s, t, dJoin).To("out", serde.String(), serde.String())
		kstream.LeftJoin(s, t, dLeftJoin).To("out", serde.String(), serde.String())
		kstream.MapValues(kstream.Count(s.GroupByKey(), "counts").ToStream(), func(n int64) string { return fmt.Sprint(n) }).
			To("out", serde.String(), serde.String())
	}},
	{"rekey-mapvalues-join", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		s := kstream.MapValues(dRekey(dIn(b)), func(v string) string { return v })
		kstream.Join(s, t, dJoin).To("out", serde.String(), serde.String())
		kstream.Count(s.GroupByKey(), "c1").ToStream().To("c1", nil, nil)
		kstream.Count(s.GroupByKey(), "c2").ToStream().To("c2", nil, nil)
	}},
	{"rekey-filter-count-and-to", func(b *kstream.Builder) {
		k := dRekey(dIn(b))
		f := k.Filter(func(string, string) bool { return true })
		kstream.Count(f.GroupByKey(), "c").ToStream().To("counts", nil, nil)
		f.To("rekeyed", nil, nil)
		k.To("direct", nil, nil)
	}},
	{"totable", func(b *kstream.Builder) {
		s := dIn(b)
		s.ToTable("latest").ToStream().To("out", nil, nil)
		dRekey(s).ToTable("by-value").ToStream().To("out2", nil, nil)
	}},
	{"table-ops", func(b *kstream.Builder) {
		t := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		kstream.TableMapValues(t.Filter(func(string, string) bool { return true }), func(v string) string { return v }).ToStream().To("out", nil, nil)
		nf := t.FilterNot(func(string, string) bool { return false }, kstream.Materialized[string]("not-filtered", nil))
		kstream.TableMapValuesWithKey(nf, func(_, v string) string { return v }, kstream.Named("with-key")).
			ToStream(kstream.Named("changes")).To("out2", nil, nil)
		kstream.TableMapValues(t, func(v string) string { return v }, kstream.Materialized[string]("mapped", nil)).
			Filter(func(string, string) bool { return true }, kstream.Named("keep")).ToStream().To("out3", nil, nil)
	}},
	{"table-groupby", func(b *kstream.Builder) {
		t := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		swap := func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(v, k) }
		g := kstream.TableGroupBy(t, swap, nil, nil)
		kstream.TableCount(g, "cnt").ToStream().To("out", serde.String(), serde.Int64())
		kstream.TableReduce(g, func(a, c string) string { return a + c }, func(a, _ string) string { return a }, "red").ToStream().To("out", nil, nil)
		g2 := kstream.TableGroupBy(t, swap, nil, nil, kstream.Named("regroup"))
		kstream.TableAggregate(g2, func() string { return "" }, func(_, v, a string) string { return a + v }, func(_, _, a string) string { return a },
			serde.String(), "agg").ToStream().To("out", nil, nil)
		kstream.TableCount(g2, "cnt2").ToStream().To("out", serde.String(), serde.Int64())
	}},
	{"table-joins", func(b *kstream.Builder) {
		l := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		r := kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
		kstream.TableJoin(l, r, func(_, a, c string) string { return a + c }).ToStream().To("out", nil, nil)
		kstream.TableLeftJoin(l, r, func(_, a, c string, _ bool) string { return a + c }, kstream.Named("lj")).ToStream().To("out", nil, nil)
		kstream.TableOuterJoin(l, r, func(_, a string, _ bool, c string, _ bool) string { return a + c },
			kstream.Materialized[string]("oj-store", nil)).ToStream().To("out", nil, nil)
	}},
	{"table-join-derived", func(b *kstream.Builder) {
		l := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		r := kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
		lf := l.Filter(func(_, v string) bool { return len(v) > 2 })
		rm := kstream.TableMapValues(r, strings.ToUpper)
		j1 := kstream.TableLeftJoin(lf, rm, func(_, a, c string, _ bool) string { return a + "/" + c }, kstream.Materialized[string]("j1", nil))
		j1.ToStream().To("out", nil, nil)
		rf := r.Filter(func(_, v string) bool { return v != "" }, kstream.Materialized[string]("right-filtered", nil))
		kstream.TableOuterJoin(j1, kstream.TableMapValuesWithKey(rf, func(k, v string) string { return k + fmt.Sprint(len(v)) }),
			func(_, a string, _ bool, c string, _ bool) string { return a + "&" + c }).
			Filter(func(_, v string) bool { return !strings.HasPrefix(v, "-") }).
			ToStream().To("out", nil, nil)
	}},
	{"stream-table-join", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		s := dIn(b)
		kstream.Join(s, t, dJoin).To("out", serde.String(), serde.String())
		kstream.LeftJoin(s, t, dLeftJoin, kstream.Named("enrich")).To("out", serde.String(), serde.String())
	}},
	{"stream-totable-join", func(b *kstream.Builder) {
		t := dIn(b).ToTable("as-table")
		r := kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
		kstream.TableJoin(t, r, func(_, a, c string) string { return a + "*" + c }).ToStream().To("out", nil, nil)
	}},
	{"global", func(b *kstream.Builder) {
		s := dIn(b)
		g := kstream.GlobalTable(b, "products", serde.String(), serde.String(), "products-store")
		o := kstream.Stream(b, "other", serde.String(), serde.String())
		kstream.JoinGlobal(s, g, func(_, v string) string { return v }, func(_, v, gv string) string { return v + gv }).To("out", nil, nil)
		kstream.LeftJoinGlobal(o, g, func(_, v string) string { return v }, func(_, v, gv string, _ bool) string { return v + gv },
			kstream.Named("enrich")).To("out", nil, nil)
	}},
	{"named-sources-order", func(b *kstream.Builder) {
		z := kstream.Stream(b, "z", serde.String(), serde.String(), kstream.Named("zeta"))
		kstream.Count(kstream.GroupBy(z, func(_, v string) string { return v }, serde.String()), "zc").ToStream().To("out", nil, nil)
		kstream.Stream(b, "a", serde.String(), serde.String(), kstream.Named("alpha")).To("out", nil, nil)
		dRekey(kstream.Stream(b, "m", serde.String(), serde.String())).Repartition("Mid").To("out", nil, nil)
	}},
	{"merge-rekey-count", func(b *kstream.Builder) {
		a := dRekey(kstream.Stream(b, "a", serde.String(), serde.String()))
		c := dRekey(kstream.Stream(b, "c", serde.String(), serde.String()))
		kstream.Count(a.Merge(c).GroupByKey(), "merged-counts").ToStream().To("out", nil, nil)
	}},
	{"process-count", func(b *kstream.Builder) {
		p := kstream.Process(dIn(b), dPass).WithSerdes(serde.String(), serde.String())
		kstream.Count(p.GroupByKey(), "pc").ToStream().To("out", nil, nil)
	}},
	{"rekey-process-count", func(b *kstream.Builder) {
		p := kstream.Process(dRekey(dIn(b)), dPass).WithSerdes(serde.String(), serde.String())
		kstream.Count(p.GroupByKey(), "pc").ToStream().To("out", nil, nil)
	}},
	{"table-tostream-rekey-count", func(b *kstream.Builder) {
		s := kstream.Table(b, "left", serde.String(), serde.String(), "left-store").ToStream()
		kstream.Count(dRekey(s).GroupByKey(), "tc").ToStream().To("out", nil, nil)
	}},
	{"named-join-rekey", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		s := dRekey(dIn(b))
		kstream.Join(s, t, dJoin, kstream.Named("enrich")).To("out", serde.String(), serde.String())
		kstream.LeftJoin(s, t, dLeftJoin, kstream.Named("enrich2")).To("out", serde.String(), serde.String())
	}},
	{"aggregate-reduce", func(b *kstream.Builder) {
		g := dIn(b).GroupByKey()
		kstream.Aggregate(g, func() string { return "" }, func(_, v, a string) string { return a + v }, serde.String(), "agg").ToStream().To("out", nil, nil)
		kstream.Reduce(g, func(a, c string) string { return a + c }, "red").ToStream().To("out", nil, nil)
	}},
	{"flatmap-map-stateful", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		fm := kstream.FlatMap(dIn(b), func(k, v string) []kstream.KeyValue[string, string] {
			return []kstream.KeyValue[string, string]{kstream.KV(v, k)}
		})
		kstream.Count(fm.GroupByKey(), "fc").ToStream().To("out", nil, nil)
		m := kstream.Map(kstream.Stream(b, "in2", serde.String(), serde.String()), func(k, v string) (string, string) { return v, k })
		kstream.Join(m, t, dJoin).To("out", serde.String(), serde.String())
	}},
	{"rekey-totable-and-count", func(b *kstream.Builder) {
		k := dRekey(dIn(b))
		k.ToTable("t").ToStream().To("out", nil, nil)
		kstream.Count(k.GroupByKey(), "c").ToStream().To("out", nil, nil)
		kstream.Join(k, k.ToTable("t2"), dJoin).To("out", serde.String(), serde.String())
	}},
	{"join-of-join", func(b *kstream.Builder) {
		l := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		r := kstream.Table(b, "right", serde.String(), serde.String(), "right-store")
		x := kstream.Table(b, "extra", serde.String(), serde.String(), "extra-store")
		lr := kstream.TableJoin(l, r, func(_, a, c string) string { return a + c })
		kstream.TableJoin(lr, x, func(_, a, c string) string { return a + c }).ToStream().To("out", nil, nil)
		kstream.Join(dIn(b), lr, dJoin).To("out2", serde.String(), serde.String())
		kstream.TableLeftJoin(x, lr.Filter(func(string, string) bool { return true }), func(_, a, c string, _ bool) string { return a + c }).
			ToStream().To("out3", nil, nil)
	}},
	{"big-fanout", func(b *kstream.Builder) {
		s := dIn(b)
		for i := range 15 {
			c := s.Filter(func(string, string) bool { return true })
			for range i % 4 {
				c = kstream.MapValues(c, func(v string) string { return v })
			}
			switch i % 3 {
			case 0:
				c.To(fmt.Sprint("out", i), nil, nil)
			case 1:
				c.Peek(func(string, string) {}).Foreach(func(string, string) {})
			default:
				c.To("out", nil, nil)
				c.To("more", nil, nil)
			}
		}
	}},
	{"multi-topics-hash", func(b *kstream.Builder) {
		kstream.StreamTopics(b, []string{"orders", "payments", "a-very-long-topic-name", "zzz", "shipments"}, serde.String(), serde.String()).
			To("out", nil, nil)
	}},
	{"process-two-stores", func(b *kstream.Builder) {
		st := func(name string) kstream.StoreBuilder {
			return kstream.KeyValueStore(name, serde.String(), serde.String())
		}
		kstream.Process(dIn(b), dPass, kstream.WithStores(st("beta"), st("alpha-store"), st("gamma-7"))).To("out", nil, nil)
	}},
	{"processvalues-count", func(b *kstream.Builder) {
		kstream.Count(kstream.ProcessValues(dIn(b), dPassValues).GroupByKey(), "pvc").ToStream().To("out", nil, nil)
	}},
	{"rekey-processvalues-two-counts", func(b *kstream.Builder) {
		p := kstream.ProcessValues(dRekey(dIn(b)), dPassValues)
		kstream.Count(p.GroupByKey(), "c1").ToStream().To("out", nil, nil)
		kstream.Count(p.GroupByKey(), "c2").ToStream().To("out", nil, nil)
	}},
	{"processvalues-named-store", func(b *kstream.Builder) {
		st := kstream.KeyValueStore("pv-store", serde.String(), serde.String())
		p := kstream.ProcessValues(dIn(b), dPassValues, kstream.Named("pv"), kstream.WithStores(st))
		kstream.MapValues(p, func(v string) string { return v }).To("out", nil, nil)
		in2 := kstream.Stream(b, "in2", serde.String(), serde.String())
		kstream.ProcessValues(kstream.ProcessValues(in2, dPassValues), dPassValues).To("out2", nil, nil)
	}},
	{"groupby-named-two-aggs", func(b *kstream.Builder) {
		g := kstream.GroupBy(dIn(b), func(_, v string) string { return v }, serde.String(), kstream.Named("g"))
		kstream.Count(g, "gc").ToStream().To("out", nil, nil)
		kstream.Aggregate(g, func() string { return "" }, func(_, v, a string) string { return a + v }, serde.String(), "ga").ToStream().To("out", nil, nil)
	}},
	{"rekey-repartition-and-count", func(b *kstream.Builder) {
		k := dRekey(dIn(b))
		k.Repartition("explicit").To("out", nil, nil)
		kstream.Count(k.GroupByKey(), "c").ToStream().To("out", nil, nil)
	}},
	{"rekey-split-default-count", func(b *kstream.Builder) {
		br := dRekey(dIn(b)).Split().
			Branch("x", func(_, v string) bool { return v == "" }).
			DefaultBranch("rest")
		br["x"].To("empty", nil, nil)
		kstream.Count(br["rest"].GroupByKey(), "rc").ToStream().To("out", nil, nil)
	}},
	{"merge-self", func(b *kstream.Builder) {
		s := dIn(b)
		s.Merge(s).To("out", nil, nil)
	}},
	{"chained-rekeys", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		k := kstream.SelectKey(dRekey(dIn(b)), func(k, v string) string { return k + v }).WithSerdes(serde.String(), nil)
		kstream.Count(k.GroupByKey(), "cc").ToStream().To("out", nil, nil)
		m := kstream.Map(kstream.Stream(b, "in2", serde.String(), serde.String()), func(k, v string) (string, string) { return v, k })
		fm := kstream.FlatMap(m, func(k, v string) []kstream.KeyValue[string, string] {
			return []kstream.KeyValue[string, string]{kstream.KV(v, k)}
		})
		kstream.Join(fm, t, dJoin).To("out", serde.String(), serde.String())
	}},
	{"table-tostream-join", func(b *kstream.Builder) {
		t := kstream.Table(b, "table", serde.String(), serde.String(), "table-store")
		l := kstream.Table(b, "left", serde.String(), serde.String(), "left-store")
		kstream.Join(l.ToStream(), t, dJoin).To("out", serde.String(), serde.String())
		kstream.LeftJoin(l.ToStream().Filter(func(string, string) bool { return true }), kstream.TableMapValues(t, func(v string) string { return v }), dLeftJoin).
			To("out", serde.String(), serde.String())
	}},
	{"wordcount", func(b *kstream.Builder) {
		lines := kstream.Stream(b, "text-lines", serde.String(), serde.String())
		words := kstream.FlatMapValues(lines, func(line string) []string { return strings.Split(line, " ") })
		counts := kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String(), kstream.Named("by-word")), "word-counts")
		counts.ToStream().To("word-counts", serde.String(), serde.Int64())
	}},
}

func dIn(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "in", serde.String(), serde.String())
}

// dRekey is Java's selectKey((k, v) -> v), with the key serde that Java takes from the
// default.
func dRekey(s kstream.KStream[string, string]) kstream.KStream[string, string] {
	return kstream.SelectKey(s, func(_, v string) string { return v }).WithSerdes(serde.String(), nil)
}

func dJoin(_, v, vt string) string { return v + vt }

func dLeftJoin(_, v, vt string, _ bool) string { return v + vt }

func dPass() kstream.Processor[string, string, string, string] {
	return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
		ctx.Forward(r)
		return nil
	})
}

// dPassValues is Describe.java's passValues: a FixedKeyProcessor that forwards its input.
func dPassValues() kstream.FixedKeyProcessor[string, string, string] {
	return kstream.FixedKeyProcessorFunc[string, string, string](func(ctx kstream.FixedKeyProcessorContext[string, string], r kstream.FixedKeyRecord[string, string]) error {
		ctx.Forward(r)
		return nil
	})
}

// describeJava is Kafka Streams 4.4's describe() of each topology, verbatim.
var describeJava = map[string]string{
	"stateless": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FILTER-0000000001
    Processor: KSTREAM-FILTER-0000000001 (stores: [])
      --> KSTREAM-FILTER-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000002 (stores: [])
      --> KSTREAM-MAPVALUES-0000000003
      <-- KSTREAM-FILTER-0000000001
    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])
      --> KSTREAM-MAPVALUES-0000000004
      <-- KSTREAM-FILTER-0000000002
    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])
      --> KSTREAM-FLATMAPVALUES-0000000005
      <-- KSTREAM-MAPVALUES-0000000003
    Processor: KSTREAM-FLATMAPVALUES-0000000005 (stores: [])
      --> KSTREAM-FLATMAPVALUES-0000000006
      <-- KSTREAM-MAPVALUES-0000000004
    Processor: KSTREAM-FLATMAPVALUES-0000000006 (stores: [])
      --> KSTREAM-PEEK-0000000007
      <-- KSTREAM-FLATMAPVALUES-0000000005
    Processor: KSTREAM-PEEK-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-FLATMAPVALUES-0000000006
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KSTREAM-PEEK-0000000007

`,
	"key-changing-sinks": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FLATMAP-0000000003, KSTREAM-KEY-SELECT-0000000005, KSTREAM-MAP-0000000001, KSTREAM-FOREACH-0000000007
    Processor: KSTREAM-FLATMAP-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAP-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FOREACH-0000000007 (stores: [])
      --> none
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-MAP-0000000001
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- KSTREAM-FLATMAP-0000000003
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KSTREAM-KEY-SELECT-0000000005

`,
	"named-operators": `Topologies:
   Sub-topology: 0
    Source: orders-source (topics: [orders])
      --> big, rekey
    Processor: big (stores: [])
      --> ids, peeker
      <-- orders-source
    Processor: rekey (stores: [])
      --> remap
      <-- orders-source
    Processor: remap (stores: [])
      --> flat
      <-- rekey
    Processor: flat (stores: [])
      --> out-sink
      <-- remap
    Processor: ids (stores: [])
      --> ids-sink
      <-- big
    Processor: peeker (stores: [])
      --> each
      <-- big
    Processor: each (stores: [])
      --> none
      <-- peeker
    Sink: ids-sink (topic: ids)
      <-- ids
    Sink: out-sink (topic: out)
      <-- flat

`,
	"split-named": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> len-
    Processor: len- (stores: [])
      --> len-long, len-short
      <-- KSTREAM-SOURCE-0000000000
    Processor: len-short (stores: [])
      --> KSTREAM-MAPVALUES-0000000004
      <-- len-
    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- len-short
    Processor: len-long (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- len-
    Sink: KSTREAM-SINK-0000000005 (topic: short)
      <-- KSTREAM-MAPVALUES-0000000004
    Sink: KSTREAM-SINK-0000000006 (topic: long)
      <-- len-long

`,
	"split-unnamed": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FILTER-0000000001
    Processor: KSTREAM-FILTER-0000000001 (stores: [])
      --> KSTREAM-BRANCH-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-BRANCH-0000000002 (stores: [])
      --> KSTREAM-BRANCH-0000000002a, KSTREAM-BRANCH-0000000002b
      <-- KSTREAM-FILTER-0000000001
    Processor: KSTREAM-BRANCH-0000000002a (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-BRANCH-0000000002
    Processor: KSTREAM-BRANCH-0000000002b (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-BRANCH-0000000002
    Sink: KSTREAM-SINK-0000000005 (topic: out-a)
      <-- KSTREAM-BRANCH-0000000002a
    Sink: KSTREAM-SINK-0000000006 (topic: out-b)
      <-- KSTREAM-BRANCH-0000000002b

`,
	"merge": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [a])
      --> KSTREAM-FILTER-0000000004, KSTREAM-MERGE-0000000002
    Source: KSTREAM-SOURCE-0000000001 (topics: [c])
      --> KSTREAM-MAPVALUES-0000000005, KSTREAM-MERGE-0000000002
    Processor: KSTREAM-FILTER-0000000004 (stores: [])
      --> merged
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000005 (stores: [])
      --> merged
      <-- KSTREAM-SOURCE-0000000001
    Processor: KSTREAM-MERGE-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-SOURCE-0000000001, KSTREAM-SOURCE-0000000000
    Processor: merged (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-FILTER-0000000004, KSTREAM-MAPVALUES-0000000005
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KSTREAM-MERGE-0000000002
    Sink: KSTREAM-SINK-0000000007 (topic: out2)
      <-- merged

`,
	"stream-topics": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [t0, t1, t2])
      --> KSTREAM-MAPVALUES-0000000001
    Processor: KSTREAM-MAPVALUES-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000001

`,
	"process-store": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-PROCESSOR-0000000001
    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [seen])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-PROCESSOR-0000000001

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000003 (topics: [in2])
      --> sink-proc
    Processor: sink-proc (stores: [])
      --> none
      <-- KSTREAM-SOURCE-0000000003

`,
	"repartition-named": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> by-value-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: by-value-repartition-filter (stores: [])
      --> by-value-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: by-value-repartition-sink (topic: by-value-repartition)
      <-- by-value-repartition-filter

  Sub-topology: 1
    Source: by-value-repartition-source (topics: [by-value-repartition])
      --> KSTREAM-SINK-0000000005
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- by-value-repartition-source

`,
	"process-window-stores": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> windows
    Processor: windows (stores: [sess-store, win-store])
      --> KSTREAM-SINK-0000000001
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000001 (topic: out)
      <-- windows

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in2])
      --> KSTREAM-PROCESSOR-0000000003
    Processor: KSTREAM-PROCESSOR-0000000003 (stores: [dup-store])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out2)
      <-- KSTREAM-PROCESSOR-0000000003

`,
	"named-aggregations": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> aggregator, counter, reducer, sess-reducer, win-counter
    Processor: aggregator (stores: [aggregated])
      --> KTABLE-TOSTREAM-0000000008
      <-- KSTREAM-SOURCE-0000000000
    Processor: counter (stores: [counts])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: reducer (stores: [reduced])
      --> KTABLE-TOSTREAM-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: sess-reducer (stores: [sess-reduced])
      --> KTABLE-TOSTREAM-0000000014
      <-- KSTREAM-SOURCE-0000000000
    Processor: win-counter (stores: [win-counts])
      --> KTABLE-TOSTREAM-0000000011
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- counter
    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- reducer
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- aggregator
    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])
      --> KSTREAM-SINK-0000000012
      <-- win-counter
    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])
      --> KSTREAM-SINK-0000000015
      <-- sess-reducer
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KTABLE-TOSTREAM-0000000002
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KTABLE-TOSTREAM-0000000005
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KTABLE-TOSTREAM-0000000008
    Sink: KSTREAM-SINK-0000000012 (topic: out)
      <-- KTABLE-TOSTREAM-0000000011
    Sink: KSTREAM-SINK-0000000015 (topic: out)
      <-- KTABLE-TOSTREAM-0000000014

`,
	"named-rekeyed-aggregation": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> by-value-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: by-value-repartition-filter (stores: [])
      --> by-value-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: by-value-repartition-sink (topic: by-value-repartition)
      <-- by-value-repartition-filter

  Sub-topology: 1
    Source: by-value-repartition-source (topics: [by-value-repartition])
      --> by-value-agg
    Processor: by-value-agg (stores: [by-value])
      --> KTABLE-TOSTREAM-0000000006
      <-- by-value-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- by-value-agg
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

`,
	"named-table-aggregations": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> KTABLE-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SELECT-0000000002 (stores: [])
      --> tcounter-sink, treducer-sink
      <-- KTABLE-SOURCE-0000000001
    Sink: tcounter-sink (topic: tcounts-repartition)
      <-- KTABLE-SELECT-0000000002
    Sink: treducer-sink (topic: treduced-repartition)
      <-- KTABLE-SELECT-0000000002

  Sub-topology: 1
    Source: tcounter-source (topics: [tcounts-repartition])
      --> tcounter
    Processor: tcounter (stores: [tcounts])
      --> KTABLE-TOSTREAM-0000000006
      <-- tcounter-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- tcounter
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

  Sub-topology: 2
    Source: treducer-source (topics: [treduced-repartition])
      --> treducer
    Processor: treducer (stores: [treduced])
      --> KTABLE-TOSTREAM-0000000011
      <-- treducer-source
    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])
      --> KSTREAM-SINK-0000000012
      <-- treducer
    Sink: KSTREAM-SINK-0000000012 (topic: out)
      <-- KTABLE-TOSTREAM-0000000011

`,
	"named-totable": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> as-table-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: as-table-repartition-filter (stores: [])
      --> as-table-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: as-table-repartition-sink (topic: as-table-repartition)
      <-- as-table-repartition-filter

  Sub-topology: 1
    Source: as-table-repartition-source (topics: [as-table-repartition])
      --> as-table
    Processor: as-table (stores: [tt-store])
      --> KTABLE-TOSTREAM-0000000006
      <-- as-table-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- as-table
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

`,
	"mapvalues-serde-suppress": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [wcounts])
      --> KTABLE-FILTER-0000000003
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-FILTER-0000000003 (stores: [])
      --> KTABLE-MAPVALUES-0000000005
      <-- KSTREAM-AGGREGATE-0000000001
    Processor: KTABLE-MAPVALUES-0000000005 (stores: [])
      --> KTABLE-SUPPRESS-0000000006
      <-- KTABLE-FILTER-0000000003
    Processor: KTABLE-SUPPRESS-0000000006 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000007])
      --> KTABLE-TOSTREAM-0000000008
      <-- KTABLE-MAPVALUES-0000000005
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KTABLE-SUPPRESS-0000000006
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KTABLE-TOSTREAM-0000000008

`,
	"groupbykey-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [counts])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-AGGREGATE-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KTABLE-TOSTREAM-0000000002

`,
	"groupby-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> by-value-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: by-value-repartition-filter (stores: [])
      --> by-value-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: by-value-repartition-sink (topic: by-value-repartition)
      <-- by-value-repartition-filter

  Sub-topology: 1
    Source: by-value-repartition-source (topics: [by-value-repartition])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [by-value])
      --> KTABLE-TOSTREAM-0000000006
      <-- by-value-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-AGGREGATE-0000000002
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

`,
	"groupby-named": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> by-word
      <-- KSTREAM-SOURCE-0000000000
    Processor: by-word (stores: [])
      --> by-word-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: by-word-repartition-filter (stores: [])
      --> by-word-repartition-sink
      <-- by-word
    Sink: by-word-repartition-sink (topic: by-word-repartition)
      <-- by-word-repartition-filter

  Sub-topology: 1
    Source: by-word-repartition-source (topics: [by-word-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [word-counts])
      --> KTABLE-TOSTREAM-0000000007
      <-- by-word-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007

`,
	"rekey-two-aggregations": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> c1-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: c1-repartition-filter (stores: [])
      --> c1-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: c1-repartition-sink (topic: c1-repartition)
      <-- c1-repartition-filter

  Sub-topology: 1
    Source: c1-repartition-source (topics: [c1-repartition])
      --> KSTREAM-AGGREGATE-0000000002, KSTREAM-REDUCE-0000000008
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [c1])
      --> KTABLE-TOSTREAM-0000000006
      <-- c1-repartition-source
    Processor: KSTREAM-REDUCE-0000000008 (stores: [r1])
      --> KTABLE-TOSTREAM-0000000012
      <-- c1-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- KSTREAM-REDUCE-0000000008
    Sink: KSTREAM-SINK-0000000007 (topic: out1)
      <-- KTABLE-TOSTREAM-0000000006
    Sink: KSTREAM-SINK-0000000013 (topic: out2)
      <-- KTABLE-TOSTREAM-0000000012

`,
	"rekey-join-leftjoin": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-KEY-SELECT-0000000003-repartition-source (topics: [KSTREAM-KEY-SELECT-0000000003-repartition])
      --> KSTREAM-LEFTJOIN-0000000012, KSTREAM-JOIN-0000000007
    Processor: KSTREAM-JOIN-0000000007 (stores: [table-store])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-source
    Processor: KSTREAM-LEFTJOIN-0000000012 (stores: [table-store])
      --> KSTREAM-SINK-0000000013
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-source
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KSTREAM-JOIN-0000000007
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KSTREAM-LEFTJOIN-0000000012
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000003-repartition-filter
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-KEY-SELECT-0000000003-repartition-filter (stores: [])
      --> KSTREAM-KEY-SELECT-0000000003-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000003
    Sink: KSTREAM-KEY-SELECT-0000000003-repartition-sink (topic: KSTREAM-KEY-SELECT-0000000003-repartition)
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-filter

`,
	"two-joins-and-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-KEY-SELECT-0000000003-repartition-source (topics: [KSTREAM-KEY-SELECT-0000000003-repartition])
      --> KSTREAM-LEFTJOIN-0000000012, KSTREAM-AGGREGATE-0000000014, KSTREAM-JOIN-0000000007
    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [counts])
      --> KTABLE-TOSTREAM-0000000018
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-source
    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])
      --> KSTREAM-MAPVALUES-0000000019
      <-- KSTREAM-AGGREGATE-0000000014
    Processor: KSTREAM-JOIN-0000000007 (stores: [table-store])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-source
    Processor: KSTREAM-LEFTJOIN-0000000012 (stores: [table-store])
      --> KSTREAM-SINK-0000000013
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-source
    Processor: KSTREAM-MAPVALUES-0000000019 (stores: [])
      --> KSTREAM-SINK-0000000020
      <-- KTABLE-TOSTREAM-0000000018
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KSTREAM-JOIN-0000000007
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KSTREAM-LEFTJOIN-0000000012
    Sink: KSTREAM-SINK-0000000020 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000019
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000003-repartition-filter
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-KEY-SELECT-0000000003-repartition-filter (stores: [])
      --> KSTREAM-KEY-SELECT-0000000003-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000003
    Sink: KSTREAM-KEY-SELECT-0000000003-repartition-sink (topic: KSTREAM-KEY-SELECT-0000000003-repartition)
      <-- KSTREAM-KEY-SELECT-0000000003-repartition-filter

`,
	"rekey-mapvalues-join": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000007 (topics: [KSTREAM-MAPVALUES-0000000004-repartition])
      --> KSTREAM-JOIN-0000000008
    Processor: KSTREAM-JOIN-0000000008 (stores: [table-store])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-SOURCE-0000000007
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KSTREAM-JOIN-0000000008
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> KSTREAM-MAPVALUES-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])
      --> KSTREAM-FILTER-0000000006, c1-repartition-filter, c2-repartition-filter
      <-- KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-FILTER-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-MAPVALUES-0000000004
    Processor: c1-repartition-filter (stores: [])
      --> c1-repartition-sink
      <-- KSTREAM-MAPVALUES-0000000004
    Processor: c2-repartition-filter (stores: [])
      --> c2-repartition-sink
      <-- KSTREAM-MAPVALUES-0000000004
    Sink: KSTREAM-SINK-0000000005 (topic: KSTREAM-MAPVALUES-0000000004-repartition)
      <-- KSTREAM-FILTER-0000000006
    Sink: c1-repartition-sink (topic: c1-repartition)
      <-- c1-repartition-filter
    Sink: c2-repartition-sink (topic: c2-repartition)
      <-- c2-repartition-filter

  Sub-topology: 2
    Source: c1-repartition-source (topics: [c1-repartition])
      --> KSTREAM-AGGREGATE-0000000010
    Processor: KSTREAM-AGGREGATE-0000000010 (stores: [c1])
      --> KTABLE-TOSTREAM-0000000014
      <-- c1-repartition-source
    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])
      --> KSTREAM-SINK-0000000015
      <-- KSTREAM-AGGREGATE-0000000010
    Sink: KSTREAM-SINK-0000000015 (topic: c1)
      <-- KTABLE-TOSTREAM-0000000014

  Sub-topology: 3
    Source: c2-repartition-source (topics: [c2-repartition])
      --> KSTREAM-AGGREGATE-0000000016
    Processor: KSTREAM-AGGREGATE-0000000016 (stores: [c2])
      --> KTABLE-TOSTREAM-0000000020
      <-- c2-repartition-source
    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])
      --> KSTREAM-SINK-0000000021
      <-- KSTREAM-AGGREGATE-0000000016
    Sink: KSTREAM-SINK-0000000021 (topic: c2)
      <-- KTABLE-TOSTREAM-0000000020

`,
	"rekey-filter-count-and-to": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000010, c-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: c-repartition-filter (stores: [])
      --> c-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: KSTREAM-SINK-0000000010 (topic: direct)
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: c-repartition-sink (topic: c-repartition)
      <-- c-repartition-filter

  Sub-topology: 1
    Source: c-repartition-source (topics: [c-repartition])
      --> KSTREAM-FILTER-0000000002
    Processor: KSTREAM-FILTER-0000000002 (stores: [])
      --> KSTREAM-AGGREGATE-0000000003, KSTREAM-SINK-0000000009
      <-- c-repartition-source
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [c])
      --> KTABLE-TOSTREAM-0000000007
      <-- KSTREAM-FILTER-0000000002
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: counts)
      <-- KTABLE-TOSTREAM-0000000007
    Sink: KSTREAM-SINK-0000000009 (topic: rekeyed)
      <-- KSTREAM-FILTER-0000000002

`,
	"totable": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000004, KSTREAM-TOTABLE-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000004 (stores: [])
      --> KSTREAM-TOTABLE-0000000005-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-TOTABLE-0000000001 (stores: [latest])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-TOTABLE-0000000005-repartition-filter (stores: [])
      --> KSTREAM-TOTABLE-0000000005-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000004
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-TOTABLE-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KTABLE-TOSTREAM-0000000002
    Sink: KSTREAM-TOTABLE-0000000005-repartition-sink (topic: KSTREAM-TOTABLE-0000000005-repartition)
      <-- KSTREAM-TOTABLE-0000000005-repartition-filter

  Sub-topology: 1
    Source: KSTREAM-TOTABLE-0000000005-repartition-source (topics: [KSTREAM-TOTABLE-0000000005-repartition])
      --> KSTREAM-TOTABLE-0000000005
    Processor: KSTREAM-TOTABLE-0000000005 (stores: [by-value])
      --> KTABLE-TOSTREAM-0000000009
      <-- KSTREAM-TOTABLE-0000000005-repartition-source
    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- KSTREAM-TOTABLE-0000000005
    Sink: KSTREAM-SINK-0000000010 (topic: out2)
      <-- KTABLE-TOSTREAM-0000000009

`,
	"table-ops": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-FILTER-0000000006, KTABLE-FILTER-0000000002, KTABLE-MAPVALUES-0000000010
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-FILTER-0000000002 (stores: [])
      --> KTABLE-MAPVALUES-0000000003
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-FILTER-0000000006 (stores: [not-filtered])
      --> with-key
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-MAPVALUES-0000000010 (stores: [mapped])
      --> keep
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-MAPVALUES-0000000003 (stores: [])
      --> KTABLE-TOSTREAM-0000000004
      <-- KTABLE-FILTER-0000000002
    Processor: keep (stores: [])
      --> KTABLE-TOSTREAM-0000000012
      <-- KTABLE-MAPVALUES-0000000010
    Processor: with-key (stores: [])
      --> changes
      <-- KTABLE-FILTER-0000000006
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KTABLE-MAPVALUES-0000000003
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- keep
    Processor: changes (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- with-key
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KTABLE-TOSTREAM-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: out2)
      <-- changes
    Sink: KSTREAM-SINK-0000000013 (topic: out3)
      <-- KTABLE-TOSTREAM-0000000012

`,
	"table-groupby": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-SELECT-0000000002, regroup
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SELECT-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003, KSTREAM-SINK-0000000008
      <-- KTABLE-SOURCE-0000000001
    Processor: regroup (stores: [])
      --> KSTREAM-SINK-0000000014
      <-- KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: cnt-repartition)
      <-- KTABLE-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000008 (topic: red-repartition)
      <-- KTABLE-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000014 (topic: regroup-repartition)
      <-- regroup

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000004 (topics: [cnt-repartition])
      --> KTABLE-AGGREGATE-0000000005
    Processor: KTABLE-AGGREGATE-0000000005 (stores: [cnt])
      --> KTABLE-TOSTREAM-0000000006
      <-- KSTREAM-SOURCE-0000000004
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KTABLE-AGGREGATE-0000000005
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

  Sub-topology: 2
    Source: KSTREAM-SOURCE-0000000009 (topics: [red-repartition])
      --> KTABLE-REDUCE-0000000010
    Processor: KTABLE-REDUCE-0000000010 (stores: [red])
      --> KTABLE-TOSTREAM-0000000011
      <-- KSTREAM-SOURCE-0000000009
    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])
      --> KSTREAM-SINK-0000000012
      <-- KTABLE-REDUCE-0000000010
    Sink: KSTREAM-SINK-0000000012 (topic: out)
      <-- KTABLE-TOSTREAM-0000000011

  Sub-topology: 3
    Source: KSTREAM-SOURCE-0000000015 (topics: [regroup-repartition])
      --> KTABLE-AGGREGATE-0000000016, KTABLE-AGGREGATE-0000000021
    Processor: KTABLE-AGGREGATE-0000000016 (stores: [agg])
      --> KTABLE-TOSTREAM-0000000017
      <-- KSTREAM-SOURCE-0000000015
    Processor: KTABLE-AGGREGATE-0000000021 (stores: [cnt2])
      --> KTABLE-TOSTREAM-0000000022
      <-- KSTREAM-SOURCE-0000000015
    Processor: KTABLE-TOSTREAM-0000000017 (stores: [])
      --> KSTREAM-SINK-0000000018
      <-- KTABLE-AGGREGATE-0000000016
    Processor: KTABLE-TOSTREAM-0000000022 (stores: [])
      --> KSTREAM-SINK-0000000023
      <-- KTABLE-AGGREGATE-0000000021
    Sink: KSTREAM-SINK-0000000018 (topic: out)
      <-- KTABLE-TOSTREAM-0000000017
    Sink: KSTREAM-SINK-0000000023 (topic: out)
      <-- KTABLE-TOSTREAM-0000000022

`,
	"table-joins": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Source: KSTREAM-SOURCE-0000000002 (topics: [right])
      --> KTABLE-SOURCE-0000000003
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-JOINTHIS-0000000005, KTABLE-JOINTHIS-0000000015, lj-join-this
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SOURCE-0000000003 (stores: [right-store])
      --> KTABLE-JOINOTHER-0000000006, KTABLE-JOINOTHER-0000000016, lj-join-other
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-JOINOTHER-0000000006 (stores: [left-store])
      --> KTABLE-MERGE-0000000004
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-JOINOTHER-0000000016 (stores: [left-store])
      --> KTABLE-MERGE-0000000014
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-JOINTHIS-0000000005 (stores: [right-store])
      --> KTABLE-MERGE-0000000004
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-JOINTHIS-0000000015 (stores: [right-store])
      --> KTABLE-MERGE-0000000014
      <-- KTABLE-SOURCE-0000000001
    Processor: lj-join-other (stores: [left-store])
      --> lj
      <-- KTABLE-SOURCE-0000000003
    Processor: lj-join-this (stores: [right-store])
      --> lj
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-MERGE-0000000004 (stores: [])
      --> KTABLE-TOSTREAM-0000000007
      <-- KTABLE-JOINTHIS-0000000005, KTABLE-JOINOTHER-0000000006
    Processor: KTABLE-MERGE-0000000014 (stores: [oj-store])
      --> KTABLE-TOSTREAM-0000000017
      <-- KTABLE-JOINTHIS-0000000015, KTABLE-JOINOTHER-0000000016
    Processor: lj (stores: [])
      --> KTABLE-TOSTREAM-0000000012
      <-- lj-join-this, lj-join-other
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KTABLE-MERGE-0000000004
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- lj
    Processor: KTABLE-TOSTREAM-0000000017 (stores: [])
      --> KSTREAM-SINK-0000000018
      <-- KTABLE-MERGE-0000000014
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KTABLE-TOSTREAM-0000000012
    Sink: KSTREAM-SINK-0000000018 (topic: out)
      <-- KTABLE-TOSTREAM-0000000017

`,
	"table-join-derived": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000002 (topics: [right])
      --> KTABLE-SOURCE-0000000003
    Processor: KTABLE-SOURCE-0000000003 (stores: [right-store])
      --> KTABLE-MAPVALUES-0000000005, KTABLE-FILTER-0000000011
      <-- KSTREAM-SOURCE-0000000002
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-FILTER-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-FILTER-0000000004 (stores: [])
      --> KTABLE-JOINTHIS-0000000007
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-MAPVALUES-0000000005 (stores: [])
      --> KTABLE-JOINOTHER-0000000008
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-JOINOTHER-0000000008 (stores: [left-store])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-MAPVALUES-0000000005
    Processor: KTABLE-JOINTHIS-0000000007 (stores: [right-store])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-FILTER-0000000004
    Processor: KTABLE-MERGE-0000000006 (stores: [j1])
      --> KTABLE-JOINTHIS-0000000014, KTABLE-TOSTREAM-0000000009
      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008
    Processor: KTABLE-FILTER-0000000011 (stores: [right-filtered])
      --> KTABLE-MAPVALUES-0000000012
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-MAPVALUES-0000000012 (stores: [])
      --> KTABLE-JOINOTHER-0000000015
      <-- KTABLE-FILTER-0000000011
    Processor: KTABLE-JOINOTHER-0000000015 (stores: [j1])
      --> KTABLE-MERGE-0000000013
      <-- KTABLE-MAPVALUES-0000000012
    Processor: KTABLE-JOINTHIS-0000000014 (stores: [right-filtered])
      --> KTABLE-MERGE-0000000013
      <-- KTABLE-MERGE-0000000006
    Processor: KTABLE-MERGE-0000000013 (stores: [])
      --> KTABLE-FILTER-0000000016
      <-- KTABLE-JOINTHIS-0000000014, KTABLE-JOINOTHER-0000000015
    Processor: KTABLE-FILTER-0000000016 (stores: [])
      --> KTABLE-TOSTREAM-0000000017
      <-- KTABLE-MERGE-0000000013
    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- KTABLE-MERGE-0000000006
    Processor: KTABLE-TOSTREAM-0000000017 (stores: [])
      --> KSTREAM-SINK-0000000018
      <-- KTABLE-FILTER-0000000016
    Sink: KSTREAM-SINK-0000000010 (topic: out)
      <-- KTABLE-TOSTREAM-0000000009
    Sink: KSTREAM-SINK-0000000018 (topic: out)
      <-- KTABLE-TOSTREAM-0000000017

`,
	"stream-table-join": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-JOIN-0000000003, enrich
    Processor: KSTREAM-JOIN-0000000003 (stores: [table-store])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Processor: enrich (stores: [table-store])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-SOURCE-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- KSTREAM-JOIN-0000000003
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- enrich
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

`,
	"stream-totable-join": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-TOTABLE-0000000001
    Source: KSTREAM-SOURCE-0000000002 (topics: [right])
      --> KTABLE-SOURCE-0000000003
    Processor: KSTREAM-TOTABLE-0000000001 (stores: [as-table])
      --> KTABLE-JOINTHIS-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SOURCE-0000000003 (stores: [right-store])
      --> KTABLE-JOINOTHER-0000000006
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-JOINOTHER-0000000006 (stores: [as-table])
      --> KTABLE-MERGE-0000000004
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-JOINTHIS-0000000005 (stores: [right-store])
      --> KTABLE-MERGE-0000000004
      <-- KSTREAM-TOTABLE-0000000001
    Processor: KTABLE-MERGE-0000000004 (stores: [])
      --> KTABLE-TOSTREAM-0000000007
      <-- KTABLE-JOINTHIS-0000000005, KTABLE-JOINOTHER-0000000006
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KTABLE-MERGE-0000000004
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007

`,
	"global": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-LEFTJOIN-0000000004
    Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KSTREAM-LEFTJOIN-0000000004

  Sub-topology: 1 for global store (will not generate tasks)
    Source: KSTREAM-SOURCE-0000000001 (topics: [products])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [products-store])
      --> none
      <-- KSTREAM-SOURCE-0000000001
  Sub-topology: 2
    Source: KSTREAM-SOURCE-0000000003 (topics: [other])
      --> enrich
    Processor: enrich (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-SOURCE-0000000003
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- enrich

`,
	"named-sources-order": `Topologies:
   Sub-topology: 0
    Source: zeta (topics: [z])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> zc-repartition-filter
      <-- zeta
    Processor: zc-repartition-filter (stores: [])
      --> zc-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: zc-repartition-sink (topic: zc-repartition)
      <-- zc-repartition-filter

  Sub-topology: 1
    Source: zc-repartition-source (topics: [zc-repartition])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [zc])
      --> KTABLE-TOSTREAM-0000000006
      <-- zc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-AGGREGATE-0000000002
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

  Sub-topology: 2
    Source: alpha (topics: [a])
      --> KSTREAM-SINK-0000000009
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- alpha

  Sub-topology: 3
    Source: KSTREAM-SOURCE-0000000010 (topics: [m])
      --> KSTREAM-KEY-SELECT-0000000011
    Processor: KSTREAM-KEY-SELECT-0000000011 (stores: [])
      --> Mid-repartition-filter
      <-- KSTREAM-SOURCE-0000000010
    Processor: Mid-repartition-filter (stores: [])
      --> Mid-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000011
    Sink: Mid-repartition-sink (topic: Mid-repartition)
      <-- Mid-repartition-filter

  Sub-topology: 4
    Source: Mid-repartition-source (topics: [Mid-repartition])
      --> KSTREAM-SINK-0000000015
    Sink: KSTREAM-SINK-0000000015 (topic: out)
      <-- Mid-repartition-source

`,
	"merge-rekey-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [a])
      --> KSTREAM-KEY-SELECT-0000000001
    Source: KSTREAM-SOURCE-0000000002 (topics: [c])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-MERGE-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> KSTREAM-MERGE-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-MERGE-0000000004 (stores: [])
      --> merged-counts-repartition-filter
      <-- KSTREAM-KEY-SELECT-0000000001, KSTREAM-KEY-SELECT-0000000003
    Processor: merged-counts-repartition-filter (stores: [])
      --> merged-counts-repartition-sink
      <-- KSTREAM-MERGE-0000000004
    Sink: merged-counts-repartition-sink (topic: merged-counts-repartition)
      <-- merged-counts-repartition-filter

  Sub-topology: 1
    Source: merged-counts-repartition-source (topics: [merged-counts-repartition])
      --> KSTREAM-AGGREGATE-0000000005
    Processor: KSTREAM-AGGREGATE-0000000005 (stores: [merged-counts])
      --> KTABLE-TOSTREAM-0000000009
      <-- merged-counts-repartition-source
    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- KSTREAM-AGGREGATE-0000000005
    Sink: KSTREAM-SINK-0000000010 (topic: out)
      <-- KTABLE-TOSTREAM-0000000009

`,
	"process-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-PROCESSOR-0000000001
    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [])
      --> pc-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: pc-repartition-filter (stores: [])
      --> pc-repartition-sink
      <-- KSTREAM-PROCESSOR-0000000001
    Sink: pc-repartition-sink (topic: pc-repartition)
      <-- pc-repartition-filter

  Sub-topology: 1
    Source: pc-repartition-source (topics: [pc-repartition])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [pc])
      --> KTABLE-TOSTREAM-0000000006
      <-- pc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-AGGREGATE-0000000002
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

`,
	"rekey-process-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-PROCESSOR-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-PROCESSOR-0000000002 (stores: [])
      --> pc-repartition-filter
      <-- KSTREAM-KEY-SELECT-0000000001
    Processor: pc-repartition-filter (stores: [])
      --> pc-repartition-sink
      <-- KSTREAM-PROCESSOR-0000000002
    Sink: pc-repartition-sink (topic: pc-repartition)
      <-- pc-repartition-filter

  Sub-topology: 1
    Source: pc-repartition-source (topics: [pc-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [pc])
      --> KTABLE-TOSTREAM-0000000007
      <-- pc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007

`,
	"table-tostream-rekey-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000003
      <-- KTABLE-SOURCE-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> tc-repartition-filter
      <-- KTABLE-TOSTREAM-0000000002
    Processor: tc-repartition-filter (stores: [])
      --> tc-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000003
    Sink: tc-repartition-sink (topic: tc-repartition)
      <-- tc-repartition-filter

  Sub-topology: 1
    Source: tc-repartition-source (topics: [tc-repartition])
      --> KSTREAM-AGGREGATE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000004 (stores: [tc])
      --> KTABLE-TOSTREAM-0000000008
      <-- tc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-AGGREGATE-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KTABLE-TOSTREAM-0000000008

`,
	"named-join-rekey": `Topologies:
   Sub-topology: 0
    Source: enrich-repartition-source (topics: [enrich-repartition])
      --> enrich, enrich2
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Processor: enrich (stores: [table-store])
      --> KSTREAM-SINK-0000000008
      <-- enrich-repartition-source
    Processor: enrich2 (stores: [table-store])
      --> KSTREAM-SINK-0000000013
      <-- enrich-repartition-source
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- enrich
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- enrich2
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> enrich-repartition-filter
      <-- KSTREAM-SOURCE-0000000002
    Processor: enrich-repartition-filter (stores: [])
      --> enrich-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000003
    Sink: enrich-repartition-sink (topic: enrich-repartition)
      <-- enrich-repartition-filter

`,
	"aggregate-reduce": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-AGGREGATE-0000000001, KSTREAM-REDUCE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [agg])
      --> KTABLE-TOSTREAM-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-REDUCE-0000000004 (stores: [red])
      --> KTABLE-TOSTREAM-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-AGGREGATE-0000000001
    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-REDUCE-0000000004
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KTABLE-TOSTREAM-0000000002
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KTABLE-TOSTREAM-0000000005

`,
	"flatmap-map-stateful": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-MAP-0000000011-repartition-source (topics: [KSTREAM-MAP-0000000011-repartition])
      --> KSTREAM-JOIN-0000000015
    Processor: KSTREAM-JOIN-0000000015 (stores: [table-store])
      --> KSTREAM-SINK-0000000016
      <-- KSTREAM-MAP-0000000011-repartition-source
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000016 (topic: out)
      <-- KSTREAM-JOIN-0000000015
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-FLATMAP-0000000003
    Processor: KSTREAM-FLATMAP-0000000003 (stores: [])
      --> fc-repartition-filter
      <-- KSTREAM-SOURCE-0000000002
    Processor: fc-repartition-filter (stores: [])
      --> fc-repartition-sink
      <-- KSTREAM-FLATMAP-0000000003
    Sink: fc-repartition-sink (topic: fc-repartition)
      <-- fc-repartition-filter

  Sub-topology: 2
    Source: fc-repartition-source (topics: [fc-repartition])
      --> KSTREAM-AGGREGATE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000004 (stores: [fc])
      --> KTABLE-TOSTREAM-0000000008
      <-- fc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-AGGREGATE-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KTABLE-TOSTREAM-0000000008

  Sub-topology: 3
    Source: KSTREAM-SOURCE-0000000010 (topics: [in2])
      --> KSTREAM-MAP-0000000011
    Processor: KSTREAM-MAP-0000000011 (stores: [])
      --> KSTREAM-MAP-0000000011-repartition-filter
      <-- KSTREAM-SOURCE-0000000010
    Processor: KSTREAM-MAP-0000000011-repartition-filter (stores: [])
      --> KSTREAM-MAP-0000000011-repartition-sink
      <-- KSTREAM-MAP-0000000011
    Sink: KSTREAM-MAP-0000000011-repartition-sink (topic: KSTREAM-MAP-0000000011-repartition)
      <-- KSTREAM-MAP-0000000011-repartition-filter

`,
	"rekey-totable-and-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-TOTABLE-0000000002-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-TOTABLE-0000000002-repartition-filter (stores: [])
      --> KSTREAM-TOTABLE-0000000002-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: KSTREAM-TOTABLE-0000000002-repartition-sink (topic: KSTREAM-TOTABLE-0000000002-repartition)
      <-- KSTREAM-TOTABLE-0000000002-repartition-filter

  Sub-topology: 1
    Source: KSTREAM-TOTABLE-0000000002-repartition-source (topics: [KSTREAM-TOTABLE-0000000002-repartition])
      --> KSTREAM-TOTABLE-0000000002, KSTREAM-JOIN-0000000021, KSTREAM-AGGREGATE-0000000008, KSTREAM-TOTABLE-0000000014
    Processor: KSTREAM-AGGREGATE-0000000008 (stores: [c])
      --> KTABLE-TOSTREAM-0000000012
      <-- KSTREAM-TOTABLE-0000000002-repartition-source
    Processor: KSTREAM-TOTABLE-0000000002 (stores: [t])
      --> KTABLE-TOSTREAM-0000000006
      <-- KSTREAM-TOTABLE-0000000002-repartition-source
    Processor: KSTREAM-JOIN-0000000021 (stores: [t2])
      --> KSTREAM-SINK-0000000022
      <-- KSTREAM-TOTABLE-0000000002-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-TOTABLE-0000000002
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- KSTREAM-AGGREGATE-0000000008
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KTABLE-TOSTREAM-0000000012
    Sink: KSTREAM-SINK-0000000022 (topic: out)
      <-- KSTREAM-JOIN-0000000021
    Processor: KSTREAM-TOTABLE-0000000014 (stores: [t2])
      --> none
      <-- KSTREAM-TOTABLE-0000000002-repartition-source

`,
	"join-of-join": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KTABLE-SOURCE-0000000001
    Source: KSTREAM-SOURCE-0000000002 (topics: [right])
      --> KTABLE-SOURCE-0000000003
    Processor: KTABLE-SOURCE-0000000001 (stores: [left-store])
      --> KTABLE-JOINTHIS-0000000007
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SOURCE-0000000003 (stores: [right-store])
      --> KTABLE-JOINOTHER-0000000008
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-JOINOTHER-0000000008 (stores: [left-store])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-JOINTHIS-0000000007 (stores: [right-store])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-SOURCE-0000000001
    Source: KSTREAM-SOURCE-0000000004 (topics: [extra])
      --> KTABLE-SOURCE-0000000005
    Processor: KTABLE-MERGE-0000000006 (stores: [])
      --> KTABLE-FILTER-0000000017, KTABLE-JOINTHIS-0000000010
      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008
    Processor: KTABLE-SOURCE-0000000005 (stores: [extra-store])
      --> KTABLE-JOINTHIS-0000000019, KTABLE-JOINOTHER-0000000011
      <-- KSTREAM-SOURCE-0000000004
    Processor: KTABLE-FILTER-0000000017 (stores: [])
      --> KTABLE-JOINOTHER-0000000020
      <-- KTABLE-MERGE-0000000006
    Processor: KTABLE-JOINOTHER-0000000011 (stores: [left-store, right-store])
      --> KTABLE-MERGE-0000000009
      <-- KTABLE-SOURCE-0000000005
    Processor: KTABLE-JOINOTHER-0000000020 (stores: [extra-store])
      --> KTABLE-MERGE-0000000018
      <-- KTABLE-FILTER-0000000017
    Processor: KTABLE-JOINTHIS-0000000010 (stores: [extra-store])
      --> KTABLE-MERGE-0000000009
      <-- KTABLE-MERGE-0000000006
    Processor: KTABLE-JOINTHIS-0000000019 (stores: [left-store, right-store])
      --> KTABLE-MERGE-0000000018
      <-- KTABLE-SOURCE-0000000005
    Source: KSTREAM-SOURCE-0000000014 (topics: [in])
      --> KSTREAM-JOIN-0000000015
    Processor: KTABLE-MERGE-0000000009 (stores: [])
      --> KTABLE-TOSTREAM-0000000012
      <-- KTABLE-JOINTHIS-0000000010, KTABLE-JOINOTHER-0000000011
    Processor: KTABLE-MERGE-0000000018 (stores: [])
      --> KTABLE-TOSTREAM-0000000021
      <-- KTABLE-JOINTHIS-0000000019, KTABLE-JOINOTHER-0000000020
    Processor: KSTREAM-JOIN-0000000015 (stores: [left-store, right-store])
      --> KSTREAM-SINK-0000000016
      <-- KSTREAM-SOURCE-0000000014
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- KTABLE-MERGE-0000000009
    Processor: KTABLE-TOSTREAM-0000000021 (stores: [])
      --> KSTREAM-SINK-0000000022
      <-- KTABLE-MERGE-0000000018
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KTABLE-TOSTREAM-0000000012
    Sink: KSTREAM-SINK-0000000016 (topic: out2)
      <-- KSTREAM-JOIN-0000000015
    Sink: KSTREAM-SINK-0000000022 (topic: out3)
      <-- KTABLE-TOSTREAM-0000000021

`,
	"big-fanout": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FILTER-0000000045, KSTREAM-FILTER-0000000024, KSTREAM-FILTER-0000000020, KSTREAM-FILTER-0000000028, KSTREAM-FILTER-0000000003, KSTREAM-FILTER-0000000012, KSTREAM-FILTER-0000000017, KSTREAM-FILTER-0000000051, KSTREAM-FILTER-0000000007, KSTREAM-FILTER-0000000001, KSTREAM-FILTER-0000000040, KSTREAM-FILTER-0000000053, KSTREAM-FILTER-0000000057, KSTREAM-FILTER-0000000034, KSTREAM-FILTER-0000000037
    Processor: KSTREAM-FILTER-0000000028 (stores: [])
      --> KSTREAM-MAPVALUES-0000000029
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000045 (stores: [])
      --> KSTREAM-MAPVALUES-0000000046
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000007 (stores: [])
      --> KSTREAM-MAPVALUES-0000000008
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000012 (stores: [])
      --> KSTREAM-MAPVALUES-0000000013
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000040 (stores: [])
      --> KSTREAM-MAPVALUES-0000000041
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000057 (stores: [])
      --> KSTREAM-MAPVALUES-0000000058
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000029 (stores: [])
      --> KSTREAM-MAPVALUES-0000000030
      <-- KSTREAM-FILTER-0000000028
    Processor: KSTREAM-MAPVALUES-0000000046 (stores: [])
      --> KSTREAM-MAPVALUES-0000000047
      <-- KSTREAM-FILTER-0000000045
    Processor: KSTREAM-FILTER-0000000003 (stores: [])
      --> KSTREAM-MAPVALUES-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000020 (stores: [])
      --> KSTREAM-MAPVALUES-0000000021
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000024 (stores: [])
      --> KSTREAM-MAPVALUES-0000000025
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000053 (stores: [])
      --> KSTREAM-MAPVALUES-0000000054
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000008 (stores: [])
      --> KSTREAM-MAPVALUES-0000000009
      <-- KSTREAM-FILTER-0000000007
    Processor: KSTREAM-MAPVALUES-0000000013 (stores: [])
      --> KSTREAM-MAPVALUES-0000000014
      <-- KSTREAM-FILTER-0000000012
    Processor: KSTREAM-MAPVALUES-0000000030 (stores: [])
      --> KSTREAM-MAPVALUES-0000000031
      <-- KSTREAM-MAPVALUES-0000000029
    Processor: KSTREAM-MAPVALUES-0000000041 (stores: [])
      --> KSTREAM-MAPVALUES-0000000042
      <-- KSTREAM-FILTER-0000000040
    Processor: KSTREAM-MAPVALUES-0000000047 (stores: [])
      --> KSTREAM-MAPVALUES-0000000048
      <-- KSTREAM-MAPVALUES-0000000046
    Processor: KSTREAM-MAPVALUES-0000000058 (stores: [])
      --> KSTREAM-MAPVALUES-0000000059
      <-- KSTREAM-FILTER-0000000057
    Processor: KSTREAM-FILTER-0000000017 (stores: [])
      --> KSTREAM-PEEK-0000000018
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000034 (stores: [])
      --> KSTREAM-SINK-0000000035, KSTREAM-SINK-0000000036
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000037 (stores: [])
      --> KSTREAM-MAPVALUES-0000000038
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])
      --> KSTREAM-PEEK-0000000005
      <-- KSTREAM-FILTER-0000000003
    Processor: KSTREAM-MAPVALUES-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010, KSTREAM-SINK-0000000011
      <-- KSTREAM-MAPVALUES-0000000008
    Processor: KSTREAM-MAPVALUES-0000000014 (stores: [])
      --> KSTREAM-MAPVALUES-0000000015
      <-- KSTREAM-MAPVALUES-0000000013
    Processor: KSTREAM-MAPVALUES-0000000021 (stores: [])
      --> KSTREAM-SINK-0000000022, KSTREAM-SINK-0000000023
      <-- KSTREAM-FILTER-0000000020
    Processor: KSTREAM-MAPVALUES-0000000025 (stores: [])
      --> KSTREAM-MAPVALUES-0000000026
      <-- KSTREAM-FILTER-0000000024
    Processor: KSTREAM-MAPVALUES-0000000031 (stores: [])
      --> KSTREAM-PEEK-0000000032
      <-- KSTREAM-MAPVALUES-0000000030
    Processor: KSTREAM-MAPVALUES-0000000042 (stores: [])
      --> KSTREAM-PEEK-0000000043
      <-- KSTREAM-MAPVALUES-0000000041
    Processor: KSTREAM-MAPVALUES-0000000048 (stores: [])
      --> KSTREAM-SINK-0000000049, KSTREAM-SINK-0000000050
      <-- KSTREAM-MAPVALUES-0000000047
    Processor: KSTREAM-MAPVALUES-0000000054 (stores: [])
      --> KSTREAM-PEEK-0000000055
      <-- KSTREAM-FILTER-0000000053
    Processor: KSTREAM-MAPVALUES-0000000059 (stores: [])
      --> KSTREAM-SINK-0000000060, KSTREAM-SINK-0000000061
      <-- KSTREAM-MAPVALUES-0000000058
    Processor: KSTREAM-FILTER-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000051 (stores: [])
      --> KSTREAM-SINK-0000000052
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000015 (stores: [])
      --> KSTREAM-SINK-0000000016
      <-- KSTREAM-MAPVALUES-0000000014
    Processor: KSTREAM-MAPVALUES-0000000026 (stores: [])
      --> KSTREAM-SINK-0000000027
      <-- KSTREAM-MAPVALUES-0000000025
    Processor: KSTREAM-MAPVALUES-0000000038 (stores: [])
      --> KSTREAM-SINK-0000000039
      <-- KSTREAM-FILTER-0000000037
    Processor: KSTREAM-PEEK-0000000005 (stores: [])
      --> KSTREAM-FOREACH-0000000006
      <-- KSTREAM-MAPVALUES-0000000004
    Processor: KSTREAM-PEEK-0000000018 (stores: [])
      --> KSTREAM-FOREACH-0000000019
      <-- KSTREAM-FILTER-0000000017
    Processor: KSTREAM-PEEK-0000000032 (stores: [])
      --> KSTREAM-FOREACH-0000000033
      <-- KSTREAM-MAPVALUES-0000000031
    Processor: KSTREAM-PEEK-0000000043 (stores: [])
      --> KSTREAM-FOREACH-0000000044
      <-- KSTREAM-MAPVALUES-0000000042
    Processor: KSTREAM-PEEK-0000000055 (stores: [])
      --> KSTREAM-FOREACH-0000000056
      <-- KSTREAM-MAPVALUES-0000000054
    Processor: KSTREAM-FOREACH-0000000006 (stores: [])
      --> none
      <-- KSTREAM-PEEK-0000000005
    Processor: KSTREAM-FOREACH-0000000019 (stores: [])
      --> none
      <-- KSTREAM-PEEK-0000000018
    Processor: KSTREAM-FOREACH-0000000033 (stores: [])
      --> none
      <-- KSTREAM-PEEK-0000000032
    Processor: KSTREAM-FOREACH-0000000044 (stores: [])
      --> none
      <-- KSTREAM-PEEK-0000000043
    Processor: KSTREAM-FOREACH-0000000056 (stores: [])
      --> none
      <-- KSTREAM-PEEK-0000000055
    Sink: KSTREAM-SINK-0000000002 (topic: out0)
      <-- KSTREAM-FILTER-0000000001
    Sink: KSTREAM-SINK-0000000010 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000009
    Sink: KSTREAM-SINK-0000000011 (topic: more)
      <-- KSTREAM-MAPVALUES-0000000009
    Sink: KSTREAM-SINK-0000000016 (topic: out3)
      <-- KSTREAM-MAPVALUES-0000000015
    Sink: KSTREAM-SINK-0000000022 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000021
    Sink: KSTREAM-SINK-0000000023 (topic: more)
      <-- KSTREAM-MAPVALUES-0000000021
    Sink: KSTREAM-SINK-0000000027 (topic: out6)
      <-- KSTREAM-MAPVALUES-0000000026
    Sink: KSTREAM-SINK-0000000035 (topic: out)
      <-- KSTREAM-FILTER-0000000034
    Sink: KSTREAM-SINK-0000000036 (topic: more)
      <-- KSTREAM-FILTER-0000000034
    Sink: KSTREAM-SINK-0000000039 (topic: out9)
      <-- KSTREAM-MAPVALUES-0000000038
    Sink: KSTREAM-SINK-0000000049 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000048
    Sink: KSTREAM-SINK-0000000050 (topic: more)
      <-- KSTREAM-MAPVALUES-0000000048
    Sink: KSTREAM-SINK-0000000052 (topic: out12)
      <-- KSTREAM-FILTER-0000000051
    Sink: KSTREAM-SINK-0000000060 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000059
    Sink: KSTREAM-SINK-0000000061 (topic: more)
      <-- KSTREAM-MAPVALUES-0000000059

`,
	"multi-topics-hash": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [a-very-long-topic-name, payments, orders, zzz, shipments])
      --> KSTREAM-SINK-0000000001
    Sink: KSTREAM-SINK-0000000001 (topic: out)
      <-- KSTREAM-SOURCE-0000000000

`,
	"process-two-stores": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-PROCESSOR-0000000001
    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [gamma-7, alpha-store, beta])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-PROCESSOR-0000000001

`,
	"processvalues-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-PROCESSVALUES-0000000001
    Processor: KSTREAM-PROCESSVALUES-0000000001 (stores: [])
      --> KSTREAM-AGGREGATE-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [pvc])
      --> KTABLE-TOSTREAM-0000000003
      <-- KSTREAM-PROCESSVALUES-0000000001
    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-AGGREGATE-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- KTABLE-TOSTREAM-0000000003

`,
	"rekey-processvalues-two-counts": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-PROCESSVALUES-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-PROCESSVALUES-0000000002 (stores: [])
      --> c1-repartition-filter, c2-repartition-filter
      <-- KSTREAM-KEY-SELECT-0000000001
    Processor: c1-repartition-filter (stores: [])
      --> c1-repartition-sink
      <-- KSTREAM-PROCESSVALUES-0000000002
    Processor: c2-repartition-filter (stores: [])
      --> c2-repartition-sink
      <-- KSTREAM-PROCESSVALUES-0000000002
    Sink: c1-repartition-sink (topic: c1-repartition)
      <-- c1-repartition-filter
    Sink: c2-repartition-sink (topic: c2-repartition)
      <-- c2-repartition-filter

  Sub-topology: 1
    Source: c1-repartition-source (topics: [c1-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [c1])
      --> KTABLE-TOSTREAM-0000000007
      <-- c1-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007

  Sub-topology: 2
    Source: c2-repartition-source (topics: [c2-repartition])
      --> KSTREAM-AGGREGATE-0000000009
    Processor: KSTREAM-AGGREGATE-0000000009 (stores: [c2])
      --> KTABLE-TOSTREAM-0000000013
      <-- c2-repartition-source
    Processor: KTABLE-TOSTREAM-0000000013 (stores: [])
      --> KSTREAM-SINK-0000000014
      <-- KSTREAM-AGGREGATE-0000000009
    Sink: KSTREAM-SINK-0000000014 (topic: out)
      <-- KTABLE-TOSTREAM-0000000013

`,
	"processvalues-named-store": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> pv
    Processor: pv (stores: [pv-store])
      --> KSTREAM-MAPVALUES-0000000001
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- pv
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000001

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000003 (topics: [in2])
      --> KSTREAM-PROCESSVALUES-0000000004
    Processor: KSTREAM-PROCESSVALUES-0000000004 (stores: [])
      --> KSTREAM-PROCESSVALUES-0000000005
      <-- KSTREAM-SOURCE-0000000003
    Processor: KSTREAM-PROCESSVALUES-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-PROCESSVALUES-0000000004
    Sink: KSTREAM-SINK-0000000006 (topic: out2)
      <-- KSTREAM-PROCESSVALUES-0000000005

`,
	"groupby-named-two-aggs": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> g
    Processor: g (stores: [])
      --> g-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: g-repartition-filter (stores: [])
      --> g-repartition-sink
      <-- g
    Sink: g-repartition-sink (topic: g-repartition)
      <-- g-repartition-filter

  Sub-topology: 1
    Source: g-repartition-source (topics: [g-repartition])
      --> KSTREAM-AGGREGATE-0000000002, KSTREAM-AGGREGATE-0000000008
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [gc])
      --> KTABLE-TOSTREAM-0000000006
      <-- g-repartition-source
    Processor: KSTREAM-AGGREGATE-0000000008 (stores: [ga])
      --> KTABLE-TOSTREAM-0000000012
      <-- g-repartition-source
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000012 (stores: [])
      --> KSTREAM-SINK-0000000013
      <-- KSTREAM-AGGREGATE-0000000008
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006
    Sink: KSTREAM-SINK-0000000013 (topic: out)
      <-- KTABLE-TOSTREAM-0000000012

`,
	"rekey-repartition-and-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> explicit-repartition-filter, c-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: c-repartition-filter (stores: [])
      --> c-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Processor: explicit-repartition-filter (stores: [])
      --> explicit-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: c-repartition-sink (topic: c-repartition)
      <-- c-repartition-filter
    Sink: explicit-repartition-sink (topic: explicit-repartition)
      <-- explicit-repartition-filter

  Sub-topology: 1
    Source: c-repartition-source (topics: [c-repartition])
      --> KSTREAM-AGGREGATE-0000000006
    Processor: KSTREAM-AGGREGATE-0000000006 (stores: [c])
      --> KTABLE-TOSTREAM-0000000010
      <-- c-repartition-source
    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])
      --> KSTREAM-SINK-0000000011
      <-- KSTREAM-AGGREGATE-0000000006
    Sink: KSTREAM-SINK-0000000011 (topic: out)
      <-- KTABLE-TOSTREAM-0000000010

  Sub-topology: 2
    Source: explicit-repartition-source (topics: [explicit-repartition])
      --> KSTREAM-SINK-0000000005
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- explicit-repartition-source

`,
	"rekey-split-default-count": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> rc-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: rc-repartition-filter (stores: [])
      --> rc-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: rc-repartition-sink (topic: rc-repartition)
      <-- rc-repartition-filter

  Sub-topology: 1
    Source: rc-repartition-source (topics: [rc-repartition])
      --> KSTREAM-BRANCH-0000000002
    Processor: KSTREAM-BRANCH-0000000002 (stores: [])
      --> KSTREAM-BRANCH-0000000002rest, KSTREAM-BRANCH-0000000002x
      <-- rc-repartition-source
    Processor: KSTREAM-BRANCH-0000000002rest (stores: [])
      --> KSTREAM-AGGREGATE-0000000006
      <-- KSTREAM-BRANCH-0000000002
    Processor: KSTREAM-AGGREGATE-0000000006 (stores: [rc])
      --> KTABLE-TOSTREAM-0000000010
      <-- KSTREAM-BRANCH-0000000002rest
    Processor: KSTREAM-BRANCH-0000000002x (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-BRANCH-0000000002
    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])
      --> KSTREAM-SINK-0000000011
      <-- KSTREAM-AGGREGATE-0000000006
    Sink: KSTREAM-SINK-0000000005 (topic: empty)
      <-- KSTREAM-BRANCH-0000000002x
    Sink: KSTREAM-SINK-0000000011 (topic: out)
      <-- KTABLE-TOSTREAM-0000000010

`,
	"merge-self": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-MERGE-0000000001
    Processor: KSTREAM-MERGE-0000000001 (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- KSTREAM-MERGE-0000000001

`,
	"chained-rekeys": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-FLATMAP-0000000013-repartition-source (topics: [KSTREAM-FLATMAP-0000000013-repartition])
      --> KSTREAM-JOIN-0000000017
    Processor: KSTREAM-JOIN-0000000017 (stores: [table-store])
      --> KSTREAM-SINK-0000000018
      <-- KSTREAM-FLATMAP-0000000013-repartition-source
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000018 (topic: out)
      <-- KSTREAM-JOIN-0000000017
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> none
      <-- KSTREAM-SOURCE-0000000000

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000002 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000003
    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-KEY-SELECT-0000000004 (stores: [])
      --> cc-repartition-filter
      <-- KSTREAM-KEY-SELECT-0000000003
    Processor: cc-repartition-filter (stores: [])
      --> cc-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000004
    Sink: cc-repartition-sink (topic: cc-repartition)
      <-- cc-repartition-filter

  Sub-topology: 2
    Source: cc-repartition-source (topics: [cc-repartition])
      --> KSTREAM-AGGREGATE-0000000005
    Processor: KSTREAM-AGGREGATE-0000000005 (stores: [cc])
      --> KTABLE-TOSTREAM-0000000009
      <-- cc-repartition-source
    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- KSTREAM-AGGREGATE-0000000005
    Sink: KSTREAM-SINK-0000000010 (topic: out)
      <-- KTABLE-TOSTREAM-0000000009

  Sub-topology: 3
    Source: KSTREAM-SOURCE-0000000011 (topics: [in2])
      --> KSTREAM-MAP-0000000012
    Processor: KSTREAM-MAP-0000000012 (stores: [])
      --> KSTREAM-FLATMAP-0000000013
      <-- KSTREAM-SOURCE-0000000011
    Processor: KSTREAM-FLATMAP-0000000013 (stores: [])
      --> KSTREAM-FLATMAP-0000000013-repartition-filter
      <-- KSTREAM-MAP-0000000012
    Processor: KSTREAM-FLATMAP-0000000013-repartition-filter (stores: [])
      --> KSTREAM-FLATMAP-0000000013-repartition-sink
      <-- KSTREAM-FLATMAP-0000000013
    Sink: KSTREAM-FLATMAP-0000000013-repartition-sink (topic: KSTREAM-FLATMAP-0000000013-repartition)
      <-- KSTREAM-FLATMAP-0000000013-repartition-filter

`,
	"table-tostream-join": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000002 (topics: [left])
      --> KTABLE-SOURCE-0000000003
    Processor: KTABLE-SOURCE-0000000003 (stores: [left-store])
      --> KTABLE-TOSTREAM-0000000007, KTABLE-TOSTREAM-0000000004
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-FILTER-0000000008
      <-- KTABLE-SOURCE-0000000003
    Processor: KSTREAM-FILTER-0000000008 (stores: [])
      --> KSTREAM-LEFTJOIN-0000000010
      <-- KTABLE-TOSTREAM-0000000007
    Source: KSTREAM-SOURCE-0000000000 (topics: [table])
      --> KTABLE-SOURCE-0000000001
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-JOIN-0000000005
      <-- KTABLE-SOURCE-0000000003
    Processor: KSTREAM-JOIN-0000000005 (stores: [table-store])
      --> KSTREAM-SINK-0000000006
      <-- KTABLE-TOSTREAM-0000000004
    Processor: KSTREAM-LEFTJOIN-0000000010 (stores: [table-store])
      --> KSTREAM-SINK-0000000011
      <-- KSTREAM-FILTER-0000000008
    Processor: KTABLE-SOURCE-0000000001 (stores: [table-store])
      --> KTABLE-MAPVALUES-0000000009
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KSTREAM-JOIN-0000000005
    Sink: KSTREAM-SINK-0000000011 (topic: out)
      <-- KSTREAM-LEFTJOIN-0000000010
    Processor: KTABLE-MAPVALUES-0000000009 (stores: [])
      --> none
      <-- KTABLE-SOURCE-0000000001

`,
	"wordcount": `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [text-lines])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> by-word
      <-- KSTREAM-SOURCE-0000000000
    Processor: by-word (stores: [])
      --> by-word-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: by-word-repartition-filter (stores: [])
      --> by-word-repartition-sink
      <-- by-word
    Sink: by-word-repartition-sink (topic: by-word-repartition)
      <-- by-word-repartition-filter

  Sub-topology: 1
    Source: by-word-repartition-source (topics: [by-word-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [word-counts])
      --> KTABLE-TOSTREAM-0000000007
      <-- by-word-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: word-counts)
      <-- KTABLE-TOSTREAM-0000000007

`,
}

// A re-keyed stream split into branches that are each counted: Java's optimizer fails on it
// ("Found a null keyChangingChild node", the second branch's path was already moved), so
// there is no Java text to compare; kstream shares one repartition topic, below which the
// peek, the split and both counts run.
func TestSharedRepartitionThroughBranches(t *testing.T) {
	b := kstream.NewBuilder()
	k := dRekey(dIn(b)).Peek(func(string, string) {})
	br := k.Split(kstream.Named("s-")).Branch("x", func(string, string) bool { return true }).DefaultBranch("y")
	kstream.Count(br["s-x"].GroupByKey(), "cx").ToStream().To("out", nil, nil)
	kstream.Count(br["s-y"].GroupByKey(), "cy").ToStream().To("out", nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> cx-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: cx-repartition-filter (stores: [])
      --> cx-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: cx-repartition-sink (topic: cx-repartition)
      <-- cx-repartition-filter

  Sub-topology: 1
    Source: cx-repartition-source (topics: [cx-repartition])
      --> KSTREAM-PEEK-0000000002
    Processor: KSTREAM-PEEK-0000000002 (stores: [])
      --> s-
      <-- cx-repartition-source
    Processor: s- (stores: [])
      --> s-x, s-y
      <-- KSTREAM-PEEK-0000000002
    Processor: s-x (stores: [])
      --> KSTREAM-AGGREGATE-0000000006
      <-- s-
    Processor: s-y (stores: [])
      --> KSTREAM-AGGREGATE-0000000012
      <-- s-
    Processor: KSTREAM-AGGREGATE-0000000006 (stores: [cx])
      --> KTABLE-TOSTREAM-0000000010
      <-- s-x
    Processor: KSTREAM-AGGREGATE-0000000012 (stores: [cy])
      --> KTABLE-TOSTREAM-0000000016
      <-- s-y
    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])
      --> KSTREAM-SINK-0000000011
      <-- KSTREAM-AGGREGATE-0000000006
    Processor: KTABLE-TOSTREAM-0000000016 (stores: [])
      --> KSTREAM-SINK-0000000017
      <-- KSTREAM-AGGREGATE-0000000012
    Sink: KSTREAM-SINK-0000000011 (topic: out)
      <-- KTABLE-TOSTREAM-0000000010
    Sink: KSTREAM-SINK-0000000017 (topic: out)
      <-- KTABLE-TOSTREAM-0000000016

`
	if got := topo.Describe(); got != want {
		t.Errorf("Describe:\n%s", lineDiff(want, got))
	}
	// Build is repeatable: a second Build describes the same topology.
	if again, err := b.Build(); err != nil || again.Describe() != topo.Describe() {
		t.Errorf("a second Build differs (err %v)", err)
	}
}

// A sink whose topic a function chooses is printed as Java prints one with a
// TopicNameExtractor, with the Go function's name where Java has the extractor's class.
func TestDescribeTopicExtractor(t *testing.T) {
	b := kstream.NewBuilder()
	dIn(b).ToTopicFunc(routeByKey, nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `    Sink: KSTREAM-SINK-0000000001 (extractor class: github.com/kstream-go/kstream_test.routeByKey)
      <-- KSTREAM-SOURCE-0000000000
`
	if got := topo.Describe(); !strings.Contains(got, want) {
		t.Errorf("Describe:\n%s\nwant it to contain:\n%s", got, want)
	}
}

func routeByKey(r kstream.Record[string, string]) string { return "out-" + r.Key }
