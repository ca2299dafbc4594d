package store

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/google/btree"
)

// Buffer is a write buffer over a [Backend]: a [Backend] whose writes are held in memory
// until [Buffer.Flush] writes them, with a checkpoint, to the underlying backend in one
// batch. A task uses one Buffer per store partition so that a write costs a map update
// rather than a write to the storage engine, so that reading a key written since the last
// flush costs a map lookup, and so that the writes of a commit interval reach the engine as
// one atomic batch, with the changelog offset they are complete up to.
//
// Writes (Set, Delete, and batches from NewBatch, whose Commit applies into the buffer)
// become pending entries: a value or a deletion marker per key, a later write of a key
// replacing the earlier one. Reads see pending entries first (read-your-writes): Get, and
// iterators, which merge the pending entries with the underlying backend's keys in key
// order. [Buffer.Discard] drops the pending entries, for a transaction that aborts.
//
// A range deletion (DeleteRange) drops the pending entries in its range and becomes a
// pending range, which hides the underlying backend's keys in it from reads; Flush writes
// the pending ranges before the pending entries, which are all younger than any range
// covering them.
//
// The checkpoint is the underlying backend's: Checkpoint does not see a checkpoint set by
// a batch of the buffer before Flush writes it.
//
// Like any Backend, a Buffer is used by one goroutine at a time. Its iterators read a
// snapshot of the pending entries (a copy-on-write clone, O(1) to take) and an iterator of
// the underlying backend, both taken at their creation, so that writes to the buffer and
// flushes while an iterator is open neither show in it nor disturb it.
//
// Errors of the underlying backend are returned as they are, except by Flush, which wraps
// them.
type Buffer struct {
	under Backend
	// m and old index the slots of the keys the Buffer knows: a slot holds a key's pending
	// entry, if any, and the read cache's copy of its underlying value, if known. A key has
	// at most one slot, in m or in old. Get and a write cost one map lookup (none for a
	// write of the key the previous call looked up), and Flush moves a pending value into
	// its slot's cache (if it caches writes: see cacheWrites) without any.
	//
	// With the read cache, m and old are its two generations (see cleanSize): slots go to
	// m, and a slot of old that is read or written moves to m, so that old holds the slots
	// not used since m last became old. When the cache exceeds its bound, it drops slots
	// of old, any of them (evict), moving those with a pending entry to m (uncached); when
	// old is empty, m becomes old. Keys that all fit stay, however they are read: turning
	// the generations whenever m filled half the cache, as it once did, dropped the keys
	// used longest ago, which a pass over the keys in turn (each read once per pass, as an
	// aggregation's or a table's keys are) reads next, and such passes missed about half
	// their keys with room for all of them. Entries are only deleted from old, which is
	// replaced whole, and only inserted into m: a Go map never shrinks, and one that
	// entries are inserted into and deleted from in turn grows to far more heap than its
	// entries. Without the read cache, m holds only the slots of pending entries and old
	// is empty.
	m, old map[string]*slot
	// cgen is the generation of m; the slots of old have cgen-1.
	cgen uint32
	// pendCur and pendOld count the slots with a pending entry in m and in old.
	pendCur, pendOld int
	// last is the slot the last lookup found or created, so that a write following a Get
	// of the same key (an aggregation's read-modify-write) needs no map lookup. It is
	// reset whenever a slot may leave the maps.
	last *slot

	tree *btree.BTreeG[*entry]
	// snap is a clone of tree shared by the iterators created since the last write, or
	// nil.
	//
	// INVARIANT: snap is nil or holds exactly the entries of tree.
	snap *btree.BTreeG[*entry]
	// gen counts the clones of tree taken for iterators. An entry created when gen had
	// its current value is in no clone, so it may be modified in place; an older entry
	// may be in a clone and is replaced instead.
	gen uint64
	// slab holds entries not yet used at its end, so that creating an entry rarely
	// allocates; slabGen is gen when slab was allocated.
	slab    []entry
	slabGen uint64
	// slots holds slots not yet used at its end, used while there is no read cache (the
	// slots then all leave at the next Flush or Discard, so the slab is reused).
	slots []slot
	// vals is the arena the values of new entries are carved from, so that a commit
	// interval's writes cost few allocations; valsGen is gen when it was allocated (it is
	// reused after a flush only if no clone can hold an entry whose value it holds).
	vals    []byte
	valsGen uint64

	// ranges are the pending range deletions, oldest first. A pending entry is always
	// younger than the ranges covering it (a range deletion drops the entries it covers).
	// The slice is only appended to until clear replaces it, so iterators may keep a
	// prefix of it.
	ranges []keyRange

	// discards counts the calls of Discard: a reader that caches what it read (a window
	// store's stream time) compares it to know whether the Buffer's contents went back.
	discards uint64
	// flushes counts the cuts of the pending writes: the flushes that wrote to the
	// underlying backend, and the freezes (Freeze). A write made before a cut is in the
	// underlying backend or in the frozen generation, which getCut reads.
	flushes uint64

	size       int   // sum of len(key)+len(value) over the pending entries
	sets, dels int   // pending entries that are values, that are deletion markers
	cp         int64 // pending checkpoint, if hasCP
	hasCP      bool

	pivot      *entry // ascendPending's search key
	flushBatch Batch  // the underlying batch Flush reuses, created on the first flush
	scratch    []byte // Flush's key buffer

	// The read cache of the underlying backend: values (or absences) read by Get or
	// written by Flush, kept in the slots, at most cacheMax bytes of heap (keys, values and
	// the overhead of each slot, see slotCost); cleanSize is the part of it in m, oldSize
	// the part in old, and oldGone the part of old's map that the slots evicted from old
	// still hold (mapShare each), until old is replaced. The cache mirrors the underlying
	// backend as long as every write goes through the Buffer, so Discard keeps it.
	cleanSize, oldSize, oldGone int
	cacheMax                    int
	// limit, if not nil, is the read cache's bound instead of cacheMax (which then only
	// says the cache is on): a share of a budget that its owner changes while the Buffer
	// is in use (WithSharedReadCache).
	limit *atomic.Int64
	// weight scales limit for this Buffer (SetReadCacheWeight), in units of 1/weightOne;
	// 0 is weightOne. Its owner may store it from another goroutine.
	weight atomic.Int64
	// reads counts the reads that consulted the read cache (those a pending write or a
	// range deletion did not answer): the demand its owner weighs the shares by. evictions
	// counts the times the cache exceeded its bound (evict).
	reads, evictions uint64
	// readsAtCut is reads at the last cut of the pending writes that wrote to the
	// underlying backend (Flush, Release); byReads says the Buffer is a segmented store's,
	// whose cuts cache their writes only if it reads values back (see cacheWrites).
	readsAtCut uint64
	byReads    bool

	// frozen is the generation of pending writes cut by Freeze and not yet released, or
	// nil (see buffer_freeze.go). Its entries stay pending for reads until Release.
	frozen *Frozen
	// hidden are entries of frozen that range deletions made since the freeze detached from
	// their slots, so that Discard can put them back.
	hidden []*entry

	// epoch counts the range deletions made with the read cache on; dead are the latest of
	// them, oldest first, whose keys the cached values taken before them (the slots of a
	// lower epoch) must not answer for.
	epoch uint32
	dead  []deadRange

	// fresh are the prefixes whose written keys the Buffer records (see TrackFresh), hashed
	// with freshSeed.
	fresh     []*freshPrefix
	freshSeed maphash.Seed
}

