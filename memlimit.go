package kstream

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"sync"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/store/pebble"
)

// MemoryLimitMode says whether [App.Run] sets the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) from the instance's memory budgets: see
// [Config.GoMemoryLimit].
type MemoryLimitMode int

// The modes of [Config.GoMemoryLimit].
const (
	// MemoryLimitOff (the default): the library sets no memory limit; the process's own,
	// if it has one (GOMEMLIMIT, debug.SetMemoryLimit), applies.
	MemoryLimitOff MemoryLimitMode = iota
	// MemoryLimitFromBudgets: Run sets the memory limit computed from the budgets, unless
	// the process already has a limit (GOMEMLIMIT or debug.SetMemoryLimit), which it then
	// keeps, logging both figures.
	MemoryLimitFromBudgets
	// MemoryLimitOverride: Run sets the computed limit even over a limit the process
	// already has (GOMEMLIMIT included), and puts that one back when it returns.
	MemoryLimitOverride
)

// String returns "off", "from-budgets" or "override".
func (m MemoryLimitMode) String() string {
	switch m {
	case MemoryLimitOff:
		return "off"
	case MemoryLimitFromBudgets:
		return "from-budgets"
	case MemoryLimitOverride:
		return "override"
	}
	return fmt.Sprintf("MemoryLimitMode(%d)", int(m))
}

const (
	// DefaultGoMemoryLimitHeadroom is the Go memory that [Config.GoMemoryLimit] allows
	// beyond the heap budgets when Config.GoMemoryLimitHeadroom is 0: 48 MiB, for the
	// records in flight, the buffered store writes of a commit interval, the Go runtime's
	// own memory and the GC's working room, sized on a count over 6 partitions of small
	// records (docs/operations-guide.md, "Memory").
	DefaultGoMemoryLimitHeadroom int64 = 48 << 20
	// MinGoMemoryLimitHeadroom is the smallest Config.GoMemoryLimitHeadroom accepted:
	// 16 MiB, about what the Go runtime (stacks, GC metadata) and the Kafka clients of an
	// idle instance take. Below it the garbage collector would run without end.
	MinGoMemoryLimitHeadroom int64 = 16 << 20
)

// defaultStoreCacheBytes is the default of Config.StoreCacheBytes (internal/runtime's
// storeCacheBytes).
const defaultStoreCacheBytes int64 = 32 << 20

// pebbleOnGoHeap reports whether Pebble allocates its block cache and memtables on the
// Go heap: without cgo it does (memlimit_nocgo.go), with cgo it allocates them with C's
// malloc, outside the Go heap and the Go memory limit (memlimit_cgo.go).
const pebbleOnGoHeap = !pebbleWithCgo

// goMemoryLimit is the limit [Config.GoMemoryLimit] sets, and what it is made of.
type goMemoryLimit struct {
	mode       MemoryLimitMode
	storeCache int64 // the caches' one budget: Config.StoreCacheBytes + CacheMaxBytes, each unless disabled
	pebble     int64 // Pebble's cache and memtable budget when on the Go heap, else 0
	headroom   int64
	limit      int64 // their sum
	log        *slog.Logger
}

// checkGoMemoryLimit validates Config.GoMemoryLimit and Config.GoMemoryLimitHeadroom.
func (c Config) checkGoMemoryLimit() error {
	switch c.GoMemoryLimit {
	case MemoryLimitOff:
		if c.GoMemoryLimitHeadroom != 0 {
			return fmt.Errorf("kstream: Config.GoMemoryLimitHeadroom is %d but Config.GoMemoryLimit is MemoryLimitOff: set GoMemoryLimit too, or leave the headroom 0", c.GoMemoryLimitHeadroom)
		}
		return nil
	case MemoryLimitFromBudgets, MemoryLimitOverride:
	default:
		return fmt.Errorf("kstream: Config.GoMemoryLimit is %v, not one of the MemoryLimitMode constants", c.GoMemoryLimit)
	}
	if h := c.GoMemoryLimitHeadroom; h != 0 && h < MinGoMemoryLimitHeadroom {
		return fmt.Errorf("kstream: Config.GoMemoryLimitHeadroom is %d bytes; it must be 0 (the default, %d MiB) or at least %d MiB", h, DefaultGoMemoryLimitHeadroom>>20, MinGoMemoryLimitHeadroom>>20)
	}
	if _, err := computeGoMemoryLimit(c, true); err != nil {
		return err
	}
	return nil
}

