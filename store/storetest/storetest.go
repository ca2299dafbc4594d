// Package storetest is a conformance suite for implementations of [store.DB]. A backend's
// tests call [Run] (and [RunPersistent] for an engine that keeps data across Close):
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.DB { return memory.New() })
//	}
//
// Besides the contract written in package store, the suite requires two behaviours both
// kstream backends provide: iterators read a snapshot taken when they are created (writes
// made during an iteration are not visible to it), and the slices an iterator returns may
// be modified by the caller without affecting the store. An empty store name is rejected.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/kstream-go/kstream/store"
)

// Run runs the conformance suite. open must return a new, empty DB each time it is called;
// the suite closes it (a DB may be closed twice: the second Close must return an error
// wrapping [store.ErrClosed], which the suite ignores).
func Run(t *testing.T, open func(t *testing.T) store.DB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db store.DB)
	}{
		{"GetSetDelete", testGetSetDelete},
		{"EmptyKeyIsNotNull", testEmptyKeyIsNotNull},
		{"SlicesAreCopied", testSlicesAreCopied},
		{"Ordering", testOrdering},
		{"RangeBounds", testRangeBounds},
		{"PrefixScan", testPrefixScan},
		{"DeleteRange", testDeleteRange},
		{"DeleteRangeBatch", testDeleteRangeBatch},
		{"RandomModel", testRandomModel},
		{"NamespaceIsolation", testNamespaceIsolation},
		{"OpenTwice", testOpenTwice},
		{"Batch", testBatch},
		{"BatchOrder", testBatchOrder},
		{"Checkpoint", testCheckpoint},
		{"InvalidCheckpoint", testInvalidCheckpoint},
		{"Drop", testDrop},
		{"Iterator", testIterator},
		{"WritesDuringIteration", testWritesDuringIteration},
		{"ApproximateCount", testApproximateCount},
		{"LargeValue", testLargeValue},
		{"BadInput", testBadInput},
		{"Closed", testClosed},
		{"ConcurrentNamespaces", testConcurrentNamespaces},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t)
			t.Cleanup(func() { _ = db.Close() })
			tc.fn(t, db)
		})
	}
}

// RunPersistent runs the tests of persistence across Close. open must open the DB kept in
// dir (creating it if dir is empty); the suite closes what it opens.
func RunPersistent(t *testing.T, open func(t *testing.T, dir string) store.DB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, reopen func() store.DB)
	}{
		{"ReopenKeepsData", testReopenKeepsData},
		{"ReopenNamespaceIDs", testReopenNamespaceIDs},
		{"ReopenNamespaceIsolation", testReopenNamespaceIsolation},
		{"UncommittedBatchLost", testUncommittedBatchLost},
		{"DropPersists", testDropPersists},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var last store.DB
			t.Cleanup(func() {
				if last != nil {
					_ = last.Close()
				}
			})
			tc.fn(t, func() store.DB {
				if last != nil {
					_ = last.Close()
				}
				last = open(t, dir)
				return last
			})
		})
	}
}

// --- helpers ---

type kv struct{ k, v string }

func mustOpen(t *testing.T, db store.DB, name string, partition int32) store.Backend {
	t.Helper()
	b, err := db.Open(name, partition)
	if err != nil {
		t.Fatalf("Open(%q, %d): %v", name, partition, err)
	}
	return b
}

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

func mustCommit(t *testing.T, bt store.Batch) {
	t.Helper()
	if err := bt.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// get returns the value of k and whether it is present.
func get(t *testing.T, b store.Backend, k string) (string, bool) {
	t.Helper()
	v, ok, err := b.Get([]byte(k))
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	if !ok && v != nil {
		t.Errorf("Get(%q): absent key returned value %q", k, v)
	}
	return string(v), ok
}

func wantGet(t *testing.T, b store.Backend, k, want string) {
	t.Helper()
	v, ok := get(t, b, k)
	if !ok || v != want {
		t.Errorf("Get(%q) = %q, %v; want %q, true", k, v, ok, want)
	}
}

func wantAbsent(t *testing.T, b store.Backend, k string) {
	t.Helper()
	if v, ok := get(t, b, k); ok {
		t.Errorf("Get(%q) = %q, true; want absent", k, v)
	}
}

func checkpoint(t *testing.T, b store.Backend) int64 {
	t.Helper()
	cp, err := b.Checkpoint()
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	return cp
}

func wantCheckpoint(t *testing.T, b store.Backend, want int64) {
	t.Helper()
	if cp := checkpoint(t, b); cp != want {
		t.Errorf("Checkpoint() = %d; want %d", cp, want)
	}
}

// drain reads it to the end, checks Err, closes it and returns the pairs.
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

func scanAll(t *testing.T, b store.Backend) []kv {
	t.Helper()
	it, err := b.Range(nil, nil)
	return drain(t, it, err)
}

func wantPairs(t *testing.T, what string, got, want []kv) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, fmtPairs(got), fmtPairs(want))
	}
}

func fmtPairs(p []kv) string {
	var b bytes.Buffer
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

func count(t *testing.T, b store.Backend) int64 {
	t.Helper()
	n, err := b.ApproximateCount()
	if err != nil {
		t.Fatalf("ApproximateCount: %v", err)
	}
	return n
}

// model is the reference: a sorted set of pairs.
type model map[string]string

func (m model) sorted() []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return bytes.Compare([]byte(a.k), []byte(b.k)) })
	return out
}

// rangeOf returns the model's pairs in [from, to), nil being unbounded.
func (m model) rangeOf(from, to []byte, reverse bool) []kv {
	var out []kv
	for _, p := range m.sorted() {
		if from != nil && bytes.Compare([]byte(p.k), from) < 0 {
			continue
		}
		if to != nil && bytes.Compare([]byte(p.k), to) >= 0 {
			continue
		}
		out = append(out, p)
	}
	if reverse {
		slices.Reverse(out)
	}
	return out
}