// slot is the Buffer's state of one key: its pending entry and its cached underlying value.
type slot struct {
	key string // also the key of the map holding it, and of its entries, sharing its bytes
	// val is the cached underlying value, if known and not absent.
	val []byte
	// p is the pending entry of the key, or nil.
	p *entry
	// cost is the heap accounted to the read cache for the slot: 0 unless known.
	cost int32
	// cgen is the generation of the map holding the slot (Buffer.cgen for m).
	cgen uint32
	// epoch is the Buffer's range deletion count (Buffer.epoch) when the cached value was
	// taken: the range deletions made since may have deleted it (see Buffer.dead).
	epoch uint32
	// known: the read cache knows the underlying value (val), or its absence (absent).
	known, absent bool
}

var _ Backend = (*Buffer)(nil)

// entry is one pending write. An entry that may be in a clone of the tree (its gen is
// below the Buffer's) is never modified.
type entry struct {
	key string // the key, sharing the bytes of its slot's
	val []byte // the value, empty (or with spare capacity) for a deletion
	del bool
	gen uint64
	s   *slot // the key's slot; read only by the Buffer, never by iterators
	// prev is the entry of the frozen generation this entry replaced, if any, so that
	// Discard can put it back (see Freeze); read only by the Buffer.
	prev *entry
}

func entryLess(a, b *entry) bool { return a.key < b.key }

// keyRange is a pending range deletion of the keys in [from, to); a nil bound is
// unbounded. Its bounds are copies owned by the Buffer and never modified.
type keyRange struct{ from, to []byte }

// covers reports whether r holds key k.
func (r keyRange) covers(k []byte) bool {
	return (r.from == nil || bytes.Compare(k, r.from) >= 0) && (r.to == nil || bytes.Compare(k, r.to) < 0)
}

// coversString is covers for a key held as a string.
func (r keyRange) coversString(k string) bool {
	return (r.from == nil || k >= string(r.from)) && (r.to == nil || k < string(r.to))
}

// overlaps reports whether r meets [from, to) (nil bounds unbounded, the range not empty).
func (r keyRange) overlaps(from, to []byte) bool {
	return (r.to == nil || from == nil || bytes.Compare(from, r.to) < 0) &&
		(r.from == nil || to == nil || bytes.Compare(r.from, to) < 0)
}

// emptyRange reports whether [from, to) holds no key.
func emptyRange(from, to []byte) bool {
	return to != nil && (len(to) == 0 || from != nil && bytes.Compare(from, to) >= 0)
}

// coveredBy reports whether one of rs holds k.
func coveredBy(rs []keyRange, k []byte) bool {
	for _, r := range rs {
		if r.covers(k) {
			return true
		}
	}
	return false
}

// bufferDegree is the degree of the pending entries' B-tree: nodes hold 15 to 31 entries.
const bufferDegree = 16

// slabSize is the number of entries (or slots) allocated at once.
const slabSize = 128

// NewBuffer returns an empty write buffer over b. Writes should go through the Buffer
// only: a write made to b directly is visible through the Buffer only for a key without a
// pending entry, and the next Flush overwrites it for a key with one.
func NewBuffer(b Backend) *Buffer {
	return &Buffer{
		under: b,
		m:     make(map[string]*slot),
		tree:  btree.NewG(bufferDegree, entryLess),
	}
}

// Get implements [Backend]: a pending value or deletion of key answers without reading
// the underlying backend. The value is a copy owned by the caller.
func (b *Buffer) Get(key []byte) ([]byte, bool, error) {
	v, ok, owned, err := b.view(key)
	if !ok || owned {
		return v, ok, err
	}
	return append(make([]byte, 0, len(v)), v...), true, nil
}

// getView implements viewGetter: Get without the copy. The value is the Buffer's (owned
// false) or the caller's (owned true); the Buffer's is valid until its next call and must
// not be modified.
func (b *Buffer) getView(key []byte) ([]byte, bool, error) {
	v, ok, _, err := b.view(key)
	if ok && v == nil {
		v = []byte{} // a present empty value is not a Kafka null
	}
	return v, ok, err
}

// viewGetter is implemented by a backend that can return a value without copying it: the
// value is valid until the next call on the backend and must not be modified. A typed store
// that deserializes at once uses it (serde.Serde's Deserialize keeps no reference to its
// input).
type viewGetter interface {
	getView(key []byte) ([]byte, bool, error)
}

// view is Get returning the Buffer's own storage when it can (owned false).
func (b *Buffer) view(key []byte) (v []byte, ok, owned bool, err error) {
	if len(b.fresh) > 0 && b.freshAbsent(key) {
		return nil, false, false, nil // never written, nor cached but as absent
	}
	s := b.find(key)
	if s != nil && s.p != nil {
		if s.p.del {
			return nil, false, false, nil
		}
		return s.p.val, true, false, nil
	}
	if b.rangeCovers(key) {
		return nil, false, false, nil
	}
	b.reads++
	if s != nil && s.known && len(b.dead) > 0 && s.epoch != b.epoch && b.stale(s) {
		b.remove(s) // no pending entry
		s = nil
	}
	if s != nil && s.known {
		if s.absent {
			return nil, false, false, nil
		}
		return s.val, true, false, nil
	}
	v, ok, err = b.under.Get(key)
	if err != nil || b.cacheMax <= 0 {
		return v, ok, true, err
	}
	if s == nil {
		s = b.newSlot(key)
	}
	// The underlying value is the caller's: the cache takes it.
	kept := b.setCached(s, v, !ok, true)
	return v, ok, !kept, nil
}

