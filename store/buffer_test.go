package store_test

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/kstream-go/kstream/store/pebble"
	"github.com/kstream-go/kstream/store/storetest"
)

// --- engines ---

type engine struct {
	name string
	open func(t testing.TB, dir string) store.DB
}

var engines = []engine{
	{"memory", func(testing.TB, string) store.DB { return memory.New() }},
	{"pebble", func(t testing.TB, dir string) store.DB {
		t.Helper()
		db, err := pebble.Open(dir, pebble.Options{
			Logger:       slog.New(slog.DiscardHandler),
			CacheSize:    1 << 20,
			MemTableSize: 1 << 20,
		})
		if err != nil {
			t.Fatalf("pebble.Open: %v", err)
		}
		return db
	}},
}

// forEachBackend runs fn on a new, empty backend of each engine.
func forEachBackend(t *testing.T, fn func(t *testing.T, under store.Backend)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			db := e.open(t, t.TempDir())
			t.Cleanup(func() { _ = db.Close() })
			b, err := db.Open("s", 0)
			if err != nil {
				t.Fatal(err)
			}
			fn(t, b)
		})
	}
}

// --- conformance ---

// bufferDB is a store.DB whose backends are Buffers, so that the conformance suite can run
// over them. A batch's Commit is followed by a Flush (the suite expects a committed
// checkpoint to be visible), and direct writes stay pending until then. Opening a
// namespace twice returns the same Buffer, Drop discards its pending entries, and Close
// flushes every Buffer first, as a clean shutdown would.
type bufferDB struct {
	store.DB
	mu   sync.Mutex
	bufs map[string]*store.Buffer
}

func nsName(name string, partition int32) string { return fmt.Sprintf("%d/%s", partition, name) }

func (d *bufferDB) Open(name string, partition int32) (store.Backend, error) {
	under, err := d.DB.Open(name, partition)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := nsName(name, partition)
	buf, ok := d.bufs[k]
	if !ok {
		buf = store.NewBuffer(under)
		d.bufs[k] = buf
	}
	return flushingBackend{buf}, nil
}

func (d *bufferDB) Drop(name string, partition int32) error {
	d.mu.Lock()
	if buf, ok := d.bufs[nsName(name, partition)]; ok {
		buf.Discard()
	}
	d.mu.Unlock()
	return d.DB.Drop(name, partition)
}

func (d *bufferDB) Close() error {
	d.mu.Lock()
	var err error
	for _, buf := range d.bufs {
		err = errors.Join(err, buf.Flush(-1))
	}
	clear(d.bufs)
	d.mu.Unlock()
	return errors.Join(err, d.DB.Close())
}

type flushingBackend struct{ *store.Buffer }

func (b flushingBackend) NewBatch() store.Batch { return flushingBatch{b.Buffer.NewBatch(), b.Buffer} }

type flushingBatch struct {
	store.Batch
	buf *store.Buffer
}

func (bt flushingBatch) Commit() error {
	if err := bt.Batch.Commit(); err != nil {
		return err
	}
	return bt.buf.Flush(-1)
}

func openBufferDB(t *testing.T, e engine, dir string) store.DB {
	if strings.HasSuffix(t.Name(), "/Closed") {
		// Pending writes and their iterators do not touch the underlying DB, so they
		// keep working after it is closed.
		t.Skip("a Buffer does not know that its underlying DB is closed")
	}
	return &bufferDB{DB: e.open(t, dir), bufs: make(map[string]*store.Buffer)}
}

func TestBufferConformance(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.DB { return openBufferDB(t, e, t.TempDir()) })
		})
	}
}

func TestBufferPersistence(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T, dir string) store.DB { return openBufferDB(t, engines[1], dir) })
}

// --- helpers ---

type kv struct{ k, v string }

func mustSet(t *testing.T, b store.Backend, k, v string) {
	t.Helper()
	if err := b.Set([]byte(k), []byte(v)); err != nil {
		t.Fatalf("Set(%q): %v", k, err)
	}
}

func mustDelete(t *testing.T, b store.Backend, k string) {
	t.Helper()
	if err := b.Delete([]byte(k)); err != nil {
		t.Fatalf("Delete(%q): %v", k, err)
	}
}

func mustFlush(t *testing.T, b *store.Buffer, cp int64) {
	t.Helper()
	if err := b.Flush(cp); err != nil {
		t.Fatalf("Flush(%d): %v", cp, err)
	}
}

// mustRelease freezes b's pending writes, writes them and releases them: a commit's cut.
func mustRelease(t *testing.T, b *store.Buffer) {
	t.Helper()
	f, err := b.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(-1); err != nil {
		t.Fatal(err)
	}
	b.Release(f)
}

func wantGet(t *testing.T, b store.Backend, k, want string) {
	t.Helper()
	v, ok, err := b.Get([]byte(k))
	if err != nil || !ok || string(v) != want {
		t.Errorf("Get(%q) = %q, %v, %v; want %q, true, nil", k, v, ok, err, want)
	}
}

func wantAbsent(t *testing.T, b store.Backend, k string) {
	t.Helper()
	v, ok, err := b.Get([]byte(k))
	if err != nil || ok || v != nil {
		t.Errorf("Get(%q) = %q, %v, %v; want absent", k, v, ok, err)
	}
}

func wantCheckpoint(t *testing.T, b store.Backend, want int64) {
	t.Helper()
	if cp, err := b.Checkpoint(); err != nil || cp != want {
		t.Errorf("Checkpoint() = %d, %v; want %d", cp, err, want)
	}
}

func drain(t *testing.T, it store.Iterator, err error) []kv {
	t.Helper()
	if err != nil {
		t.Fatalf("creating iterator: %v", err)
	}
	var out []kv
	for it.Next() {
		out = append(out, kv{string(it.Key()), string(it.Value())})
	}
	if err := it.Err(); err != nil {
		t.Errorf("iterator Err: %v", err)
	}
	if err := it.Close(); err != nil {
		t.Errorf("iterator Close: %v", err)
	}
	return out
}

func scan(t *testing.T, b store.Backend, from, to []byte, reverse bool) []kv {
	t.Helper()
	if reverse {
		it, err := b.ReverseRange(from, to)
		return drain(t, it, err)
	}
	it, err := b.Range(from, to)
	return drain(t, it, err)
}

func prefixScan(t *testing.T, b store.Backend, prefix []byte) []kv {
	t.Helper()
	it, err := b.PrefixScan(prefix)
	return drain(t, it, err)
}

func wantPairs(t *testing.T, what string, got, want []kv) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, fmtPairs(got), fmtPairs(want))
	}
}

func fmtPairs(p []kv) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range p {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%x=%q", x.k, x.v)
	}
	b.WriteByte(']')
	return b.String()
}

// model is the reference for a backend's contents.
type model map[string]string

func (m model) rangeOf(from, to []byte, reverse bool) []kv {
	var out []kv
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if from != nil && k < string(from) || to != nil && k >= string(to) {
			continue
		}
		out = append(out, kv{k, m[k]})
	}
	if reverse {
		slices.Reverse(out)
	}
	return out
}

// deleteRange removes the keys in [from, to).
func (m model) deleteRange(from, to []byte) {
	for _, p := range m.rangeOf(from, to, false) {
		delete(m, p.k)
	}
}

func (m model) prefixOf(prefix []byte) []kv {
	var out []kv
	for _, p := range m.rangeOf(nil, nil, false) {
		if strings.HasPrefix(p.k, string(prefix)) {
			out = append(out, p)
		}
	}
	return out
}

