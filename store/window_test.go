package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

// countKeys counts a backend's keys with a full scan.
func countKeys(t *testing.T, b store.Backend) int {
	t.Helper()
	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		n++
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
	return n
}

// writeCounter counts the writes that reach a backend.
type writeCounter struct {
	store.Backend
	sets, deletes, ranges int
}

func (c *writeCounter) Set(k, v []byte) error { c.sets++; return c.Backend.Set(k, v) }
func (c *writeCounter) Delete(k []byte) error { c.deletes++; return c.Backend.Delete(k) }
func (c *writeCounter) DeleteRange(from, to []byte) error {
	c.ranges++
	return c.Backend.DeleteRange(from, to)
}

// NewBatch counts the writes of batches (a Buffer's flush) too.
func (c *writeCounter) NewBatch() store.Batch { return &countingBatch{c.Backend.NewBatch(), c} }

type countingBatch struct {
	store.Batch
	c *writeCounter
}

func (b *countingBatch) Set(k, v []byte) { b.c.sets++; b.Batch.Set(k, v) }
func (b *countingBatch) Delete(k []byte) { b.c.deletes++; b.Batch.Delete(k) }
func (b *countingBatch) DeleteRange(from, to []byte) {
	b.c.ranges++
	b.Batch.DeleteRange(from, to)
}

func at(ms int64) time.Time { return time.UnixMilli(ms) }

// TestWindowExpiryLeavesTheStore writes windows over a long stretch of stream time: expired
// windows leave the backend (its key count drops) through range deletions, never point
// deletions, one per expired segment boundary crossed.
func TestWindowExpiryLeavesTheStore(t *testing.T) {
	for _, v := range goldenVariants() {
		t.Run(v.String(), func(t *testing.T) {
			db := v.engine.open(t, t.TempDir())
			t.Cleanup(func() { _ = db.Close() })
			raw, err := db.Open("w", 0)
			if err != nil {
				t.Fatal(err)
			}
			counter := &writeCounter{Backend: raw}
			var under store.Backend = counter
			var buf *store.Buffer
			if v.buffered {
				buf = store.NewBuffer(counter)
				under = buf
			}
			// Retention 1 min, segments of 30 s.
			o := store.WindowOptions{Retention: time.Minute, WindowSize: time.Second}
			w, err := store.NewWindowStore("w", under, serde.String(), serde.Int64(), o)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.SegmentInterval(); got != time.Minute {
				t.Fatalf("SegmentInterval = %s; want the 60 s minimum", got)
			}
			const keys = 200
			fill := func(ms int64) {
				for i := range keys {
					if err := w.Put(fmt.Sprintf("key-%03d", i), ms, at(ms)); err != nil {
						t.Fatal(err)
					}
				}
				if buf != nil {
					if err := buf.Flush(-1); err != nil {
						t.Fatal(err)
					}
				}
			}
			// One window per key in each of 3 segments: 0 s, 60 s, 120 s.
			fill(0)
			fill(60_000)
			n1 := countKeys(t, raw)
			if n1 != 2*keys+1 { // and the state key
				t.Fatalf("%d keys after two segments; want %d", n1, 2*keys+1)
			}
			fill(120_000) // stream time 120 s: the segment of 60 s is the first live one
			n2 := countKeys(t, raw)
			if n2 != 2*keys+1 {
				t.Errorf("%d keys after the first segment expired; want %d", n2, 2*keys+1)
			}
			fill(300_000) // the segments of 60 s and 120 s expire
			if n3 := countKeys(t, raw); n3 != keys+1 {
				t.Errorf("%d keys after two more segments expired; want %d", n3, keys+1)
			}
			if counter.deletes != 0 {
				t.Errorf("%d point deletions reached the backend; expiry must use range deletions", counter.deletes)
			}
			if counter.ranges != 2 {
				t.Errorf("%d range deletions reached the backend; want 2 (one per stream-time advance that expires segments)", counter.ranges)
			}
			it, err := w.All()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for it.Next() {
				if it.Key().StartMs() != 300_000 {
					t.Errorf("an expired window is still read: %v", it.Key())
				}
				n++
			}
			if err := errors.Join(it.Err(), it.Close()); err != nil || n != keys {
				t.Errorf("All: %d windows, %v; want %d", n, err, keys)
			}
		})
	}
}

