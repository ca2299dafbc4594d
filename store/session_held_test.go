package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

// FindHeldSessionsByEnd returns the sessions that the retention filter of FindSessionsByEnd
// hides but whose segment is still held, as Kafka Streams' time-ordered session store does.
func TestFindHeldSessionsByEnd(t *testing.T) {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("sessions", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Retention 15ms, segments of one minute: nothing leaves the backend below.
	s, err := store.NewSessionStore("sessions", b, serde.String(), serde.Int64(), store.SessionOptions{Retention: 15 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		k          string
		start, end int64
	}{{"b", 3, 3}, {"a", 0, 5}, {"a", 13, 22}, {"b", 40, 40}} {
		if err := s.Put(serde.WindowedMs(p.k, p.start, p.end), p.end); err != nil {
			t.Fatal(err)
		}
	}
	read := func(it *store.WindowedIterator[string, int64], err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []string
		for it.Next() {
			k := it.Key()
			out = append(out, fmt.Sprintf("%s@%d/%d", k.Key, k.StartMs(), k.EndMs()))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Stream time 40, retention 15: sessions ending at or before 25 are expired for reads.
	if got := read(s.FindSessionsByEnd(time.UnixMilli(0), time.UnixMilli(39))); len(got) != 0 {
		t.Errorf("FindSessionsByEnd = %v, want none", got)
	}
	got := read(s.FindHeldSessionsByEnd(time.UnixMilli(4), time.UnixMilli(39)))
	if want := []string{"a@0/5", "a@13/22"}; !slices.Equal(got, want) {
		t.Errorf("FindHeldSessionsByEnd(4, 39) = %v, want %v", got, want)
	}
	if got := read(s.FindHeldSessionsByEnd(time.UnixMilli(41), time.UnixMilli(100))); len(got) != 0 {
		t.Errorf("FindHeldSessionsByEnd(41, 100) = %v, want none (beyond stream time)", got)
	}
}