// deleteRange removes the model's keys in [from, to), nil being unbounded.
func (m model) deleteRange(from, to []byte) {
	for _, p := range m.rangeOf(from, to, false) {
		delete(m, p.k)
	}
}

// randRangeBound returns a bound for a random range: nil (unbounded) now and then.
func randRangeBound(r *rand.Rand, randKey func() string) []byte {
	if r.IntN(5) == 0 {
		return nil
	}
	return []byte(randKey())
}

func (m model) prefixOf(prefix []byte) []kv {
	var out []kv
	for _, p := range m.sorted() {
		if bytes.HasPrefix([]byte(p.k), prefix) {
			out = append(out, p)
		}
	}
	return out
}

// edgeKeys are keys around the edges of the byte order.
var edgeKeys = []string{
	"", "\x00", "\x00\x00", "\x00\x01", "\x01", "\x7f", "\x80", "\xfe", "\xfe\xff",
	"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff", "a", "a\x00", "a\xff", "ab", "b",
}

// --- Run tests ---

func testGetSetDelete(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	wantAbsent(t, b, "k")
	mustSet(t, b, "k", "v1")
	wantGet(t, b, "k", "v1")
	mustSet(t, b, "k", "v2")
	wantGet(t, b, "k", "v2")
	mustDelete(t, b, "k")
	wantAbsent(t, b, "k")
	mustDelete(t, b, "never-set") // deleting an absent key is not an error

	// A nil value is stored as an empty value.
	if err := b.Set([]byte("nil"), nil); err != nil {
		t.Fatalf("Set(nil value): %v", err)
	}
	if v, ok, err := b.Get([]byte("nil")); err != nil || !ok || len(v) != 0 {
		t.Errorf("Get after Set(nil) = %q, %v, %v; want empty, true, nil", v, ok, err)
	}
	// The empty key is a key like any other.
	mustSet(t, b, "", "empty-key")
	wantGet(t, b, "", "empty-key")
	wantPairs(t, "scan", scanAll(t, b), []kv{{"", "empty-key"}, {"nil", ""}})
	mustDelete(t, b, "")
	wantAbsent(t, b, "")
}

