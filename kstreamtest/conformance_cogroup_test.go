package kstreamtest_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// The cogroup scenarios of the conformance test (issue 12 item 3), reading topics cg1, cg2
// and cg3. They are mirrored one for one, in the same order and with the same store,
// operator and topic names, in testing/conformance/src/main/java/conformance/
// CogroupScenarios.java, and appended to confScenarios by init below.

// confCogroupRecords are the records of cg1, cg2 and cg3, piped in this order after the
// other families' (CogroupScenarios.RECORDS): topic, key, value (nil: a Kafka null) and time
// after T0 in ms; record i has the header i. The keys a, b and k all go to partition 0 of
// 4, so that the windowed scenarios have one stream time per operator with 4 partitions,
// as Java's with one.
var confCogroupRecords = []struct {
	topic      string
	key, value *string
	ms         int64
}{
	{"cg1", confPtr("a"), confPtr("x0"), 1000},
	{"cg2", confPtr("a"), confPtr("y1"), 2000},
	{"cg1", confPtr("b"), confPtr("x2"), 3000},
	{"cg3", confPtr("k"), confPtr("z3"), 4000},
	{"cg2", confPtr("b"), confPtr("y4"), 9000},
	{"cg1", confPtr("a"), nil, 9500},
	{"cg2", nil, confPtr("y6"), 10000},
	{"cg3", confPtr("a"), confPtr("z7"), 12000},
	{"cg1", confPtr("k"), confPtr("x8"), 14000},
	{"cg2", confPtr("a"), confPtr("y9"), 8000},
	{"cg3", confPtr("b"), confPtr("z10"), 16000},
	{"cg1", confPtr("a"), confPtr("x11"), 21000},
	{"cg2", confPtr("b"), confPtr("y12"), 5000},
	{"cg1", confPtr("b"), confPtr("x13"), 4000},
	{"cg3", confPtr("k"), nil, 22000},
	{"cg2", confPtr("a"), confPtr("y15"), 30000},
	{"cg3", confPtr("a"), confPtr("z16"), 31000},
	{"cg1", confPtr("b"), confPtr("x17"), 29000},
	{"cg2", confPtr("k"), confPtr("y18"), 25000},
	{"cg3", nil, nil, 26000},
	{"cg1", confPtr("a"), confPtr("x20"), 50000},
	{"cg2", confPtr("a"), confPtr("y21"), 52000},
	{"cg3", confPtr("b"), confPtr("z22"), 40000},
	{"cg1", confPtr("k"), confPtr("x23"), 33000},
	{"cg2", confPtr("b"), nil, 51000},
	{"cg3", confPtr("a"), confPtr("z25"), 60000},
	{"cg1", confPtr("a"), confPtr("x26"), 61000},
	{"cg2", confPtr("k"), confPtr("y27"), 2000},
	{"cg1", nil, confPtr("x28"), 62000},
	{"cg3", confPtr("b"), confPtr("z29"), 3000},
}

