package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
)

// Fresh prefixes: a Buffer can record the keys written under a key prefix that held no key
// when the recording began, so that a Get of a key under it that was never written since
// answers "absent" without reading the underlying backend. A window store records each new
// segment this way: an aggregation's first record of a window fetches a window that does not
// exist yet, which would otherwise be a point lookup of the storage engine per record (and
// one that only grows costlier as the engine's files pile up).
//
// Every write of the Buffer goes through write, which notes the key; Discard drops every
// recorded prefix (a discarded pending range deletion may uncover keys the recording
// assumed absent); a range deletion that covers a whole prefix drops it. Entries are 32-bit
// fingerprints of the keys' hashes: two keys may share one, which only sends a Get of the
// other to the underlying backend.

const (
	// maxFreshPrefixes is the number of prefixes a Buffer records at once: a window store
	// keeps a few live segments (Kafka Streams' default interval is half the retention), and
	// the newest get the fetches. A new prefix beyond it replaces the smallest.
	maxFreshPrefixes = 4
	// maxFreshKeys is the number of keys recorded under one prefix: beyond it, the prefix
	// gives up (every Get under it reads the underlying backend again). A prefix's table is
	// at most 2*maxFreshKeys fingerprints of 4 bytes: 2 MiB.
	maxFreshKeys = 1 << 18
	// minFreshSlots is the initial size of a prefix's table.
	minFreshSlots = 1 << 10
)

// freshPrefix is the record of the keys written under one prefix: an open-addressing set of
// fingerprints (0 is an empty slot), at most half full.
type freshPrefix struct {
	prefix []byte
	slots  []uint32
	n      int
	// full is set once more than maxFreshKeys keys were noted: the set is dropped and the
	// prefix answers nothing any more.
	full bool
}

// fingerprint returns the fingerprint of hash h: its low 32 bits, never 0.
func fingerprint(h uint64) uint32 {
	if fp := uint32(h); fp != 0 {
		return fp
	}
	return 1
}

// has reports whether fingerprint fp may have been noted.
func (f *freshPrefix) has(fp uint32) bool {
	if f.full {
		return true
	}
	mask := uint32(len(f.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch f.slots[i] {
		case fp:
			return true
		case 0:
			return false
		}
	}
}

// add notes fingerprint fp.
func (f *freshPrefix) add(fp uint32) {
	if f.full {
		return
	}
	if 2*(f.n+1) > len(f.slots) {
		if f.n+1 > maxFreshKeys {
			f.full, f.slots = true, nil
			return
		}
		old := f.slots
		f.slots = make([]uint32, 2*len(old))
		f.n = 0
		for _, x := range old {
			if x != 0 {
				f.insert(x)
			}
		}
	}
	f.insert(fp)
}

// insert puts fp in the table, which has room for it.
func (f *freshPrefix) insert(fp uint32) {
	mask := uint32(len(f.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch f.slots[i] {
		case fp:
			return
		case 0:
			f.slots[i] = fp
			f.n++
			return
		}
	}
}

// TrackFresh starts recording the keys written under prefix if the Buffer's contents (its
// pending writes over the underlying backend, as reads see them) hold no key under it now:
// from then on, a Get of a key under prefix that no write has touched since answers
// "absent" without reading the underlying backend. It reports whether prefix is recorded
// (already, or from now on). Recording assumes, as the read cache does, that the underlying
// backend is written only through the Buffer. It costs one range read of the prefix, and
// up to 8 bytes of heap per key written under the prefix, for at most 2^18 keys.
func (b *Buffer) TrackFresh(prefix []byte) (bool, error) {
	if len(prefix) == 0 {
		return false, nil
	}
	for _, f := range b.fresh {
		if bytes.Equal(f.prefix, prefix) {
			return !f.full, nil
		}
	}
	it, err := b.Range(prefix, prefixSuccessor(prefix))
	if err != nil {
		return false, fmt.Errorf("store: buffer: reading prefix %x: %w", prefix, err)
	}
	held := it.Next()
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return false, fmt.Errorf("store: buffer: reading prefix %x: %w", prefix, err)
	}
	if held {
		return false, nil
	}
	if b.fresh == nil {
		b.freshSeed = maphash.MakeSeed()
	}
	f := &freshPrefix{prefix: bytes.Clone(prefix), slots: make([]uint32, minFreshSlots)}
	if len(b.fresh) < maxFreshPrefixes {
		b.fresh = append(b.fresh, f)
		return true, nil
	}
	low := 0
	for i, g := range b.fresh {
		if bytes.Compare(g.prefix, b.fresh[low].prefix) < 0 {
			low = i
		}
	}
	b.fresh[low] = f
	return true, nil
}

// noteFresh records a write of key under every recorded prefix of it (prefixes may nest).
func (b *Buffer) noteFresh(key []byte) {
	var fp uint32
	for _, f := range b.fresh {
		if bytes.HasPrefix(key, f.prefix) {
			if fp == 0 {
				fp = fingerprint(maphash.Bytes(b.freshSeed, key))
			}
			f.add(fp)
		}
	}
}

// freshAbsent reports whether key is under a recorded prefix and was never written since
// that prefix's recording began: the Buffer holds no value of it, nor does the underlying
// backend.
func (b *Buffer) freshAbsent(key []byte) bool {
	var fp uint32
	for _, f := range b.fresh {
		if bytes.HasPrefix(key, f.prefix) {
			if fp == 0 {
				fp = fingerprint(maphash.Bytes(b.freshSeed, key))
			}
			if !f.has(fp) {
				return true
			}
		}
	}
	return false
}

// dropFresh stops recording the prefixes that the range deletion [from, to) covers whole
// (nil bounds unbounded): a window store's expired segments.
func (b *Buffer) dropFresh(from, to []byte) {
	kept := b.fresh[:0]
	for _, f := range b.fresh {
		succ := prefixSuccessor(f.prefix)
		whole := (from == nil || bytes.Compare(from, f.prefix) <= 0) &&
			(to == nil || succ != nil && bytes.Compare(succ, to) <= 0)
		if !whole {
			kept = append(kept, f)
		}
	}
	clear(b.fresh[len(kept):])
	b.fresh = kept
}
