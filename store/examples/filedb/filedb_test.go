package filedb_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/examples/filedb"
	"github.com/kstream-go/kstream/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.DB {
		db, err := filedb.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestConformancePersistent(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T, dir string) store.DB {
		db, err := filedb.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// A frame torn by a crash is dropped at Open, with everything after it; the frames before
// it are kept, and new writes follow them.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	db, err := filedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := db.Open("s", 0)
	if err := b.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	bt := b.NewBatch()
	bt.Set([]byte("b"), []byte("2"))
	bt.SetCheckpoint(7)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filedb.log")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-1); err != nil { // the batch's frame is torn
		t.Fatal(err)
	}
	db, err = filedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, _ = db.Open("s", 0)
	if _, ok, _ := b.Get([]byte("b")); ok {
		t.Error("b of the torn batch is there")
	}
	if cp, _ := b.Checkpoint(); cp != store.NoCheckpoint {
		t.Errorf("checkpoint %d of the torn batch is there", cp)
	}
	if v, ok, _ := b.Get([]byte("a")); !ok || string(v) != "1" {
		t.Errorf("a = %q, %v; want 1", v, ok)
	}
	if err := b.Set([]byte("c"), []byte("3")); err != nil {
		t.Fatal(err)
	}
}