// clearBackend deletes every key of b.
func clearBackend(t *testing.T, b store.Backend) {
	t.Helper()
	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt := b.NewBatch()
	for it.Next() {
		bt.Delete(it.Key())
	}
	if err := errors.Join(it.Err(), it.Close(), bt.Commit()); err != nil {
		t.Fatal(err)
	}
}

// spyBackend wraps a backend: it counts the writes that reach it directly and records the
// batches committed to it; while fail is set, commits fail with errInjected.
type spyBackend struct {
	store.Backend
	direct  int
	commits []commitRecord
	fail    bool
}

type commitRecord struct {
	writes int
	cp     int64
	hasCP  bool
}

var errInjected = errors.New("injected commit failure")

func (s *spyBackend) Set(key, value []byte) error {
	s.direct++
	return s.Backend.Set(key, value)
}

func (s *spyBackend) Delete(key []byte) error {
	s.direct++
	return s.Backend.Delete(key)
}

func (s *spyBackend) NewBatch() store.Batch { return &spyBatch{Batch: s.Backend.NewBatch(), s: s} }

type spyBatch struct {
	store.Batch
	s     *spyBackend
	cp    int64
	hasCP bool
}

func (bt *spyBatch) SetCheckpoint(offset int64) {
	bt.cp, bt.hasCP = offset, true
	bt.Batch.SetCheckpoint(offset)
}

func (bt *spyBatch) Reset() {
	bt.hasCP = false
	bt.Batch.Reset()
}

func (bt *spyBatch) Commit() error {
	defer func() { bt.hasCP = false }()
	if bt.s.fail {
		bt.Batch.Reset()
		return fmt.Errorf("spy: %w", errInjected)
	}
	bt.s.commits = append(bt.s.commits, commitRecord{writes: bt.Len(), cp: bt.cp, hasCP: bt.hasCP})
	return bt.Batch.Commit()
}

// --- tests ---

// TestBufferReadYourWrites checks that pending values and deletions override the
// underlying backend in Get and in every kind of iterator, and that the underlying backend
// sees none of them.
func TestBufferReadYourWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			mustSet(t, under, k, "u"+k)
		}
		buf := store.NewBuffer(under)
		mustSet(t, buf, "b", "pb")     // overrides
		mustDelete(t, buf, "c")        // hides
		mustSet(t, buf, "c2", "pc2")   // new, between underlying keys
		mustDelete(t, buf, "absent")   // deletes nothing
		mustSet(t, buf, "e", "pe")     // overrides the last key
		mustSet(t, buf, "0", "p0")     // before every key
		mustSet(t, buf, "z", "pz")     // after every key
		mustDelete(t, buf, "z")        // set then deleted: hidden
		mustSet(t, buf, "d", "")       // an empty value is a value
		mustSet(t, buf, "b", "pb-new") // a second write replaces the first

		wantGet(t, buf, "a", "ua")
		wantGet(t, buf, "b", "pb-new")
		wantAbsent(t, buf, "c")
		wantGet(t, buf, "c2", "pc2")
		wantGet(t, buf, "d", "")
		wantGet(t, buf, "e", "pe")
		wantGet(t, buf, "0", "p0")
		wantAbsent(t, buf, "z")
		wantAbsent(t, buf, "absent")

		want := model{"0": "p0", "a": "ua", "b": "pb-new", "c2": "pc2", "d": "", "e": "pe"}
		bounds := [][]byte{nil, {}, []byte("0"), []byte("a"), []byte("b"), []byte("c"), []byte("c2"),
			[]byte("d"), []byte("e"), []byte("e\x00"), []byte("z"), []byte("zz")}
		for _, from := range bounds {
			for _, to := range bounds {
				what := fmt.Sprintf("[%q, %q) nil=%v,%v", from, to, from == nil, to == nil)
				wantPairs(t, "Range"+what, scan(t, buf, from, to, false), want.rangeOf(from, to, false))
				wantPairs(t, "ReverseRange"+what, scan(t, buf, from, to, true), want.rangeOf(from, to, true))
			}
		}
		for _, p := range []string{"", "c", "z", "b", "0", "x"} {
			wantPairs(t, fmt.Sprintf("PrefixScan(%q)", p), prefixScan(t, buf, []byte(p)), want.prefixOf([]byte(p)))
		}
		wantPairs(t, "PrefixScan(nil)", prefixScan(t, buf, nil), want.rangeOf(nil, nil, false))

		// The underlying backend is untouched.
		orig := model{"a": "ua", "b": "ub", "c": "uc", "d": "ud", "e": "ue"}
		wantPairs(t, "underlying", scan(t, under, nil, nil, false), orig.rangeOf(nil, nil, false))
	})
}

// TestBufferEdgeKeys splits keys around the edges of the byte order between the underlying
// backend and the buffer, and checks every range and prefix scan.
func TestBufferEdgeKeys(t *testing.T) {
	edge := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x01", "\x7f", "\x80", "\xfe", "\xfe\xff",
		"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff", "a", "a\x00", "a\xff", "ab", "b"}
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		buf := store.NewBuffer(under)
		m := model{}
		for i, k := range edge {
			switch i % 4 {
			case 0: // underlying only
				mustSet(t, under, k, "u")
				m[k] = "u"
			case 1: // pending only
				mustSet(t, buf, k, "p")
				m[k] = "p"
			case 2: // both: pending wins
				mustSet(t, under, k, "u")
				mustSet(t, buf, k, "p")
				m[k] = "p"
			case 3: // underlying, deleted by the buffer
				mustSet(t, under, k, "u")
				mustDelete(t, buf, k)
			}
		}
		bounds := [][]byte{nil, {}}
		for _, k := range append(slices.Clone(edge), "\x00\x00\x00", "a\x00\x00", "c", "\xff\xff\xff\xff") {
			bounds = append(bounds, []byte(k))
		}
		for _, from := range bounds {
			for _, to := range bounds {
				what := fmt.Sprintf("(%x, %x) nil=%v,%v", from, to, from == nil, to == nil)
				wantPairs(t, "Range"+what, scan(t, buf, from, to, false), m.rangeOf(from, to, false))
				wantPairs(t, "ReverseRange"+what, scan(t, buf, from, to, true), m.rangeOf(from, to, true))
			}
			wantPairs(t, fmt.Sprintf("PrefixScan(%x)", from), prefixScan(t, buf, from), m.prefixOf(from))
		}
		for _, k := range edge {
			if v, ok := m[k]; ok {
				wantGet(t, buf, k, v)
			} else {
				wantAbsent(t, buf, k)
			}
		}
		// After Flush, the underlying backend holds exactly the same.
		mustFlush(t, buf, 1)
		wantPairs(t, "underlying after Flush", scan(t, under, nil, nil, false), m.rangeOf(nil, nil, false))
		wantPairs(t, "buffer after Flush", scan(t, buf, nil, nil, true), m.rangeOf(nil, nil, true))
	})
}

