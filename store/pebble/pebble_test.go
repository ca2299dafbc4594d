package pebble_test

import (
	"log/slog"
	"testing"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/pebble"
	"github.com/kstream-go/kstream/store/storetest"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func openDir(t *testing.T, dir string, opts pebble.Options) store.DB {
	t.Helper()
	opts.Logger = quiet()
	// Small caches keep the many test databases cheap.
	opts.CacheSize = 1 << 20
	opts.MemTableSize = 1 << 20
	db, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.DB { return openDir(t, t.TempDir(), pebble.Options{}) })
}

func TestConformanceSync(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.DB { return openDir(t, t.TempDir(), pebble.Options{Sync: true}) })
}

func TestPersistence(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T, dir string) store.DB { return openDir(t, dir, pebble.Options{}) })
}

func TestPersistenceSync(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T, dir string) store.DB {
		return openDir(t, dir, pebble.Options{Sync: true})
	})
}