// find returns the slot of key, or nil. A slot of old moves to m.
func (b *Buffer) find(key []byte) *slot {
	if s := b.last; s != nil && s.key == string(key) {
		return s
	}
	s, ok := b.m[string(key)]
	if !ok {
		if len(b.old) == 0 {
			return nil
		}
		if s, ok = b.old[string(key)]; !ok {
			return nil
		}
		b.promote(s)
	}
	b.last = s
	return s
}

// newSlot creates the slot of key, in m.
func (b *Buffer) newSlot(key []byte) *slot {
	var s *slot
	if b.cacheMax <= 0 {
		if len(b.slots) == cap(b.slots) {
			b.slots = make([]slot, 0, slabSize)
		}
		b.slots = b.slots[:len(b.slots)+1]
		s = &b.slots[len(b.slots)-1]
	} else {
		s = new(slot)
	}
	s.key, s.cgen = string(key), b.cgen
	b.m[s.key] = s
	b.last = s
	return s
}

// promote moves s from old to m.
func (b *Buffer) promote(s *slot) {
	b.leaveOld(s, false)
	if s.p != nil {
		b.pendOld--
	}
	s.cgen = b.cgen
	b.m[s.key] = s
	b.cleanSize += int(s.cost)
	if s.p != nil {
		b.pendCur++
	}
}

// mapShare is the heap of a map's slot for a *slot key-value pair, part of slotOverhead:
// what a slot that left a map still costs until the map goes.
const mapShare = 48

// leaveOld deletes s from old. The room s had in old's map stays until old is replaced
// (when old is empty, it goes at once); an eviction counts it (oldGone), so that evicting
// a slot frees what it costs less mapShare. A slot moved to m leaves it uncounted, as a
// deletion did when the generations only turned.
func (b *Buffer) leaveOld(s *slot, evicted bool) {
	delete(b.old, s.key)
	b.oldSize -= int(s.cost)
	if evicted {
		b.oldGone += mapShare
	}
	if len(b.old) == 0 {
		b.old, b.oldGone = nil, 0
	}
}

// evict brings the read cache within bound if it exceeds it, down to 15/16 of it so that
// evictions come in batches: it drops the cached values of slots of old (any of them, in
// the map's order) and, when old is empty, makes m old. A slot with a pending entry keeps
// it and moves to m, uncached. keep, if not nil, stays in m.
func (b *Buffer) evict(bound int, keep *slot) {
	if b.CacheSize() <= bound {
		return
	}
	b.evictions++
	target := bound - bound/16
	for b.CacheSize() > target {
		if len(b.old) == 0 {
			if len(b.m) == 0 {
				return
			}
			b.rotate()
			if keep != nil {
				b.promote(keep)
			}
			continue
		}
		for _, s := range b.old {
			if b.CacheSize() <= target {
				break
			}
			if s.p == nil {
				b.leaveOld(s, true)
				s.val, s.cost, s.known = nil, 0, false
				continue
			}
			b.promote(s)
			b.uncache(s)
		}
	}
	b.last = nil
}

// rotate turns the cache's generations once old is empty (evict): m becomes old.
func (b *Buffer) rotate() {
	b.old, b.oldSize, b.oldGone = b.m, b.cleanSize, 0
	b.m, b.cleanSize = make(map[string]*slot), 0
	b.cgen++
	b.pendCur, b.pendOld = 0, b.pendCur
	b.last = nil
}

// remove takes s, which has no pending entry, out of its map.
func (b *Buffer) remove(s *slot) {
	if s.cgen == b.cgen {
		b.uncache(s)
		delete(b.m, s.key)
	} else {
		b.leaveOld(s, false)
		s.val, s.cost, s.known, s.absent = nil, 0, false, false
	}
	if b.last == s {
		b.last = nil
	}
}

// uncache forgets the cached value of s.
func (b *Buffer) uncache(s *slot) {
	if s.cgen == b.cgen {
		b.cleanSize -= int(s.cost)
	} else {
		b.oldSize -= int(s.cost)
	}
	s.val, s.cost, s.known, s.absent = nil, 0, false, false
}

// setCached records v (absent: no value) as the underlying value of s's key; with own, s
// takes v rather than a copy. It reports whether the cache kept v itself. A value above
// half the cache is not cached; s then leaves the maps unless it has a pending entry.
func (b *Buffer) setCached(s *slot, v []byte, absent, own bool) (kept bool) {
	if s.cgen != b.cgen {
		b.promote(s) // a slot written or read again moves to the new generation
	}
	b.cleanSize -= int(s.cost)
	s.cost = 0
	switch {
	case absent:
		s.val = s.val[:0]
	case own:
		s.val, kept = v, true
	default:
		s.val = append(s.val[:0], v...) // reuses the cached value's storage when it fits
	}
	s.known, s.absent, s.epoch = true, absent, b.epoch
	cost := slotCost(s.key, s.val)
	bound := b.bound()
	if cost > bound/2 || cost > math.MaxInt32 {
		s.val, s.known, s.absent = nil, false, false
		if s.p == nil {
			b.remove(s)
		}
		return false
	}
	s.cost = int32(cost)
	b.cleanSize += cost
	b.evict(bound, s)
	return kept
}

// WithReadCache makes Get keep up to maxBytes of keys and values read from or flushed to
// the underlying backend, so that reading a key again costs a map lookup; it returns b.
// The cache assumes that the underlying backend is written only through the Buffer. It
// must be called before the Buffer is used.
func (b *Buffer) WithReadCache(maxBytes int) *Buffer {
	b.cacheMax = maxBytes
	return b
}

// WithSharedReadCache is WithReadCache with a bound that its owner may change while the
// Buffer is in use (another goroutine may store to limit at any time): a share of a
// budget divided among the Buffers of a process as they come and go. A smaller bound takes
// effect as the cache inserts (its generations turn sooner) and at the next Flush, which
// drops what exceeds it. It must be called before the Buffer is used.
func (b *Buffer) WithSharedReadCache(limit *atomic.Int64) *Buffer {
	b.cacheMax, b.limit = math.MaxInt, limit
	return b
}

// weightOne is the read cache weight 1.0 in SetReadCacheWeight's fixed point.
const weightOne = 1 << 10

// SetReadCacheWeight scales a shared read cache's bound (WithSharedReadCache) by w: its
// owner gives a Buffer that is read more a larger part of the budget than one that is
// read less, keeping the sum of the bounds within the budget. A weight at or below zero
// is the smallest one above it; 1 is the default. Another goroutine may call it while the
// Buffer is in use; a smaller bound takes effect as WithSharedReadCache says.
func (b *Buffer) SetReadCacheWeight(w float64) {
	b.weight.Store(max(int64(w*weightOne), 1))
}