// testEmptyKeyIsNotNull: a nil key is the empty key, and iterators return the empty key
// and an empty value as empty slices, never nil (which kstream would write to a changelog,
// or show in a query, as a Kafka null).
func testEmptyKeyIsNotNull(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	if err := b.Set(nil, []byte("v")); err != nil {
		t.Fatalf("Set(nil key): %v", err)
	}
	wantGet(t, b, "", "v")
	if v, ok, err := b.Get(nil); err != nil || !ok || string(v) != "v" {
		t.Errorf("Get(nil) = %q, %v, %v; want the empty key's value", v, ok, err)
	}
	bt := b.NewBatch()
	bt.Set([]byte{}, nil) // overwrites it with an empty value
	bt.Set([]byte("a"), []byte{})
	mustCommit(t, bt)
	for _, c := range []struct {
		name string
		open func() (store.Iterator, error)
	}{
		{"Range", func() (store.Iterator, error) { return b.Range(nil, nil) }},
		{"Range from the empty key", func() (store.Iterator, error) { return b.Range([]byte{}, []byte("b")) }},
		{"ReverseRange", func() (store.Iterator, error) { return b.ReverseRange(nil, nil) }},
		{"PrefixScan", func() (store.Iterator, error) { return b.PrefixScan(nil) }},
	} {
		it, err := c.open()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := 0
		for it.Next() {
			n++
			if it.Key() == nil || it.Value() == nil {
				t.Errorf("%s: key %q (nil %v), value %q (nil %v): want non-nil slices", c.name, it.Key(), it.Key() == nil, it.Value(), it.Value() == nil)
			}
		}
		if err := it.Err(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := it.Close(); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
		if n != 2 {
			t.Errorf("%s: %d keys, want 2 (the empty key and a)", c.name, n)
		}
	}
	if err := b.Delete(nil); err != nil {
		t.Fatalf("Delete(nil key): %v", err)
	}
	wantAbsent(t, b, "")
}

func testSlicesAreCopied(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	k, v := []byte("key"), []byte("value")
	if err := b.Set(k, v); err != nil {
		t.Fatal(err)
	}
	copy(k, "XXX")
	copy(v, "XXXXX")
	wantGet(t, b, "key", "value")
	wantAbsent(t, b, "XXX")

	got, _, err := b.Get([]byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "XXXXX")
	wantGet(t, b, "key", "value")

	bt := b.NewBatch()
	k2, v2 := []byte("key2"), []byte("value2")
	bt.Set(k2, v2)
	d := []byte("key")
	bt.Delete(d)
	copy(k2, "XXXX")
	copy(v2, "XXXXXX")
	copy(d, "zzz")
	mustCommit(t, bt)
	wantGet(t, b, "key2", "value2")
	wantAbsent(t, b, "key")

	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		copy(it.Key(), "XXXX")
		copy(it.Value(), "XXXXXX")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	wantPairs(t, "scan after modifying iterator slices", scanAll(t, b), []kv{{"key2", "value2"}})
}

func testOrdering(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	m := model{}
	r := rand.New(rand.NewPCG(1, 2))
	for _, i := range r.Perm(len(edgeKeys)) {
		k := edgeKeys[i]
		mustSet(t, b, k, fmt.Sprintf("v%d", i))
		m[k] = fmt.Sprintf("v%d", i)
	}
	wantPairs(t, "Range(nil, nil)", scanAll(t, b), m.sorted())
	it, err := b.ReverseRange(nil, nil)
	wantPairs(t, "ReverseRange(nil, nil)", drain(t, it, err), m.rangeOf(nil, nil, true))
	it, err = b.PrefixScan(nil)
	wantPairs(t, "PrefixScan(nil)", drain(t, it, err), m.sorted())
}

func testRangeBounds(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	m := model{}
	for i, k := range edgeKeys {
		mustSet(t, b, k, fmt.Sprint(i))
		m[k] = fmt.Sprint(i)
	}
	// Bounds: unbounded, every key, and keys that are absent.
	bounds := [][]byte{nil, {}}
	for _, k := range append(slices.Clone(edgeKeys), "\x00\x00\x00", "a\x00\x00", "c", "\xff\xff\xff\xff") {
		bounds = append(bounds, []byte(k))
	}
	for _, from := range bounds {
		for _, to := range bounds {
			it, err := b.Range(from, to)
			wantPairs(t, fmt.Sprintf("Range(%x, %x) [nil=%v,%v]", from, to, from == nil, to == nil),
				drain(t, it, err), m.rangeOf(from, to, false))
			it, err = b.ReverseRange(from, to)
			wantPairs(t, fmt.Sprintf("ReverseRange(%x, %x) [nil=%v,%v]", from, to, from == nil, to == nil),
				drain(t, it, err), m.rangeOf(from, to, true))
		}
	}
	// Ranges over an empty namespace.
	e := mustOpen(t, db, "empty", 0)
	for _, r := range [][2][]byte{{nil, nil}, {[]byte("a"), nil}, {nil, []byte("a")}, {[]byte("a"), []byte("b")}} {
		it, err := e.Range(r[0], r[1])
		wantPairs(t, "Range on empty namespace", drain(t, it, err), nil)
		it, err = e.ReverseRange(r[0], r[1])
		wantPairs(t, "ReverseRange on empty namespace", drain(t, it, err), nil)
	}
}

func testPrefixScan(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	m := model{}
	for i, k := range edgeKeys {
		mustSet(t, b, k, fmt.Sprint(i))
		m[k] = fmt.Sprint(i)
	}
	prefixes := [][]byte{nil, {}, {0x00}, {0x00, 0x00}, {0x01}, {0xfe}, {0xff}, {0xff, 0xff},
		{0xff, 0xff, 0xff}, {0xff, 0xff, 0xff, 0xff}, []byte("a"), []byte("ab"), []byte("abc"), []byte("zz")}
	for _, p := range prefixes {
		it, err := b.PrefixScan(p)
		wantPairs(t, fmt.Sprintf("PrefixScan(%x)", p), drain(t, it, err), m.prefixOf(p))
	}
}

// testDeleteRange deletes ranges with every kind of bound, directly, and checks scans,
// Gets, counts, iterators opened before, and writes into a deleted range.
func testDeleteRange(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	other := mustOpen(t, db, "other", 0)
	mustSet(t, other, "a", "kept")
	bounds := [][]byte{nil, {}, {0x00}, []byte("a"), []byte("a\x00"), []byte("ab"), []byte("b"), {0xff}, {0xff, 0xff}, {0xff, 0xff, 0xff, 0xff}}
	fill := func() model {
		m := model{}
		for i, k := range edgeKeys {
			mustSet(t, b, k, fmt.Sprint(i))
			m[k] = fmt.Sprint(i)
		}
		return m
	}
	for _, from := range bounds {
		for _, to := range bounds {
			m := fill()
			what := fmt.Sprintf("DeleteRange(%x, %x) [nil=%v,%v]", from, to, from == nil, to == nil)
			if err := b.DeleteRange(from, to); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			m.deleteRange(from, to)
			wantPairs(t, what+": scan", scanAll(t, b), m.sorted())
			it, err := b.ReverseRange(nil, nil)
			wantPairs(t, what+": reverse scan", drain(t, it, err), m.rangeOf(nil, nil, true))
			for _, k := range edgeKeys {
				if v, ok := m[k]; ok {
					wantGet(t, b, k, v)
				} else {
					wantAbsent(t, b, k)
				}
			}
			if n := count(t, b); n < int64(len(m))/2 || n > 2*int64(len(m))+1 {
				t.Errorf("%s: ApproximateCount = %d; want about %d", what, n, len(m))
			}
		}
	}
	wantPairs(t, "another namespace", scanAll(t, other), []kv{{"a", "kept"}})

	// An iterator opened before the deletion keeps its snapshot; keys written into the
	// range afterwards are there.
	m := fill()
	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteRange([]byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	wantPairs(t, "iterator opened before DeleteRange", drain(t, it, nil), m.sorted())
	m.deleteRange([]byte("a"), []byte("b"))
	mustSet(t, b, "aa", "new")
	m["aa"] = "new"
	wantPairs(t, "write after DeleteRange", scanAll(t, b), m.sorted())
	// The whole namespace; the checkpoint stays.
	bt := b.NewBatch()
	bt.SetCheckpoint(9)
	mustCommit(t, bt)
	if err := b.DeleteRange(nil, nil); err != nil {
		t.Fatal(err)
	}
	wantPairs(t, "DeleteRange(nil, nil)", scanAll(t, b), nil)
	wantCheckpoint(t, b, 9)
	wantPairs(t, "another namespace", scanAll(t, other), []kv{{"a", "kept"}})

	// Many keys (an engine may store them in several files).
	for i := range 3000 {
		mustSet(t, b, fmt.Sprintf("seg%02d/k%04d", i%30, i), "v")
	}
	if err := b.DeleteRange(nil, []byte("seg15")); err != nil {
		t.Fatal(err)
	}
	got := scanAll(t, b)
	if len(got) != 1500 || got[0].k != "seg15/k0015" {
		t.Errorf("after deleting 15 of 30 prefixes: %d keys, first %v", len(got), got[:min(1, len(got))])
	}
}

// testDeleteRangeBatch checks that a batch applies range deletions in order with its other
// writes, atomically with its checkpoint.
func testDeleteRangeBatch(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	for _, k := range []string{"a1", "a2", "b1", "c1"} {
		mustSet(t, b, k, "old")
	}
	bt := b.NewBatch()
	bt.Set([]byte("a3"), []byte("set-before")) // deleted by the range below
	bt.DeleteRange([]byte("a"), []byte("b"))
	bt.Set([]byte("a2"), []byte("set-after")) // kept
	bt.DeleteRange([]byte("x"), []byte("c"))  // empty: nothing
	bt.DeleteRange(nil, []byte{})             // empty: nothing
	bt.DeleteRange([]byte("c"), nil)
	bt.SetCheckpoint(5)
	if n := bt.Len(); n != 6 {
		t.Errorf("Len = %d; want 6", n)
	}
	wantPairs(t, "before Commit", scanAll(t, b), []kv{{"a1", "old"}, {"a2", "old"}, {"b1", "old"}, {"c1", "old"}})
	mustCommit(t, bt)
	wantPairs(t, "after Commit", scanAll(t, b), []kv{{"a2", "set-after"}, {"b1", "old"}})
	wantCheckpoint(t, b, 5)
	// A failing batch applies none of its range deletions.
	bt.DeleteRange(nil, nil)
	bt.SetCheckpoint(-2)
	if err := bt.Commit(); err == nil {
		t.Fatal("Commit with checkpoint -2 succeeded")
	}
	wantPairs(t, "after a failed Commit", scanAll(t, b), []kv{{"a2", "set-after"}, {"b1", "old"}})
	// Reset drops them.
	bt.DeleteRange(nil, nil)
	bt.Reset()
	mustCommit(t, bt)
	wantPairs(t, "after Reset", scanAll(t, b), []kv{{"a2", "set-after"}, {"b1", "old"}})
}

// testRandomModel compares the backend with a map after random writes, with enough keys
// to exercise iterators that read in chunks.
func testRandomModel(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	r := rand.New(rand.NewPCG(3, 4))
	randKey := func() string {
		k := make([]byte, 1+r.IntN(3))
		for i := range k {
			k[i] = "\x00\x01ab\xfe\xff"[r.IntN(6)]
		}
		return string(k)
	}
	m := model{}
	for range 3000 {
		switch x := r.IntN(10); {
		case x < 6:
			k, v := randKey(), fmt.Sprint(r.Int())
			mustSet(t, b, k, v)
			m[k] = v
		case x < 8:
			k := randKey()
			mustDelete(t, b, k)
			delete(m, k)
		case x < 9 && r.IntN(4) == 0:
			from, to := randRangeBound(r, randKey), randRangeBound(r, randKey)
			if err := b.DeleteRange(from, to); err != nil {
				t.Fatalf("DeleteRange(%x, %x): %v", from, to, err)
			}
			m.deleteRange(from, to)
		default:
			bt := b.NewBatch()
			for range r.IntN(20) {
				k := randKey()
				if r.IntN(40) == 0 {
					from, to := randRangeBound(r, randKey), randRangeBound(r, randKey)
					bt.DeleteRange(from, to)
					m.deleteRange(from, to)
				} else if r.IntN(3) == 0 {
					bt.Delete([]byte(k))
					delete(m, k)
				} else {
					v := fmt.Sprint(r.Int())
					bt.Set([]byte(k), []byte(v))
					m[k] = v
				}
			}
			mustCommit(t, bt)
		}
	}
	wantPairs(t, "full scan", scanAll(t, b), m.sorted())
	for range 50 {
		from, to := []byte(randKey()), []byte(randKey())
		if r.IntN(4) == 0 {
			from = nil
		}
		if r.IntN(4) == 0 {
			to = nil
		}
		it, err := b.Range(from, to)
		wantPairs(t, fmt.Sprintf("Range(%x, %x)", from, to), drain(t, it, err), m.rangeOf(from, to, false))
		it, err = b.ReverseRange(from, to)
		wantPairs(t, fmt.Sprintf("ReverseRange(%x, %x)", from, to), drain(t, it, err), m.rangeOf(from, to, true))
		p := []byte(randKey())[:1]
		it, err = b.PrefixScan(p)
		wantPairs(t, fmt.Sprintf("PrefixScan(%x)", p), drain(t, it, err), m.prefixOf(p))
	}
	for k, v := range m {
		wantGet(t, b, k, v)
	}
}

func testNamespaceIsolation(t *testing.T, db store.DB) {
	all := collidingNamespaces
	bs := make([]store.Backend, len(all))
	for i, n := range all {
		bs[i] = mustOpen(t, db, n.name, n.partition)
	}
	for i, b := range bs {
		for _, k := range []string{"", "k", "\x00", "\xff\xff", "1"} {
			mustSet(t, b, k, fmt.Sprintf("%d:%s", i, k))
		}
		bt := b.NewBatch()
		bt.Set([]byte("batch"), []byte(fmt.Sprint(i)))
		bt.SetCheckpoint(int64(100 + i))
		mustCommit(t, bt)
	}
	check := func(skip int) {
		t.Helper()
		for i, b := range bs {
			if i == skip {
				continue
			}
			want := []kv{{"", fmt.Sprintf("%d:", i)}, {"\x00", fmt.Sprintf("%d:\x00", i)}, {"1", fmt.Sprintf("%d:1", i)},
				{"batch", fmt.Sprint(i)}, {"k", fmt.Sprintf("%d:k", i)}, {"\xff\xff", fmt.Sprintf("%d:\xff\xff", i)}}
			wantPairs(t, fmt.Sprintf("scan of %q/%d", all[i].name, all[i].partition), scanAll(t, b), want)
			it, err := b.ReverseRange(nil, nil)
			rev := slices.Clone(want)
			slices.Reverse(rev)
			wantPairs(t, fmt.Sprintf("reverse scan of %q/%d", all[i].name, all[i].partition), drain(t, it, err), rev)
			it, err = b.PrefixScan([]byte{0xff})
			wantPairs(t, fmt.Sprintf("PrefixScan(ff) of %q/%d", all[i].name, all[i].partition), drain(t, it, err), want[5:])
			wantCheckpoint(t, b, int64(100+i))
			if n := count(t, b); n < 3 || n > 12 {
				t.Errorf("ApproximateCount of %q/%d = %d; want about 6", all[i].name, all[i].partition, n)
			}
		}
	}
	check(-1)
	// Dropping one namespace leaves the others alone.
	if err := db.Drop(all[0].name, all[0].partition); err != nil {
		t.Fatal(err)
	}
	check(0)
	wantPairs(t, "scan of dropped namespace", scanAll(t, bs[0]), nil)
}

type namespace struct {
	name      string
	partition int32
}

// collidingNamespaces are names and partitions whose naive encodings collide.
var collidingNamespaces = []namespace{{"a", 1}, {"a", 11}, {"a1", 1}, {"ab", 1}, {"a", 0}, {"b", 1},
	{"a\x00", 1}, {"a\x00\x00\x00\x00\x01", 0}, {"\xff", 1}, {"a", 256}, {"a", 1 << 24}, {"a", -1}}

func testOpenTwice(t *testing.T, db store.DB) {
	b1 := mustOpen(t, db, "s", 3)
	b2 := mustOpen(t, db, "s", 3)
	mustSet(t, b1, "k", "v")
	wantGet(t, b2, "k", "v")
	bt := b2.NewBatch()
	bt.Set([]byte("k2"), []byte("v2"))
	bt.SetCheckpoint(7)
	mustCommit(t, bt)
	wantGet(t, b1, "k2", "v2")
	wantCheckpoint(t, b1, 7)
}

func testBatch(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	mustSet(t, b, "old", "1")
	bt := b.NewBatch()
	if bt.Len() != 0 {
		t.Errorf("new batch Len = %d", bt.Len())
	}
	bt.Set([]byte("a"), []byte("1"))
	bt.Set([]byte("b"), []byte("2"))
	bt.Delete([]byte("old"))
	bt.SetCheckpoint(5)
	if bt.Len() != 3 {
		t.Errorf("Len = %d; want 3 (the checkpoint is not counted)", bt.Len())
	}
	// Nothing is visible before Commit.
	wantAbsent(t, b, "a")
	wantGet(t, b, "old", "1")
	wantPairs(t, "scan before Commit", scanAll(t, b), []kv{{"old", "1"}})
	wantCheckpoint(t, b, store.NoCheckpoint)
	if n := count(t, b); n != 1 {
		t.Errorf("ApproximateCount before Commit = %d; want 1", n)
	}

	// Reset discards writes and checkpoint.
	bt.Reset()
	if bt.Len() != 0 {
		t.Errorf("Len after Reset = %d", bt.Len())
	}
	mustCommit(t, bt)
	wantPairs(t, "scan after Reset and Commit", scanAll(t, b), []kv{{"old", "1"}})
	wantCheckpoint(t, b, store.NoCheckpoint)

	// After Commit, everything is visible, and the batch is empty and reusable.
	bt.Set([]byte("a"), []byte("1"))
	bt.Set([]byte("b"), []byte("2"))
	bt.Delete([]byte("old"))
	bt.SetCheckpoint(5)
	mustCommit(t, bt)
	if bt.Len() != 0 {
		t.Errorf("Len after Commit = %d", bt.Len())
	}
	wantPairs(t, "scan after Commit", scanAll(t, b), []kv{{"a", "1"}, {"b", "2"}})
	wantCheckpoint(t, b, 5)

	bt.Set([]byte("c"), []byte("3"))
	mustCommit(t, bt)
	wantPairs(t, "scan after reuse", scanAll(t, b), []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}})
	wantCheckpoint(t, b, 5) // a batch without SetCheckpoint keeps the checkpoint

	// An empty batch commits as a no-op.
	mustCommit(t, b.NewBatch())
	wantPairs(t, "scan after empty Commit", scanAll(t, b), []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}})

	// A large batch.
	bt = b.NewBatch()
	m := model{}
	for i := range 5000 {
		k, v := fmt.Sprintf("big%05d", i), fmt.Sprint(i)
		bt.Set([]byte(k), []byte(v))
		m[k] = v
	}
	bt.SetCheckpoint(6)
	mustCommit(t, bt)
	it, err := b.PrefixScan([]byte("big"))
	wantPairs(t, "large batch", drain(t, it, err), m.sorted())
	wantCheckpoint(t, b, 6)
}

