package memory

import (
	"bytes"

	"github.com/google/btree"

	"github.com/kstream-go/kstream/store"
)

// backend is one namespace seen through one Open call.
type backend struct {
	db *db
	ns *namespace
}

var _ store.Backend = (*backend)(nil)

// checkOpen returns an error wrapping store.ErrClosed if the DB is closed.
func (b *backend) checkOpen(op string) error {
	if b.db.closed.Load() {
		return b.db.errorf(b.ns, "%s: %w", op, store.ErrClosed)
	}
	return nil
}

// Get implements [store.Backend]. The value is a copy owned by the caller.
func (b *backend) Get(key []byte) ([]byte, bool, error) {
	if err := b.checkOpen("get"); err != nil {
		return nil, false, err
	}
	b.ns.mu.RLock()
	it, ok := b.ns.mu.tree.Get(item{key: key})
	b.ns.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	// it.value is never modified after insertion, so copying outside the lock is safe.
	return append([]byte{}, it.value...), true, nil
}

// Set implements [store.Backend].
func (b *backend) Set(key, value []byte) error {
	if err := b.checkOpen("set"); err != nil {
		return err
	}
	it := newItem(key, value)
	b.ns.mu.Lock()
	b.ns.setLocked(it)
	b.ns.mu.Unlock()
	return nil
}

// Delete implements [store.Backend].
func (b *backend) Delete(key []byte) error {
	if err := b.checkOpen("delete"); err != nil {
		return err
	}
	b.ns.mu.Lock()
	b.ns.deleteLocked(key)
	b.ns.mu.Unlock()
	return nil
}

// DeleteRange implements [store.Backend]. It removes the keys one by one (a B-tree has no
// bulk deletion), under the namespace's lock.
func (b *backend) DeleteRange(from, to []byte) error {
	if err := b.checkOpen("delete range"); err != nil {
		return err
	}
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return nil
	}
	b.ns.mu.Lock()
	b.ns.deleteRangeLocked(from, to)
	b.ns.mu.Unlock()
	return nil
}

// deleteRangeLocked removes the keys in [from, to), nil bounds being unbounded.
func (ns *namespace) deleteRangeLocked(from, to []byte) {
	var doomed []item
	collect := func(x item) bool {
		if to != nil && bytes.Compare(x.key, to) >= 0 {
			return false
		}
		doomed = append(doomed, x)
		return true
	}
	if from == nil {
		ns.mu.tree.Ascend(collect)
	} else {
		ns.mu.tree.AscendGreaterOrEqual(item{key: from}, collect)
	}
	for _, x := range doomed {
		ns.mu.tree.Delete(x)
	}
	if len(doomed) > 0 {
		ns.mu.snap = nil
	}
}

func (ns *namespace) setLocked(it item) {
	ns.mu.tree.ReplaceOrInsert(it)
	ns.mu.snap = nil
}

func (ns *namespace) deleteLocked(key []byte) {
	if _, ok := ns.mu.tree.Delete(item{key: key}); ok {
		ns.mu.snap = nil
	}
}

// snapshot returns a read-only clone of the namespace's tree.
func (ns *namespace) snapshot() *btree.BTreeG[item] {
	// Clone modifies the copy-on-write state of the tree it is called on, so it needs
	// the write lock.
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.mu.snap == nil {
		ns.mu.snap = ns.mu.tree.Clone()
	}
	return ns.mu.snap
}

// Range implements [store.Backend].
func (b *backend) Range(from, to []byte) (store.Iterator, error) {
	return b.newIter("range", from, to, false)
}

// ReverseRange implements [store.Backend].
func (b *backend) ReverseRange(from, to []byte) (store.Iterator, error) {
	return b.newIter("reverse range", from, to, true)
}

// PrefixScan implements [store.Backend].
func (b *backend) PrefixScan(prefix []byte) (store.Iterator, error) {
	return b.newIter("prefix scan", prefix, prefixEnd(prefix), false)
}

// prefixEnd returns the smallest key greater than every key that starts with prefix, or
// nil (unbounded) if there is none (prefix is empty or all 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte{}, prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

func (b *backend) newIter(op string, from, to []byte, reverse bool) (store.Iterator, error) {
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	it := &iterator{db: b.db, ns: b.ns, reverse: reverse}
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		it.done = true // empty range
		return it, nil
	}
	if from != nil {
		it.lo = append([]byte{}, from...)
	}
	if to != nil {
		it.hi = append([]byte{}, to...)
	}
	it.tree = b.ns.snapshot()
	return it, nil
}

