package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// BenchmarkPebbleWindowVsKeyValue compares the put+fetch path of the Pebble window store with
// that of the Pebble key-value store on the same keys: each operation puts a key's value and
// reads it back, in a key-value store (key -> value) and in a window store (key, window
// start -> value; one-minute windows, one hour of retention, stream time advancing 10 ms a
// record, so that segments expire as the benchmark runs). It reports both costs and their
// ratio, window/kv. "raw" writes straight to Pebble; "buffered" goes through a Buffer
// flushed every 10 000 operations, as a persistent store of the runtime does.
func BenchmarkPebbleWindowVsKeyValue(b *testing.B) {
	for _, buffered := range []bool{false, true} {
		for _, nkeys := range []int{1_000, 100_000} {
			name := "raw"
			if buffered {
				name = "buffered"
			}
			b.Run(fmt.Sprintf("%s/keys=%d", name, nkeys), func(b *testing.B) {
				benchWindowVsKeyValue(b, buffered, nkeys)
			})
		}
	}
}

func benchWindowVsKeyValue(b *testing.B, buffered bool, nkeys int) {
	db := benchEngines[1].open(b, b.TempDir())
	defer db.Close()
	open := func(name string) (store.Backend, func() error) {
		raw, err := db.Open(name, 0)
		if err != nil {
			b.Fatal(err)
		}
		if !buffered {
			return raw, func() error { return nil }
		}
		buf := store.NewBuffer(raw).WithReadCache(8 << 20)
		return buf, func() error { return buf.Flush(-1) }
	}
	kvb, kvFlush := open("kv")
	wb, wFlush := open("window")
	kv := store.NewKeyValueStore("kv", kvb, serde.String(), serde.Int64())
	w, err := store.NewWindowStore("window", wb, serde.String(), serde.Int64(),
		store.WindowOptions{Retention: time.Hour, WindowSize: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%08d", i)
	}
	const every = 10_000
	var kvTime, wTime time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%nkeys]
		v := int64(i)
		start := time.Now()
		if err := kv.Put(k, v); err != nil {
			b.Fatal(err)
		}
		if got, ok, err := kv.Get(k); err != nil || !ok || got != v {
			b.Fatalf("kv Get = %d, %v, %v", got, ok, err)
		}
		mid := time.Now()
		ts := int64(i) * 10
		ws := time.UnixMilli(ts - ts%60_000)
		if err := w.Put(k, v, ws); err != nil {
			b.Fatal(err)
		}
		if got, ok, err := w.Fetch(k, ws); err != nil || !ok || got != v {
			b.Fatalf("window Fetch = %d, %v, %v", got, ok, err)
		}
		end := time.Now()
		kvTime += mid.Sub(start)
		wTime += end.Sub(mid)
		i++
		if i%every == 0 {
			t0 := time.Now()
			if err := kvFlush(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := wFlush(); err != nil {
				b.Fatal(err)
			}
			kvTime += t1.Sub(t0)
			wTime += time.Since(t1)
		}
	}
	if i == 0 {
		return
	}
	kvNs, wNs := float64(kvTime.Nanoseconds())/float64(i), float64(wTime.Nanoseconds())/float64(i)
	b.ReportMetric(kvNs, "kv-ns/op")
	b.ReportMetric(wNs, "window-ns/op")
	b.ReportMetric(wNs/kvNs, "window/kv")
	if i >= 10_000 {
		b.Logf("%d put+fetch: key-value %.0f ns, window %.0f ns, ratio window/kv %.2f", i, kvNs, wNs, wNs/kvNs)
	}
}