func testBatchOrder(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	mustSet(t, b, "deleted-then-set", "old")
	bt := b.NewBatch()
	bt.Set([]byte("set-then-deleted"), []byte("x"))
	bt.Delete([]byte("set-then-deleted"))
	bt.Delete([]byte("deleted-then-set"))
	bt.Set([]byte("deleted-then-set"), []byte("new"))
	bt.Set([]byte("set-twice"), []byte("1"))
	bt.Set([]byte("set-twice"), []byte("2"))
	bt.SetCheckpoint(1)
	bt.SetCheckpoint(2) // the last checkpoint wins
	if bt.Len() != 6 {
		t.Errorf("Len = %d; want 6", bt.Len())
	}
	mustCommit(t, bt)
	wantAbsent(t, b, "set-then-deleted")
	wantGet(t, b, "deleted-then-set", "new")
	wantGet(t, b, "set-twice", "2")
	wantCheckpoint(t, b, 2)
}

func testCheckpoint(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	wantCheckpoint(t, b, store.NoCheckpoint)
	mustSet(t, b, "k", "v")
	mustDelete(t, b, "k")
	wantCheckpoint(t, b, store.NoCheckpoint) // direct writes never move it

	bt := b.NewBatch()
	bt.SetCheckpoint(10)
	wantCheckpoint(t, b, store.NoCheckpoint)
	mustCommit(t, bt) // a checkpoint-only batch
	wantCheckpoint(t, b, 10)

	bt.SetCheckpoint(0)
	bt.Reset()
	mustCommit(t, bt)
	wantCheckpoint(t, b, 10)

	for _, cp := range []int64{0, 1 << 40, 1<<63 - 1, 3} {
		bt.SetCheckpoint(cp)
		mustCommit(t, bt)
		wantCheckpoint(t, b, cp)
	}
	bt.SetCheckpoint(store.NoCheckpoint)
	mustCommit(t, bt)
	wantCheckpoint(t, b, store.NoCheckpoint)
}

