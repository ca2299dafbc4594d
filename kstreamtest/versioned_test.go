package kstreamtest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// A versioned table's store, read through kstreamtest.VersionedStore: the latest value,
// values as of past times with their validity, out-of-order versions, tombstones, and the
// history retention's limit.
func TestVersionedStoreReader(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Table(b, "prices", serde.String(), serde.String(), "prices-store", kstream.Versioned(10*time.Second)).
		ToStream().To("out", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "prices", serde.String(), serde.String())
	at := func(s int64) time.Time { return time.UnixMilli(s * 1000) }
	for _, r := range []struct {
		k, v string
		s    int64
	}{{"p", "10", 10}, {"p", "30", 30}, {"p", "20", 20}, {"q", "1", 25}, {"p", "5", 5}} {
		if err := in.PipeAt(r.k, r.v, at(r.s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.PipeRaw([]byte("q"), nil, at(28)); err != nil {
		t.Fatal(err)
	}
	st, err := kstreamtest.VersionedStore(d, "prices-store", 0, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		k    string
		asOf int64
		rec  store.VersionedRecord[string]
		ok   bool
	}
	for _, c := range []read{
		{"p", 25_000, store.VersionedRecord[string]{Value: "20", Timestamp: 20_000, ValidTo: 30_000, HasValidTo: true}, true},
		{"p", 20_000, store.VersionedRecord[string]{Value: "20", Timestamp: 20_000, ValidTo: 30_000, HasValidTo: true}, true},
		{"p", 19_999, store.VersionedRecord[string]{}, false}, // 10 expired: older than 30 - 10
		{"p", 31_000, store.VersionedRecord[string]{Value: "30", Timestamp: 30_000}, true},
		{"q", 26_000, store.VersionedRecord[string]{Value: "1", Timestamp: 25_000, ValidTo: 28_000, HasValidTo: true}, true},
		{"q", 28_000, store.VersionedRecord[string]{}, false},
	} {
		got, ok, err := st.GetAsOf(c.k, c.asOf)
		if err != nil || ok != c.ok || got != c.rec {
			t.Errorf("GetAsOf(%s, %d) = %+v %v %v, want %+v %v", c.k, c.asOf, got, ok, err, c.rec, c.ok)
		}
	}
	if got, ok, _ := st.Get("p"); !ok || got.Value != "30" {
		t.Errorf("Get(p) = %+v %v, want 30", got, ok)
	}
	if _, ok, _ := st.Get("q"); ok {
		t.Error("Get(q) found a value after its tombstone")
	}
	// The update at 20 is out of order (forwarded, not the latest); the one at 5 is older
	// than the history retention allows (neither stored nor forwarded).
	vals, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadValues()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10", "30", "20", "1", ""}; !slices.Equal(vals, want) {
		t.Errorf("table updates %q, want %q", vals, want)
	}
}

// Build errors of versioned options, as Java's.
func TestVersionedBuildErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *kstream.Builder)
		want  string
	}{
		{"grace-needs-versioned-table", func(b *kstream.Builder) {
			tbl := kstream.Table(b, "t", serde.String(), serde.String(), "t-store")
			kstream.Join(kstream.Stream(b, "s", serde.String(), serde.String()), tbl,
				func(_, v, vt string) string { return v + vt }, kstream.JoinGrace(time.Second)).To("out", serde.String(), serde.String())
		}, "KTable must be versioned to use a grace period in a stream table join."},
		{"grace-within-history", func(b *kstream.Builder) {
			tbl := kstream.Table(b, "t", serde.String(), serde.String(), "t-store", kstream.Versioned(time.Second))
			kstream.Join(kstream.Stream(b, "s", serde.String(), serde.String()), tbl,
				func(_, v, vt string) string { return v + vt }, kstream.JoinGrace(2*time.Second)).To("out", serde.String(), serde.String())
		}, "History retention must be at least grace period."},
		{"grace-only-on-joins", func(b *kstream.Builder) {
			kstream.Stream(b, "s", serde.String(), serde.String()).Filter(func(_, _ string) bool { return true }, kstream.JoinGrace(time.Second))
		}, "option JoinGrace does not apply"},
		{"versioned-window-store", func(b *kstream.Builder) {
			w := kstream.Stream(b, "s", serde.String(), serde.String()).GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Second))
			kstream.WindowedCount(w, "c", kstream.Versioned(time.Second))
		}, `store "c": option Versioned applies to`},
		{"versioned-global-table", func(b *kstream.Builder) {
			kstream.GlobalTable(b, "g", serde.String(), serde.String(), "g-store", kstream.Versioned(time.Second))
			kstream.Stream(b, "s", serde.String(), serde.String()).To("out", serde.String(), serde.String())
		}, `store "g-store": option Versioned applies to key-value stores of tables only (Table, ToTable, Materialized, aggregations)`},
		{"suppress-versioned", func(b *kstream.Builder) {
			kstream.Table(b, "t", serde.String(), serde.String(), "t-store", kstream.Versioned(time.Second)).
				Suppress(kstream.UntilTimeLimit(time.Second, kstream.Unbounded())).ToStream().To("out", serde.String(), serde.String())
		}, "suppress() is only supported for non-versioned KTables"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := kstream.NewBuilder()
			c.build(b)
			_, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: %v, want an error containing %q", err, c.want)
			}
		})
	}
}
