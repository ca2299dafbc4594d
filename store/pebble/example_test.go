package pebble_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/kstream-go/kstream/store/pebble"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "kstream-pebble-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := pebble.Open(dir, pebble.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	b, err := db.Open("word-counts", 0)
	if err != nil {
		panic(err)
	}
	// Data and the changelog offset it is complete up to commit together.
	batch := b.NewBatch()
	batch.Set([]byte("hello"), []byte("2"))
	batch.Set([]byte("world"), []byte("1"))
	batch.SetCheckpoint(41)
	if err := batch.Commit(); err != nil {
		panic(err)
	}
	if err := db.Close(); err != nil {
		panic(err)
	}

	// Reopen: the data and the checkpoint are still there.
	db, err = pebble.Open(dir, pebble.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	b, err = db.Open("word-counts", 0)
	if err != nil {
		panic(err)
	}
	it, err := b.PrefixScan([]byte("h"))
	if err != nil {
		panic(err)
	}
	defer it.Close()
	for it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	if err := it.Err(); err != nil {
		panic(err)
	}
	cp, _ := b.Checkpoint()
	fmt.Println("checkpoint:", cp)
	// Output:
	// hello=2
	// checkpoint: 41
}