func testInvalidCheckpoint(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	bt := b.NewBatch()
	bt.SetCheckpoint(4)
	mustCommit(t, bt)
	bt.Set([]byte("k"), []byte("v"))
	bt.SetCheckpoint(-2)
	if err := bt.Commit(); err == nil {
		t.Fatal("Commit with checkpoint -2 succeeded")
	}
	wantAbsent(t, b, "k")
	wantCheckpoint(t, b, 4)
	// The batch is usable afterwards.
	bt.Reset()
	bt.Set([]byte("k"), []byte("v"))
	mustCommit(t, bt)
	wantGet(t, b, "k", "v")
	wantCheckpoint(t, b, 4)
}

func testDrop(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	bt := b.NewBatch()
	for i := range 100 {
		bt.Set(fmt.Appendf(nil, "k%03d", i), []byte("v"))
	}
	bt.SetCheckpoint(42)
	mustCommit(t, bt)
	if err := db.Drop("s", 0); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	// The backend opened before Drop sees an empty namespace and stays usable.
	wantPairs(t, "scan after Drop", scanAll(t, b), nil)
	wantCheckpoint(t, b, store.NoCheckpoint)
	if n := count(t, b); n != 0 {
		t.Errorf("ApproximateCount after Drop = %d", n)
	}
	mustSet(t, b, "after", "1")
	b2 := mustOpen(t, db, "s", 0)
	wantPairs(t, "scan of reopened namespace", scanAll(t, b2), []kv{{"after", "1"}})

	// Dropping a namespace that was never opened, or twice, is not an error.
	if err := db.Drop("never-opened", 9); err != nil {
		t.Errorf("Drop of unknown namespace: %v", err)
	}
	if err := db.Drop("s", 0); err != nil {
		t.Fatal(err)
	}
	if err := db.Drop("s", 0); err != nil {
		t.Fatal(err)
	}
	wantPairs(t, "scan after second Drop", scanAll(t, b2), nil)
}

