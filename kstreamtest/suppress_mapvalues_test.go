package kstreamtest_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// A suppression after a TableMapValues that changes the value type needs a serde for its
// buffer, which the mapped table does not carry (Java's would fall back to the default
// serdes). Build says which option gives it: Materialized("", serde) on the mapping, Kafka
// Streams' mapValues(mapper, Materialized.with(null, serde)), which gives the table a value
// serde without a store. With it, the suppression works.
func TestSuppressAfterTypeChangingMapValues(t *testing.T) {
	build := func(opts ...kstream.Option) *kstream.Builder {
		b := kstream.NewBuilder()
		w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().
			WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(0))
		counts := kstream.WindowedCount(w, "counts")
		texts := kstream.TableMapValues(counts, func(n int64) string { return "n=" + strconv.FormatInt(n, 10) }, opts...)
		kstream.Map(texts.Suppress(kstream.UntilWindowCloses(kstream.Unbounded())).ToStream(), func(k serde.Windowed[string], v string) (string, string) {
			return k.Key + "@" + strconv.FormatInt(k.StartMs(), 10), v
		}).To("out", serde.String(), serde.String())
		return b
	}

	_, err := build().Build()
	if !errors.Is(err, kstream.ErrNoSerde) || !strings.Contains(err.Error(), `Materialized("", serde)`) || !strings.Contains(err.Error(), "KTABLE-MAPVALUES-") {
		t.Fatalf("Build error without a value serde: %v; want ErrNoSerde naming the mapping and Materialized(\"\", serde)", err)
	}
	t.Logf("Build error: %v", err)

	d, err := kstreamtest.New(build(kstream.Materialized("", serde.String())), kstream.Config{ApplicationID: "sup-map"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := runSuppress(t, d, "in", []supIn{
		{"a", sv("x"), 1000, ""},
		{"a", sv("y"), 2000, ""},
		{"b", sv("z"), 9000, ""},
		{"a", sv("w"), 12000, ""}, // closes [0, 10s)
		{"b", sv("v"), 25000, ""}, // closes [10s, 20s)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, got, `
after a@12000: a@0 = n=2 @2000
after a@12000: b@0 = n=1 @9000
after b@25000: a@10000 = n=1 @12000
`)
	// No store was made for the mapping: only the count's and the buffer's.
	if _, err := kstreamtest.KeyValueStore(d, "", 0, serde.String(), serde.String()); err == nil {
		t.Fatal("Materialized(\"\", serde) made a store")
	}
}

// Materialized without a store name (a serde only) applies to Filter and TableMapValues,
// as Java's Materialized.with does; a table-table join needs a store name, and store
// options make no sense without a store.
func TestMaterializedWithoutStoreName(t *testing.T) {
	for name, c := range map[string]struct {
		build func(b *kstream.Builder)
		want  string
	}{
		"join": {func(b *kstream.Builder) {
			l := kstream.Table(b, "l", serde.String(), serde.String(), "l-store")
			r := kstream.Table(b, "r", serde.String(), serde.String(), "r-store")
			kstream.TableJoin(l, r, func(_, a, c string) string { return a + c }, kstream.Materialized("", serde.String()))
		}, "Materialized needs a store name here"},
		"options": {func(b *kstream.Builder) {
			l := kstream.Table(b, "l", serde.String(), serde.String(), "l-store")
			kstream.TableMapValues(l, func(v string) int { return len(v) }, kstream.Materialized("", serde.JSON[int](), kstream.InMemory()))
		}, "its store options do not apply"},
	} {
		b := kstream.NewBuilder()
		c.build(b)
		if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Build error %v, want one containing %q", name, err, c.want)
		}
	}
}