// NewBatch implements [store.Backend].
func (b *backend) NewBatch() store.Batch {
	return &batch{b: b, checkpoint: noBatchCheckpoint}
}

// ApproximateCount implements [store.Backend]; the count is exact.
func (b *backend) ApproximateCount() (int64, error) {
	if err := b.checkOpen("approximate count"); err != nil {
		return 0, err
	}
	b.ns.mu.RLock()
	n := b.ns.mu.tree.Len()
	b.ns.mu.RUnlock()
	return int64(n), nil
}

// Checkpoint implements [store.Backend].
func (b *backend) Checkpoint() (int64, error) {
	if err := b.checkOpen("checkpoint"); err != nil {
		return 0, err
	}
	b.ns.mu.RLock()
	cp := b.ns.mu.checkpoint
	b.ns.mu.RUnlock()
	return cp, nil
}

// noBatchCheckpoint marks a batch without a checkpoint; any offset below NoCheckpoint is
// rejected by Commit, so this value cannot be a real one.
const noBatchCheckpoint = store.NoCheckpoint - 1

// batch buffers copies of its writes and applies them under the namespace's lock.
type batch struct {
	b          *backend
	ops        []op
	checkpoint int64 // noBatchCheckpoint if unset
	badOffset  bool  // SetCheckpoint was given an offset below NoCheckpoint
	offset     int64 // the bad offset, for the error
}

type op struct {
	it     item
	delete bool
	// rangeEnd is the exclusive end of a range deletion (it.key is its start); nil bounds
	// are unbounded, with the *Nil fields telling nil from empty.
	rangeEnd       []byte
	isRange        bool
	fromNil, toNil bool
}

var _ store.Batch = (*batch)(nil)

// Set implements [store.Batch].
func (bt *batch) Set(key, value []byte) { bt.ops = append(bt.ops, op{it: newItem(key, value)}) }

// Delete implements [store.Batch].
func (bt *batch) Delete(key []byte) {
	bt.ops = append(bt.ops, op{it: item{key: append([]byte{}, key...)}, delete: true})
}

// DeleteRange implements [store.Batch].
func (bt *batch) DeleteRange(from, to []byte) {
	bt.ops = append(bt.ops, op{
		it:       item{key: append([]byte{}, from...)},
		rangeEnd: append([]byte{}, to...),
		isRange:  true, fromNil: from == nil, toNil: to == nil,
	})
}

// SetCheckpoint implements [store.Batch]. An offset below [store.NoCheckpoint] makes
// Commit fail.
func (bt *batch) SetCheckpoint(offset int64) {
	if offset < store.NoCheckpoint {
		bt.badOffset, bt.offset = true, offset
		return
	}
	bt.badOffset = false
	bt.checkpoint = offset
}

// Len implements [store.Batch].
func (bt *batch) Len() int { return len(bt.ops) }

// Commit implements [store.Batch]. The writes are applied in order under the namespace's
// lock, so no reader sees part of the batch. The batch is empty afterwards, also when
// Commit fails, in which case none of it is applied.
func (bt *batch) Commit() error {
	defer bt.Reset()
	b := bt.b
	if err := b.checkOpen("commit"); err != nil {
		return err
	}
	if bt.badOffset {
		return b.db.errorf(b.ns, "commit: invalid checkpoint %d", bt.offset)
	}
	if len(bt.ops) == 0 && bt.checkpoint == noBatchCheckpoint {
		return nil
	}
	ns := b.ns
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for _, o := range bt.ops {
		if o.isRange {
			from, to := o.it.key, o.rangeEnd
			if o.fromNil {
				from = nil
			}
			if o.toNil {
				to = nil
			}
			if from == nil || to == nil || bytes.Compare(from, to) < 0 {
				ns.deleteRangeLocked(from, to)
			}
			continue
		}
		if o.delete {
			ns.deleteLocked(o.it.key)
		} else {
			ns.setLocked(o.it)
		}
	}
	if bt.checkpoint != noBatchCheckpoint {
		ns.mu.checkpoint = bt.checkpoint
	}
	return nil
}

// Reset implements [store.Batch].
func (bt *batch) Reset() {
	clear(bt.ops) // drop references to the items, which the tree may own now
	bt.ops = bt.ops[:0]
	bt.checkpoint = noBatchCheckpoint
	bt.badOffset = false
}
