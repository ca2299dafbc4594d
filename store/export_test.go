package store

import "fmt"

// CheckInvariants checks the Buffer's bookkeeping of its slots against its pending entries
// and read cache (tests only).
func (b *Buffer) CheckInvariants() error {
	pending := b.tree.Len()
	var err error
	if f := b.frozen; f != nil {
		f.tree.Ascend(func(e *entry) bool {
			switch {
			case e.gen > f.maxGen:
				err = fmt.Errorf("frozen entry %q of generation %d, above the freeze's %d", e.key, e.gen, f.maxGen)
			case e.s.p == e:
				pending++ // still the pending entry of its slot
				if !b.holds(e.s) {
					err = fmt.Errorf("frozen entry %q: pending, its slot in no map", e.key)
				}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if b.pendCur+b.pendOld != pending {
		return fmt.Errorf("pending counters %d+%d, %d pending entries", b.pendCur, b.pendOld, pending)
	}
	b.tree.Ascend(func(e *entry) bool {
		s := e.s
		switch {
		case e.prev != nil && (!b.isFrozen(e.prev) || e.prev.s != s):
			err = fmt.Errorf("pending entry %q: its replaced entry is not a frozen one of its slot", e.key)
		case s == nil || s.p != e:
			err = fmt.Errorf("pending entry %q: its slot does not point back to it", e.key)
		case s.key != e.key:
			err = fmt.Errorf("pending entry %q: slot of key %q", e.key, s.key)
		case s.cgen == b.cgen && b.m[s.key] != s, s.cgen == b.cgen-1 && b.old[s.key] != s:
			err = fmt.Errorf("pending entry %q: slot not in the map of its generation", e.key)
		case s.cgen != b.cgen && s.cgen != b.cgen-1:
			err = fmt.Errorf("pending entry %q: slot of generation %d, buffer at %d", e.key, s.cgen, b.cgen)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	cur, old, pc, po := 0, 0, 0, 0
	for gen, mp := range []map[string]*slot{b.m, b.old} {
		for k, s := range mp {
			switch {
			case s.key != k:
				return fmt.Errorf("slot of key %q under %q", s.key, k)
			case gen == 0 && s.cgen != b.cgen, gen == 1 && s.cgen != b.cgen-1:
				return fmt.Errorf("slot %q: generation %d in map of generation %d", k, s.cgen, b.cgen-uint32(gen))
			case !s.known && s.p == nil:
				return fmt.Errorf("slot %q: neither cached nor pending", k)
			case !s.known && s.cost != 0, s.known && int(s.cost) != slotCost(s.key, s.val):
				return fmt.Errorf("slot %q: cost %d, want %d", k, s.cost, slotCost(s.key, s.val))
			}
			if gen == 0 {
				cur += int(s.cost)
				if s.p != nil {
					pc++
				}
			} else {
				old += int(s.cost)
				if s.p != nil {
					po++
				}
			}
		}
	}
	if cur != b.cleanSize || old != b.oldSize {
		return fmt.Errorf("cache sizes %d and %d, slots cost %d and %d", b.cleanSize, b.oldSize, cur, old)
	}
	if pc != b.pendCur || po != b.pendOld {
		return fmt.Errorf("pending counters %d and %d, slots %d and %d", b.pendCur, b.pendOld, pc, po)
	}
	if b.cacheMax > 0 && b.CacheSize() > b.bound() {
		return fmt.Errorf("cache generations of %d and %d bytes (and %d of old's map), bound %d", cur, old, b.oldGone, b.bound())
	}
	if len(b.old) == 0 && b.oldGone != 0 {
		return fmt.Errorf("old is empty, its map still counted (%d bytes)", b.oldGone)
	}
	if b.last != nil && b.m[b.last.key] != b.last {
		return fmt.Errorf("last slot %q not in the current generation", b.last.key)
	}
	return nil
}

// CacheWritesByReads makes b's cuts cache their writes only while it reads values back,
// as a segmented store's Buffer does (tests only).
func (b *Buffer) CacheWritesByReads() *Buffer { b.cacheWritesByReads(); return b }
