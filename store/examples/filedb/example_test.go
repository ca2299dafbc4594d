package filedb_test

import (
	"fmt"
	"os"

	"github.com/kstream-go/kstream/store/examples/filedb"
)

// The engine keeps its data across Close: what a batch committed, with its checkpoint, is
// there when the directory is opened again. kstream.Config.StoreEngine plugs it in:
//
//	cfg.StoreEngine = func(dir string) (store.DB, error) { return filedb.Open(dir) }
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "filedb-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := filedb.Open(dir)
	if err != nil {
		panic(err)
	}
	b, _ := db.Open("word-counts", 0)
	batch := b.NewBatch()
	batch.Set([]byte("hello"), []byte("2"))
	batch.SetCheckpoint(41)
	if err := batch.Commit(); err != nil {
		panic(err)
	}
	if err := db.Close(); err != nil {
		panic(err)
	}

	db, err = filedb.Open(dir)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	b, _ = db.Open("word-counts", 0)
	v, _, _ := b.Get([]byte("hello"))
	cp, _ := b.Checkpoint()
	fmt.Printf("hello=%s checkpoint=%d\n", v, cp)
	// Output: hello=2 checkpoint=41
}
