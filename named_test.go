package kstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// Named passed to a cogroup's aggregation names its operators as CogroupedKStream.Named
// does ("<name>-cogroup-agg-<i>", "<name>-cogroup-merge", as Java's aggregate(init,
// Named.as(name), ...)), for the plain, windowed and session forms.
func TestCogroupAggregateNamedOption(t *testing.T) {
	cgAdd := func(_, v, acc string) string { return acc + v }
	forms := []func(c kstream.CogroupedKStream[string, string], named bool){
		func(c kstream.CogroupedKStream[string, string], named bool) {
			if named {
				c.Aggregate(func() string { return "" }, serde.String(), "st", kstream.Named("cg"))
			} else {
				c.Named("cg").Aggregate(func() string { return "" }, serde.String(), "st")
			}
		},
		func(c kstream.CogroupedKStream[string, string], named bool) {
			if named {
				c.WindowedBy(kstream.TimeWindowsOf(time.Minute)).Aggregate(func() string { return "" }, serde.String(), "st", kstream.Named("cg"))
			} else {
				c.Named("cg").WindowedBy(kstream.TimeWindowsOf(time.Minute)).Aggregate(func() string { return "" }, serde.String(), "st")
			}
		},
		func(c kstream.CogroupedKStream[string, string], named bool) {
			merge := func(_, a, b string) string { return a + b }
			if named {
				c.WindowedBySession(kstream.SessionWindowsOf(time.Minute)).Aggregate(func() string { return "" }, merge, serde.String(), "st", kstream.Named("cg"))
			} else {
				c.Named("cg").WindowedBySession(kstream.SessionWindowsOf(time.Minute)).Aggregate(func() string { return "" }, merge, serde.String(), "st")
			}
		},
	}
	for i, form := range forms {
		describe := func(named bool) string {
			b := kstream.NewBuilder()
			g1 := kstream.Stream(b, "a", serde.String(), serde.String()).GroupByKey()
			g2 := kstream.Stream(b, "b", serde.String(), serde.String()).GroupByKey()
			form(kstream.CogroupWith(kstream.Cogroup(g1, cgAdd), g2, cgAdd), named)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return topo.Describe()
		}
		want, got := describe(false), describe(true)
		if got != want {
			t.Errorf("form %d: Describe with the Named option differs from CogroupedKStream.Named's\n%s", i, lineDiff(want, got))
		}
		if !strings.Contains(got, "cg-cogroup-agg-1") || !strings.Contains(got, "cg-cogroup-merge") {
			t.Errorf("form %d: the operators are not named after cg:\n%s", i, got)
		}
	}
}

// Named among the options of a store that is not an aggregation's is a Build error naming
// where it applies; so are WithRetention and RetainDuplicates on a store that does not take
// them.
func TestNamedMisplacedOnStores(t *testing.T) {
	for name, build := range map[string]func(b *kstream.Builder){
		"Table": func(b *kstream.Builder) {
			kstream.Table(b, "t", serde.String(), serde.String(), "t-store", kstream.Named("x"))
		},
		"Materialized": func(b *kstream.Builder) {
			t := kstream.Table(b, "t", serde.String(), serde.String(), "t-store")
			t.Filter(func(string, string) bool { return true }, kstream.Materialized("f-store", serde.String(), kstream.Named("x")))
		},
		"GlobalTable": func(b *kstream.Builder) {
			kstream.GlobalTable(b, "g", serde.String(), serde.String(), "g-store", kstream.Named("x"))
		},
		"Count+WithRetention": func(b *kstream.Builder) {
			kstream.Count(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "c", kstream.WithRetention(time.Hour))
		},
		"WindowedCount+RetainDuplicates": func(b *kstream.Builder) {
			kstream.WindowedCount(kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Minute)), "w", kstream.RetainDuplicates())
		},
	} {
		b := kstream.NewBuilder()
		build(b)
		_, err := b.Build()
		if err == nil || !strings.Contains(err.Error(), "does not apply to it; it applies to") {
			t.Errorf("%s: Build error %v, want a misplaced option", name, err)
		}
	}
}