func testIterator(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	for _, k := range []string{"a", "b", "c"} {
		mustSet(t, b, k, k)
	}
	for _, mk := range []func() (store.Iterator, error){
		func() (store.Iterator, error) { return b.Range(nil, nil) },
		func() (store.Iterator, error) { return b.ReverseRange(nil, nil) },
		func() (store.Iterator, error) { return b.PrefixScan(nil) },
		func() (store.Iterator, error) { return b.Range([]byte("b"), []byte("a")) }, // empty
	} {
		// Exhausted: Next stays false and Err stays nil.
		it, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
		}
		for range 3 {
			if it.Next() {
				t.Error("Next after exhaustion returned true")
			}
		}
		if err := it.Err(); err != nil {
			t.Errorf("Err after exhaustion: %v", err)
		}
		if err := it.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := it.Err(); err != nil {
			t.Errorf("Err after Close: %v", err)
		}
		_ = it.Close() // a second Close must not panic
		// Next after Close reports ErrClosed.
		if it.Next() {
			t.Error("Next after Close returned true")
		}
		if err := it.Err(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Err after Next after Close = %v; want ErrClosed", err)
		}

		// Closed early.
		it, err = mk()
		if err != nil {
			t.Fatal(err)
		}
		it.Next()
		if err := it.Close(); err != nil {
			t.Errorf("early Close: %v", err)
		}
		if err := it.Err(); err != nil {
			t.Errorf("Err after early Close: %v", err)
		}
	}
	// Key and Value stay valid until the next Next.
	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatal("no first key")
	}
	k, v := it.Key(), it.Value()
	if string(k) != "a" || string(v) != "a" || string(it.Key()) != "a" {
		t.Errorf("first pair = %q=%q", k, v)
	}
}

