package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/btree"
)

// errFrozen is Flush's error while a frozen generation is not released.
var errFrozen = errors.New("store: buffer: flush while a frozen generation of writes is being written")

// Frozen is a generation of a [Buffer]'s pending writes cut by [Buffer.Freeze], so that they
// reach the underlying backend while the Buffer goes on taking writes: a commit that does
// not stop processing. Its Write may run on any goroutine, once, while the Buffer's owner
// keeps reading and writing the Buffer; the owner then calls [Buffer.Release] if Write
// succeeded, or [Buffer.Unfreeze] if it failed or never ran.
//
// Until then, the frozen writes stay pending for the Buffer's reads, under the writes made
// since the freeze: Get, iterators and the other reads see them whether or not Write has
// reached the underlying backend yet, since a frozen write hides whatever the underlying
// backend holds for its key, before Write as after it.
type Frozen struct {
	b *Buffer
	// tree holds the frozen entries, ranges the frozen range deletions (older than the
	// entries they cover). Neither changes after the freeze: the entries' generation is at
	// most maxGen, below the Buffer's, so the Buffer never writes them in place.
	tree   *btree.BTreeG[*entry]
	ranges []keyRange
	maxGen uint64

	cp               int64 // a batch's pending checkpoint, if hasCP
	hasCP            bool
	size, sets, dels int
	batch            Batch
	written          bool
}

// Freeze cuts the Buffer's pending writes (entries, range deletions and a batch's pending
// checkpoint) into a frozen generation, to be written by the Frozen's Write on any
// goroutine while the Buffer goes on; writes made after Freeze are the next generation's.
// At most one generation is frozen at a time: Freeze fails until the previous one is
// released or unfrozen, and so does Flush.
//
// Like the Buffer's other methods, Freeze runs on the Buffer's goroutine.
func (b *Buffer) Freeze() (*Frozen, error) {
	if b.frozen != nil {
		return nil, errors.New("store: buffer: freeze while a frozen generation of writes is being written")
	}
	f := &Frozen{b: b, tree: b.tree, ranges: b.ranges, maxGen: b.gen, cp: b.cp, hasCP: b.hasCP,
		size: b.size, sets: b.sets, dels: b.dels, batch: b.under.NewBatch()}
	b.frozen = f
	b.tree = btree.NewG(bufferDegree, entryLess)
	b.snap = nil
	b.gen++ // the frozen entries must no longer change in place
	b.ranges, b.hasCP = nil, false
	b.size, b.sets, b.dels = 0, 0, 0
	b.last = nil
	b.flushes++ // a cut: see getCut
	return f, nil
}

// getCut reads key as of the last cut (Flush or Freeze), without the writes made since: from
// the frozen generation if it has the key (or a range deletion of it), else from the
// underlying backend. A reader that bounds what was written before the cut (a segmented
// store's flushed stream time) reads it this way, whether or not the frozen generation's
// Write has reached the underlying backend yet. The value is a copy.
func (b *Buffer) getCut(key []byte) ([]byte, bool, error) {
	if f := b.frozen; f != nil {
		if e, ok := f.tree.Get(&entry{key: string(key)}); ok {
			if e.del {
				return nil, false, nil
			}
			return append([]byte{}, e.val...), true, nil
		}
		if coveredBy(f.ranges, key) {
			return nil, false, nil
		}
	}
	return b.under.Get(key)
}

// isFrozen reports whether e is an entry of the frozen generation.
func (b *Buffer) isFrozen(e *entry) bool {
	return e != nil && b.frozen != nil && e.gen <= b.frozen.maxGen
}

// Len returns the number of frozen writes: values, deletion markers and range deletions.
func (f *Frozen) Len() int { return f.tree.Len() + len(f.ranges) }

// Write writes the frozen range deletions, then the frozen entries, to the underlying
// backend in one batch, with checkpoint if it is at least 0 (else the pending checkpoint of
// a batch of the Buffer, if one was frozen). It may run on any goroutine, concurrently with
// the Buffer's owner; it reads only the frozen generation, which nothing changes. It runs
// once: a second call fails.
func (f *Frozen) Write(checkpoint int64) error {
	if f.written {
		return errors.New("store: buffer: frozen generation written twice")
	}
	f.written = true
	cp, hasCP := checkpoint, checkpoint >= 0
	if !hasCP && f.hasCP {
		cp, hasCP = f.cp, true
	}
	if f.tree.Len() == 0 && len(f.ranges) == 0 && !hasCP {
		return nil
	}
	bt := f.batch
	for _, r := range f.ranges {
		bt.DeleteRange(r.from, r.to)
	}
	var key []byte
	f.tree.Ascend(func(e *entry) bool {
		key = append(key[:0], e.key...)
		if e.del {
			bt.Delete(key)
		} else {
			bt.Set(key, e.val)
		}
		return true
	})
	if hasCP {
		bt.SetCheckpoint(cp)
	}
	if err := bt.Commit(); err != nil {
		bt.Reset()
		return fmt.Errorf("store: buffer: write of a frozen generation of %d entries and %d range deletions: %w", f.tree.Len(), len(f.ranges), err)
	}
	return nil
}

