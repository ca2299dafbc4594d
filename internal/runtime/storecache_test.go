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
	r := &Runtime{cfg: Config{StoreCacheBytes: 12 << 20}, tasks: map[TaskID]*taskRun{}}
	r.storeCache.Store(12 << 20)
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
				ls.buf = store.NewBuffer(raw).WithSharedReadCache(&r.storeCache)
			}
			tr.stores[string(rune('a'+i))] = ls
		}
		r.tasks[tr.id] = tr
		r.resizeStoreCachesLocked()
	}
	want := func(share int64) {
		t.Helper()
		if got := r.storeCache.Load(); got != share {
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
