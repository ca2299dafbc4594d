package kstream

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
)

// The record cache holds back the updates of a cached table store and forwards each key's
// latest update once per commit, or earlier when the cache is full: Kafka Streams' record
// cache (statestore.cache.max.bytes), whose CachingKeyValueStore forwards on flush and on
// eviction, not on every put. The store itself is written on every update, as without the
// cache (its write buffer already batches the writes of a commit interval); only the
// forwarding is deferred.
//
// An update forwarded from the cache carries the key's latest value, the timestamp and
// headers of the latest record aggregated into it, and as its old value the key's value
// at the previous forward (none for a key the store did not hold), as Java's flush listener
// reads the old value from the underlying store. The old value of a key's first update is
// therefore none, not the aggregation's initial value.

// DefaultCacheMaxBytes is the record caches' budget when Config.CacheMaxBytes is 0:
// 10 MiB, Kafka Streams' default statestore.cache.max.bytes.
const DefaultCacheMaxBytes int64 = 10 << 20

// cacheMaxBytes is the record caches' budget: Config.CacheMaxBytes, the default for 0;
// 0 when disabled.
func (c Config) cacheMaxBytes() int64 {
	switch {
	case c.CacheMaxBytes == 0:
		return DefaultCacheMaxBytes
	case c.CacheMaxBytes < 0:
		return 0
	}
	return c.CacheMaxBytes
}

// cacheBudget is the instance's record cache budget, Config.CacheMaxBytes, shared equally
// by the task instances of the cached stores that are open. The caches report the bytes
// they hold to the instance's one cache budget, shared, whose read caches get the rest.
type cacheBudget struct {
	max    int64
	open   atomic.Int64
	shared *runtime.CacheBudget
}

// cacheReportBytes is the change in the bytes a record cache holds that it reports to the
// shared budget at once: reporting every entry would make the tasks, which run in
// parallel, contend for the budget's counter.
const cacheReportBytes = 8 << 10

// share is the bytes one cache may hold now.
func (b *cacheBudget) share() int {
	n := b.open.Load()
	if n < 1 {
		n = 1
	}
	return int(b.max / n)
}

// recordCache is a store's record cache in one task, as the task flushes it.
type recordCache interface {
	// flush forwards every held update, in the order of each key's latest update since
	// the last flush, and empties the cache.
	flush()
	// held reports whether the cache holds updates.
	held() bool
	// discard drops the held updates: the transaction that made them aborted, and the
	// records are processed again.
	discard()
}

// cacheEntryOverhead approximates the heap of an entry besides its key bytes: the map
// slot, the entry and the values it holds.
const cacheEntryOverhead = 96

// emitCache is the record cache of a table store d in task t, for the updates of node n
// (a change of K's value, VA).
type emitCache[K, VA any] struct {
	t      *task
	ctx    ProcessorContext[K, change[VA]] // the forwarding context, set by the first update
	budget *cacheBudget
	idx    map[string]int // serialized key -> its entry in ents
	ents   []emitEntry[K, VA]
	bytes  int
	// reported is the part of bytes reported to the shared budget (cacheBudget.shared).
	reported int
	// dead counts the entries of ents left behind by keys put again (moved to the end).
	dead   int
	closed bool
}

type emitEntry[K, VA any] struct {
	key     K
	res     change[VA]
	ts      int64
	headers []Header
	existed bool // the store held the key at its first update since the last forward
	dead    bool // moved to the end by a later update (put)
}

// newEmitCache opens task t's record cache for a store, counted in the instance's budget
// until the task closes.
func newEmitCache[K, VA any](t *task, b *cacheBudget) *emitCache[K, VA] {
	c := &emitCache[K, VA]{t: t, budget: b, idx: map[string]int{}}
	b.open.Add(1)
	t.caches = append(t.caches, c)
	t.txnHooks = append(t.txnHooks, c)
	t.closers = append(t.closers, namedCloser{"record cache", c})
	return c
}

// openEmitCache opens task t's record cache of table store d, or returns nil when the store
// has none: no Config.CacheMaxBytes, WithoutCaching, or a versioned store (Kafka Streams'
// versioned stores have no cache).
func openEmitCache[K, VA any](t *task, d *storeDef) *emitCache[K, VA] {
	if t.h.cache == nil || d.noCache || d.versioned {
		return nil
	}
	return newEmitCache[K, VA](t, t.h.cache)
}

// put holds update res of key (serialized kb) at timestamp ts; existed says whether the
// store held the key before. The first update of a key since the last flush keeps its old
// value; a later one replaces the new value, the timestamp and the headers. A cache over
// its share is flushed whole, as Java's is when it evicts a dirty entry.
func (c *emitCache[K, VA]) put(ctx ProcessorContext[K, change[VA]], kb []byte, key K, res change[VA], existed bool, ts int64, headers []Header) {
	c.ctx = ctx
	if i, ok := c.idx[string(kb)]; ok {
		e := c.ents[i]
		e.key = key
		e.res.new, e.res.hasNew, e.res.stale = res.new, res.hasNew, res.stale
		e.ts, e.headers = ts, headers
		if i == len(c.ents)-1 {
			c.ents[i] = e
			return
		}
		// The key moves to the end of the flush order, as Kafka Streams' NamedCache moves
		// a key put again to the end of its dirty keys: updates leave in the order of each
		// key's latest update.
		c.ents[i] = emitEntry[K, VA]{dead: true}
		c.idx[string(kb)] = len(c.ents)
		c.ents = append(c.ents, e)
		if c.dead++; c.dead > 64 && c.dead > len(c.ents)/2 {
			c.compact()
		}
		return
	}
	c.idx[string(kb)] = len(c.ents)
	c.ents = append(c.ents, emitEntry[K, VA]{key: key, res: res, ts: ts, headers: headers, existed: existed})
	c.bytes += len(kb) + cacheEntryOverhead
	if c.bytes-c.reported >= cacheReportBytes {
		c.budget.shared.Hold(int64(c.bytes - c.reported))
		c.reported = c.bytes
	}
	if c.bytes > c.budget.share() {
		c.flush()
	}
}