func init() {
	confSetFamilyInput("cogroup", func() []confRecord {
		recs := make([]confRecord, len(confCogroupRecords))
		for i, r := range confCogroupRecords {
			recs[i] = confRecord{topic: r.topic, key: r.key, value: r.value, ts: time.UnixMilli(confT0 + r.ms),
				headers: []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
		}
		return recs
	})
	confScenarios = append(confScenarios, confCogroupScenarios...)
}

// confCogroupScenarios are the cogroup scenarios, in CogroupScenarios.java's order.
var confCogroupScenarios = []struct {
	name  string
	build func(b *kstream.Builder)
}{
	{"cg-two", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		confOut(c.Aggregate(func() string { return "" }, serde.String(), "cg-two-store").ToStream())
	}},
	{"cg-three", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		g3 := kstream.MapValues(confCg(b, "cg3"), func(v string) int { return len(v) }).GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		c3 := kstream.CogroupWith(c, g3, func(_ string, n int, acc string) string { return acc + ",3#" + strconv.Itoa(n) })
		confOut(c3.Aggregate(func() string { return "" }, serde.String(), "").ToStream())
	}},
	{"cg-rekey", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := kstream.GroupBy(confCg(b, "cg2"), func(_, v string) string {
			if len(v)%2 == 0 {
				return "a"
			}
			return "k"
		}, serde.String())
		g3 := kstream.GroupBy(confCg(b, "cg3"), func(k, _ string) string { return k + "3" }, serde.String(), kstream.Named("cg3-by"))
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		c = kstream.CogroupWith(c, g3, confCgAppend(",3"))
		confOut(c.Aggregate(func() string { return "" }, serde.String(), "cg-rekey-store").ToStream())
	}},
	{"cg-named", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		g3 := confCg(b, "cg3").GroupByKey()
		add := func(n int64) func(string, string, int64) int64 {
			return func(_, _ string, acc int64) int64 { return acc + n }
		}
		c := kstream.CogroupWith(kstream.CogroupWith(kstream.Cogroup(g1, add(1)), g2, add(10)), g3, add(100))
		t := c.Named("cgn").Aggregate(func() int64 { return 0 }, serde.Int64(), "cg-named-store")
		confOut(kstream.MapValues(t.ToStream(), confN))
	}},
	{"cg-tombstones", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, func(_, v string, acc *string) *string { return confPtr(*acc + ",1" + v) }),
			g2, func(_, v string, acc *string) *string {
				if strings.HasPrefix(v, "y1") {
					return nil
				}
				return confPtr(*acc + ",2" + v)
			})
		confOutNullable(c.Aggregate(func() *string { return confPtr("") }, serde.Nullable(serde.String()), "cg-tomb-store").ToStream())
	}},
	{"cg-tumbling", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		g3 := confCg(b, "cg3").GroupByKey()
		c := kstream.CogroupWith(kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2")), g3, confCgAppend(",3"))
		w := c.WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
		confWinOut(w.Aggregate(func() string { return "" }, serde.String(), "cg-win-store"))
	}},
	{"cg-hopping-named", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2")).Named("cgh")
		w := c.WindowedBy(kstream.TimeWindowsOf(10 * time.Second).AdvanceBy(5 * time.Second).WithGrace(3 * time.Second))
		confWinOut(w.Aggregate(func() string { return "" }, serde.String(), ""))
	}},
	{"cg-sliding", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		w := c.WindowedBy(kstream.SlidingWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
		confWinOut(w.Aggregate(func() string { return "" }, serde.String(), "cg-slide-store"))
	}},
	{"cg-session", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		g3 := confCg(b, "cg3").GroupByKey()
		c := kstream.CogroupWith(kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2")), g3, confCgAppend(",3"))
		w := c.Named("cgs").WindowedBySession(kstream.SessionWindowsOf(5 * time.Second).WithGrace(5 * time.Second))
		confWinOut(w.Aggregate(func() string { return "" }, func(_, a, b string) string { return a + "|" + b }, serde.String(), "cg-session-store"))
	}},
	{"cg-suppress", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		w := c.WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second))
		confWinOut(w.Aggregate(func() string { return "" }, serde.String(), "cg-sup-store").
			Suppress(kstream.UntilWindowCloses(kstream.Unbounded())))
	}},
	{"cg-join", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		s3 := confCg(b, "cg3")
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		t := c.Aggregate(func() string { return "" }, serde.String(), "cg-join-store")
		confOut(kstream.Join(s3, t, func(_, v, tv string) string { return v + "/" + tv }))
	}},
	{"cg-regroup", func(b *kstream.Builder) {
		g1 := confCg(b, "cg1").GroupByKey()
		g2 := confCg(b, "cg2").GroupByKey()
		c := kstream.CogroupWith(kstream.Cogroup(g1, confCgAppend(",1")), g2, confCgAppend(",2"))
		t := c.Aggregate(func() string { return "" }, serde.String(), "cg-regroup-store")
		g := kstream.TableGroupBy(t, func(k, v string) kstream.KeyValue[string, string] {
			return kstream.KV("n"+strconv.Itoa(len(v)%4), k)
		}, serde.String(), serde.String())
		confOut(kstream.MapValues(kstream.TableCount(g, "cg-regroup-count").ToStream(), confN))
	}},
	{"cg-shared-rekey", func(b *kstream.Builder) {
		s1 := confCg(b, "cg1")
		s2 := kstream.SelectKey(confCg(b, "cg2"), func(_, v string) string {
			if len(v)%2 == 0 {
				return "a"
			}
			return "b"
		})
		confOut(kstream.MapValues(kstream.Count(s2.GroupByKey(), "cg-shared-count").ToStream(), func(n int64) string { return "n" + confN(n) }))
		c := kstream.CogroupWith(kstream.Cogroup(s1.GroupByKey(), confCgAppend(",1")), s2.GroupByKey(), confCgAppend(",2"))
		confOut(c.Aggregate(func() string { return "" }, serde.String(), "cg-shared-store").ToStream())
	}},
}

func confCg(b *kstream.Builder, topic string) kstream.KStream[string, string] {
	return kstream.Stream(b, topic, serde.String(), serde.String())
}

// confCgAppend is an aggregator that appends tag and the value (a null value is "" here,
// and "" through nz in Java).
func confCgAppend(tag string) func(_, v, acc string) string {
	return func(_, v, acc string) string { return acc + tag + v }
}
