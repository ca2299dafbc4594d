package memory_test

import (
	"fmt"

	"github.com/kstream-go/kstream/store/memory"
)

func ExampleNew() {
	db := memory.New()
	defer db.Close()

	b, err := db.Open("word-counts", 0)
	if err != nil {
		panic(err)
	}
	// Write two keys and the changelog offset they come from, atomically.
	batch := b.NewBatch()
	batch.Set([]byte("hello"), []byte("2"))
	batch.Set([]byte("world"), []byte("1"))
	batch.SetCheckpoint(41)
	if err := batch.Commit(); err != nil {
		panic(err)
	}

	it, err := b.Range(nil, nil)
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
	// world=1
	// checkpoint: 41
}