// TestBufferIteratorSnapshot checks that an iterator reads the pending entries and the
// underlying backend as of its creation, whatever is written, flushed or discarded while
// it is open, including in-place updates of pending values.
func TestBufferIteratorSnapshot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		buf := store.NewBuffer(under)
		m := model{}
		// setup makes the underlying backend hold k0000, k0002, k0003, k0005... and the
		// buffer k0001, k0004... and deletions of k0002, k0005...
		setup := func() {
			t.Helper()
			clearBackend(t, under)
			for i := range 1000 {
				k := fmt.Sprintf("k%04d", i)
				switch i % 3 {
				case 0:
					mustSet(t, under, k, "u")
				case 1:
					mustSet(t, buf, k, "p1")
				case 2:
					mustSet(t, under, k, "u")
					mustDelete(t, buf, k)
				}
			}
		}
		setup()
		for i := range 1000 {
			if i%3 != 2 {
				m[fmt.Sprintf("k%04d", i)] = []string{"u", "p1"}[i%3]
			}
		}
		type mk struct {
			name string
			open func() (store.Iterator, error)
			want []kv
		}
		iters := []mk{
			{"Range", func() (store.Iterator, error) { return buf.Range(nil, nil) }, m.rangeOf(nil, nil, false)},
			{"ReverseRange", func() (store.Iterator, error) { return buf.ReverseRange(nil, nil) }, m.rangeOf(nil, nil, true)},
			{"bounded Range", func() (store.Iterator, error) { return buf.Range([]byte("k0100"), []byte("k0900")) },
				m.rangeOf([]byte("k0100"), []byte("k0900"), false)},
			{"bounded ReverseRange", func() (store.Iterator, error) { return buf.ReverseRange([]byte("k0100"), []byte("k0900")) },
				m.rangeOf([]byte("k0100"), []byte("k0900"), true)},
			{"PrefixScan", func() (store.Iterator, error) { return buf.PrefixScan([]byte("k05")) }, m.prefixOf([]byte("k05"))},
		}
		for _, tc := range iters {
			for _, writes := range []string{"set", "flush", "discard"} {
				it, err := tc.open()
				if err != nil {
					t.Fatal(err)
				}
				// Writes before the first Next, between chunks, and at the end.
				var got []kv
				for i := 0; ; i++ {
					k := fmt.Sprintf("k%04d", (i*7)%1000)
					// Same-size values of pending keys may be updated in place.
					mustSet(t, buf, k, "p2")
					mustSet(t, buf, k+"x", "new")
					mustDelete(t, buf, fmt.Sprintf("k%04d", (i*11)%1000))
					if i%50 == 0 {
						switch writes {
						case "flush":
							mustFlush(t, buf, int64(i))
						case "discard":
							buf.Discard()
						}
					}
					if !it.Next() {
						break
					}
					got = append(got, kv{string(it.Key()), string(it.Value())})
				}
				if err := it.Err(); err != nil {
					t.Errorf("Err: %v", err)
				}
				if err := it.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				wantPairs(t, fmt.Sprintf("%s with writes (%s)", tc.name, writes), got, tc.want)
				// Restore the initial state.
				buf.Discard()
				setup()
			}
		}

		// Iterators each see a pending value as of their creation, although the later
		// writes of the key, of the same size, could reuse its storage.
		buf.Discard()
		mustSet(t, buf, "same", "aaaa")
		first, err := buf.Range(nil, []byte("t"))
		if err != nil {
			t.Fatal(err)
		}
		mustSet(t, buf, "same", "bbbb") // replaces: "aaaa" is in first's snapshot
		second, err := buf.Range(nil, []byte("t"))
		if err != nil {
			t.Fatal(err)
		}
		mustSet(t, buf, "same", "cccc")
		mustSet(t, buf, "same", "dddd")
		third, err := buf.Range(nil, []byte("t"))
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range []store.Iterator{first, second, third} {
			got := drain(t, it, nil)
			var v string
			for _, p := range got {
				if p.k == "same" {
					v = p.v
				}
			}
			if want := []string{"aaaa", "bbbb", "dddd"}[i]; v != want {
				t.Errorf("iterator %d: same = %q; want %q", i, v, want)
			}
		}
		wantGet(t, buf, "same", "dddd")
	})
}

// TestBufferIteratorContract checks exhaustion, Close twice, Next after Close, and that
// the slices an iterator returns may be modified.
func TestBufferIteratorContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "a", "ua")
		mustSet(t, under, "c", "uc")
		buf := store.NewBuffer(under)
		mustSet(t, buf, "b", "pb")
		mustDelete(t, buf, "c")
		for _, open := range []func() (store.Iterator, error){
			func() (store.Iterator, error) { return buf.Range(nil, nil) },
			func() (store.Iterator, error) { return buf.ReverseRange(nil, nil) },
			func() (store.Iterator, error) { return buf.PrefixScan(nil) },
			func() (store.Iterator, error) { return buf.Range([]byte("b"), []byte("a")) },
			func() (store.Iterator, error) { return buf.Range([]byte("x"), nil) }, // nothing pending
		} {
			it, err := open()
			if err != nil {
				t.Fatal(err)
			}
			if it.Key() != nil || it.Value() != nil {
				t.Error("Key or Value before Next is not nil")
			}
			for it.Next() {
				copy(it.Key(), "XX")
				copy(it.Value(), "XX")
			}
			for range 3 {
				if it.Next() {
					t.Error("Next after exhaustion returned true")
				}
			}
			if it.Err() != nil || it.Key() != nil {
				t.Errorf("after exhaustion: Err = %v, Key = %q", it.Err(), it.Key())
			}
			if err := it.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := it.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if it.Err() != nil {
				t.Errorf("Err after Close: %v", it.Err())
			}
			if it.Next() {
				t.Error("Next after Close returned true")
			}
			if !errors.Is(it.Err(), store.ErrClosed) {
				t.Errorf("Err after Next after Close = %v; want ErrClosed", it.Err())
			}
		}
		wantPairs(t, "after modifying iterator slices", scan(t, buf, nil, nil, false), []kv{{"a", "ua"}, {"b", "pb"}})
	})
}

// errIterBackend is a backend whose iterators fail after their first pair.
type errIterBackend struct{ store.Backend }

var errIter = errors.New("injected iterator failure")

func (b errIterBackend) Range(from, to []byte) (store.Iterator, error) {
	it, err := b.Backend.Range(from, to)
	return &errIterator{Iterator: it}, err
}

type errIterator struct {
	store.Iterator
	n   int
	err error
}

func (it *errIterator) Next() bool {
	if it.n++; it.n > 1 {
		it.err = errIter
		return false
	}
	return it.Iterator.Next()
}

func (it *errIterator) Err() error { return it.err }

// TestBufferIteratorError checks that an error of the underlying iterator ends the merged
// iteration, although pending entries remain, and is reported by Err.
func TestBufferIteratorError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "a", "1")
		mustSet(t, under, "c", "3")
		buf := store.NewBuffer(errIterBackend{under})
		mustSet(t, buf, "b", "2")
		mustSet(t, buf, "d", "4")
		it, err := buf.Range(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for it.Next() {
			got = append(got, string(it.Key()))
		}
		if !errors.Is(it.Err(), errIter) {
			t.Errorf("Err = %v; want the underlying iterator's error", it.Err())
		}
		if !slices.Equal(got, []string{"a"}) {
			t.Errorf("keys before the error = %q; want [a]", got)
		}
		if it.Next() {
			t.Error("Next after an error returned true")
		}
		_ = it.Close()
	})
}

