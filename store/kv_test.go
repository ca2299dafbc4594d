package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

func collect(t *testing.T, open func() (*store.KeyValueIterator[string, int64], error)) []string {
	t.Helper()
	it, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		out = append(out, it.Key()+"="+string(rune('0'+it.Value())))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeyValueStore(t *testing.T) {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	kv := store.NewKeyValueStore("s", b, serde.String(), serde.Int64())
	for i, k := range []string{"b", "a", "c", "ab", "d"} {
		if err := kv.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := kv.Get("c"); err != nil || !ok || v != 2 {
		t.Fatalf("Get(c) = %d %v %v", v, ok, err)
	}
	if _, ok, _ := kv.Get("zz"); ok {
		t.Fatal("absent key found")
	}
	if old, had, _ := kv.PutIfAbsent("a", 9); !had || old != 1 {
		t.Fatalf("PutIfAbsent on a present key: %d %v", old, had)
	}
	if got := collect(t, func() (*store.KeyValueIterator[string, int64], error) { return kv.Range("a", "c") }); !slices.Equal(got, []string{"a=1", "ab=3", "b=0"}) {
		t.Fatalf("Range: %v", got)
	}
	if got := collect(t, func() (*store.KeyValueIterator[string, int64], error) { return kv.ReverseRange("a", "c") }); !slices.Equal(got, []string{"b=0", "ab=3", "a=1"}) {
		t.Fatalf("ReverseRange: %v", got)
	}
	if got := collect(t, func() (*store.KeyValueIterator[string, int64], error) { return kv.PrefixScan("a") }); !slices.Equal(got, []string{"a=1", "ab=3"}) {
		t.Fatalf("PrefixScan: %v", got)
	}
	if err := kv.Delete("ab"); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, kv.All); !slices.Equal(got, []string{"a=1", "b=0", "c=2", "d=4"}) {
		t.Fatalf("All after Delete: %v", got)
	}
	if n, _ := kv.ApproximateNumEntries(); n != 4 {
		t.Fatalf("entries %d", n)
	}
	// A value the serde cannot decode ends the iteration with an error naming the store.
	if err := b.Set([]byte("e"), []byte("xyz")); err != nil {
		t.Fatal(err)
	}
	it, _ := kv.All()
	for it.Next() {
	}
	if err := it.Err(); err == nil || !strings.Contains(err.Error(), "store s") {
		t.Fatalf("decoding error: %v", err)
	}
	it.Close()
	if _, _, err := kv.Get("e"); err == nil {
		t.Fatal("Get decoded a bad value")
	}
}

// TestKeyValueStoreKeyScratch: with a key serde that appends (the built-in strings), Get,
// Put and Delete serialize the key into a buffer the store reuses. The bounds of an open
// iterator must not be that buffer: writes made while it is open would move its range.
func TestKeyValueStoreKeyScratch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// allocs is what a Get of a present key with an integer value allocates: the
		// memory backend copies the value it returns, a Buffer does not.
		allocs float64
		b      func(t *testing.T) store.Backend
	}{
		{"memory", 1, memoryBackend},
		{"buffer", 0, func(t *testing.T) store.Backend { return store.NewBuffer(memoryBackend(t)).WithReadCache(1 << 20) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An empty key is a key (Serialize gives empty bytes, not nil), also as the
			// first one a store serializes, before its buffer exists.
			empty := store.NewKeyValueStore("s", tc.b(t), serde.String(), serde.Int64())
			if err := empty.Put("", 5); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := store.NewKeyValueStore("s", tc.b(t), serde.String(), serde.Int64()).Get(""); err != nil || ok {
				t.Fatalf("Get(\"\") of another backend = %d %v %v, want absent", v, ok, err)
			}
			if v, ok, err := empty.Get(""); err != nil || !ok || v != 5 {
				t.Fatalf("Get(\"\") = %d %v %v, want 5", v, ok, err)
			}
			kv := store.NewKeyValueStore("s", tc.b(t), serde.String(), serde.Int64())
			for i, k := range []string{"a1", "a2", "b1", "b2", "c1"} {
				if err := kv.Put(k, int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			// Each kind of iterator, opened and then read while keys of other prefixes
			// (of the same length, so a reused buffer would hold them) are read and written.
			churn := func() {
				t.Helper()
				for _, k := range []string{"zz", "c1", "b9"} {
					if _, _, err := kv.Get(k); err != nil {
						t.Fatal(err)
					}
				}
				if err := kv.Put("zz", 7); err != nil {
					t.Fatal(err)
				}
				if err := kv.Delete("zz"); err != nil {
					t.Fatal(err)
				}
			}
			for name, open := range map[string]func() (*store.KeyValueIterator[string, int64], error){
				"Range":        func() (*store.KeyValueIterator[string, int64], error) { return kv.Range("a1", "b2") },
				"ReverseRange": func() (*store.KeyValueIterator[string, int64], error) { return kv.ReverseRange("a1", "b2") },
				"PrefixScan":   func() (*store.KeyValueIterator[string, int64], error) { return kv.PrefixScan("a") },
			} {
				it, err := open()
				if err != nil {
					t.Fatal(err)
				}
				churn()
				var got []string
				for it.Next() {
					got = append(got, it.Key())
					churn()
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				it.Close()
				want := map[string][]string{"Range": {"a1", "a2", "b1"}, "ReverseRange": {"b1", "a2", "a1"}, "PrefixScan": {"a1", "a2"}}[name]
				if !slices.Equal(got, want) {
					t.Errorf("%s with writes while open: %v, want %v", name, got, want)
				}
			}
			// Reads and writes see the right keys one after another.
			for i, k := range []string{"a1", "a2", "b1", "b2", "c1"} {
				if v, ok, err := kv.Get(k); err != nil || !ok || v != int64(i) {
					t.Fatalf("Get(%s) = %d %v %v, want %d", k, v, ok, err, i)
				}
			}
			// The key costs no allocation.
			if n := testing.AllocsPerRun(100, func() {
				if _, _, err := kv.Get("b2"); err != nil {
					t.Fatal(err)
				}
			}); n != tc.allocs {
				t.Errorf("Get allocates %.0f times per call, want %.0f", n, tc.allocs)
			}
		})
	}
}

// memoryBackend opens a namespace of a memory database closed when t ends.
func memoryBackend(t *testing.T) store.Backend {
	t.Helper()
	db := memory.New()
	t.Cleanup(func() { db.Close() })
	b, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