// CacheReads returns how many reads consulted the read cache since the Buffer was made:
// hits and misses, not the reads that a pending write answered.
func (b *Buffer) CacheReads() uint64 { return b.reads }

// CacheEvictions returns how many times since the Buffer was made the read cache was full
// and dropped values to make room: zero means it held every value it was given.
func (b *Buffer) CacheEvictions() uint64 { return b.evictions }

// bound is the read cache's bound in bytes of heap.
func (b *Buffer) bound() int {
	if b.limit != nil {
		l := max(b.limit.Load(), 0)
		if w := b.weight.Load(); w > 0 {
			l = l / weightOne * w // divided first: l*w could overflow
		}
		return int(l)
	}
	return b.cacheMax
}

// writeReadRatio bounds the writes a cut caches per read of the underlying backend since the
// previous cut: see cacheWrites.
const writeReadRatio = 8

// cacheWrites reports whether a cut that wrote n pending entries to the underlying backend
// (Flush, Release) keeps their values in the read cache. A key-value store's cut does, as
// a key is rewritten in later commits, read or not (its slot is then at hand: no lookup
// of the backend, no new slot). A segmented store's (see cacheWritesByReads) does only if
// the Buffer read the underlying backend (hits and misses of the cache) at least once per
// writeReadRatio of them since the previous cut: its keys carry a time, and a store whose
// reads the pending writes or the fresh-key records answer rewrites few of them in later
// commits (a window store that opens a window per record; a session store, read by range
// only). Caching each of its writes cost a slot update and, once the cache was full, an
// eviction, and took the room of the stores that read. A value not cached is read from the
// underlying backend if it is read at all, and cached then; the reads counted make the
// next cut cache its writes again.
func (b *Buffer) cacheWrites(n int) bool {
	reads := b.reads - b.readsAtCut
	b.readsAtCut = b.reads
	return !b.byReads || reads*writeReadRatio >= uint64(n)
}

// cacheWritesByReads makes the Buffer's cuts cache their writes only while it reads values
// back (see cacheWrites): a segmented store's Buffer.
func (b *Buffer) cacheWritesByReads() { b.byReads = true }

// fit brings the read cache within its bound again, which a shared bound can fall below
// (see WithSharedReadCache). Slots with a pending entry stay (uncached).
func (b *Buffer) fit() { b.evict(b.bound(), nil) }

// CacheSize returns the heap the read cache is accounted to hold: its keys and values and
// the per-entry overhead of its index.
func (b *Buffer) CacheSize() int { return b.cleanSize + b.oldSize + b.oldGone }

// slotOverhead is the heap a read cache entry costs beyond its key and value bytes: the
// slot (64 bytes) and its share of the map (a 24-byte slot and a control byte, at the
// map's load factor, which is between 7/16 and 7/8), measured with
// TestBufferReadCacheHeapWithinBound.
const slotOverhead = 112

// slotCost is the heap that a read cache entry of key with value storage val costs: the
// allocations of key and value, rounded up as the allocator does, and the overhead.
func slotCost(key string, val []byte) int {
	return allocSize(len(key)) + cap(val) + slotOverhead
}

// allocSize approximates the size of a heap allocation of n bytes (Go's small size classes
// are multiples of 16 above 16 bytes).
func allocSize(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= 8:
		return 8
	default:
		return (n + 15) &^ 15
	}
}

// Set implements [Backend]: key = value becomes pending. It never fails.
func (b *Buffer) Set(key, value []byte) error {
	b.write(key, value, false)
	return nil
}

// Delete implements [Backend]: the deletion of key becomes pending, hiding the key of the
// underlying backend until Flush deletes it there. It never fails.
func (b *Buffer) Delete(key []byte) error {
	b.write(key, nil, true)
	return nil
}

// DeleteRange implements [Backend]: the pending entries in [from, to) are dropped and the
// range becomes pending, hiding the underlying backend's keys in it until Flush deletes
// them there. It never fails.
func (b *Buffer) DeleteRange(from, to []byte) error {
	b.deleteRange(from, to)
	return nil
}

func (b *Buffer) deleteRange(from, to []byte) {
	if emptyRange(from, to) {
		return
	}
	r := keyRange{from: bytes.Clone(from), to: bytes.Clone(to)}
	if len(r.from) == 0 {
		r.from = nil // every key is at least the empty key
	}
	var doomed []*entry
	collect := func(e *entry) bool {
		if r.to != nil && e.key >= string(r.to) {
			return false
		}
		doomed = append(doomed, e)
		return true
	}
	if r.from == nil {
		b.tree.Ascend(collect)
	} else {
		b.tree.AscendGreaterOrEqual(&entry{key: string(r.from)}, collect)
	}
	if len(doomed) > 0 {
		// Entries are removed, never modified: a snapshot holding them keeps them.
		b.snap = nil
		for _, e := range doomed {
			b.tree.Delete(e)
			b.forget(e)
			b.unpend(e.s)
			if b.isFrozen(e.prev) {
				b.hidden = append(b.hidden, e.prev)
			}
			if !e.s.known {
				b.remove(e.s)
			}
		}
	}
	if b.frozen != nil {
		b.hideFrozen(r)
	}
	if len(b.fresh) > 0 {
		b.dropFresh(r.from, r.to)
	}
	b.ranges = append(b.ranges, r)
	// The read cache must not answer for the keys the range deletes: a cached value taken
	// before it that it covers is stale (see stale), and leaves when read or when
	// maxDeadRanges pile up, in one pass over the cache, rather than at each deletion.
	if b.cacheMax > 0 {
		if b.epoch == math.MaxUint32 {
			b.renumberEpochs()
		}
		b.epoch++
		b.dead = append(b.dead, deadRange{keyRange: r, epoch: b.epoch})
		if len(b.dead) > maxDeadRanges {
			b.dropDead()
		}
	}
	b.last = nil
}

// deadRange is a range deletion that may have deleted values the read cache took before
// it: those of the slots whose epoch is below the range's.
type deadRange struct {
	keyRange
	epoch uint32
}

// maxDeadRanges is the number of range deletions the read cache checks its values against
// when they are read; beyond it, dropDead drops the values they made stale.
const maxDeadRanges = 8

// stale reports whether the cached value of s may have been deleted by a range deletion
// made after the cache took it.
func (b *Buffer) stale(s *slot) bool {
	for i := len(b.dead) - 1; i >= 0 && b.dead[i].epoch > s.epoch; i-- {
		if b.dead[i].coversString(s.key) {
			return true
		}
	}
	return false
}