// TestBufferFlush checks that Flush writes the data and the checkpoint in one batch of the
// underlying backend, which sees nothing before.
func TestBufferFlush(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "old", "1")
		mustSet(t, under, "gone", "1")
		spy := &spyBackend{Backend: under}
		buf := store.NewBuffer(spy)
		mustSet(t, buf, "a", "1")
		mustSet(t, buf, "b", "2")
		mustSet(t, buf, "old", "2")
		mustDelete(t, buf, "gone")
		bt := buf.NewBatch()
		bt.Set([]byte("c"), []byte("3"))
		bt.SetCheckpoint(5)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}

		// Before Flush: the underlying backend has seen nothing, and the checkpoint is
		// the underlying one.
		if spy.direct != 0 || len(spy.commits) != 0 {
			t.Fatalf("before Flush: %d direct writes, %d commits reached the underlying backend", spy.direct, len(spy.commits))
		}
		wantCheckpoint(t, buf, store.NoCheckpoint)
		wantCheckpoint(t, under, store.NoCheckpoint)
		wantPairs(t, "underlying before Flush", scan(t, under, nil, nil, false), []kv{{"gone", "1"}, {"old", "1"}})
		wantAbsent(t, under, "a")
		if buf.Len() != 5 {
			t.Errorf("Len = %d; want 5", buf.Len())
		}

		// Flush(-1) writes the batch's pending checkpoint.
		mustFlush(t, buf, -1)
		if spy.direct != 0 || len(spy.commits) != 1 {
			t.Fatalf("Flush: %d direct writes, %d commits; want 0 and 1", spy.direct, len(spy.commits))
		}
		if c := spy.commits[0]; c.writes != 5 || !c.hasCP || c.cp != 5 {
			t.Errorf("Flush committed %+v; want 5 writes and checkpoint 5", c)
		}
		want := []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"old", "2"}}
		wantPairs(t, "underlying after Flush", scan(t, under, nil, nil, false), want)
		wantPairs(t, "buffer after Flush", scan(t, buf, nil, nil, false), want)
		wantCheckpoint(t, under, 5)
		wantCheckpoint(t, buf, 5)
		if buf.Len() != 0 || buf.Size() != 0 {
			t.Errorf("after Flush: Len = %d, Size = %d; want 0, 0", buf.Len(), buf.Size())
		}

		// Nothing pending and no checkpoint: no commit at all.
		mustFlush(t, buf, -1)
		if len(spy.commits) != 1 {
			t.Errorf("empty Flush(-1) committed")
		}
		// A checkpoint alone is committed.
		mustFlush(t, buf, 8)
		wantCheckpoint(t, under, 8)
		// An explicit checkpoint wins over a batch's pending one; a negative one keeps
		// the underlying checkpoint.
		bt.SetCheckpoint(10)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		wantCheckpoint(t, buf, 8)
		mustFlush(t, buf, 12)
		wantCheckpoint(t, under, 12)
		mustSet(t, buf, "d", "4")
		mustFlush(t, buf, -1)
		wantCheckpoint(t, under, 12)
		wantGet(t, under, "d", "4")
		if n := len(spy.commits); n != 4 {
			t.Errorf("%d commits; want 4", n)
		}
		if spy.direct != 0 {
			t.Errorf("%d direct writes reached the underlying backend", spy.direct)
		}
	})
}

// TestBufferDiscard checks that Discard drops the pending entries and checkpoint.
func TestBufferDiscard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "a", "1")
		spy := &spyBackend{Backend: under}
		buf := store.NewBuffer(spy)
		mustFlush(t, buf, 3)
		mustSet(t, buf, "a", "2")
		mustSet(t, buf, "b", "2")
		bt := buf.NewBatch()
		bt.Delete([]byte("a"))
		bt.SetCheckpoint(4)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, buf, "a")
		buf.Discard()
		if buf.Len() != 0 || buf.Size() != 0 {
			t.Errorf("after Discard: Len = %d, Size = %d", buf.Len(), buf.Size())
		}
		wantGet(t, buf, "a", "1")
		wantAbsent(t, buf, "b")
		wantPairs(t, "scan after Discard", scan(t, buf, nil, nil, false), []kv{{"a", "1"}})
		mustFlush(t, buf, -1) // the pending checkpoint is gone too: nothing to commit
		if len(spy.commits) != 1 {
			t.Errorf("%d commits; want 1 (the Flush before Discard)", len(spy.commits))
		}
		wantCheckpoint(t, buf, 3)
		// The buffer is usable afterwards.
		mustSet(t, buf, "c", "3")
		mustFlush(t, buf, 5)
		wantPairs(t, "underlying", scan(t, under, nil, nil, false), []kv{{"a", "1"}, {"c", "3"}})
		wantCheckpoint(t, under, 5)
	})
}

// TestBufferFlushFailure checks that a failed Flush keeps everything pending, returns the
// underlying error wrapped, and can be retried.
func TestBufferFlushFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "x", "1")
		spy := &spyBackend{Backend: under, fail: true}
		buf := store.NewBuffer(spy)
		mustSet(t, buf, "a", "1")
		mustDelete(t, buf, "x")
		bt := buf.NewBatch()
		bt.SetCheckpoint(7)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		n, size := buf.Len(), buf.Size()
		for _, cp := range []int64{-1, 9} {
			err := buf.Flush(cp)
			if !errors.Is(err, errInjected) {
				t.Fatalf("Flush(%d) = %v; want an error wrapping the injected one", cp, err)
			}
			if buf.Len() != n || buf.Size() != size {
				t.Errorf("after failed Flush: Len, Size = %d, %d; want %d, %d", buf.Len(), buf.Size(), n, size)
			}
			wantGet(t, buf, "a", "1")
			wantAbsent(t, buf, "x")
			wantPairs(t, "scan after failed Flush", scan(t, buf, nil, nil, false), []kv{{"a", "1"}})
			wantPairs(t, "underlying after failed Flush", scan(t, under, nil, nil, false), []kv{{"x", "1"}})
			wantCheckpoint(t, under, store.NoCheckpoint)
		}
		// The retry writes everything, with the pending checkpoint.
		spy.fail = false
		mustFlush(t, buf, -1)
		wantPairs(t, "underlying after retry", scan(t, under, nil, nil, false), []kv{{"a", "1"}})
		wantCheckpoint(t, under, 7)
		if buf.Len() != 0 {
			t.Errorf("Len after retry = %d", buf.Len())
		}
	})
}

// TestBufferBatch checks batches of the buffer: invisible before Commit, applied in order,
// rejected whole for an invalid checkpoint, reusable.
func TestBufferBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		mustSet(t, under, "deleted-then-set", "old")
		mustSet(t, under, "deleted", "old")
		buf := store.NewBuffer(under)
		bt := buf.NewBatch()
		bt.Set([]byte("set-then-deleted"), []byte("x"))
		bt.Delete([]byte("set-then-deleted"))
		bt.Delete([]byte("deleted-then-set"))
		bt.Set([]byte("deleted-then-set"), []byte("new"))
		bt.Set([]byte("set-twice"), []byte("1"))
		bt.Set([]byte("set-twice"), []byte("2"))
		bt.Delete([]byte("deleted"))
		bt.Set([]byte("nil"), nil)
		if bt.Len() != 8 {
			t.Errorf("Len = %d; want 8", bt.Len())
		}
		wantAbsent(t, buf, "set-twice")
		wantGet(t, buf, "deleted", "old")
		if buf.Len() != 0 {
			t.Errorf("buffer Len before Commit = %d", buf.Len())
		}
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		if bt.Len() != 0 {
			t.Errorf("batch Len after Commit = %d", bt.Len())
		}
		wantAbsent(t, buf, "set-then-deleted")
		wantGet(t, buf, "deleted-then-set", "new")
		wantGet(t, buf, "set-twice", "2")
		wantAbsent(t, buf, "deleted")
		wantGet(t, buf, "nil", "")
		if buf.Len() != 5 {
			t.Errorf("buffer Len = %d; want 5", buf.Len())
		}

		// An invalid checkpoint rejects the whole batch.
		bt.Set([]byte("k"), []byte("v"))
		bt.SetCheckpoint(-2)
		if err := bt.Commit(); err == nil {
			t.Error("Commit with checkpoint -2 succeeded")
		}
		wantAbsent(t, buf, "k")
		// Reset discards writes and checkpoint.
		bt.Set([]byte("k"), []byte("v"))
		bt.SetCheckpoint(3)
		bt.Reset()
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, buf, "k")
		mustFlush(t, buf, -1)
		wantCheckpoint(t, under, store.NoCheckpoint)
		// A later valid checkpoint replaces an invalid one.
		bt.SetCheckpoint(-5)
		bt.SetCheckpoint(4)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, buf, -1)
		wantCheckpoint(t, under, 4)
		wantPairs(t, "underlying", scan(t, under, nil, nil, false),
			[]kv{{"deleted-then-set", "new"}, {"nil", ""}, {"set-twice", "2"}})
	})
}

