package memory_test

import (
	"fmt"
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/kstream-go/kstream/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.DB { return memory.New() })
}

// TestApproximateCountExact checks the memory backend's promise of an exact count.
func TestApproximateCountExact(t *testing.T) {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	check := func() {
		t.Helper()
		n, err := b.ApproximateCount()
		if err != nil || n != want {
			t.Fatalf("ApproximateCount = %d, %v; want %d", n, err, want)
		}
	}
	check()
	for i := range 1000 {
		if err := b.Set(fmt.Appendf(nil, "k%d", i), nil); err != nil {
			t.Fatal(err)
		}
		want++
	}
	check()
	for i := range 1000 {
		if err := b.Set(fmt.Appendf(nil, "k%d", i), []byte("again")); err != nil { // overwrites
			t.Fatal(err)
		}
	}
	check()
	bt := b.NewBatch()
	for i := range 300 {
		bt.Delete(fmt.Appendf(nil, "k%d", i))
		bt.Delete(fmt.Appendf(nil, "absent%d", i))
	}
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	want -= 300
	check()
}

// TestIteratorChunks crosses the iterator's chunk boundaries in both directions, with
// writes between chunks.
func TestIteratorChunks(t *testing.T) {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 48, 49, 1000} {
		if err := db.Drop("s", 0); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := b.Set(fmt.Appendf(nil, "%05d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, reverse := range []bool{false, true} {
			var it store.Iterator
			if reverse {
				it, err = b.ReverseRange(nil, nil)
			} else {
				it, err = b.Range(nil, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for it.Next() {
				want := got
				if reverse {
					want = n - 1 - got
				}
				if k := string(it.Key()); k != fmt.Sprintf("%05d", want) {
					t.Fatalf("n=%d reverse=%v: key %d = %s", n, reverse, got, k)
				}
				got++
				if err := b.Set(fmt.Appendf(nil, "%05da", want), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if got != n {
				t.Errorf("n=%d reverse=%v: %d keys", n, reverse, got)
			}
			for i := range n {
				if err := b.Delete(fmt.Appendf(nil, "%05da", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