// renumberEpochs starts the range deletions' count again from 0 once it reached its
// largest value: the stale values go, and every slot's epoch becomes 0.
func (b *Buffer) renumberEpochs() {
	b.dropDead()
	for _, mp := range [2]map[string]*slot{b.m, b.old} {
		for _, s := range mp {
			s.epoch = 0
		}
	}
	b.epoch = 0
}

// dropDead drops from the read cache the values that the range deletions of b.dead made
// stale, and forgets those ranges: one pass over the cache. A slot with a pending entry
// keeps its entry and forgets its cached value.
func (b *Buffer) dropDead() {
	for _, mp := range [2]map[string]*slot{b.m, b.old} {
		for _, s := range mp {
			if !s.known || s.epoch == b.epoch || !b.stale(s) {
				continue
			}
			if s.p == nil {
				b.remove(s)
			} else {
				b.uncache(s)
			}
		}
	}
	clear(b.dead)
	b.dead = b.dead[:0]
	b.last = nil
}

// rangeCovers reports whether a pending range deletion, frozen or not, holds key.
func (b *Buffer) rangeCovers(key []byte) bool {
	if len(b.ranges) > 0 && coveredBy(b.ranges, key) {
		return true
	}
	return b.frozen != nil && len(b.frozen.ranges) > 0 && coveredBy(b.frozen.ranges, key)
}

// unpend detaches the pending entry of s.
func (b *Buffer) unpend(s *slot) {
	s.p = nil
	if s.cgen == b.cgen {
		b.pendCur--
	} else {
		b.pendOld--
	}
}

// rangesIn returns the ranges of rs that meet [from, to).
func rangesIn(rs []keyRange, from, to []byte) []keyRange {
	var out []keyRange
	for _, r := range rs {
		if r.overlaps(from, to) {
			out = append(out, r)
		}
	}
	return out
}

// write records a pending value of key (a deletion marker if del is set), copying key and
// value. It allocates at most a copy of each: none for a key that is already pending with
// room for the value, none for the key if it is pending or cached.
func (b *Buffer) write(key, value []byte, del bool) {
	b.snap = nil
	if len(b.fresh) > 0 {
		b.noteFresh(key)
	}
	s := b.find(key)
	if s == nil {
		s = b.newSlot(key)
	}
	old := s.p
	if old != nil && old.gen == b.gen {
		// In no snapshot: update in place, reusing the value's storage if it fits.
		b.forget(old)
		if del {
			old.val = old.val[:0]
		} else if cap(old.val) >= len(value) {
			old.val = append(old.val[:0], value...)
		} else {
			old.val = append([]byte(nil), value...)
		}
		old.del = del
		b.count(old)
		return
	}
	e := b.newEntry()
	e.key, e.s = s.key, s
	if old != nil {
		if b.isFrozen(old) {
			e.prev = old // the frozen entry stays the frozen generation's
		} else {
			b.forget(old)
			e.prev = old.prev
		}
	} else {
		b.pendCur++ // find moved s to m
	}
	if !del {
		e.val = b.copyValue(value)
	}
	e.del = del
	b.count(e)
	s.p = e
	b.tree.ReplaceOrInsert(e)
}

// Sizes of the value arena's chunks, and of the largest value carved from it.
const (
	valChunk    = 32 << 10
	maxArenaVal = 1 << 10
)

// copyValue returns a copy of v (nil if v is empty), carved from the value arena when small.
// The copy has no spare capacity: an update in place that does not fit allocates.
func (b *Buffer) copyValue(v []byte) []byte {
	n := len(v)
	switch {
	case n == 0:
		return nil
	case n > maxArenaVal:
		return append([]byte(nil), v...)
	case cap(b.vals)-len(b.vals) < n:
		b.vals, b.valsGen = make([]byte, 0, valChunk), b.gen
	}
	start := len(b.vals)
	b.vals = append(b.vals, v...)
	return b.vals[start:len(b.vals):len(b.vals)]
}

// newEntry returns an empty entry of the current generation.
func (b *Buffer) newEntry() *entry {
	if len(b.slab) == cap(b.slab) {
		b.slab, b.slabGen = make([]entry, 0, slabSize), b.gen
	}
	b.slab = b.slab[:len(b.slab)+1]
	e := &b.slab[len(b.slab)-1]
	e.gen = b.gen
	return e
}

// count adds e to the statistics of the pending entries; forget removes it.
func (b *Buffer) count(e *entry) {
	b.size += len(e.key) + len(e.val)
	if e.del {
		b.dels++
	} else {
		b.sets++
	}
}

func (b *Buffer) forget(e *entry) {
	b.size -= len(e.key) + len(e.val)
	if e.del {
		b.dels--
	} else {
		b.sets--
	}
}

// Range implements [Backend].
func (b *Buffer) Range(from, to []byte) (Iterator, error) {
	return b.newIter(from, to, false, false)
}

// ReverseRange implements [Backend].
func (b *Buffer) ReverseRange(from, to []byte) (Iterator, error) {
	return b.newIter(from, to, true, false)
}

// PrefixScan implements [Backend].
func (b *Buffer) PrefixScan(prefix []byte) (Iterator, error) {
	return b.newIter(prefix, nil, false, true)
}

// newIter returns an iterator merging the pending entries in [from, to) with the
// underlying backend's keys; for a prefix scan, from is the prefix and to is ignored.
// When no entry is pending in the range, it returns the underlying iterator itself.
func (b *Buffer) newIter(from, to []byte, reverse, prefix bool) (Iterator, error) {
	var (
		under Iterator
		err   error
	)
	switch {
	case prefix:
		under, err = b.under.PrefixScan(from)
		to = prefixSuccessor(from)
	case reverse:
		under, err = b.under.ReverseRange(from, to)
	default:
		under, err = b.under.Range(from, to)
	}
	if err != nil {
		return nil, err
	}
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return under, nil // empty range
	}
	c := pendingCursor{reverse: reverse}
	if from != nil {
		c.lo, c.hasLo = string(from), true
	}
	if to != nil {
		c.hi, c.hasHi = string(to), true
	}
	if b.frozen != nil {
		under = b.frozen.layer(under, c, from, to)
	}
	ranges := rangesIn(b.ranges, from, to)
	if len(ranges) == 0 && !pendingIn(b.tree, &c) {
		return under, nil
	}
	c.tree = b.snapshot()
	return &bufferIter{under: under, pending: c, ranges: ranges}, nil
}