// TestBufferCopies checks that the buffer copies what it is given and what it returns.
func TestBufferCopies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		buf := store.NewBuffer(under)
		k, v := []byte("key"), []byte("value")
		if err := buf.Set(k, v); err != nil {
			t.Fatal(err)
		}
		copy(k, "XXX")
		copy(v, "XXXXX")
		wantGet(t, buf, "key", "value")
		wantAbsent(t, buf, "XXX")
		got, _, _ := buf.Get([]byte("key"))
		copy(got, "XXXXX")
		wantGet(t, buf, "key", "value")

		bt := buf.NewBatch()
		k2, v2, d := []byte("key2"), []byte("value2"), []byte("key")
		bt.Set(k2, v2)
		bt.Delete(d)
		copy(k2, "XXXX")
		copy(v2, "XXXXXX")
		copy(d, "zzz")
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		wantGet(t, buf, "key2", "value2")
		wantAbsent(t, buf, "key")
		// In-place update of a pending value: the caller's slice is still not kept.
		v3 := []byte("VALUE2")
		mustSet(t, buf, "key2", "short")
		if err := buf.Set([]byte("key2"), v3); err != nil {
			t.Fatal(err)
		}
		copy(v3, "XXXXXX")
		wantGet(t, buf, "key2", "VALUE2")
		mustFlush(t, buf, -1)
		wantGet(t, under, "key2", "VALUE2")
		wantAbsent(t, under, "key")
	})
}

// TestBufferStats checks Len, Size and ApproximateCount.
func TestBufferStats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		for i := range 10 {
			mustSet(t, under, fmt.Sprintf("u%d", i), "v")
		}
		buf := store.NewBuffer(under)
		count := func() int64 {
			t.Helper()
			n, err := buf.ApproximateCount()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(); n != 10 {
			t.Errorf("ApproximateCount = %d; want 10", n)
		}
		mustSet(t, buf, "p1", "abc")   // 2+3
		mustSet(t, buf, "p2", "abcde") // 2+5
		mustDelete(t, buf, "u0")       // 2
		if buf.Len() != 3 || buf.Size() != 14 {
			t.Errorf("Len, Size = %d, %d; want 3, 14", buf.Len(), buf.Size())
		}
		if n := count(); n != 11 {
			t.Errorf("ApproximateCount = %d; want 11", n)
		}
		mustSet(t, buf, "p1", "a")       // shrinks in place
		mustSet(t, buf, "p2", "abcdefg") // grows
		mustDelete(t, buf, "p2")
		mustSet(t, buf, "u0", "back")
		if buf.Len() != 3 || buf.Size() != 2+1+2+2+4 {
			t.Errorf("Len, Size = %d, %d; want 3, 11", buf.Len(), buf.Size())
		}
		// p1 is new, p2 deleted (counts -1 though absent below), u0 set (counted twice).
		if n := count(); n != 11 {
			t.Errorf("ApproximateCount = %d; want 11", n)
		}
		mustFlush(t, buf, -1)
		if n := count(); n != 11 {
			t.Errorf("ApproximateCount after Flush = %d; want 11", n)
		}
		buf2 := store.NewBuffer(under)
		for i := range 20 {
			mustDelete(t, buf2, fmt.Sprintf("absent%d", i))
		}
		if n, err := buf2.ApproximateCount(); err != nil || n != 0 {
			t.Errorf("ApproximateCount with many pending deletions = %d, %v; want 0", n, err)
		}
	})
}

// TestBufferAllocs checks the allocations of the hot path: Get of a pending key allocates
// only the returned copy, Set of a pending key with a value that fits allocates nothing,
// and Set of a new key allocates about the copies of the key and the value.
func TestBufferAllocs(t *testing.T) {
	db := memory.New()
	defer db.Close()
	under, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := store.NewBuffer(under)
	key, val := []byte("counter"), []byte("12345678")
	_ = buf.Set(key, val)
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = buf.Get(key) }); n != 1 {
		t.Errorf("Get of a pending key: %v allocations; want 1", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = buf.Set(key, val) }); n != 0 {
		t.Errorf("Set of a pending key: %v allocations; want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		v, _, _ := buf.Get(key)
		v[0]++
		_ = buf.Set(key, v)
	}); n != 1 {
		t.Errorf("Get then Set of a pending key: %v allocations; want 1", n)
	}
	keys := make([][]byte, 20_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%08d", i)
	}
	i := 0
	n := testing.AllocsPerRun(len(keys)-1, func() {
		_ = buf.Set(keys[i], val)
		i++
	})
	// 2 copies, plus B-tree nodes, entry slabs and map growth, amortized.
	if n > 2.5 {
		t.Errorf("Set of a new key: %v allocations; want about 2", n)
	}
	t.Logf("Set of a new key: %.2f allocations", n)
}

// TestBufferRandomModel compares a Buffer over each backend with a map after every one of
// thousands of random writes, batches, flushes, discards and iterations.
func TestBufferRandomModel(t *testing.T) {
	// Without a read cache, and with one small enough to evict all the time.
	// 600 and 4096 bytes hold a few and a few tens of entries: generations turn often,
	// with pending entries in both and in dropped ones.
	for _, cache := range []int{0, 48, 600, 4096} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testBufferRandomModel(t, cache, false, false) })
	}
	// A segmented store's cache, which caches a flush's writes only when reads came before.
	t.Run("cache=600,byReads", func(t *testing.T) { testBufferRandomModel(t, 600, false, true) })
}

// TestBufferFreezeRandomModel is TestBufferRandomModel with generations frozen (Freeze),
// written on another goroutine while the Buffer goes on, then released or unfrozen.
func TestBufferFreezeRandomModel(t *testing.T) {
	for _, cache := range []int{0, 48, 600, 4096} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testBufferRandomModel(t, cache, true, false) })
	}
	t.Run("cache=600,byReads", func(t *testing.T) { testBufferRandomModel(t, 600, true, true) })
}