// computeGoMemoryLimit computes the limit of c (c.GoMemoryLimit not off, validated) for
// a topology with persistent stores or not: the heap parts of the budgets, namely
// StoreCacheBytes and CacheMaxBytes (each unless disabled: the caches' one budget) and,
// without cgo and with persistent stores, BlockCacheBytes + MemTableBytes, plus the
// headroom.
func computeGoMemoryLimit(c Config, persistent bool) (goMemoryLimit, error) {
	m := goMemoryLimit{mode: c.GoMemoryLimit, headroom: c.GoMemoryLimitHeadroom}
	if m.headroom == 0 {
		m.headroom = DefaultGoMemoryLimitHeadroom
	}
	switch {
	case c.StoreCacheBytes == 0:
		m.storeCache = defaultStoreCacheBytes
	case c.StoreCacheBytes > 0:
		m.storeCache = int64(c.StoreCacheBytes)
	}
	if rc := c.cacheMaxBytes(); rc > 0 {
		// The record caches (docs/caching.md) are heap too: with the read caches, one
		// budget of StoreCacheBytes + CacheMaxBytes (the default 10 MiB unless disabled).
		var ok bool
		if m.storeCache, ok = addBytes(m.storeCache, rc); !ok {
			return m, fmt.Errorf("kstream: Config.StoreCacheBytes + Config.CacheMaxBytes overflows (%d + %d)", m.storeCache, rc)
		}
	}
	if persistent && pebbleOnGoHeap {
		cache, mem := c.BlockCacheBytes, c.MemTableBytes
		if cache == 0 {
			cache = pebble.DefaultCacheSize
		}
		if mem == 0 {
			mem = pebble.DefaultMemTableSize
		}
		if cache < 0 || mem > math.MaxInt64/2 {
			return m, fmt.Errorf("kstream: Config.BlockCacheBytes (%d) or Config.MemTableBytes (%d) is out of range", c.BlockCacheBytes, c.MemTableBytes)
		}
		var ok bool
		if m.pebble, ok = addBytes(cache, int64(mem)); !ok {
			return m, fmt.Errorf("kstream: Config.BlockCacheBytes + Config.MemTableBytes overflows (%d + %d)", cache, mem)
		}
	}
	sum, ok := addBytes(m.storeCache, m.pebble)
	if ok {
		sum, ok = addBytes(sum, m.headroom)
	}
	if !ok {
		return m, fmt.Errorf("kstream: the Go memory limit of Config.GoMemoryLimit overflows: store caches %d + Pebble %d + headroom %d bytes", m.storeCache, m.pebble, m.headroom)
	}
	m.limit = sum
	return m, nil
}

