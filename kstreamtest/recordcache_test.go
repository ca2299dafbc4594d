package kstreamtest_test

import (
	"testing"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The driver flushes the record caches after every record it processes, as Kafka Streams'
// TopologyTestDriver commits after each: a cached count forwards one update per input
// record, the latest, however many updates of a key that record made, and its old value is
// the count last forwarded. The cache is on by default (10 MiB, as in Kafka Streams).
// Without it, every update is forwarded.
func TestRecordCacheInTheDriver(t *testing.T) {
	build := func(opts ...kstream.StoreOption) *kstream.Builder {
		b := kstream.NewBuilder()
		words := kstream.FlatMapValues(kstream.Stream(b, "lines", serde.String(), serde.String()),
			func(v string) []string { return []string{v, v, v} })
		counts := kstream.Count(words.GroupByKey(), "counts", opts...)
		// TableGroupBy asks for old values: each update carries the count last forwarded.
		totals := kstream.TableCount(kstream.TableGroupBy(counts, func(k string, n int64) kstream.KeyValue[string, int64] {
			return kstream.KeyValue[string, int64]{Key: "all", Value: n}
		}, serde.String(), serde.Int64()), "rows")
		counts.ToStream().To("counts", serde.String(), serde.Int64())
		totals.ToStream().To("rows", serde.String(), serde.Int64())
		return b
	}
	run := func(cfg kstream.Config, b *kstream.Builder) (counts, rows []int64) {
		d, err := kstreamtest.New(b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		in := kstreamtest.CreateInputTopic(d, "lines", serde.String(), serde.String())
		for _, k := range []string{"a", "a", "b"} {
			if err := in.Pipe(k, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if counts, err = kstreamtest.CreateOutputTopic(d, "counts", serde.String(), serde.Int64()).ReadValues(); err != nil {
			t.Fatal(err)
		}
		if rows, err = kstreamtest.CreateOutputTopic(d, "rows", serde.String(), serde.Int64()).ReadValues(); err != nil {
			t.Fatal(err)
		}
		return counts, rows
	}
	cached := kstream.Config{ApplicationID: "cache"} // the default
	counts, rows := run(cached, build())
	if want := []int64{3, 6, 3}; !equalInts(counts, want) {
		t.Errorf("cached counts %v, want %v", counts, want)
	}
	// The table count of rows: a row joins (1), the row a is updated (its old count
	// subtracted, the new added: 1), row b joins (2).
	if want := []int64{1, 1, 2}; !equalInts(rows, want) {
		t.Errorf("cached row counts %v, want %v", rows, want)
	}
	counts, _ = run(kstream.Config{ApplicationID: "nocache", CacheMaxBytes: -1}, build())
	if want := []int64{1, 2, 3, 4, 5, 6, 1, 2, 3}; !equalInts(counts, want) {
		t.Errorf("counts without a cache %v, want %v", counts, want)
	}
	counts, _ = run(cached, build(kstream.WithoutCaching()))
	if want := []int64{1, 2, 3, 4, 5, 6, 1, 2, 3}; !equalInts(counts, want) {
		t.Errorf("counts WithoutCaching %v, want %v", counts, want)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