// testWritesDuringIteration writes through the backend, through a second backend of the
// namespace, in batches and by Drop while iterators are open: iterators keep the snapshot
// taken when they were created.
func testWritesDuringIteration(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	other := mustOpen(t, db, "s", 0)
	m := model{}
	for i := range 600 {
		k, v := fmt.Sprintf("k%04d", i*2), fmt.Sprint(i)
		mustSet(t, b, k, v)
		m[k] = v
	}
	want := m.sorted()
	for _, reverse := range []bool{false, true} {
		var it store.Iterator
		var err error
		if reverse {
			it, err = b.ReverseRange(nil, nil)
		} else {
			it, err = b.Range(nil, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []kv
		i := 0
		for it.Next() {
			got = append(got, kv{string(it.Key()), string(it.Value())})
			switch i % 4 {
			case 0: // insert next to the current key and far away
				mustSet(t, b, string(it.Key())+"x", "new")
				mustSet(t, other, fmt.Sprintf("k%04d", 1199-i), "new")
			case 1: // delete keys ahead and behind
				mustDelete(t, b, fmt.Sprintf("k%04d", (i+2)*2))
				mustDelete(t, other, fmt.Sprintf("k%04d", (i-1)*2))
			case 2: // overwrite the current key in a batch
				bt := b.NewBatch()
				bt.Set(it.Key(), []byte("overwritten"))
				bt.Delete([]byte(fmt.Sprintf("k%04d", 1100-i)))
				bt.SetCheckpoint(int64(i))
				mustCommit(t, bt)
			case 3:
				if i == 303 {
					if err := db.Drop("s", 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			i++
		}
		if err := it.Err(); err != nil {
			t.Errorf("Err: %v", err)
		}
		if err := it.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		w := want
		if reverse {
			w = slices.Clone(want)
			slices.Reverse(w)
		}
		wantPairs(t, fmt.Sprintf("iteration with concurrent writes (reverse=%v)", reverse), got, w)
		// Restore the initial state for the next round.
		if err := db.Drop("s", 0); err != nil {
			t.Fatal(err)
		}
		for _, p := range want {
			mustSet(t, b, p.k, p.v)
		}
	}
}

func testApproximateCount(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	if n := count(t, b); n != 0 {
		t.Errorf("ApproximateCount of new namespace = %d; want 0", n)
	}
	for i := range 100 {
		mustSet(t, b, fmt.Sprintf("k%03d", i), "v")
	}
	// The contract only asks for an estimate; within a factor of 2 is required here.
	if n := count(t, b); n < 50 || n > 200 {
		t.Errorf("ApproximateCount = %d; want about 100", n)
	}
}

func testLargeValue(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	v := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	k := bytes.Repeat([]byte{0xff}, 4096)
	if err := b.Set(k, v); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(k)
	if err != nil || !ok || !bytes.Equal(got, v) {
		t.Errorf("Get of 1 MiB value: ok=%v err=%v equal=%v", ok, err, bytes.Equal(got, v))
	}
	it, err := b.PrefixScan(k[:100])
	pairs := drain(t, it, err)
	if len(pairs) != 1 || pairs[0].k != string(k) || pairs[0].v != string(v) {
		t.Errorf("PrefixScan of large key: %d pairs", len(pairs))
	}
}

func testBadInput(t *testing.T, db store.DB) {
	if _, err := db.Open("", 0); err == nil {
		t.Error("Open with an empty store name succeeded")
	}
}

func testClosed(t *testing.T, db store.DB) {
	b := mustOpen(t, db, "s", 0)
	mustSet(t, b, "a", "1")
	mustSet(t, b, "b", "2")
	it, err := b.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() {
		t.Fatal("no first key")
	}
	rit, err := b.ReverseRange(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt := b.NewBatch()
	bt.Set([]byte("c"), []byte("3"))
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	isClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v; want ErrClosed", what, err)
		}
	}
	isClosed("Close", db.Close())
	_, err = db.Open("s", 0)
	isClosed("DB.Open", err)
	isClosed("Drop", db.Drop("s", 0))
	_, _, err = b.Get([]byte("a"))
	isClosed("Get", err)
	isClosed("Set", b.Set([]byte("a"), nil))
	isClosed("Delete", b.Delete([]byte("a")))
	isClosed("DeleteRange", b.DeleteRange(nil, nil))
	_, err = b.Range(nil, nil)
	isClosed("Range", err)
	_, err = b.Range([]byte("b"), []byte("a"))
	isClosed("empty Range", err)
	_, err = b.ReverseRange(nil, nil)
	isClosed("ReverseRange", err)
	_, err = b.PrefixScan(nil)
	isClosed("PrefixScan", err)
	_, err = b.ApproximateCount()
	isClosed("ApproximateCount", err)
	_, err = b.Checkpoint()
	isClosed("Checkpoint", err)
	isClosed("Batch.Commit", bt.Commit())
	nb := b.NewBatch() // must not panic
	nb.Set([]byte("x"), []byte("y"))
	nb.Delete([]byte("x"))
	nb.DeleteRange([]byte("a"), []byte("b"))
	nb.SetCheckpoint(1)
	isClosed("new Batch.Commit", nb.Commit())
	nb.Reset()

	// Iterators open at Close end with ErrClosed.
	for _, it := range []store.Iterator{it, rit} {
		if it.Next() {
			t.Error("Next after DB.Close returned true")
		}
		isClosed("iterator Err", it.Err())
		_ = it.Close() // must not panic
	}
}

func testConcurrentNamespaces(t *testing.T, db store.DB) {
	const goroutines = 8
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(db, fmt.Sprintf("store-%d", g%2), int32(g))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// concurrentWorker exercises one namespace; it returns an error instead of calling
// t.Fatal, which must not be called from other goroutines.
func concurrentWorker(db store.DB, name string, partition int32) error {
	b, err := db.Open(name, partition)
	if err != nil {
		return err
	}
	m := model{}
	for i := range 200 {
		k, v := fmt.Sprintf("k%03d", i%50), fmt.Sprintf("%s/%d/%d", name, partition, i)
		if err := b.Set([]byte(k), []byte(v)); err != nil {
			return err
		}
		m[k] = v
		if i%10 == 0 {
			bt := b.NewBatch()
			bt.Delete([]byte(k))
			delete(m, k)
			bt.SetCheckpoint(int64(i))
			if err := bt.Commit(); err != nil {
				return err
			}
			// Open and drop another namespace to exercise the DB's registry.
			if _, err := db.Open(fmt.Sprintf("tmp-%s", name), partition); err != nil {
				return err
			}
			if err := db.Drop(fmt.Sprintf("tmp-%s", name), partition); err != nil {
				return err
			}
		}
		if i%25 == 0 {
			it, err := b.Range(nil, nil)
			if err != nil {
				return err
			}
			var got []kv
			for it.Next() {
				got = append(got, kv{string(it.Key()), string(it.Value())})
			}
			if err := errors.Join(it.Err(), it.Close()); err != nil {
				return err
			}
			if want := m.sorted(); !slices.Equal(got, want) {
				return fmt.Errorf("%s/%d: scan = %s; want %s", name, partition, fmtPairs(got), fmtPairs(want))
			}
		}
	}
	if cp, err := b.Checkpoint(); err != nil || cp != 190 {
		return fmt.Errorf("%s/%d: Checkpoint = %d, %v; want 190", name, partition, cp, err)
	}
	return nil
}

// --- RunPersistent tests ---

func testReopenKeepsData(t *testing.T, reopen func() store.DB) {
	db := reopen()
	b := mustOpen(t, db, "s", 0)
	mustSet(t, b, "direct", "1")
	mustSet(t, b, "deleted", "x")
	mustDelete(t, b, "deleted")
	bt := b.NewBatch()
	bt.Set([]byte("batched"), []byte("2"))
	bt.Set([]byte("\xff\xff"), []byte("3"))
	bt.SetCheckpoint(10)
	mustCommit(t, bt)
	c := mustOpen(t, db, "s", 1)
	mustSet(t, c, "other", "4")
	want := []kv{{"batched", "2"}, {"direct", "1"}, {"\xff\xff", "3"}}

	for round := range 2 {
		db = reopen()
		b = mustOpen(t, db, "s", 0)
		wantPairs(t, fmt.Sprintf("scan after reopen %d", round), scanAll(t, b), want)
		wantCheckpoint(t, b, 10)
		c = mustOpen(t, db, "s", 1)
		wantPairs(t, "other partition after reopen", scanAll(t, c), []kv{{"other", "4"}})
		wantCheckpoint(t, c, store.NoCheckpoint)
	}
}

func testReopenNamespaceIDs(t *testing.T, reopen func() store.DB) {
	names := []string{"a", "ab", "b", "c"}
	db := reopen()
	for i, n := range names {
		mustSet(t, mustOpen(t, db, n, int32(i)), "k", n)
	}
	db = reopen()
	// Opened in another order, with a new namespace first.
	fresh := mustOpen(t, db, "fresh", 0)
	wantPairs(t, "new namespace after reopen", scanAll(t, fresh), nil)
	mustSet(t, fresh, "k", "fresh")
	for i := len(names) - 1; i >= 0; i-- {
		b := mustOpen(t, db, names[i], int32(i))
		wantPairs(t, fmt.Sprintf("namespace %q after reopen", names[i]), scanAll(t, b), []kv{{"k", names[i]}})
	}
	db = reopen()
	wantGet(t, mustOpen(t, db, "fresh", 0), "k", "fresh")
	wantGet(t, mustOpen(t, db, "a", 0), "k", "a")
}

func testReopenNamespaceIsolation(t *testing.T, reopen func() store.DB) {
	db := reopen()
	for i, n := range collidingNamespaces {
		b := mustOpen(t, db, n.name, n.partition)
		mustSet(t, b, "k", fmt.Sprint(i))
		bt := b.NewBatch()
		bt.SetCheckpoint(int64(i))
		mustCommit(t, bt)
	}
	db = reopen()
	for i := len(collidingNamespaces) - 1; i >= 0; i-- {
		n := collidingNamespaces[i]
		b := mustOpen(t, db, n.name, n.partition)
		wantPairs(t, fmt.Sprintf("%q/%d after reopen", n.name, n.partition), scanAll(t, b), []kv{{"k", fmt.Sprint(i)}})
		wantCheckpoint(t, b, int64(i))
	}
}

func testUncommittedBatchLost(t *testing.T, reopen func() store.DB) {
	db := reopen()
	b := mustOpen(t, db, "s", 0)
	bt := b.NewBatch()
	bt.Set([]byte("committed"), []byte("1"))
	bt.SetCheckpoint(1)
	mustCommit(t, bt)
	bt.Set([]byte("uncommitted"), []byte("2"))
	bt.SetCheckpoint(2)
	db = reopen()
	b = mustOpen(t, db, "s", 0)
	wantPairs(t, "scan after reopen", scanAll(t, b), []kv{{"committed", "1"}})
	wantCheckpoint(t, b, 1)
}

func testDropPersists(t *testing.T, reopen func() store.DB) {
	db := reopen()
	b := mustOpen(t, db, "s", 0)
	bt := b.NewBatch()
	bt.Set([]byte("k"), []byte("v"))
	bt.SetCheckpoint(3)
	mustCommit(t, bt)
	mustSet(t, mustOpen(t, db, "t", 0), "k", "kept")
	if err := db.Drop("s", 0); err != nil {
		t.Fatal(err)
	}
	db = reopen()
	b = mustOpen(t, db, "s", 0)
	wantPairs(t, "dropped namespace after reopen", scanAll(t, b), nil)
	wantCheckpoint(t, b, store.NoCheckpoint)
	wantGet(t, mustOpen(t, db, "t", 0), "k", "kept")
	mustSet(t, b, "after", "1")
	db = reopen()
	wantPairs(t, "write after Drop, reopened", scanAll(t, mustOpen(t, db, "s", 0)), []kv{{"after", "1"}})
}