// addBytes returns a + b for non-negative a and b, and false if it overflows.
func addBytes(a, b int64) (int64, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// newGoMemoryLimit returns the limit App.Run sets for cfg (validated by compile) and
// rtopo, or nil when cfg.GoMemoryLimit is off.
func newGoMemoryLimit(cfg Config, rtopo *runtime.Topology, log *slog.Logger) *goMemoryLimit {
	if cfg.GoMemoryLimit == MemoryLimitOff {
		return nil
	}
	persistent := false
	for _, st := range rtopo.SubTopologies {
		for _, s := range st.Stores {
			persistent = persistent || s.Persistent
		}
	}
	for _, g := range rtopo.GlobalStores {
		persistent = persistent || g.Persistent
	}
	cfg.MemTableBytes = runtime.MemTableBytesFor(cfg.MemTableBytes, rtopo)
	m, err := computeGoMemoryLimit(cfg, persistent)
	if err != nil {
		return nil // compile checked it
	}
	m.log = log
	return &m
}

// memoryLimits is the process's record of the limits that running Apps set: while
// several run, the limit is the sum of theirs; when the last returns, the limit it found
// is restored.
var memoryLimits struct {
	sync.Mutex
	shares map[*goMemoryLimit]int64 // the Apps whose limit is in force
	prev   int64                    // the limit before the first of them
	set    int64                    // the limit they set last
}

// limitSource names who set a limit the library did not set.
func limitSource() string {
	if os.Getenv("GOMEMLIMIT") != "" {
		return "GOMEMLIMIT"
	}
	return "debug.SetMemoryLimit"
}

// apply sets the Go memory limit, as the mode says, and returns the function that puts
// the previous one back. A nil m does nothing.
func (m *goMemoryLimit) apply() (restore func()) {
	if m == nil {
		return func() {}
	}
	ml := &memoryLimits
	ml.Lock()
	defer ml.Unlock()
	cur := debug.SetMemoryLimit(-1)
	ours := len(ml.shares) > 0 && cur == ml.set
	if !ours {
		if cur != math.MaxInt64 && m.mode != MemoryLimitOverride {
			m.log.Info("kstream: keeping the process's Go memory limit (Config.GoMemoryLimit is MemoryLimitFromBudgets; MemoryLimitOverride would replace it)",
				"limit_mib", mib(cur), "set_by", limitSource(), "computed_mib", mib(m.limit))
			return func() {}
		}
		// No App's limit is in force (or the program changed it since): start over, with
		// the limit in force now as the one to restore.
		clear(ml.shares)
		if ml.shares == nil {
			ml.shares = make(map[*goMemoryLimit]int64)
		}
		ml.prev = cur
	}
	ml.shares[m] = m.limit
	ml.set = sumShares(ml.shares)
	debug.SetMemoryLimit(ml.set)
	attrs := []any{"limit_mib", mib(ml.set), "store_caches_mib", mib(m.storeCache), "pebble_on_heap_mib", mib(m.pebble), "headroom_mib", mib(m.headroom)}
	if len(ml.shares) > 1 {
		attrs = append(attrs, "apps", len(ml.shares), "this_app_mib", mib(m.limit))
	}
	if cur != math.MaxInt64 {
		attrs = append(attrs, "replaced_mib", mib(cur))
	}
	m.log.Info("kstream: Go memory limit set (Config.GoMemoryLimit)", attrs...)
	return func() {
		ml.Lock()
		defer ml.Unlock()
		if _, ok := ml.shares[m]; !ok {
			return // the program set a limit of its own meanwhile: leave it
		}
		delete(ml.shares, m)
		if debug.SetMemoryLimit(-1) != ml.set {
			clear(ml.shares) // likewise
			return
		}
		if len(ml.shares) == 0 {
			debug.SetMemoryLimit(ml.prev)
			m.log.Info("kstream: Go memory limit restored", "limit_mib", mib(ml.prev))
			return
		}
		ml.set = sumShares(ml.shares)
		debug.SetMemoryLimit(ml.set)
	}
}

// sumShares adds the limits of the running Apps, saturating at math.MaxInt64.
func sumShares(shares map[*goMemoryLimit]int64) int64 {
	var sum int64
	for _, s := range shares {
		var ok bool
		if sum, ok = addBytes(sum, s); !ok {
			return math.MaxInt64
		}
	}
	return sum
}

// mib is b in MiB for the logs ("off" for no limit).
func mib(b int64) any {
	if b == math.MaxInt64 {
		return "off"
	}
	return float64(b>>10) / 1024
}
