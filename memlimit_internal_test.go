package kstream

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kstream-go/kstream/serde"
)

// TestGoMemoryLimitComputation checks the limit Config.GoMemoryLimit sets: the caches'
// one budget (read caches and record caches, each unless disabled), Pebble's when it is
// on the Go heap (no cgo) and the topology has persistent stores, and the headroom.
func TestGoMemoryLimitComputation(t *testing.T) {
	const mi = 1 << 20
	pebbleDefault := int64(0)
	if pebbleOnGoHeap {
		pebbleDefault = 72 * mi
	}
	for _, c := range []struct {
		name       string
		cfg        Config
		persistent bool
		want       int64
	}{
		{"defaults", Config{GoMemoryLimit: MemoryLimitFromBudgets}, true, 32*mi + 10*mi + pebbleDefault + 48*mi},
		{"no persistent store", Config{GoMemoryLimit: MemoryLimitFromBudgets}, false, 90 * mi},
		{"record caches disabled", Config{GoMemoryLimit: MemoryLimitFromBudgets, CacheMaxBytes: -1}, false, 80 * mi},
		{"read caches disabled", Config{GoMemoryLimit: MemoryLimitFromBudgets, StoreCacheBytes: -1}, false, 58 * mi},
		{"caches disabled", Config{GoMemoryLimit: MemoryLimitOverride, StoreCacheBytes: -1, CacheMaxBytes: -1}, false, 48 * mi},
		{"set budgets", Config{GoMemoryLimit: MemoryLimitFromBudgets, StoreCacheBytes: 10 * mi, CacheMaxBytes: 5 * mi, BlockCacheBytes: 100 * mi, MemTableBytes: 20 * mi, GoMemoryLimitHeadroom: 30 * mi},
			true, 10*mi + 5*mi + 30*mi + map[bool]int64{true: 120 * mi, false: 0}[pebbleOnGoHeap]},
	} {
		m, err := computeGoMemoryLimit(c.cfg, c.persistent)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.limit != c.want || m.storeCache+m.pebble+m.headroom != m.limit {
			t.Errorf("%s: limit %d (caches %d, pebble %d, headroom %d), want %d", c.name, m.limit, m.storeCache, m.pebble, m.headroom, c.want)
		}
	}
}

// TestGoMemoryLimitValidation checks that New rejects nonsense values and wires a valid
// one into the App.
func TestGoMemoryLimitValidation(t *testing.T) {
	build := func() *Builder {
		b := NewBuilder()
		Count(Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To("out", serde.String(), serde.Int64())
		return b
	}
	base := Config{ApplicationID: "memlimit", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()}
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"unknown mode", func(c *Config) { c.GoMemoryLimit = 7 }, "MemoryLimitMode(7)"},
		{"negative mode", func(c *Config) { c.GoMemoryLimit = -1 }, "not one of the MemoryLimitMode constants"},
		{"headroom without a mode", func(c *Config) { c.GoMemoryLimitHeadroom = 64 << 20 }, "GoMemoryLimit is MemoryLimitOff"},
		{"negative headroom", func(c *Config) { c.GoMemoryLimit, c.GoMemoryLimitHeadroom = MemoryLimitFromBudgets, -1 }, "at least 16 MiB"},
		{"tiny headroom", func(c *Config) { c.GoMemoryLimit, c.GoMemoryLimitHeadroom = MemoryLimitFromBudgets, 1<<20 }, "at least 16 MiB"},
		{"overflow", func(c *Config) {
			c.GoMemoryLimit, c.GoMemoryLimitHeadroom, c.StoreCacheBytes = MemoryLimitOverride, math.MaxInt64-10, 1<<20
		}, "overflows"},
	} {
		cfg := base
		c.set(&cfg)
		_, err := New(build(), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New returned %v, want an error with %q", c.name, err, c.want)
		}
	}
	a, err := New(build(), base)
	if err != nil || a.memLimit != nil {
		t.Fatalf("off: New returned %v, memLimit %+v", err, a.memLimit)
	}
	cfg := base
	cfg.GoMemoryLimit = MemoryLimitFromBudgets
	if a, err = New(build(), cfg); err != nil {
		t.Fatal(err)
	}
	want, _ := computeGoMemoryLimit(cfg, true) // Count's store is persistent
	if a.memLimit == nil || a.memLimit.limit != want.limit || a.memLimit.pebble != want.pebble {
		t.Fatalf("New's memLimit %+v, want limit %d", a.memLimit, want.limit)
	}
}

// TestGoMemoryLimitApply checks what Run does with the limit: set it, keep a limit the
// process already has unless told to override it, share it between Apps, and restore
// the previous limit. The limits are terabytes, so that the tests running meanwhile do
// not feel them.
func TestGoMemoryLimitApply(t *testing.T) {
	const tb = 1 << 40
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lim := func(mode MemoryLimitMode, n int64) *goMemoryLimit {
		return &goMemoryLimit{mode: mode, limit: n * tb, headroom: n * tb, log: log}
	}
	cur := func() int64 { return debug.SetMemoryLimit(-1) }

	debug.SetMemoryLimit(math.MaxInt64) // no limit
	restore := lim(MemoryLimitFromBudgets, 2).apply()
	if cur() != 2*tb {
		t.Fatalf("limit %d, want %d", cur(), int64(2*tb))
	}
	restore2 := lim(MemoryLimitFromBudgets, 3).apply() // a second App: the sum
	if cur() != 5*tb {
		t.Fatalf("two apps: limit %d, want %d", cur(), int64(5*tb))
	}
	restore()
	if cur() != 3*tb {
		t.Fatalf("one app left: limit %d, want %d", cur(), int64(3*tb))
	}
	restore2()
	if cur() != math.MaxInt64 {
		t.Fatalf("after both: limit %d, want none", cur())
	}

	debug.SetMemoryLimit(7 * tb) // the program's (or GOMEMLIMIT's)
	restore = lim(MemoryLimitFromBudgets, 2).apply()
	if cur() != 7*tb {
		t.Fatalf("from budgets over the program's limit: %d, want it kept (%d)", cur(), int64(7*tb))
	}
	restore()
	restore = lim(MemoryLimitOverride, 2).apply()
	if cur() != 2*tb {
		t.Fatalf("override: limit %d, want %d", cur(), int64(2*tb))
	}
	restore()
	if cur() != 7*tb {
		t.Fatalf("after override: limit %d, want the program's %d back", cur(), int64(7*tb))
	}

	restore = lim(MemoryLimitOverride, 2).apply()
	debug.SetMemoryLimit(9 * tb) // the program changes it while Run runs
	restore()
	if cur() != 9*tb {
		t.Fatalf("limit %d, want the program's later %d left alone", cur(), int64(9*tb))
	}
	var none *goMemoryLimit // MemoryLimitOff
	none.apply()()
	if cur() != 9*tb {
		t.Fatalf("off changed the limit to %d", cur())
	}
}
