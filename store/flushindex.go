package store

import (
	"hash/maphash"
	"unsafe"
)

// flushIndexKeys is the number of keys a flushIndex remembers per generation: it keeps two
// generations, about 40 bytes a key, so at most about 1.3 MiB a store.
const flushIndexKeys = 1 << 14

// flushIndex bounds, for each key, the segment timestamps (window starts) of the entries
// that a segmented store over a [Buffer] holds in the Buffer's underlying backend, so that
// a scan of a key's recent windows that the bound shows to be newer than anything flushed
// reads the Buffer's pending writes alone instead of seeking the storage engine (a
// stream-stream join fetches the other side's windows of every record's key, usually
// around the present; the key's previous records, if any, are often older than the join
// window).
//
// Keys are remembered by a 64-bit hash: keys whose hashes collide share one bound, the
// larger, which is still a bound of each. The index is an upper bound, never exact: a put
// raises its key's pending bound, which becomes the flushed bound once the Buffer has
// flushed since (a Buffer's flush count tells); the entries written before the index
// started (other processes, restoration) are bounded by the stream time then (floor),
// and when a generation of keys is dropped to bound the memory, floor rises to the largest
// bound it held. Discarded writes, deletions and expired segments only leave the bounds
// larger than needed.
type flushIndex struct {
	ok       bool
	keys     int // keys per generation: flushIndexKeys
	seed     maphash.Seed
	floor    int64
	cur, old map[uint64]flushMark
	// curMax and oldMax are the largest timestamps noted in cur and old.
	curMax, oldMax int64
	// unknownGen is the Buffer's flush count when the index started or last dropped a
	// generation: until the next flush, a key it does not hold may have pending writes
	// it does not know, bounded by floor.
	unknownGen uint64
}

// flushMark is the bound of the keys of one hash: the largest timestamp put before the
// Buffer's flush number gen (flushed, or discarded), and the largest put since (pending).
type flushMark struct {
	flushed, pending int64
	gen              uint64
}

// start starts the index at stream time st, the Buffer's flush count being gen: every
// entry already written has a timestamp of at most st.
func (x *flushIndex) start(st int64, gen uint64) {
	x.ok, x.keys, x.seed, x.floor, x.unknownGen = true, flushIndexKeys, maphash.MakeSeed(), st, gen
	x.cur, x.old = make(map[uint64]flushMark), nil
	x.curMax, x.oldMax = NoTimestamp, NoTimestamp
}

func (x *flushIndex) hash(kb []byte) uint64 { return maphash.Bytes(x.seed, kb) }

// note records a put of serialized key kb at timestamp ts while the Buffer's flush count is
// gen.
func (x *flushIndex) note(kb []byte, ts int64, gen uint64) {
	h := x.hash(kb)
	m, ok := x.cur[h]
	if !ok {
		if m, ok = x.old[h]; ok {
			x.curMax = max(x.curMax, m.flushed, m.pending)
		} else {
			m = flushMark{flushed: NoTimestamp, pending: NoTimestamp, gen: gen}
			if gen == x.unknownGen {
				// The key may have pending writes from before the index started or
				// from a generation dropped since the last flush: floor bounds them.
				m.pending = x.floor
			}
		}
	}
	if m.gen != gen {
		m.flushed, m.pending = max(m.flushed, m.pending), NoTimestamp
	}
	m.pending, m.gen = max(m.pending, ts), gen
	x.curMax = max(x.curMax, ts)
	if !ok && len(x.cur) >= x.keys {
		// Drop the older generation: its keys are bounded by floor from now on.
		x.floor, x.unknownGen = max(x.floor, x.oldMax), gen
		x.old, x.oldMax = x.cur, x.curMax
		x.cur, x.curMax = make(map[uint64]flushMark, x.keys), max(m.flushed, m.pending)
	}
	x.cur[h] = m
}

// bounds returns, for serialized key kb, a timestamp that no flushed entry of the key
// exceeds and one that no pending write of it exceeds (NoTimestamp if it has none), the
// Buffer's flush count being gen. The pending bound assumes that the Buffer is written
// through the store only.
func (x *flushIndex) bounds(kb []byte, gen uint64) (flushed, pending int64) {
	h := x.hash(kb)
	m, ok := x.cur[h]
	if !ok {
		m, ok = x.old[h]
	}
	switch {
	case !ok && gen == x.unknownGen:
		// Written before the index started or in a dropped generation, if at all.
		return x.floor, x.floor
	case !ok:
		return x.floor, NoTimestamp
	case m.gen == gen:
		return max(m.flushed, x.floor), m.pending
	}
	return max(m.flushed, m.pending, x.floor), NoTimestamp
}

// unsafeBytes returns the bytes of s without a copy, for reading only.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// pendingBound returns a timestamp that no pending write of serialized key kb exceeds
// (NoTimestamp if it has none), the Buffer's flush count being gen, assuming that the
// Buffer is written through the store only.
func (x *flushIndex) pendingBound(kb []byte, gen uint64) int64 {
	h := x.hash(kb)
	m, ok := x.cur[h]
	if !ok {
		m, ok = x.old[h]
	}
	switch {
	case ok && m.gen == gen:
		return m.pending
	case !ok && gen == x.unknownGen:
		return x.floor // written before the index started or in a dropped generation
	}
	return NoTimestamp
}
