package store_test

import (
	"testing"

	"github.com/kstream-go/kstream/store"
)

// TestBufferDeleteRange checks a pending range deletion: it drops the pending entries it
// covers, hides the underlying keys it covers from Get (also from the read cache) and from
// iterators, lets later writes into the range show, is not reported by Pending, reaches the
// underlying backend only at Flush (before the pending entries), and goes with Discard.
func TestBufferDeleteRange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		for _, k := range []string{"a", "b1", "b2", "b3", "c"} {
			mustSet(t, under, k, "u"+k)
		}
		buf := store.NewBuffer(under).WithReadCache(1 << 20)
		wantGet(t, buf, "b2", "ub2") // cached now
		mustSet(t, buf, "b1", "pb1") // pending, then covered
		mustSet(t, buf, "a", "pa")   // pending, not covered
		it, err := buf.Range(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := buf.DeleteRange([]byte("b"), []byte("c")); err != nil {
			t.Fatal(err)
		}
		mustSet(t, buf, "b3", "pb3") // written after: shows
		wantPairs(t, "iterator opened before", drain(t, it, nil),
			[]kv{{"a", "pa"}, {"b1", "pb1"}, {"b2", "ub2"}, {"b3", "ub3"}, {"c", "uc"}})
		want := []kv{{"a", "pa"}, {"b3", "pb3"}, {"c", "uc"}}
		wantPairs(t, "scan", scan(t, buf, nil, nil, false), want)
		wantPairs(t, "reverse scan", scan(t, buf, nil, nil, true), []kv{{"c", "uc"}, {"b3", "pb3"}, {"a", "pa"}})
		wantPairs(t, "scan of the range", scan(t, buf, []byte("b"), []byte("b3"), false), nil)
		wantPairs(t, "prefix scan", prefixScan(t, buf, []byte("b")), []kv{{"b3", "pb3"}})
		wantAbsent(t, buf, "b1")
		wantAbsent(t, buf, "b2") // not from the read cache
		wantGet(t, buf, "b3", "pb3")
		if n := buf.Len(); n != 3 { // a, b3, the range
			t.Errorf("Len = %d; want 3", n)
		}
		var pending []string
		buf.Pending(func(k, _ []byte, _ bool) { pending = append(pending, string(k)) })
		if len(pending) != 2 || pending[0] != "a" || pending[1] != "b3" {
			t.Errorf("Pending reported %q; want [a b3]", pending)
		}
		// The underlying backend sees nothing before Flush.
		wantPairs(t, "underlying before Flush", scan(t, under, nil, nil, false),
			[]kv{{"a", "ua"}, {"b1", "ub1"}, {"b2", "ub2"}, {"b3", "ub3"}, {"c", "uc"}})

		// Discard drops the range with the entries.
		buf.Discard()
		wantGet(t, buf, "b2", "ub2")
		wantPairs(t, "scan after Discard", scan(t, buf, nil, nil, false),
			[]kv{{"a", "ua"}, {"b1", "ub1"}, {"b2", "ub2"}, {"b3", "ub3"}, {"c", "uc"}})

		// Flush applies the range, then the entries written after it.
		if err := buf.DeleteRange([]byte("b"), []byte("c")); err != nil {
			t.Fatal(err)
		}
		mustSet(t, buf, "b3", "pb3")
		bt := buf.NewBatch()
		bt.Set([]byte("b4"), []byte("set-before"))
		bt.DeleteRange([]byte("b4"), nil)
		bt.Set([]byte("d"), []byte("set-after"))
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, buf, 7)
		want = []kv{{"a", "ua"}, {"b3", "pb3"}, {"d", "set-after"}}
		wantPairs(t, "underlying after Flush", scan(t, under, nil, nil, false), want)
		wantPairs(t, "buffer after Flush", scan(t, buf, nil, nil, false), want)
		wantCheckpoint(t, under, 7)
		if n := buf.Len(); n != 0 {
			t.Errorf("Len after Flush = %d", n)
		}
		// A range deletion alone is flushed.
		if err := buf.DeleteRange(nil, []byte("b")); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, buf, -1)
		wantPairs(t, "underlying after a flush of a range alone", scan(t, under, nil, nil, false), want[1:])
	})
}

// TestBufferDeleteRangeFlushFailure keeps a range deletion pending when its flush fails.
func TestBufferDeleteRangeFlushFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "a", "ua")
		spy := &spyBackend{Backend: under}
		buf := store.NewBuffer(spy)
		if err := buf.DeleteRange(nil, nil); err != nil {
			t.Fatal(err)
		}
		spy.fail = true
		if err := buf.Flush(3); err == nil {
			t.Fatal("Flush succeeded")
		}
		wantAbsent(t, buf, "a")
		wantGet(t, under, "a", "ua")
		spy.fail = false
		mustFlush(t, buf, 3)
		wantAbsent(t, under, "a")
		if len(spy.commits) != 1 || spy.commits[0].writes != 1 {
			t.Errorf("commits = %+v; want one of 1 write", spy.commits)
		}
	})
}