// testBufferRandomModel runs the model with a read cache of cache bytes (none for 0), with
// generations frozen or flushed, and with byReads, caching writes as a segmented store's
// Buffer does (CacheWritesByReads).
func testBufferRandomModel(t *testing.T, cache int, freeze, byReads bool) {
	forEachBackend(t, func(t *testing.T, under store.Backend) {
		r := rand.New(rand.NewPCG(7, 8))
		randKey := func() string {
			k := make([]byte, 1+r.IntN(3))
			for i := range k {
				k[i] = "\x00\x01ab\xfe\xff"[r.IntN(6)]
			}
			return string(k)
		}
		randBound := func() []byte {
			switch r.IntN(6) {
			case 0:
				return nil
			case 1:
				return []byte{}
			}
			return []byte(randKey())
		}
		randValue := func() string { return fmt.Sprint(r.Uint64() >> r.IntN(64)) } // lengths vary
		buf := store.NewBuffer(under)
		if cache > 0 {
			buf.WithReadCache(cache)
		}
		if byReads {
			buf.CacheWritesByReads()
		}
		typed := store.NewKeyValueStore("model", buf, serde.String(), serde.String())
		flushed, view := model{}, model{} // the underlying backend's data; the buffer's
		flushedCP, pendingCP := store.NoCheckpoint, store.NoCheckpoint
		hasPendingCP := false
		type open struct {
			it   store.Iterator
			what string
			want []kv
		}
		var iters []open
		// The frozen generation (freeze): the view and pending checkpoint at the freeze,
		// and its Write running (writing) or done.
		var (
			fz                   *store.Frozen
			frozenView           model
			frozenCP, writeCP    int64
			hasFrozenCP, writing bool
			writeErr             chan error
			releases, unfreezes  int
		)
		defer func() {
			if writing {
				<-writeErr
			}
		}()
		openIter := func() open {
			from, to := randBound(), randBound()
			var (
				it   store.Iterator
				err  error
				want []kv
				what string
			)
			switch r.IntN(3) {
			case 0:
				it, err = buf.Range(from, to)
				want, what = view.rangeOf(from, to, false), fmt.Sprintf("Range(%x, %x)", from, to)
			case 1:
				it, err = buf.ReverseRange(from, to)
				want, what = view.rangeOf(from, to, true), fmt.Sprintf("ReverseRange(%x, %x)", from, to)
			default:
				it, err = buf.PrefixScan(from)
				want, what = view.prefixOf(from), fmt.Sprintf("PrefixScan(%x)", from)
			}
			if err != nil {
				t.Fatal(err)
			}
			return open{it, what, want}
		}
		steps := 4000
		if testing.Short() {
			steps = 1000
		}
		tracked := 0 // prefixes TrackFresh took
		for step := range steps {
			var op string
			if r.IntN(100) < 3 {
				// Record a prefix's writes (refused unless it holds no key): the Gets
				// after each step check its "absent" answers.
				prefix := []byte(randKey())[:1]
				if r.IntN(2) == 0 {
					prefix = []byte(randKey() + randKey())[:2]
				}
				ok, err := buf.TrackFresh(prefix)
				if err != nil {
					t.Fatalf("step %d: TrackFresh(%x): %v", step, prefix, err)
				}
				if ok {
					tracked++
				}
			}
			if freeze && r.IntN(100) < 12 {
				switch {
				case fz == nil:
					op = "freeze"
					f, err := buf.Freeze()
					if err != nil {
						t.Fatalf("step %d: Freeze: %v", step, err)
					}
					fz, frozenView = f, maps.Clone(view)
					frozenCP, hasFrozenCP, hasPendingCP = pendingCP, hasPendingCP, false
					if err := buf.Flush(-1); err == nil {
						t.Fatalf("step %d: Flush with a frozen generation succeeded", step)
					}
				case !writing && r.IntN(4) == 0:
					op = "unfreeze"
					buf.Unfreeze(fz)
					fz = nil
					unfreezes++
					if !hasPendingCP && hasFrozenCP {
						pendingCP, hasPendingCP = frozenCP, true
					}
				case !writing:
					op = "write frozen"
					writeCP = -1
					if r.IntN(2) == 0 {
						writeCP = int64(step)
					}
					writeErr, writing = make(chan error, 1), true
					go func(f *store.Frozen, cp int64) { writeErr <- f.Write(cp) }(fz, writeCP)
				default:
					op = "release"
					if err := <-writeErr; err != nil {
						t.Fatalf("step %d: Write of the frozen generation: %v", step, err)
					}
					writing = false
					buf.Release(fz)
					fz, flushed = nil, frozenView
					releases++
					switch {
					case writeCP >= 0:
						flushedCP = writeCP
					case hasFrozenCP:
						flushedCP = frozenCP
					}
				}
			}
			switch x := r.IntN(100); {
			case x < 40:
				op = "set"
				k, v := randKey(), randValue()
				mustSet(t, buf, k, v)
				view[k] = v
			case x < 57:
				op = "delete"
				k := randKey()
				mustDelete(t, buf, k)
				delete(view, k)
			case x < 60:
				op = "delete range"
				from, to := randBound(), randBound()
				if err := buf.DeleteRange(from, to); err != nil {
					t.Fatal(err)
				}
				view.deleteRange(from, to)
			case x < 70:
				op = "batch"
				bt := buf.NewBatch()
				next := maps.Clone(view)
				for range r.IntN(10) {
					k := randKey()
					if r.IntN(15) == 0 {
						from, to := randBound(), randBound()
						bt.DeleteRange(from, to)
						next.deleteRange(from, to)
					} else if r.IntN(3) == 0 {
						bt.Delete([]byte(k))
						delete(next, k)
					} else {
						v := randValue()
						bt.Set([]byte(k), []byte(v))
						next[k] = v
					}
				}
				cp := int64(step)
				setCP, bad := r.IntN(2) == 0, r.IntN(10) == 0
				if setCP {
					bt.SetCheckpoint(cp)
				}
				if bad {
					bt.SetCheckpoint(-3) // the whole batch fails
				}
				err := bt.Commit()
				switch {
				case bad && err == nil:
					t.Fatalf("step %d: Commit with checkpoint -3 succeeded", step)
				case !bad && err != nil:
					t.Fatalf("step %d: Commit: %v", step, err)
				case !bad:
					view = next
					if setCP {
						pendingCP, hasPendingCP = cp, true
					}
				}
			case x < 76 && fz != nil:
				op = "flush refused"
				if err := buf.Flush(-1); err == nil {
					t.Fatalf("step %d: Flush with a frozen generation succeeded", step)
				}
			case x < 76:
				op = "flush"
				cp := int64(-1)
				if r.IntN(2) == 0 {
					cp = int64(step)
				}
				mustFlush(t, buf, cp)
				flushed = maps.Clone(view)
				switch {
				case cp >= 0:
					flushedCP = cp
				case hasPendingCP:
					flushedCP = pendingCP
				}
				hasPendingCP = false
			case x < 78:
				op = "discard"
				buf.Discard()
				view = maps.Clone(flushed)
				if fz != nil {
					view = maps.Clone(frozenView) // the frozen writes stay pending
				}
				hasPendingCP = false
			case x < 86:
				op = "open iterator"
				if len(iters) < 8 {
					iters = append(iters, openIter())
				}
			case x < 92:
				op = "drain iterator"
				if len(iters) > 0 {
					i := r.IntN(len(iters))
					o := iters[i]
					iters = slices.Delete(iters, i, i+1)
					wantPairs(t, fmt.Sprintf("step %d: %s opened earlier", step, o.what), drain(t, o.it, nil), o.want)
				}
			default:
				op = "iterate"
				o := openIter()
				wantPairs(t, fmt.Sprintf("step %d: %s", step, o.what), drain(t, o.it, nil), o.want)
			}

			// After every step: Gets (of bytes, and typed ones, which read without a
			// copy) and full scans both ways.
			if err := buf.CheckInvariants(); err != nil {
				t.Fatalf("step %d (%s): %v", step, op, err)
			}
			for range 16 {
				k := randKey()
				v, ok, err := buf.Get([]byte(k))
				mv, mok := view[k]
				if err != nil || ok != mok || string(v) != mv {
					t.Fatalf("step %d (%s): Get(%x) = %q, %v, %v; want %q, %v", step, op, k, v, ok, err, mv, mok)
				}
				k = randKey()
				tv, ok, err := typed.Get(k)
				mv, mok = view[k]
				if err != nil || ok != mok || tv != mv {
					t.Fatalf("step %d (%s): typed Get(%x) = %q, %v, %v; want %q, %v", step, op, k, tv, ok, err, mv, mok)
				}
			}
			if err := buf.CheckInvariants(); err != nil {
				t.Fatalf("step %d (%s) after Gets: %v", step, op, err)
			}
			asc := view.rangeOf(nil, nil, false)
			desc := slices.Clone(asc)
			slices.Reverse(desc)
			if got := scan(t, buf, nil, nil, false); !slices.Equal(got, asc) {
				t.Fatalf("step %d (%s): full scan:\n got %s\nwant %s", step, op, fmtPairs(got), fmtPairs(asc))
			}
			if got := scan(t, buf, nil, nil, true); !slices.Equal(got, desc) {
				t.Fatalf("step %d (%s): full reverse scan:\n got %s\nwant %s", step, op, fmtPairs(got), fmtPairs(desc))
			}
			if fz == nil && (step%100 == 0 || op == "flush" || op == "discard" || op == "release") {
				wantPairs(t, fmt.Sprintf("step %d (%s): underlying", step, op), scan(t, under, nil, nil, false), flushed.rangeOf(nil, nil, false))
				wantCheckpoint(t, under, flushedCP)
				wantCheckpoint(t, buf, flushedCP)
			}
			if t.Failed() {
				t.FailNow()
			}
		}
		if tracked == 0 {
			t.Error("TrackFresh never took a prefix")
		}
		for _, o := range iters {
			wantPairs(t, "at the end: "+o.what+" opened earlier", drain(t, o.it, nil), o.want)
		}
		if freeze && (releases == 0 || unfreezes == 0) {
			t.Errorf("%d generations released, %d unfrozen: the model did not exercise both", releases, unfreezes)
		}
		if freeze {
			t.Logf("%d generations released, %d unfrozen", releases, unfreezes)
		}
	})
}