// compact drops the entries of keys moved to the end (put), in place, so that a key
// updated many times between two flushes holds one entry, not one per update.
func (c *emitCache[K, VA]) compact() {
	pos := make([]int, len(c.ents)) // old index -> new index, for the live entries
	live := c.ents[:0]
	for i, e := range c.ents {
		if !e.dead {
			pos[i] = len(live)
			live = append(live, e)
		}
	}
	clear(c.ents[len(live):])
	c.ents = live
	c.dead = 0
	for k, i := range c.idx {
		c.idx[k] = pos[i]
	}
}

func (c *emitCache[K, VA]) held() bool { return len(c.ents) > 0 }

func (c *emitCache[K, VA]) flush() {
	if len(c.ents) == 0 {
		return
	}
	// The entries are taken first: a forward may reach this cache again (a topology that
	// feeds a table's updates back into its own aggregation).
	ents := c.ents
	c.reset()
	for i := range ents {
		e := &ents[i]
		if c.t.fatal != nil {
			break
		}
		if e.dead || !e.res.hasNew && !e.existed {
			continue // moved, or a key made and deleted between two forwards: Java forwards nothing
		}
		c.ctx.Forward(Record[K, change[VA]]{Key: e.key, Value: e.res, Timestamp: msTime(e.ts), Headers: e.headers})
	}
	clear(ents)
	if len(c.ents) == 0 {
		c.ents = ents[:0] // reused, unless a forward filled the cache again
	}
}

// reset empties the cache. A map that grew large is replaced (a Go map never shrinks).
func (c *emitCache[K, VA]) reset() {
	if len(c.idx) > 1024 {
		c.idx = map[string]int{}
	} else {
		clear(c.idx)
	}
	c.ents, c.bytes, c.dead = nil, 0, 0
	if c.reported != 0 {
		c.budget.shared.Hold(int64(-c.reported))
		c.reported = 0
	}
}

func (c *emitCache[K, VA]) discard() {
	clear(c.ents)
	ents := c.ents[:0]
	c.reset()
	c.ents = ents
}

// cut implements txnHook: a commit flushed the cache first (task.PreCommit).
func (c *emitCache[K, VA]) cut() func() { return nil }

// aborted implements txnHook: the held updates were of the aborted transaction.
func (c *emitCache[K, VA]) aborted() { c.discard() }

// Close implements closer: the cache leaves the instance's budget.
func (c *emitCache[K, VA]) Close() error {
	if !c.closed {
		c.closed = true
		c.budget.open.Add(-1)
	}
	c.discard()
	return nil
}

// flushCaches forwards what the task's record caches hold, upstream stores first (the
// caches were opened in topological order), again while a flush filled a cache downstream.
func (t *task) flushCaches() {
	for range 16 {
		held := false
		for _, c := range t.caches {
			if t.fatal != nil {
				return
			}
			if c.held() {
				held = true
				c.flush()
			}
		}
		if !held {
			return
		}
	}
}

// FlushCaches forwards what the task's record caches hold and returns a fatal error that
// a forward met: the test driver flushes after every input record, as Kafka Streams'
// TopologyTestDriver commits after every input.
func (t *task) FlushCaches() error {
	t.fatal = nil
	t.flushCaches()
	return t.fatal
}

// ownCache is the record cache of a table operator's own store st (a materialized filter,
// mapValues or join result): it keys the held updates with the store's key serde ks.
type ownCache[K, V any] struct {
	*emitCache[K, V]
	ks serde.Serde[K]
	st *ownStore[K, V]
}

// openOwnCache opens task t's record cache of store d, held in st; nil when d has none.
func openOwnCache[K, V any](t *task, d *storeDef, st *ownStore[K, V]) *ownCache[K, V] {
	c := openEmitCache[K, V](t, d)
	if c == nil {
		return nil
	}
	return &ownCache[K, V]{emitCache: c, ks: storeKeySerde[K](d, nil), st: st}
}

// existed reports whether the store holds key now, before the update's put, and its value.
func (c *ownCache[K, V]) existed(key K) (V, bool, error) {
	v, _, ok, err := c.st.get(key)
	return v, ok, err
}

// hold holds the update res of key, made by a record of timestamp ts.
func (c *ownCache[K, V]) hold(ctx ProcessorContext[K, change[V]], key K, res change[V], existed bool, ts time.Time, headers []Header) error {
	kb, err := c.ks.Serialize(key)
	if err != nil {
		return fmt.Errorf("serializing the key: %w", err)
	}
	c.put(ctx, kb, key, res, existed, unixMs(ts), headers)
	return nil
}