// Release ends f after its Write succeeded: its writes are the underlying backend's now,
// so they stop being pending (a write cached by the read cache, if it has one and caches
// writes, as Flush caches the writes it makes: see cacheWrites). It runs on the Buffer's
// goroutine.
func (b *Buffer) Release(f *Frozen) {
	if b.frozen != f {
		return
	}
	cache := b.cacheMax > 0 && b.cacheWrites(f.tree.Len())
	f.tree.Ascend(func(e *entry) bool {
		s := e.s
		switch {
		case s.p == e:
			b.unpend(s)
			if cache {
				b.setCached(s, e.val, e.del, false)
			} else {
				b.remove(s)
			}
		case s.p != nil && s.p.prev == e:
			// Replaced since the freeze: the newer entry stays pending, and the underlying
			// value its slot caches is e's now (or, not cached, none).
			s.p.prev = nil
			if cache {
				b.setCached(s, e.val, e.del, false)
			} else if s.known {
				b.uncache(s)
			}
		}
		// Otherwise e was hidden since by a range deletion, which took its slot out of
		// the maps (it would be neither cached nor pending) unless a later write made
		// it pending again: the range is younger than e, and pending.
		return true
	})
	b.frozen, b.hidden, b.last = nil, nil, nil
	if b.cacheMax > 0 {
		b.fit()
	}
}

// Unfreeze ends f without its writes having reached the underlying backend (its Write
// failed, or never ran): they become pending writes of the Buffer again, older than those
// made since the freeze, so that the next Flush or Freeze writes them. It runs on the
// Buffer's goroutine.
func (b *Buffer) Unfreeze(f *Frozen) {
	if b.frozen != f {
		return
	}
	b.snap = nil
	f.tree.Ascend(func(e *entry) bool {
		s := e.s
		switch {
		case s.p == e:
			b.tree.ReplaceOrInsert(e) // no newer entry of its key: it would be s.p
			b.count(e)
		case s.p != nil && s.p.prev == e:
			s.p.prev = nil
		}
		return true
	})
	if len(f.ranges) > 0 {
		b.ranges = append(slices.Clip(f.ranges), b.ranges...)
	}
	if !b.hasCP && f.hasCP {
		b.cp, b.hasCP = f.cp, true
	}
	b.frozen, b.hidden, b.last = nil, nil, nil
}

// holds reports whether s is in one of the Buffer's maps.
func (b *Buffer) holds(s *slot) bool {
	if s.cgen == b.cgen {
		return b.m[s.key] == s
	}
	return b.old[s.key] == s
}

// repend makes e, an entry of the frozen generation, the pending entry of its slot again,
// putting the slot back in m if it left the maps.
func (b *Buffer) repend(e *entry) {
	s := e.s
	if !b.holds(s) {
		s.val, s.cost, s.known, s.absent = nil, 0, false, false
		s.cgen = b.cgen
		b.m[s.key] = s
	} else if s.cgen != b.cgen {
		b.promote(s)
	}
	s.p = e
	b.pendCur++ // s is in m
}

// hideFrozen detaches the frozen entries in the range r, a range deletion made since the
// freeze, from their slots: r is younger and hides them.
func (b *Buffer) hideFrozen(r keyRange) {
	visit := func(e *entry) bool {
		if r.to != nil && e.key >= string(r.to) {
			return false
		}
		if e.s.p == e {
			b.unpend(e.s)
			b.hidden = append(b.hidden, e)
			if !e.s.known {
				b.remove(e.s) // repend puts it back
			}
		}
		return true
	}
	if r.from == nil {
		b.frozen.tree.Ascend(visit)
	} else {
		b.frozen.tree.AscendGreaterOrEqual(&entry{key: string(r.from)}, visit)
	}
}

// discardSinceFreeze is Discard with a frozen generation: the entries and ranges written
// since the freeze go, and the frozen entries they replaced or hid are pending again.
func (b *Buffer) discardSinceFreeze() {
	b.tree.Ascend(func(e *entry) bool {
		b.unpend(e.s)
		if b.isFrozen(e.prev) {
			b.repend(e.prev)
		} else if !e.s.known {
			b.remove(e.s)
		}
		e.prev = nil
		return true
	})
	for _, e := range b.hidden {
		if e.s.p == nil {
			b.repend(e)
		}
	}
	b.hidden = nil
	b.clear()
	b.discards++
}

// layer returns under with the frozen writes in [from, to) over it, for an iterator of the
// Buffer (c holds the bounds); under itself if none is there.
func (f *Frozen) layer(under Iterator, c pendingCursor, from, to []byte) Iterator {
	ranges := rangesIn(f.ranges, from, to)
	if len(ranges) == 0 && !pendingIn(f.tree, &c) {
		return under
	}
	c.tree = f.tree
	return &bufferIter{under: under, pending: c, ranges: ranges}
}

// ascendBoth is ascendPending's walk with a frozen generation: the pending values from
// b.pivot's key to to, of the live entries and of the frozen ones still pending (not
// replaced or hidden since), in key order.
func (b *Buffer) ascendBoth(to []byte, fn func(key string, val []byte) bool) {
	var frozen []*entry
	b.frozen.tree.AscendGreaterOrEqual(b.pivot, func(e *entry) bool {
		if e.key >= string(to) {
			return false
		}
		if e.s.p == e && !e.del {
			frozen = append(frozen, e)
		}
		return true
	})
	i, stopped := 0, false
	b.tree.AscendGreaterOrEqual(b.pivot, func(e *entry) bool {
		if e.key >= string(to) {
			return false
		}
		for ; i < len(frozen) && frozen[i].key < e.key; i++ {
			if !fn(frozen[i].key, frozen[i].val) {
				stopped = true
				return false
			}
		}
		if !e.del && !fn(e.key, e.val) {
			stopped = true
			return false
		}
		return true
	})
	for ; !stopped && i < len(frozen); i++ {
		if !fn(frozen[i].key, frozen[i].val) {
			return
		}
	}
}
