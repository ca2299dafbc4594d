package store_test

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/kstream-go/kstream/store"
)

// valueBackend answers every Get with a value of its size and holds nothing, so that the
// heap of a Buffer's read cache can be measured alone.
type valueBackend struct {
	store.Backend
	size int
}

func (b valueBackend) Get(k []byte) ([]byte, bool, error) {
	v := make([]byte, b.size)
	copy(v, k)
	return v, true, nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The heap the read cache holds stays within 1.2x its bound (StoreCacheBytes), whatever
// the size of its entries: the per-entry overhead (map slot, entry, rounding of the
// allocations) is counted, not only the key and value bytes (which made small entries
// take up to 9x the bound). Nor is it wastefully pessimistic: the cache holds at least 0.4x
// its bound in heap (it evicts down to 15/16 of it, and the map room of what it evicted
// counts until its older generation is replaced).
func TestBufferReadCacheHeapWithinBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		key, value int
		bound      int
	}{
		{"tiny entries", 8, 8, 4 << 20},
		{"small entries", 16, 8, 8 << 20},
		{"medium entries", 24, 64, 8 << 20},
		{"large entries", 40, 1000, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := heapInUse()
			buf := store.NewBuffer(valueBackend{size: tc.value}).WithReadCache(tc.bound)
			key := make([]byte, tc.key)
			i := 0
			get := func(n int) {
				for range n {
					binary.BigEndian.PutUint64(key[len(key)-8:], uint64(i))
					i++
					if _, _, err := buf.Get(key); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Fill the cache twice over, then measure the heap at 16 points of two more
			// fills: the generations are at every stage of filling and turning.
			perFill := tc.bound / (tc.key + tc.value)
			get(2 * perFill)
			lo, hi := 1e9, 0.0
			for range 16 {
				get(perFill / 8)
				used := int64(heapInUse()) - int64(before)
				ratio := float64(used) / float64(tc.bound)
				lo, hi = min(lo, ratio), max(hi, ratio)
			}
			runtime.KeepAlive(buf)
			t.Logf("%d-byte keys, %d-byte values, %.0f MiB bound, %d Gets: heap between %.2fx and %.2fx the bound",
				tc.key, tc.value, float64(tc.bound)/(1<<20), i, lo, hi)
			if hi > 1.2 {
				t.Errorf("the read cache uses up to %.2fx its bound, want at most 1.2x", hi)
			}
			if lo < 0.4 {
				t.Errorf("the read cache uses down to %.2fx its bound, want at least 0.4x", lo)
			}
		})
	}
}
