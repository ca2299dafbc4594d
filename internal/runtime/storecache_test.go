package runtime

import (
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

// StoreCacheBytes is divided among the read caches of the instance's tasks: the share
// falls as tasks with buffered stores arrive and rises as they leave; stores without a
// buffer (unlogged in-memory ones) take no share; a negative budget leaves it alone.
func TestStoreCacheShare(t *testing.T) {
	db := memory.New()
	t.Cleanup(func() { _ = db.Close() })
	r := &Runtime{cfg: Config{StoreCacheBytes: 12 << 20}, tasks: map[TaskID]*taskRun{}, caches: NewCacheBudget(12<<20, 0)}
	add := func(p int32, buffered, plain int) {
		t.Helper()
		tr := &taskRun{id: TaskID{Partition: p}, stores: map[string]*loggedStore{}}
		for i := range buffered + plain {
			raw, err := db.Open("s", p*10+int32(i))
			if err != nil {
				t.Fatal(err)
			}
			ls := &loggedStore{raw: raw}
			if i < buffered {
				ls.buf = store.NewBuffer(raw).WithSharedReadCache(&r.caches.share)
			}
			tr.stores[string(rune('a'+i))] = ls
		}
		r.tasks[tr.id] = tr
		r.resizeStoreCachesLocked()
	}
	want := func(share int64) {
		t.Helper()
		if got := r.caches.ReadShare(); got != share {
			t.Fatalf("share %d, want %d", got, share)
		}
	}
	add(0, 2, 1)
	want(6 << 20)
	add(1, 1, 0)
	want(4 << 20)
	add(2, 0, 2) // no buffered store
	want(4 << 20)
	delete(r.tasks, TaskID{Partition: 0})
	r.resizeStoreCachesLocked()
	want(12 << 20)

	r.cfg.StoreCacheBytes = -1
	add(3, 5, 0)
	want(12 << 20)
}

// The read and record caches share one budget: the read caches get StoreCacheBytes +
// CacheMaxBytes less what the record caches hold, divided among them, following the record
// caches as they fill and empty; a read cache's bound falls with them and the cache keeps
// to it; never below its share of StoreCacheBytes alone.
func TestCacheBudgetShared(t *testing.T) {
	db := memory.New()
	t.Cleanup(func() { _ = db.Close() })
	b := NewCacheBudget(8<<20, 4<<20)
	r := &Runtime{cfg: Config{StoreCacheBytes: 8 << 20}, tasks: map[TaskID]*taskRun{}, caches: b}
	tr := &taskRun{id: TaskID{Partition: 0}, stores: map[string]*loggedStore{}}
	var bufs []*store.Buffer
	for i := range 2 {
		raw, err := db.Open("s", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		ls := &loggedStore{raw: raw, buf: store.NewBuffer(raw).WithSharedReadCache(&r.caches.share)}
		bufs = append(bufs, ls.buf)
		tr.stores[string(rune('a'+i))] = ls
	}
	r.tasks[tr.id] = tr
	r.resizeStoreCachesLocked()
	want := func(share int64) {
		t.Helper()
		if got := b.ReadShare(); got != share {
			t.Fatalf("read share %d, want %d (record caches hold %d)", got, share, b.Held())
		}
	}
	want(6 << 20) // (8 + 4 MiB) / 2: the record caches hold nothing
	b.Hold(4 << 20)
	want(4 << 20) // the record caches hold their whole budget: 8 MiB / 2
	b.Hold(-3 << 20)
	want(11 << 19) // (12 - 1 MiB) / 2

	// A read cache filled to its share keeps to a share that falls as the record caches
	// fill, and the read and record caches together stay within the budget.
	b.Hold(-1 << 20)
	val := make([]byte, 1000)
	fill := func() {
		t.Helper()
		for _, buf := range bufs {
			for i := range 20000 {
				key := []byte{byte(i >> 16), byte(i >> 8), byte(i)}
				if err := buf.Set(key, val); err != nil {
					t.Fatal(err)
				}
			}
			if err := buf.Flush(1); err != nil {
				t.Fatal(err)
			}
		}
	}
	// check asserts that each read cache is within the share and holds more than half of
	// it (a read cache keeps two generations, each of at most half its bound), and that
	// read and record caches together are within the budget.
	check := func(share int64) {
		t.Helper()
		sum := b.Held()
		for i, buf := range bufs {
			if got := int64(buf.CacheSize()); got > share || got < share/2-2000 {
				t.Fatalf("read cache %d holds %d bytes, want within (%d, %d]", i, got, share/2, share)
			}
			sum += int64(buf.CacheSize())
		}
		if sum > 12<<20 {
			t.Fatalf("read and record caches hold %d bytes together, over the budget of 12 MiB", sum)
		}
	}
	fill()
	check(6 << 20) // the record caches' idle budget is read cache
	b.Hold(4 << 20)
	fill()
	check(4 << 20) // the record caches hold theirs: the read caches have StoreCacheBytes
	b.Hold(-4 << 20)
	fill()
	check(6 << 20)

	// Without record caches the read caches have StoreCacheBytes, as before.
	b2 := NewCacheBudget(8<<20, -1)
	b2.setReaders(2)
	if got := b2.ReadShare(); got != 4<<20 {
		t.Fatalf("read share without record caches %d, want 4 MiB", got)
	}
	// The default read budget, 32 MiB, and the record budget.
	if got := NewCacheBudget(0, 10<<20).ReadShare(); got != 42<<20 {
		t.Fatalf("one read cache's share of the defaults %d, want 42 MiB", got)
	}
}
