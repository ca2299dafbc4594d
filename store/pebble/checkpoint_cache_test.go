package pebble

import (
	"testing"

	"github.com/kstream-go/kstream/store"
)

// TestCheckpointCacheCoherent checks the cached checkpoint that Checkpoint serves without a
// Pebble lookup: every backend of a namespace sees the last committed checkpoint, Drop
// resets it, a failed commit leaves it, and a reopened database reads it from its files.
func TestCheckpointCacheCoherent(t *testing.T) {
	dir := t.TempDir()
	d, err := open(dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	openB := func(d *db, p int32) store.Backend {
		b, err := d.Open("s", p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cp := func(b store.Backend) int64 {
		t.Helper()
		v, err := b.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	w, r := openB(d, 0), openB(d, 0)
	other := openB(d, 1)
	if got := cp(r); got != store.NoCheckpoint {
		t.Fatalf("new namespace: checkpoint %d, want %d", got, store.NoCheckpoint)
	}
	for _, off := range []int64{5, 17, 0} {
		bt := w.NewBatch()
		bt.Set([]byte("k"), []byte("v"))
		bt.SetCheckpoint(off)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := cp(r); got != off {
			t.Fatalf("after a commit at %d another backend reads %d", off, got)
		}
		if got := cp(openB(d, 0)); got != off {
			t.Fatalf("after a commit at %d a new backend reads %d", off, got)
		}
	}
	if got := cp(other); got != store.NoCheckpoint {
		t.Fatalf("partition 1: checkpoint %d, want none", got)
	}
	bt := w.NewBatch()
	bt.SetCheckpoint(-7) // invalid: the commit fails and changes nothing
	if err := bt.Commit(); err == nil {
		t.Fatal("a commit with checkpoint -7 succeeded")
	}
	if got := cp(r); got != 0 {
		t.Fatalf("after a failed commit: checkpoint %d, want 0", got)
	}
	bt = w.NewBatch()
	bt.SetCheckpoint(42)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Drop("s", 0); err != nil {
		t.Fatal(err)
	}
	if got := cp(r); got != store.NoCheckpoint {
		t.Fatalf("after Drop: checkpoint %d, want none", got)
	}
	bt = w.NewBatch()
	bt.SetCheckpoint(99)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Checkpoint(); err == nil {
		t.Fatal("Checkpoint after Close succeeded")
	}
	d2, err := open(dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got := cp(openB(d2, 0)); got != 99 {
		t.Fatalf("reopened: checkpoint %d, want 99", got)
	}
	if got := cp(openB(d2, 1)); got != store.NoCheckpoint {
		t.Fatalf("reopened partition 1: checkpoint %d, want none", got)
	}
}