// The read cache answers Get for keys read or flushed before, without reading the
// underlying backend, stays right across Discard, and stays within its limit.
func TestBufferReadCache(t *testing.T) {
	under := newCountingBackend(t)
	if err := under.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	buf := store.NewBuffer(under).WithReadCache(1 << 10)
	get := func(k string) (string, bool) {
		t.Helper()
		v, ok, err := buf.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return string(v), ok
	}
	if v, ok := get("a"); !ok || v != "1" {
		t.Fatalf("a = %q %v", v, ok)
	}
	if _, ok := get("missing"); ok {
		t.Fatal("missing key found")
	}
	reads := under.gets
	get("a")
	get("missing")
	if under.gets != reads {
		t.Fatalf("cached keys read the backend again: %d reads, want %d", under.gets, reads)
	}
	// Flushed values are cached; discarded ones are not, and the cached value stays.
	_ = buf.Set([]byte("b"), []byte("2"))
	_ = buf.Delete([]byte("a"))
	if err := buf.Flush(5); err != nil {
		t.Fatal(err)
	}
	_ = buf.Set([]byte("b"), []byte("3"))
	buf.Discard()
	reads = under.gets
	if v, ok := get("b"); !ok || v != "2" {
		t.Fatalf("b after discard = %q %v, want 2", v, ok)
	}
	if _, ok := get("a"); ok {
		t.Fatal("a deleted and flushed, still found")
	}
	if under.gets != reads {
		t.Fatalf("flushed keys read the backend: %d reads, want %d", under.gets, reads)
	}
	// The limit holds: 1000 keys of ~10 bytes through a 1 KiB cache.
	for i := range 1000 {
		get(fmt.Sprintf("key-%05d", i))
	}
	if n := buf.CacheSize(); n > 1<<10 {
		t.Fatalf("cache holds %d bytes, limit 1024", n)
	}
}

