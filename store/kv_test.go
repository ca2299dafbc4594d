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