// pendingIn reports whether tree holds an entry within the bounds of c.
func pendingIn(tree *btree.BTreeG[*entry], c *pendingCursor) bool {
	found := false
	check := func(e *entry) bool {
		found = !c.hasHi || e.key < c.hi
		return false
	}
	if c.hasLo {
		tree.AscendGreaterOrEqual(&entry{key: c.lo}, check)
	} else {
		tree.Ascend(check)
	}
	return found
}

// snapshot returns a read-only clone of the tree of pending entries.
func (b *Buffer) snapshot() *btree.BTreeG[*entry] {
	if b.snap == nil {
		b.snap = b.tree.Clone()
		b.gen++ // the entries now in snap must no longer change in place
	}
	return b.snap
}

// prefixSuccessor returns the smallest key greater than every key that starts with prefix,
// or nil (unbounded) if there is none: prefix is empty or all 0xff bytes.
func prefixSuccessor(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// NewBatch implements [Backend]. The batch's Commit applies its writes to the buffer, as
// pending entries, and its checkpoint as the pending checkpoint that the next Flush writes;
// it reaches the underlying backend only through Flush.
func (b *Buffer) NewBatch() Batch { return &bufferBatch{b: b} }

// ApproximateCount implements [Backend]: the underlying backend's estimate plus the
// pending values minus the pending deletions, at least 0. It is approximate even over an
// exact backend: a pending value of a key the underlying backend already holds counts
// twice, a pending deletion of a key it does not hold counts as one key less, and the keys
// of pending range deletions still count. After Flush, it is the underlying backend's
// estimate.
func (b *Buffer) ApproximateCount() (int64, error) {
	n, err := b.under.ApproximateCount()
	if err != nil {
		return 0, err
	}
	n += int64(b.sets) - int64(b.dels)
	if f := b.frozen; f != nil {
		n += int64(f.sets) - int64(f.dels)
	}
	return max(0, n), nil
}

// Checkpoint implements [Backend]: it returns the underlying backend's checkpoint. A
// checkpoint set by a batch of the buffer is not visible before Flush writes it.
func (b *Buffer) Checkpoint() (int64, error) { return b.under.Checkpoint() }

// Len returns the number of pending writes: values, deletion markers and range deletions,
// those of a frozen generation (Freeze) left out.
func (b *Buffer) Len() int { return b.tree.Len() + len(b.ranges) }

// Size returns the number of bytes of the pending keys and values, those of a frozen
// generation (Freeze) left out. The memory the Buffer
// holds is this plus roughly 150 bytes an entry (the entry, its slot, their map slot and
// their share of the B-tree).
func (b *Buffer) Size() int { return b.size }

// Flush writes every pending range deletion, then every pending entry, to the underlying
// backend in one batch, together with a checkpoint, and clears the pending entries and checkpoint. The checkpoint is checkpoint
// if it is at least 0; a negative checkpoint leaves the underlying checkpoint as it is,
// unless a batch of the buffer set a pending checkpoint, which is then written. With
// nothing to write, Flush does nothing.
//
// The writes and the checkpoint are atomic as the underlying backend's batches are. If the
// batch fails, the pending entries and checkpoint are kept, so that Flush may be retried,
// and the error wraps the underlying one.
func (b *Buffer) Flush(checkpoint int64) error {
	if b.frozen != nil {
		return errFrozen
	}
	cp, hasCP := checkpoint, checkpoint >= 0
	if !hasCP && b.hasCP {
		cp, hasCP = b.cp, true
	}
	pending := b.tree.Len()
	if pending == 0 && len(b.ranges) == 0 && !hasCP {
		if b.cacheMax > 0 {
			b.fit()
		}
		return nil
	}
	if b.flushBatch == nil {
		b.flushBatch = b.under.NewBatch()
	}
	bt := b.flushBatch
	bt.Reset()
	for _, r := range b.ranges {
		bt.DeleteRange(r.from, r.to)
	}
	b.tree.Ascend(func(e *entry) bool {
		b.scratch = append(b.scratch[:0], e.key...)
		if e.del {
			bt.Delete(b.scratch)
		} else {
			bt.Set(b.scratch, e.val)
		}
		return true
	})
	if hasCP {
		bt.SetCheckpoint(cp)
	}
	if err := bt.Commit(); err != nil {
		bt.Reset()
		return fmt.Errorf("store: buffer: flush of %d entries and %d range deletions: %w", pending, len(b.ranges), err)
	}
	if b.cacheMax > 0 {
		// The written values become the cache's, if it reads them back: the slots are at
		// hand, no lookup.
		cache := b.cacheWrites(pending)
		b.tree.Ascend(func(e *entry) bool {
			b.unpend(e.s)
			if cache {
				b.setCached(e.s, e.val, e.del, false)
			} else {
				b.remove(e.s)
			}
			return true
		})
	}
	b.clear()
	if b.cacheMax > 0 {
		b.fit()
	}
	b.flushes++
	return nil
}

// getPending reads key from the pending writes alone: its pending value (ok) or deletion,
// known false if no pending write covers it. The value is a copy owned by the caller.
func (b *Buffer) getPending(key []byte) (value []byte, ok, known bool) {
	if s := b.find(key); s != nil && s.p != nil {
		if s.p.del {
			return nil, false, true
		}
		return append([]byte(nil), s.p.val...), true, true
	}
	if b.rangeCovers(key) {
		return nil, false, true
	}
	return nil, false, false
}

// ascendPending calls fn for each pending value whose key is in [from, to), in key order,
// until fn returns false; deletion markers are skipped. The slices are valid only during the
// call, and fn must not write to the Buffer. A window store reads its recent windows this
// way when it knows that the underlying backend holds none of them (see flushIndex).
func (b *Buffer) ascendPending(from, to []byte, fn func(key string, val []byte) bool) {
	if b.pivot == nil {
		b.pivot = new(entry)
	}
	// The pivot's key only lives during the call: from's bytes, without a copy.
	b.pivot.key = unsafe.String(unsafe.SliceData(from), len(from))
	if b.frozen != nil {
		b.ascendBoth(to, fn)
	} else {
		b.tree.AscendGreaterOrEqual(b.pivot, func(e *entry) bool {
			if e.key >= string(to) {
				return false
			}
			return e.del || fn(e.key, e.val)
		})
	}
	b.pivot.key = ""
}

// Pending calls fn for every pending entry in key order: its key, its value, and whether it
// is a deletion. The slices are valid only during the call. Pending range deletions are not
// reported: they are a store's housekeeping (a window store's expired segments), which a
// changelog does not carry.
func (b *Buffer) Pending(fn func(key, value []byte, deleted bool)) {
	b.tree.Ascend(func(e *entry) bool {
		b.scratch = append(b.scratch[:0], e.key...)
		fn(b.scratch, e.val, e.del)
		return true
	})
}

// Discard drops the pending entries, range deletions and checkpoint, leaving the underlying
// backend as of the last Flush. Iterators already open keep their snapshot. With a frozen
// generation (Freeze), it drops the writes made since the freeze: the frozen ones stay
// pending, for their Frozen to release or unfreeze.
func (b *Buffer) Discard() {
	// A discarded range deletion uncovers the keys it hid, which a recorded prefix may
	// have taken for absent.
	clear(b.fresh)
	b.fresh = b.fresh[:0]
	if b.frozen != nil {
		b.discardSinceFreeze()
		return
	}
	if b.cacheMax > 0 {
		b.tree.Ascend(func(e *entry) bool {
			b.unpend(e.s)
			if !e.s.known {
				b.remove(e.s)
			}
			return true
		})
	}
	b.clear()
	b.discards++
}

// discardCount implements discardCounter.
func (b *Buffer) discardCount() uint64 { return b.discards }

// discardCounter is implemented by a backend whose contents may go back to an earlier
// state (a Buffer's Discard); discardCount changes when they do.
type discardCounter interface{ discardCount() uint64 }

// clear empties the pending entries and checkpoint. With the read cache, the slots of the
// pending entries must have been detached from them (Flush, Discard); without it, every
// slot goes.
func (b *Buffer) clear() {
	if b.frozen != nil {
		// The slots of the frozen entries stay, and the counts of pending slots with them;
		// the caller detached the others.
		b.last = nil
	} else {
		if b.cacheMax <= 0 {
			clear(b.m)
			clear(b.slots)
			b.slots = b.slots[:0]
			b.last = nil
		}
		b.pendCur, b.pendOld = 0, 0
	}
	// Nodes a clone may share are not the tree's to free; Clear only reuses the others.
	b.tree.Clear(true)
	b.snap = nil
	if b.slabGen == b.gen {
		// No entry of the slab can be in a clone: reuse it.
		clear(b.slab)
		b.slab = b.slab[:0]
	} else {
		b.slab = nil
	}
	if b.valsGen == b.gen {
		// Nor can a value of the arena's current chunk be: reuse it.
		b.vals = b.vals[:0]
	} else {
		b.vals = nil
	}
	b.size, b.sets, b.dels = 0, 0, 0
	b.ranges = nil // iterators may hold a prefix of the old slice
	b.hasCP = false
}

// bufferBatch is a [Batch] of a Buffer. It copies its writes into one byte slice, reused
// across commits.
type bufferBatch struct {
	b     *Buffer
	data  []byte
	ops   []batchOp
	cp    int64
	hasCP bool
	badCP bool // SetCheckpoint was given an offset below NoCheckpoint (cp)
}

// batchOp is one write of a bufferBatch: key data[off:off+klen], value the vlen bytes
// after it. A range deletion's bounds are the key and the value, nil if fromNil, toNil.
type batchOp struct {
	off, klen, vlen int
	del             bool
	rng             bool
	fromNil, toNil  bool
}

var _ Batch = (*bufferBatch)(nil)

// Set implements [Batch].
func (bt *bufferBatch) Set(key, value []byte) {
	bt.ops = append(bt.ops, batchOp{off: len(bt.data), klen: len(key), vlen: len(value)})
	bt.data = append(append(bt.data, key...), value...)
}

// Delete implements [Batch].
func (bt *bufferBatch) Delete(key []byte) {
	bt.ops = append(bt.ops, batchOp{off: len(bt.data), klen: len(key), del: true})
	bt.data = append(bt.data, key...)
}

// DeleteRange implements [Batch].
func (bt *bufferBatch) DeleteRange(from, to []byte) {
	bt.ops = append(bt.ops, batchOp{off: len(bt.data), klen: len(from), vlen: len(to), rng: true, fromNil: from == nil, toNil: to == nil})
	bt.data = append(append(bt.data, from...), to...)
}

// SetCheckpoint implements [Batch]. An offset below [NoCheckpoint] makes Commit fail.
func (bt *bufferBatch) SetCheckpoint(offset int64) {
	bt.cp, bt.hasCP, bt.badCP = offset, true, offset < NoCheckpoint
}

// Len implements [Batch].
func (bt *bufferBatch) Len() int { return len(bt.ops) }

// Commit implements [Batch]: the writes become pending entries of the buffer, in order,
// and the checkpoint, if set, its pending checkpoint. It fails only for an invalid
// checkpoint, applying nothing. The batch is empty afterwards.
func (bt *bufferBatch) Commit() error {
	defer bt.Reset()
	if bt.badCP {
		return fmt.Errorf("store: buffer: commit: invalid checkpoint %d", bt.cp)
	}
	b := bt.b
	for _, op := range bt.ops {
		key := bt.data[op.off : op.off+op.klen]
		if op.rng {
			from, to := key, bt.data[op.off+op.klen:op.off+op.klen+op.vlen]
			// A bound is nil (unbounded) only if it was given so: an empty bound sliced
			// from a batch whose data is still nil is nil too, and an empty upper bound
			// means an empty range, not an unbounded one.
			switch {
			case op.fromNil:
				from = nil
			case from == nil:
				from = []byte{}
			}
			switch {
			case op.toNil:
				to = nil
			case to == nil:
				to = []byte{}
			}
			b.deleteRange(from, to)
			continue
		}
		if op.del {
			b.write(key, nil, true)
		} else {
			b.write(key, bt.data[op.off+op.klen:op.off+op.klen+op.vlen], false)
		}
	}
	if bt.hasCP {
		b.cp, b.hasCP = bt.cp, true
	}
	return nil
}

// Reset implements [Batch].
func (bt *bufferBatch) Reset() {
	bt.data, bt.ops = bt.data[:0], bt.ops[:0]
	bt.hasCP, bt.badCP = false, false
}

// Chunk sizes of a pendingCursor: it copies entries out of its snapshot this many at a time
// (the B-tree only has callback iteration), starting small for short scans.
const (
	firstPendingChunk = 16
	maxPendingChunk   = 256
)

// pendingCursor walks the pending entries of a snapshot within bounds, in chunks.
type pendingCursor struct {
	tree    *btree.BTreeG[*entry] // read-only; nil once exhausted
	lo, hi  string                // bounds, if hasLo, hasHi: [lo, hi)
	hasLo   bool
	hasHi   bool
	reverse bool

	buf       []*entry // the current chunk
	pos       int      // next entry of buf to return
	chunk     int      // size of the next chunk
	last      string   // key of the last entry of the previous chunk, to resume after
	started   bool     // a chunk has been fetched
	exhausted bool     // no entry is left beyond buf
}

// next returns the next entry, or nil at the end.
func (c *pendingCursor) next() *entry {
	if c.pos == len(c.buf) {
		if c.exhausted || c.tree == nil {
			c.release()
			return nil
		}
		c.fill()
		if len(c.buf) == 0 {
			c.release()
			return nil
		}
	}
	e := c.buf[c.pos]
	c.pos++
	return e
}

func (c *pendingCursor) release() {
	c.tree, c.buf, c.pos = nil, nil, 0
}

// fill fetches the next chunk of entries.
//
// INVARIANT: on return, len(c.buf) < c.chunk implies c.exhausted.
func (c *pendingCursor) fill() {
	if c.chunk == 0 {
		c.chunk = firstPendingChunk
	} else if c.chunk < maxPendingChunk {
		c.chunk *= 2
	}
	clear(c.buf)
	c.buf, c.pos = c.buf[:0], 0
	// The walk starts at pivot (included when includePivot); no pivot starts at the end.
	var pivot string
	hasPivot, includePivot := false, false
	switch {
	case c.started:
		pivot, hasPivot = c.last, true
	case c.reverse:
		pivot, hasPivot = c.hi, c.hasHi
	default:
		pivot, hasPivot, includePivot = c.lo, c.hasLo, true
	}
	add := func(e *entry) bool {
		if hasPivot && !includePivot && e.key == pivot {
			return true
		}
		if c.reverse {
			if c.hasLo && e.key < c.lo {
				return false
			}
		} else if c.hasHi && e.key >= c.hi {
			return false
		}
		c.buf = append(c.buf, e)
		return len(c.buf) < c.chunk
	}
	switch {
	case c.reverse && hasPivot:
		c.tree.DescendLessOrEqual(&entry{key: pivot}, add)
	case c.reverse:
		c.tree.Descend(add)
	case hasPivot:
		c.tree.AscendGreaterOrEqual(&entry{key: pivot}, add)
	default:
		c.tree.Ascend(add)
	}
	c.started = true
	if len(c.buf) < c.chunk {
		c.exhausted = true
	}
	if n := len(c.buf); n > 0 {
		c.last = c.buf[n-1].key
	}
}

// bufferIter merges a snapshot of pending entries with an iterator of the underlying
// backend. On equal keys the pending entry wins; a pending deletion hides the key.
//
// A pair of the underlying iterator is returned as the underlying iterator returns it (so
// its slices are valid until the next call of Next, which advances the underlying
// iterator); a pending pair is copied into buffers of the iterator, since the caller may
// modify what an iterator returns.
type bufferIter struct {
	under   Iterator
	pending pendingCursor
	ranges  []keyRange // pending range deletions hiding underlying keys

	uKey, uVal []byte // the underlying iterator's current pair, if uHave
	uHave      bool   // the underlying iterator is on a pair not yet merged
	uDone      bool   // the underlying iterator is exhausted
	p          *entry // the next pending entry, if not nil
	pDone      bool   // the pending entries are exhausted

	key, value []byte // the current pair, if valid
	kbuf, vbuf []byte // copies of the current pending pair
	valid      bool
	done       bool
	closed     bool
	err        error
}

var _ Iterator = (*bufferIter)(nil)

// Next implements [Iterator].
func (it *bufferIter) Next() bool {
	it.valid = false
	if it.closed {
		if it.err == nil {
			it.err = fmt.Errorf("store: buffer: iterator: %w", ErrClosed)
		}
		return false
	}
	if it.done {
		return false
	}
	reverse := it.pending.reverse
	for {
		for !it.uHave && !it.uDone {
			if it.under.Next() {
				if k := it.under.Key(); !coveredBy(it.ranges, k) {
					it.uKey, it.uVal, it.uHave = k, it.under.Value(), true
				}
			} else if err := it.under.Err(); err != nil {
				it.err = err
				it.finish()
				return false
			} else {
				it.uDone = true
			}
		}
		if it.p == nil && !it.pDone {
			if it.p = it.pending.next(); it.p == nil {
				it.pDone = true
			}
		}
		if it.p == nil {
			if !it.uHave {
				it.finish()
				return false
			}
			it.uHave = false
			it.key, it.value, it.valid = it.uKey, it.uVal, true
			return true
		}
		if it.uHave {
			// Take the underlying pair if it comes before the pending entry.
			uk, pk := it.uKey, it.p.key
			if (!reverse && string(uk) < pk) || (reverse && string(uk) > pk) {
				it.uHave = false
				it.key, it.value, it.valid = it.uKey, it.uVal, true
				return true
			}
			if string(uk) == pk {
				it.uHave = false // overridden by the pending entry
			}
		}
		e := it.p
		it.p = nil
		if e.del {
			continue
		}
		if it.kbuf == nil {
			it.kbuf = make([]byte, 0, len(e.key)) // the empty key is not nil
		}
		it.kbuf = append(it.kbuf[:0], e.key...)
		if it.vbuf == nil {
			it.vbuf = make([]byte, 0, len(e.val)) // an empty value is not nil
		}
		it.vbuf = append(it.vbuf[:0], e.val...)
		it.key, it.value, it.valid = it.kbuf, it.vbuf, true
		return true
	}
}

// finish ends the iteration and releases the snapshot.
func (it *bufferIter) finish() {
	it.done = true
	it.p, it.uHave = nil, false
	it.pending.release()
}

// Key implements [Iterator]. It returns nil when the iterator is not positioned on a pair.
func (it *bufferIter) Key() []byte {
	if !it.valid {
		return nil
	}
	return it.key
}

// Value implements [Iterator]. It returns nil when the iterator is not positioned on a
// pair.
func (it *bufferIter) Value() []byte {
	if !it.valid {
		return nil
	}
	return it.value
}

// Err implements [Iterator].
func (it *bufferIter) Err() error { return it.err }

// Close implements [Iterator]. It closes the underlying iterator and returns its error;
// closing twice is not an error.
func (it *bufferIter) Close() error {
	if it.closed {
		return nil
	}
	it.closed, it.valid = true, false
	it.finish()
	it.key, it.value, it.kbuf, it.vbuf, it.uKey, it.uVal = nil, nil, nil, nil, nil, nil
	return it.under.Close()
}
