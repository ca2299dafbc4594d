package runtime

import (
	"fmt"
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
	// it (a read cache evicts down to 15/16 of its bound), and that
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

// countingGets counts the reads that reach a store's engine.
type countingGets struct {
	store.Backend
	gets int
}

func (c *countingGets) Get(key []byte) ([]byte, bool, error) {
	c.gets++
	return c.Backend.Get(key)
}

// weighedCaches are the read caches of an instance for the weighing tests: one task per
// partition, each with a buffered store of every name, reading through a countingGets.
type weighedCaches struct {
	r     *Runtime
	bufs  map[string][]*store.Buffer // by store name, then partition
	under map[string][]*countingGets // the engine reads, likewise
}

func newWeighedCaches(t *testing.T, budget, partitions int, names ...string) *weighedCaches {
	t.Helper()
	db := memory.New()
	t.Cleanup(func() { _ = db.Close() })
	w := &weighedCaches{
		r:     &Runtime{cfg: Config{StoreCacheBytes: budget}, tasks: map[TaskID]*taskRun{}, caches: NewCacheBudget(budget, 0)},
		bufs:  map[string][]*store.Buffer{},
		under: map[string][]*countingGets{},
	}
	for p := range int32(partitions) {
		tr := &taskRun{id: TaskID{Partition: p}, stores: map[string]*loggedStore{}}
		for _, name := range names {
			raw, err := db.Open(name, p)
			if err != nil {
				t.Fatal(err)
			}
			under := &countingGets{Backend: raw}
			ls := &loggedStore{spec: StoreSpec{Name: name}, partition: p, raw: raw,
				buf: store.NewBuffer(under).WithSharedReadCache(&w.r.caches.share)}
			w.bufs[name] = append(w.bufs[name], ls.buf)
			w.under[name] = append(w.under[name], under)
			tr.stores[name] = ls
		}
		w.r.tasks[tr.id] = tr
	}
	w.r.resizeStoreCachesLocked()
	return w
}

// flush writes out every buffer, as a commit does.
func (w *weighedCaches) flush(t *testing.T) {
	t.Helper()
	for _, bs := range w.bufs {
		for _, b := range bs {
			if err := b.Flush(1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The read budget goes to the stores that are read: a table read in turn on every commit,
// whose keys an equal share cannot hold, gets what a small table read as often and a
// store only written leave, and then misses none of its keys; the caches together stay
// within the budget. With equal shares (no weighing) the same table misses most of its
// keys, however they were read before.
func TestStoreCachesWeighedByReads(t *testing.T) {
	const (
		partitions = 2
		bigKeys    = 5000 // per partition, about 1.6 MiB of cache each: an equal share is 1 MiB
		smallKeys  = 100
		budget     = 6 << 20
	)
	for _, weigh := range []bool{true, false} {
		w := newWeighedCaches(t, budget, partitions, "big", "small", "written")
		r, bufs, big := w.r, w.bufs, w.under["big"]
		val := make([]byte, 200)
		written := 0
		// round reads every key of big and small once per partition, as an aggregation
		// reads its keys in turn, writes as many new keys to written, and commits.
		round := func() {
			t.Helper()
			for p := range partitions {
				for i := range bigKeys {
					key := fmt.Appendf(nil, "b%06d", i)
					if _, _, err := bufs["big"][p].Get(key); err != nil {
						t.Fatal(err)
					}
					if err := bufs["big"][p].Set(key, val); err != nil {
						t.Fatal(err)
					}
					if _, _, err := bufs["small"][p].Get(fmt.Appendf(nil, "s%03d", i%smallKeys)); err != nil {
						t.Fatal(err)
					}
					written++
					if err := bufs["written"][p].Set(fmt.Appendf(nil, "w%08d", written), val); err != nil {
						t.Fatal(err)
					}
				}
			}
			w.flush(t)
			if weigh {
				r.noteStoreCachesLocked()
			}
		}
		for range 6 {
			round()
		}
		before := 0
		for _, c := range big {
			before += c.gets
		}
		round()
		misses := -before
		for _, c := range big {
			misses += c.gets
		}
		sum := 0
		for _, bs := range bufs {
			for _, b := range bs {
				sum += b.CacheSize()
			}
		}
		t.Logf("weighed %v: big missed %d of %d keys in a round; the caches hold %d bytes of the %d budget", weigh, misses, partitions*bigKeys, sum, budget)
		if sum > budget {
			t.Errorf("weighed %v: the caches hold %d bytes, over the budget of %d", weigh, sum, budget)
		}
		switch {
		case weigh && misses != 0:
			t.Errorf("weighed: the big table missed %d of its %d keys, want none", misses, partitions*bigKeys)
		case !weigh && misses < partitions*bigKeys/4:
			t.Errorf("equal shares: the big table missed only %d of its %d keys: the test no longer shows what weighing does", misses, partitions*bigKeys)
		}
	}
}

// A topology with a persistent segmented store (one with a changelog codec: window,
// session, stream-join, versioned) opens Pebble with WindowedMemTableBytes unless
// MemTableBytes is set; any other keeps Pebble's default.
func TestMemTableBytesFor(t *testing.T) {
	kv := &Topology{SubTopologies: []SubTopology{{Stores: []StoreSpec{{Name: "counts", Persistent: true}}}}}
	windowed := &Topology{SubTopologies: []SubTopology{
		{Stores: []StoreSpec{{Name: "counts", Persistent: true}}},
		{Stores: []StoreSpec{{Name: "windows", Persistent: true, Codec: store.NewVersionedChangelog(0)}}},
	}}
	inMemory := &Topology{SubTopologies: []SubTopology{{Stores: []StoreSpec{{Name: "windows", Codec: store.NewVersionedChangelog(0)}}}}}
	for _, tc := range []struct {
		name       string
		configured uint64
		topo       *Topology
		want       uint64
	}{
		{"key-value", 0, kv, 0},
		{"windowed", 0, windowed, WindowedMemTableBytes},
		{"windowed in memory", 0, inMemory, 0},
		{"windowed, configured", 4 << 20, windowed, 4 << 20},
		{"key-value, configured", 64 << 20, kv, 64 << 20},
	} {
		if got := MemTableBytesFor(tc.configured, tc.topo); got != tc.want {
			t.Errorf("%s: MemTableBytesFor(%d) = %d, want %d", tc.name, tc.configured, got, tc.want)
		}
	}
}

// A store whose keys are all in one partition keeps them: the room a store that is not
// full keeps is twice what its fullest cache holds, not twice its average (which held the
// loaded partition to half its keys, evicted at every other commit).
func TestStoreCachesWeighedSkewedStore(t *testing.T) {
	const (
		partitions = 4
		budget     = 6 << 20
		skewKeys   = 1000 // about 120 KB, all in partition 0
		hotKeys    = 6000 // per partition and round, new each round: always evicting
	)
	w := newWeighedCaches(t, budget, partitions, "skew", "hot")
	r, bufs, skew0 := w.r, w.bufs, w.under["skew"][0]
	hot, missed := 0, 0
	for round := range 8 {
		before := skew0.gets
		for i := range skewKeys {
			if _, _, err := bufs["skew"][0].Get(fmt.Appendf(nil, "k%06d", i)); err != nil {
				t.Fatal(err)
			}
		}
		for p := range partitions {
			for range hotKeys {
				hot++
				if _, _, err := bufs["hot"][p].Get(fmt.Appendf(nil, "h%08d", hot)); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.flush(t)
		r.noteStoreCachesLocked()
		if round >= 2 {
			missed += skew0.gets - before
		}
	}
	if missed != 0 {
		t.Errorf("the skewed store's loaded partition missed %d reads of its %d keys in rounds 2-7, with room for them many times over", missed, skewKeys)
	}
}

// When tasks go, the weights of the read caches that stay are scaled to sum to their
// number again: caches weighted above 1 (a store read on every record) must not together
// exceed the budget once the caches that gave them room (a store only written, in other
// tasks) are gone.
func TestStoreCachesRescaledWhenTasksGo(t *testing.T) {
	const budget = 4 << 20
	db := memory.New()
	t.Cleanup(func() { _ = db.Close() })
	r := &Runtime{cfg: Config{StoreCacheBytes: budget}, tasks: map[TaskID]*taskRun{}, caches: NewCacheBudget(budget, 0)}
	bufs := map[string][]*store.Buffer{}
	for p := range int32(4) {
		// Sub-topology 0 has the table that is read, sub-topology 1 the store only written.
		for sub, name := range []string{"read", "written"} {
			raw, err := db.Open(name, p)
			if err != nil {
				t.Fatal(err)
			}
			ls := &loggedStore{spec: StoreSpec{Name: name}, partition: p, raw: raw,
				buf: store.NewBuffer(raw).WithSharedReadCache(&r.caches.share)}
			bufs[name] = append(bufs[name], ls.buf)
			id := TaskID{SubTopology: sub, Partition: p}
			r.tasks[id] = &taskRun{id: id, stores: map[string]*loggedStore{"s": ls}}
		}
	}
	r.resizeStoreCachesLocked()
	val := make([]byte, 200)
	n := 0
	fill := func() {
		t.Helper()
		for _, bs := range bufs {
			for _, b := range bs {
				for range 20000 {
					n++
					key := fmt.Appendf(nil, "k%08d", n)
					if _, _, err := b.Get(key); err != nil {
						t.Fatal(err)
					}
					if err := b.Set(key, val); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.Flush(1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for range 3 {
		fill()
		r.noteStoreCachesLocked()
	}
	// Now only the read store is read: its weight grows above 1, the written store's falls.
	for range 3 {
		for _, b := range bufs["read"] {
			for i := range 5000 {
				if _, _, err := b.Get(fmt.Appendf(nil, "r%06d", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		r.noteStoreCachesLocked()
	}
	if w := r.cacheDemands["read"].weight; w <= 1.2 {
		t.Fatalf("the read store's weight is %.2f: the test needs it well above 1", w)
	}
	for p := range int32(4) {
		delete(r.tasks, TaskID{SubTopology: 1, Partition: p})
	}
	delete(bufs, "written")
	r.resizeStoreCachesLocked()
	fill()
	sum := 0
	for _, b := range bufs["read"] {
		sum += b.CacheSize()
	}
	if sum > budget {
		t.Errorf("after the written store's tasks went, the read caches hold %d bytes, over the budget of %d", sum, budget)
	}
}