// TestSessionExpiryLeavesTheStore is TestWindowExpiryLeavesTheStore for sessions, whose
// segments go by session end.
func TestSessionExpiryLeavesTheStore(t *testing.T) {
	for _, v := range goldenVariants() {
		t.Run(v.String(), func(t *testing.T) {
			db := v.engine.open(t, t.TempDir())
			t.Cleanup(func() { _ = db.Close() })
			raw, err := db.Open("s", 0)
			if err != nil {
				t.Fatal(err)
			}
			counter := &writeCounter{Backend: raw}
			var under store.Backend = counter
			var buf *store.Buffer
			if v.buffered {
				buf = store.NewBuffer(counter)
				under = buf
			}
			s, err := store.NewSessionStore("s", under, serde.String(), serde.Int64(), store.SessionOptions{Retention: 10 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.SegmentInterval(); got != 5*time.Minute {
				t.Fatalf("SegmentInterval = %s; want retention/2", got)
			}
			for round, end := range []int64{0, 300_000, 600_000, 1_500_000} {
				for i := range 100 {
					// Sessions that start long before they end: segments go by end.
					if err := s.Put(serde.WindowedMs(fmt.Sprintf("k%d", i), max(0, end-250_000), end), int64(round)); err != nil {
						t.Fatal(err)
					}
				}
				if buf != nil {
					if err := buf.Flush(-1); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Stream time 1500 s: live segments start at (1500-600)/300 = 3, i.e. 900 s.
			if n := countKeys(t, raw); n != 101 {
				t.Errorf("%d keys; want 101 (the last round and the state)", n)
			}
			if counter.deletes != 0 {
				t.Errorf("%d point deletions reached the backend", counter.deletes)
			}
		})
	}
}

// TestWindowStoreReopen checks that the stream time survives a restart of a persistent
// store, so that expiry and reads go on as before it.
func TestWindowStoreReopen(t *testing.T) {
	dir := t.TempDir()
	pe := engines[1]
	o := store.WindowOptions{Retention: 2 * time.Minute, WindowSize: time.Minute}
	open := func() (store.DB, *store.WindowStore[string, string]) {
		db := pe.open(t, dir)
		b, err := db.Open("w", 3)
		if err != nil {
			t.Fatal(err)
		}
		w, err := store.NewWindowStore("w", b, serde.String(), serde.String(), o)
		if err != nil {
			t.Fatal(err)
		}
		return db, w
	}
	db, w := open()
	for _, ms := range []int64{0, 60_000, 120_000, 180_000} {
		if err := w.Put("k", fmt.Sprint(ms), at(ms)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, w = open()
	defer db.Close()
	if st, ok, err := w.ObservedStreamTime(); err != nil || !ok || st.UnixMilli() != 180_000 {
		t.Fatalf("ObservedStreamTime after reopen = %v, %v, %v; want 180000", st.UnixMilli(), ok, err)
	}
	// Reads still hide the window at 60 s (180 - 120 = 60 is not after the cut).
	if _, ok, err := w.Fetch("k", at(60_000)); err != nil || ok {
		t.Errorf("Fetch of an expired window after reopen: ok=%v err=%v", ok, err)
	}
	if err := w.Put("k", "late", at(30_000)); err != nil { // an expired segment
		t.Fatal(err)
	}
	if w.DroppedExpired() != 1 {
		t.Errorf("DroppedExpired = %d; want 1", w.DroppedExpired())
	}
	it, err := w.FetchRange("k", at(0), at(1_000_000))
	var got []string
	if err == nil {
		for it.Next() {
			got = append(got, it.Value())
		}
		err = errors.Join(it.Err(), it.Close())
	}
	if err != nil || strings.Join(got, ",") != "120000,180000" {
		t.Errorf("FetchRange after reopen = %q, %v; want [120000 180000]", got, err)
	}
}

// TestWindowStoreDiscard checks that the store follows a Buffer's Discard: the stream time
// and the expired segments come back with the data (an aborted transaction).
func TestWindowStoreDiscard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		buf := store.NewBuffer(under)
		w, err := store.NewWindowStore("w", buf, serde.String(), serde.String(), store.WindowOptions{Retention: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Put("a", "1", at(0)); err != nil {
			t.Fatal(err)
		}
		if err := buf.Flush(5); err != nil {
			t.Fatal(err)
		}
		if err := w.Put("b", "2", at(500_000)); err != nil { // expires a's segment
			t.Fatal(err)
		}
		if _, ok, _ := w.Fetch("a", at(0)); ok {
			t.Fatal("a is still there after its segment expired")
		}
		buf.Discard()
		if st, ok, err := w.ObservedStreamTime(); err != nil || !ok || st.UnixMilli() != 0 {
			t.Errorf("ObservedStreamTime after Discard = %d, %v, %v; want 0", st.UnixMilli(), ok, err)
		}
		if v, ok, err := w.Fetch("a", at(0)); err != nil || !ok || v != "1" {
			t.Errorf("Fetch(a) after Discard = %q, %v, %v; want 1", v, ok, err)
		}
		if _, ok, _ := w.Fetch("b", at(500_000)); ok {
			t.Error("b is there after Discard")
		}
	})
}

func TestWindowStoreErrors(t *testing.T) {
	db := engines[0].open(t, "")
	defer db.Close()
	b, err := db.Open("w", 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := []store.WindowOptions{
		{Retention: -time.Second},
		{Retention: time.Second, WindowSize: -time.Second},
		{Retention: time.Second, WindowSize: 2 * time.Second},
		{Retention: time.Second, SegmentInterval: -time.Second},
	}
	for _, o := range bad {
		if _, err := store.NewWindowStore("w", b, serde.String(), serde.String(), o); err == nil {
			t.Errorf("NewWindowStore(%+v) succeeded", o)
		}
		if _, err := store.NewWindowChangelog(o); err == nil {
			t.Errorf("NewWindowChangelog(%+v) succeeded", o)
		}
	}
	if _, err := store.NewSessionStore("s", b, serde.String(), serde.String(), store.SessionOptions{Retention: -1}); err == nil {
		t.Error("NewSessionStore with a negative retention succeeded")
	}
	// Defaults: max(retention/2, 60 s); fractions of a millisecond round up.
	for _, c := range []struct {
		o    store.WindowOptions
		want time.Duration
	}{
		{store.WindowOptions{Retention: time.Hour}, 30 * time.Minute},
		{store.WindowOptions{Retention: 90 * time.Second}, time.Minute},
		{store.WindowOptions{}, time.Minute},
		{store.WindowOptions{Retention: time.Hour, SegmentInterval: time.Microsecond}, time.Millisecond},
	} {
		w, err := store.NewWindowStore("w", b, serde.String(), serde.String(), c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.SegmentInterval(); got != c.want {
			t.Errorf("SegmentInterval of %+v = %s; want %s", c.o, got, c.want)
		}
	}

	w, err := store.NewWindowStore("w", b, serde.Nullable(serde.String()), serde.String(), store.WindowOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(nil, "v", at(0)); err == nil {
		t.Error("Put with a null key succeeded")
	}
	k := "k"
	if err := w.Put(&k, "v", at(-1)); err == nil {
		t.Error("Put with a negative window start succeeded")
	}
	if err := w.Delete(&k, at(-5)); err == nil {
		t.Error("Delete with a negative window start succeeded")
	}
	s, err := store.NewSessionStore("s", b, serde.String(), serde.String(), store.SessionOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []serde.Windowed[string]{serde.WindowedMs("k", -1, 5), serde.WindowedMs("k", 10, 5)} {
		if err := s.Put(bad, "v"); err == nil {
			t.Errorf("Put of session %v succeeded", bad)
		}
		if err := s.Remove(bad); err == nil {
			t.Errorf("Remove of session %v succeeded", bad)
		}
	}
	if _, ok, err := s.FetchSession("k", at(10), at(5)); ok || err != nil {
		t.Errorf("FetchSession of an impossible session = %v, %v", ok, err)
	}
}

func TestWindowedChangelog(t *testing.T) {
	wc, err := store.NewWindowChangelog(store.WindowOptions{Retention: time.Hour, WindowSize: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := store.NewSessionChangelog(store.SessionOptions{Retention: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	str := func(m map[string]*string) string {
		return fmt.Sprintf("cleanup.policy=%s retention.ms=%s (%d configs)", *m["cleanup.policy"], *m["retention.ms"], len(m))
	}
	if got, want := str(wc.TopicConfigs()), "cleanup.policy=compact,delete retention.ms=90000000 (2 configs)"; got != want {
		t.Errorf("window TopicConfigs: %s; want %s", got, want)
	}
	if got, want := str(sc.TopicConfigs()), "cleanup.policy=compact,delete retention.ms=93600000 (2 configs)"; got != want {
		t.Errorf("session TopicConfigs: %s; want %s", got, want)
	}
	if got, want := str(store.WindowedChangelogConfigs(math.MaxInt64, math.MaxInt64)), "cleanup.policy=compact,delete retention.ms=18446744073708 (2 configs)"; got != want {
		t.Errorf("largest retention: %s; want %s", got, want)
	}
	if got, want := str(store.WindowedChangelogConfigs(time.Second, 0)), "cleanup.policy=compact,delete retention.ms=1000 (2 configs)"; got != want {
		t.Errorf("no additional retention: %s; want %s", got, want)
	}

	// Writes of the state key are not logged; data keys are logged without their segment
	// prefix.
	db := engines[0].open(t, "")
	defer db.Close()
	b, err := db.Open("w", 0)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	w, err := store.NewWindowStore("w", recorder{b, wc, &log}, serde.String(), serde.String(), store.WindowOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("key", "value", at(1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	// Java: WindowKeySchema.toStoreKeyBinary("key", 1700000000000, 0) and "value".
	want := []string{"changelog 6b65790000018bcfe5680000000000 76616c7565"}
	if strings.Join(log, "|") != strings.Join(want, "|") {
		t.Errorf("changelog %q; want %q", log, want)
	}
	if n := countKeys(t, b); n != 2 {
		t.Errorf("%d backend keys; want the window and the state", n)
	}

	// A malformed changelog key fails the restore; a window before 0 is skipped.
	r, err := wc.NewRestorer(b)
	if err != nil {
		t.Fatal(err)
	}
	bt := b.NewBatch()
	if err := r.Restore(bt, []byte("short"), []byte("v")); err == nil {
		t.Error("Restore of an 5-byte window key succeeded")
	}
	neg := append([]byte("k"), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)
	if err := r.Restore(bt, neg, []byte("v")); err != nil || bt.Len() != 0 {
		t.Errorf("Restore of a window at -1: %v, %d writes; want skipped", err, bt.Len())
	}
	sr, err := sc.NewRestorer(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := sr.Restore(bt, make([]byte, 15), nil); err == nil {
		t.Error("Restore of a 15-byte session key succeeded")
	}
}

// A window that starts after the stream time of what the Buffer flushed cannot be in the
// storage engine: Fetch answers it from the pending writes without reading the engine
// (the first record of a key's new window) but for one read of the flushed stream time per
// flush, and reads the engine for the others. Discard and a flush keep the answers right.
func TestWindowFetchOfANewWindowSkipsTheEngine(t *testing.T) {
	raw, err := memory.New().Open("w", 0)
	if err != nil {
		t.Fatal(err)
	}
	under := &countingBackend{Backend: raw}
	buf := store.NewBuffer(under)
	w, err := store.NewWindowStore("w", buf, serde.String(), serde.Int64(), store.WindowOptions{Retention: time.Hour, WindowSize: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fetch := windowFetcher(t, w)
	for _, p := range []struct {
		k  string
		ms int64
	}{{"a", 1000}, {"b", 1000}} {
		if err := w.Put(p.k, p.ms, at(p.ms)); err != nil {
			t.Fatal(err)
		}
	}
	if err := buf.Flush(-1); err != nil {
		t.Fatal(err)
	}
	under.gets = 0
	// One read, of the flushed stream time, once per flush.
	if got := fetch("a", 2000) + fetch("c", 5000) + fetch("d", 6000); got != "---" || under.gets != 1 {
		t.Fatalf("new windows: %s with %d engine reads; want --- with one", got, under.gets)
	}
	if got := fetch("a", 1000) + fetch("c", 1000); got != "1000-" || under.gets == 0 {
		t.Fatalf("flushed time: %s with %d engine reads; want 1000- read from the engine", got, under.gets)
	}
	if err := w.Put("a", 2000, at(2000)); err != nil {
		t.Fatal(err)
	}
	under.gets = 0
	if got := fetch("a", 2000) + fetch("b", 2000); got != "2000-" || under.gets != 0 {
		t.Fatalf("pending window: %s with %d engine reads; want 2000- with none", got, under.gets)
	}
	buf.Discard()
	if got := fetch("a", 2000); got != "-" {
		t.Fatalf("after Discard: %s; want -", got)
	}
	if err := w.Put("a", 3000, at(3000)); err != nil {
		t.Fatal(err)
	}
	if err := buf.Flush(-1); err != nil {
		t.Fatal(err)
	}
	if got := fetch("a", 3000) + fetch("a", 1000) + fetch("b", 3000); got != "30001000-" {
		t.Fatalf("after a flush: %s; want 30001000-", got)
	}
}

// Operator metadata: Meta is never logged; LoggedMeta is logged under a changelog key that
// no window or session has (its timestamps read as negative, so that an older restorer
// skips it as a window before 0), and a restorer of either kind of store puts it back.
func TestLoggedMetaRoundTrip(t *testing.T) {
	wc, err := store.NewWindowChangelog(store.WindowOptions{Retention: time.Hour, WindowSize: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := store.NewSessionChangelog(store.SessionOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	type changelogged struct {
		key, value []byte
	}
	for _, kind := range []string{"window", "session"} {
		t.Run(kind, func(t *testing.T) {
			codec := wc
			if kind == "session" {
				codec = sc
			}
			src, err := memory.New().Open("s", 0)
			if err != nil {
				t.Fatal(err)
			}
			var log []string
			var recs []changelogged
			rec := recorder{src, codec, &log}
			type metas interface {
				SetMeta(string, int64) error
				SetLoggedMeta(string, int64) error
				Meta(string) (int64, bool, error)
				LoggedMeta(string) (int64, bool, error)
			}
			open := func(b store.Backend) metas {
				if kind == "session" {
					s, err := store.NewSessionStore("s", b, serde.String(), serde.String(), store.SessionOptions{Retention: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				w, err := store.NewWindowStore("s", b, serde.String(), serde.String(), store.WindowOptions{Retention: time.Hour, WindowSize: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			s := open(rec)
			if err := s.SetMeta("local", 7); err != nil {
				t.Fatal(err)
			}
			if err := s.SetLoggedMeta("last-emit-close-time", 1_700_000_000_000); err != nil {
				t.Fatal(err)
			}
			if len(log) != 1 {
				t.Fatalf("changelog %q; want one record (the logged metadata)", log)
			}
			var key, value []byte
			fmt.Sscanf(log[0], "changelog %x %x", &key, &value)
			recs = append(recs, changelogged{key, value})
			if ts := int64(binary.BigEndian.Uint64(key[len(key)-8:])); ts >= 0 {
				t.Errorf("changelog key %x: its last 8 bytes read as timestamp %d; want negative", key, ts)
			}

			dst, err := memory.New().Open("s", 0)
			if err != nil {
				t.Fatal(err)
			}
			r, err := codec.NewRestorer(dst)
			if err != nil {
				t.Fatal(err)
			}
			bt := dst.NewBatch()
			for _, c := range recs {
				if err := r.Restore(bt, c.key, c.value); err != nil {
					t.Fatal(err)
				}
			}
			if err := bt.Commit(); err != nil {
				t.Fatal(err)
			}
			restored := open(dst)
			if v, ok, err := restored.LoggedMeta("last-emit-close-time"); err != nil || !ok || v != 1_700_000_000_000 {
				t.Errorf("restored LoggedMeta = %d, %v, %v; want 1700000000000", v, ok, err)
			}
			if _, ok, err := restored.Meta("local"); err != nil || ok {
				t.Errorf("restored Meta(local) = %v, %v; want none (never logged)", ok, err)
			}
		})
	}
}

// The first put to a segment newer than everything written makes the Buffer record the
// segment's keys: a fetch of a window of that segment that was never written answers
// without reading the engine, even once the segment was flushed (the stream time of the
// flush then no longer tells), and the windows written are read as before.
func TestWindowFetchOfAnUnwrittenWindowOfANewSegmentSkipsTheEngine(t *testing.T) {
	raw, err := memory.New().Open("w", 0)
	if err != nil {
		t.Fatal(err)
	}
	under := &countingBackend{Backend: raw}
	buf := store.NewBuffer(under).WithReadCache(1 << 20)
	w, err := store.NewWindowStore("w", buf, serde.String(), serde.Int64(), store.WindowOptions{
		Retention: 2 * time.Minute, WindowSize: time.Minute, SegmentInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fetch := windowFetcher(t, w)
	for _, k := range []string{"a", "b"} {
		if err := w.Put(k, 1, at(60_000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := buf.Flush(-1); err != nil {
		t.Fatal(err)
	}
	under.gets = 0
	if got := fetch("c", 60_000) + fetch("d", 60_000) + fetch("a", 61_000); got != "---" {
		t.Fatalf("unwritten windows: %s; want ---", got)
	}
	if got := fetch("a", 60_000) + fetch("b", 60_000); got != "11" {
		t.Fatalf("written windows: %s; want 11", got)
	}
	if under.gets > 1 { // the flushed stream time, once
		t.Fatalf("%d engine reads; want at most 1", under.gets)
	}
	// Later segments, and expiry of the first: the answers stay right.
	for ms := int64(120_000); ms <= 360_000; ms += 60_000 {
		if err := w.Put("a", ms, at(ms)); err != nil {
			t.Fatal(err)
		}
		if err := buf.Flush(-1); err != nil {
			t.Fatal(err)
		}
		prev := ms - 60_000 // a's value in the window before
		if ms == 120_000 {
			prev = 1
		}
		if got, want := fetch("a", ms)+fetch("b", ms)+fetch("a", ms-60_000), fmt.Sprintf("%d-%d", ms, prev); got != want {
			t.Fatalf("at %d: %s; want %s", ms, got, want)
		}
	}
	if got := fetch("a", 60_000) + fetch("b", 60_000); got != "--" {
		t.Fatalf("expired windows: %s; want --", got)
	}
}

// windowFetcher returns a function that fetches key k's window at ms from w, as its value
// or "-" when absent, failing t on an error.
func windowFetcher(t *testing.T, w *store.WindowStore[string, int64]) func(k string, ms int64) string {
	return func(k string, ms int64) string {
		t.Helper()
		v, ok, err := w.Fetch(k, at(ms))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "-"
		}
		return fmt.Sprint(v)
	}
}
