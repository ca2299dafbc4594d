package pebble_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/pebble"
)

// A write or sync that Pebble cannot make because its write-ahead log cannot be written
// (the disk is full) is an error wrapping ErrFatal, not a panic (Pebble calls its logger's Fatalf,
// on the writer's goroutine). Every later write fails with it at once, reads go on, and
// Close returns it without waiting on Pebble's stuck commit pipeline.
func TestFatalWriteIsAnError(t *testing.T) {
	var full atomic.Bool
	inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	db := openDir(t, t.TempDir(), pebble.Options{Tune: func(o *cpebble.Options) {
		o.FS = errorfs.Wrap(vfs.Default, inject)
	}})
	b, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	_ = b.Set([]byte("b"), []byte("2")) // buffered in the log: may not reach the disk yet
	err = db.(store.Syncer).Sync()
	if !errors.Is(err, pebble.ErrFatal) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Sync on a full disk = %v, want an error wrapping ErrFatal that names the cause", err)
	}
	full.Store(false) // too late: the database is unusable
	bt := b.NewBatch()
	bt.Set([]byte("c"), []byte("3"))
	for what, err := range map[string]error{
		"Set":    b.Set([]byte("d"), []byte("4")),
		"Delete": b.Delete([]byte("a")),
		"Commit": bt.Commit(),
		"Sync":   db.(store.Syncer).Sync(),
	} {
		if !errors.Is(err, pebble.ErrFatal) {
			t.Errorf("%s after the fatal error = %v, want it to wrap ErrFatal", what, err)
		}
	}
	if v, ok, err := b.Get([]byte("a")); err != nil || !ok || string(v) != "1" {
		t.Errorf("Get(a) = %q, %v, %v; want the value written before", v, ok, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, pebble.ErrFatal) {
			t.Errorf("Close = %v, want it to wrap ErrFatal", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s after a fatal write error")
	}
}