// A shared read cache bound (WithSharedReadCache) can change while the Buffer is in use: a
// lower bound is honored from the next Flush on, pending writes survive it, reads stay
// right, and a higher bound lets the cache grow again.
func TestBufferSharedReadCacheBound(t *testing.T) {
	under := newCountingBackend(t)
	for i := range 2000 {
		if err := under.Set(fmt.Appendf(nil, "key-%05d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var limit atomic.Int64
	limit.Store(1 << 20)
	buf := store.NewBuffer(under).WithSharedReadCache(&limit)
	readAll := func(n int) {
		t.Helper()
		for i := range n {
			v, ok, err := buf.Get(fmt.Appendf(nil, "key-%05d", i))
			if err != nil || !ok || string(v) != fmt.Sprintf("v%d", i) {
				t.Fatalf("key-%05d = %q %v %v, want v%d", i, v, ok, err, i)
			}
		}
	}
	readAll(2000)
	full := buf.CacheSize()
	if full < 100_000 {
		t.Fatalf("2,000 keys read through a 1 MiB cache: it holds %d bytes, want them all (over 100,000)", full)
	}
	reads := under.gets
	readAll(2000)
	if under.gets != reads {
		t.Fatalf("cached keys read the backend again: %d reads, want %d", under.gets-reads, 0)
	}

	// The budget is divided among more Buffers: the bound falls below what the cache holds.
	limit.Store(16 << 10)
	if err := buf.Set([]byte("extra"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := buf.Flush(7); err != nil {
		t.Fatal(err)
	}
	if n := buf.CacheSize(); n > 16<<10 {
		t.Fatalf("after Flush under a 16 KiB bound the cache holds %d bytes", n)
	}
	if v, ok, _ := buf.Get([]byte("extra")); !ok || string(v) != "new" {
		t.Fatalf("extra after the flush = %q %v, want new", v, ok)
	}
	if cp, err := under.Checkpoint(); err != nil || cp != 7 {
		t.Fatalf("checkpoint %d %v, want 7", cp, err)
	}
	// Reads keep it within the new bound; a pending write dropped from the cache stays.
	if err := buf.Set([]byte("pending"), []byte("p")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for i := 2; i < 2000; i++ {
			if _, _, err := buf.Get(fmt.Appendf(nil, "key-%05d", i)); err != nil {
				t.Fatal(err)
			}
			if n := buf.CacheSize(); n > 16<<10 {
				t.Fatalf("reading under a 16 KiB bound: the cache holds %d bytes", n)
			}
		}
	}
	if v, ok, _ := buf.Get([]byte("pending")); !ok || string(v) != "p" {
		t.Fatalf("pending write after the cache turned = %q %v, want p", v, ok)
	}
	// The bound rises again (Buffers left): the cache grows back.
	limit.Store(1 << 20)
	readAll(2000)
	readAll(2000)
	if n := buf.CacheSize(); n < full/2 {
		t.Fatalf("after the bound rose back to 1 MiB the cache holds %d bytes, want at least %d", n, full/2)
	}
}

// newCountingBackend returns a countingBackend over a fresh memory store partition.
func newCountingBackend(t *testing.T) *countingBackend {
	t.Helper()
	db := memory.New()
	t.Cleanup(func() { _ = db.Close() })
	mb, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &countingBackend{Backend: mb}
}

type countingBackend struct {
	store.Backend
	gets int
}

func (c *countingBackend) Get(k []byte) ([]byte, bool, error) {
	c.gets++
	return c.Backend.Get(k)
}

// An empty upper bound of a batch's range deletion is an empty range, not an unbounded one,
// even as the batch's first write (when the batch holds no bytes yet).
func TestBufferBatchRangeDeletionWithEmptyBound(t *testing.T) {
	buf := store.NewBuffer(newCountingBackend(t))
	mustSet(t, buf, "b", "1")
	bt := buf.NewBatch()
	bt.DeleteRange([]byte{}, []byte{})
	bt.DeleteRange([]byte("a"), []byte{})
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	wantGet(t, buf, "b", "1")
}

// A prefix that holds no key is recorded (TrackFresh): a Get of a key under it that was
// never written answers without reading the underlying backend, one that was written (and
// flushed) reads it as before; a prefix that holds a key is refused; Discard and a range
// deletion of the whole prefix end the recording.
func TestBufferTrackFresh(t *testing.T) {
	under := newCountingBackend(t)
	buf := store.NewBuffer(under).WithReadCache(1 << 20)
	mustSet(t, buf, "a1", "x")
	if ok, err := buf.TrackFresh([]byte("a")); ok || err != nil {
		t.Fatalf("TrackFresh of a prefix holding a key = %v, %v; want false", ok, err)
	}
	if ok, err := buf.TrackFresh([]byte("b")); !ok || err != nil {
		t.Fatalf("TrackFresh(b) = %v, %v; want true", ok, err)
	}
	mustSet(t, buf, "b1", "y")
	mustFlush(t, buf, -1)
	under.gets = 0
	wantAbsent(t, buf, "b2")
	wantAbsent(t, buf, "b3")
	if under.gets != 0 {
		t.Fatalf("Gets of never written keys read the backend %d times", under.gets)
	}
	wantGet(t, buf, "b1", "y")
	wantAbsent(t, buf, "c1")
	if under.gets != 1 {
		t.Fatalf("Get of a key outside the prefix: %d backend reads; want 1", under.gets)
	}
	buf.Discard()
	under.gets = 0
	wantAbsent(t, buf, "b2")
	if under.gets != 1 {
		t.Fatalf("after Discard: %d backend reads; want 1", under.gets)
	}
	if ok, err := buf.TrackFresh([]byte("d")); !ok || err != nil {
		t.Fatalf("TrackFresh(d) = %v, %v; want true", ok, err)
	}
	if err := buf.DeleteRange([]byte("c"), []byte("e")); err != nil {
		t.Fatal(err)
	}
	under.gets = 0
	wantAbsent(t, buf, "d1")
	if under.gets != 0 {
		t.Fatalf("under a pending range deletion: %d backend reads; want 0", under.gets)
	}
	mustFlush(t, buf, -1)
	wantAbsent(t, buf, "d1")
	if under.gets != 1 {
		t.Fatalf("after a range deletion of the prefix: %d backend reads; want 1", under.gets)
	}
}

// Values the read cache took before range deletions that cover them are never returned
// afterwards, however many range deletions came since (the cache drops them lazily).
func TestBufferReadCacheAfterRangeDeletions(t *testing.T) {
	under := newCountingBackend(t)
	buf := store.NewBuffer(under).WithReadCache(1 << 20)
	for i := range 40 {
		mustSet(t, buf, fmt.Sprintf("k%02d", i), "v")
	}
	mustFlush(t, buf, -1)
	for i := range 40 {
		wantGet(t, buf, fmt.Sprintf("k%02d", i), "v") // cached
	}
	for i := range 20 {
		from, to := fmt.Sprintf("k%02d", 2*i), fmt.Sprintf("k%02d", 2*i+1)
		if err := buf.DeleteRange([]byte(from), []byte(to)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			mustFlush(t, buf, -1)
		}
	}
	mustSet(t, buf, "k04", "new") // written after the range deletion of k04
	mustFlush(t, buf, -1)
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		switch {
		case i == 4:
			wantGet(t, buf, k, "new")
		case i%2 == 0:
			wantAbsent(t, buf, k)
		default:
			wantGet(t, buf, k, "v")
		}
	}
	if err := buf.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A segmented store's Release that caches no writes drops the value its cache held for a
// key written before the freeze and again after it: once the later write is discarded, a
// read returns the frozen write, which the backend now holds, not the value cached before.
func TestBufferUncachedReleaseOfAReplacedKey(t *testing.T) {
	under := newCountingBackend(t)
	mustSet(t, under, "k", "v0")
	buf := store.NewBuffer(under).WithReadCache(1 << 20).CacheWritesByReads()
	wantGet(t, buf, "k", "v0") // cached
	mustRelease(t, buf)        // nothing written: the read above counts for this cut, not the next
	mustSet(t, buf, "k", "v1")
	for i := range 20 {
		mustSet(t, buf, fmt.Sprintf("w%02d", i), "w") // too many writes for no read: not cached
	}
	f, err := buf.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, buf, "k", "v2") // replaces the frozen v1
	if err := f.Write(-1); err != nil {
		t.Fatal(err)
	}
	buf.Release(f)
	buf.Discard() // v2 goes
	wantGet(t, buf, "k", "v1")
	if err := buf.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A segmented store's cut (Flush, or Release of a frozen generation) caches the values it
// writes only while the Buffer reads the underlying backend back, at least once per 8
// writes since the previous cut: a window store that opens a window per record keeps its
// cache empty, and one that reads what it wrote (an aggregation of several records per
// window) caches its writes as before. A key-value store's cut caches them either way.
func TestBufferCachesWritesThatAreReadBack(t *testing.T) {
	t.Run("key-value", func(t *testing.T) {
		under := newCountingBackend(t)
		buf := store.NewBuffer(under).WithReadCache(1 << 20)
		for i := range 100 {
			mustSet(t, buf, fmt.Sprintf("w%03d", i), "v")
		}
		mustFlush(t, buf, -1)
		for i := range 100 {
			wantGet(t, buf, fmt.Sprintf("w%03d", i), "v")
		}
		if under.gets != 0 {
			t.Fatalf("reads of a key-value store's flushed writes: %d backend reads; want 0 (cached)", under.gets)
		}
	})
	for _, frozen := range []bool{false, true} {
		t.Run(fmt.Sprintf("segmented,frozen=%v", frozen), func(t *testing.T) {
			under := newCountingBackend(t)
			buf := store.NewBuffer(under).WithReadCache(1 << 20).CacheWritesByReads()
			cut := func() {
				t.Helper()
				if frozen {
					mustRelease(t, buf)
				} else {
					mustFlush(t, buf, -1)
				}
			}
			// writeAll writes v to the 100 keys; readAll reads them back, wanting v, and
			// returns how many reads reached the backend.
			writeAll := func(v string) {
				t.Helper()
				for i := range 100 {
					mustSet(t, buf, fmt.Sprintf("w%03d", i), v)
				}
			}
			readAll := func(v string) int {
				t.Helper()
				under.gets = 0
				for i := range 100 {
					wantGet(t, buf, fmt.Sprintf("w%03d", i), v)
				}
				return under.gets
			}
			// Written only: nothing cached.
			writeAll("v")
			cut()
			if n := buf.CacheSize(); n != 0 {
				t.Fatalf("after a cut of writes nothing read back, the cache holds %d bytes; want 0", n)
			}
			// Read back (one miss each, then cached), rewritten and cut: cached.
			if n := readAll("v"); n != 100 {
				t.Fatalf("reads of the uncached writes: %d backend reads; want 100", n)
			}
			writeAll("v2")
			cut()
			if n := readAll("v2"); n != 0 {
				t.Fatalf("reads of writes cut after reads: %d backend reads; want 0 (cached)", n)
			}
			// Rewritten without reads in between (the reads above count for this cut), then
			// rewritten again with none: the second cut caches nothing, and the values it
			// wrote are read from the backend, never a stale cached one.
			writeAll("v3")
			cut()
			writeAll("v4")
			cut()
			if n := readAll("v4"); n != 100 {
				t.Fatalf("reads after a cut of unread writes: %d backend reads; want 100", n)
			}
		})
	}
}
