package runtime

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/kstream-go/kstream/store/pebble"
)

// Tasks read a global store while the global goroutine writes it, each through its own
// backend of the same namespace. On both engines (run with -race) the reads are safe, and
// a reader sees a committed batch as a whole: every key of one batch carries the same
// value, so a snapshot with mixed values would be a torn batch.
func TestGlobalStoreConcurrentReads(t *testing.T) {
	engines := map[string]func(t *testing.T) store.DB{
		"memory": func(*testing.T) store.DB { return memory.New() },
		"pebble": func(t *testing.T) store.DB {
			db, err := pebble.Open(t.TempDir(), pebble.Options{Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
	}
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			defer db.Close()
			w, err := db.Open("g", GlobalDataPartition)
			if err != nil {
				t.Fatal(err)
			}
			const keys, batches, readers = 20, 300, 4
			var wg sync.WaitGroup
			stop := make(chan struct{})
			errs := make(chan error, readers)
			for range readers {
				b, err := db.Open("g", GlobalDataPartition)
				if err != nil {
					t.Fatal(err)
				}
				ro := ReadOnly("g", b)
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, _, err := ro.Get([]byte("k07")); err != nil {
							errs <- err
							return
						}
						it, err := ro.Range(nil, nil)
						if err != nil {
							errs <- err
							return
						}
						var first []byte
						n := 0
						for it.Next() {
							if n == 0 {
								first = append([]byte(nil), it.Value()...)
							} else if !bytes.Equal(it.Value(), first) {
								errs <- fmt.Errorf("torn batch: key %s = %s, first key = %s", it.Key(), it.Value(), first)
								_ = it.Close()
								return
							}
							n++
						}
						if err := it.Close(); err != nil || (n != 0 && n != keys) {
							errs <- fmt.Errorf("iteration: %d keys, err %v", n, err)
							return
						}
					}
				})
			}
			batch := w.NewBatch()
			for i := range batches {
				for k := range keys {
					batch.Set(fmt.Appendf(nil, "k%02d", k), fmt.Appendf(nil, "v%d", i))
				}
				if err := batch.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// Tasks cannot write a global store.
func TestGlobalStoreReadOnly(t *testing.T) {
	db := memory.New()
	defer db.Close()
	b, _ := db.Open("g", GlobalDataPartition)
	ro := ReadOnly("g", b)
	if err := ro.Set([]byte("k"), []byte("v")); err == nil {
		t.Error("Set succeeded")
	}
	if err := ro.Delete([]byte("k")); err == nil {
		t.Error("Delete succeeded")
	}
	batch := ro.NewBatch()
	batch.Set([]byte("k"), []byte("v"))
	if err := batch.Commit(); err == nil {
		t.Error("batch Commit succeeded")
	}
	if _, ok, _ := b.Get([]byte("k")); ok {
		t.Error("a write went through")
	}
}

// orderDB records the order of commits of its backends.
type orderBackend struct {
	store.Backend
	name string
	log  *[]string
}

func (o orderBackend) NewBatch() store.Batch { return orderBatch{o.Backend.NewBatch(), o} }

type orderBatch struct {
	store.Batch
	o orderBackend
}

func (b orderBatch) Commit() error {
	if b.Len() > 0 || b.o.name != "data" {
		*b.o.log = append(*b.o.log, b.o.name)
	}
	return b.Batch.Commit()
}

// A poll's data is committed before the positions it reaches, and only positions that
// moved are written.
func TestGlobalCommitOrder(t *testing.T) {
	db := memory.New()
	defer db.Close()
	var log []string
	open := func(name string, p int32) orderBackend {
		b, err := db.Open(name, p)
		if err != nil {
			t.Fatal(err)
		}
		return orderBackend{b, name, &log}
	}
	data := open("data", GlobalDataPartition)
	gs := &globalStore{spec: GlobalStoreSpec{Name: "g"}, data: data, batch: data.NewBatch(), parts: map[int32]*globalPart{}}
	for p := range int32(3) {
		gs.parts[p] = &globalPart{partition: p, offsets: open(fmt.Sprintf("pos%d", p), p), checkpointed: store.NoCheckpoint, pos: store.NoCheckpoint}
		gs.order = append(gs.order, p)
	}
	g := &globalRunner{stores: []*globalStore{gs}}
	gs.batch.Set([]byte("k"), []byte("v"))
	gs.parts[0].pos, gs.parts[2].pos = 5, 9
	if err := g.commit(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(log); got != "[data pos0 pos2]" {
		t.Fatalf("commit order %s, want [data pos0 pos2]", got)
	}
	if cp, _ := gs.parts[2].offsets.Checkpoint(); cp != 9 {
		t.Fatalf("position of partition 2 is %d, want 9", cp)
	}
	log = nil
	if err := g.commit(); err != nil || len(log) != 0 {
		t.Fatalf("a commit with nothing new wrote %v (err %v)", log, err)
	}
}
