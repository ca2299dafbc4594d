package store_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/pebble"
)

// benchEngines are the engines with their default sizes (the tests' engines use small
// Pebble caches and memtables).
var benchEngines = []engine{
	engines[0],
	{"pebble", func(t testing.TB, dir string) store.DB {
		t.Helper()
		db, err := pebble.Open(dir, pebble.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("pebble.Open: %v", err)
		}
		return db
	}},
}

// getSetOp is the hot path of a count aggregation: read a key's count, write it back plus
// one.
func getSetOp(b *testing.B, be store.Backend, key, val []byte) {
	v, ok, err := be.Get(key)
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	if ok {
		n = binary.BigEndian.Uint64(v)
	}
	binary.BigEndian.PutUint64(val, n+1)
	if err := be.Set(key, val); err != nil {
		b.Fatal(err)
	}
}

// benchGetSet runs Get+Set over nkeys distinct keys round-robin, calling commit(i) every
// 10 000 operations (a Flush for a buffer, a checkpoint-only batch for a raw backend, as a
// task commits). The keys exist beforehand: one pass over them runs before the timer.
func benchGetSet(b *testing.B, be store.Backend, nkeys int, commit func(i int) error) {
	const every = 10_000
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "count-%08d", i)
	}
	val := make([]byte, 8)
	for i := range nkeys {
		getSetOp(b, be, keys[i], val)
		if (i+1)%every == 0 {
			if err := commit(i); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := commit(nkeys); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		getSetOp(b, be, keys[i%nkeys], val)
		i++
		if i%every == 0 {
			if err := commit(i); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchBackends(b *testing.B, raw bool) {
	for _, e := range benchEngines {
		for _, nkeys := range []int{100_000, 1_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", e.name, nkeys), func(b *testing.B) {
				db := e.open(b, b.TempDir())
				defer db.Close()
				under, err := db.Open("counts", 0)
				if err != nil {
					b.Fatal(err)
				}
				if raw {
					bt := under.NewBatch()
					benchGetSet(b, under, nkeys, func(i int) error {
						bt.SetCheckpoint(int64(i))
						return bt.Commit()
					})
					return
				}
				buf := store.NewBuffer(under)
				benchGetSet(b, buf, nkeys, func(i int) error { return buf.Flush(int64(i)) })
			})
		}
	}
}

// BenchmarkBufferGetSet is Get+Set through a Buffer, flushed every 10 000 operations.
// With 100 000 keys, every Get misses the buffer and reads the underlying backend; with
// 1 000 keys, most hit a pending entry.
func BenchmarkBufferGetSet(b *testing.B) { benchBackends(b, false) }

// BenchmarkRawGetSet is BenchmarkBufferGetSet straight on the backends, for comparison.
func BenchmarkRawGetSet(b *testing.B) { benchBackends(b, true) }
