package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kstream-go/kstream/store"
)

// countSample is how many keys ApproximateCount counts exactly before it extrapolates.
const countSample = 10_000

// backend is one namespace seen through one Open call. As the store.Backend contract
// allows, it is used by one goroutine at a time, which lets it reuse a key buffer.
type backend struct {
	db        *db
	name      string
	partition int32
	prefix    [dataPrefixLen]byte
	end       []byte // successor(prefix): the exclusive upper bound of the namespace
	cpKey     []byte
	cp        *atomic.Int64  // the namespace's cached checkpoint (db.checkpointCell)
	gen       *atomic.Uint64 // the namespace's write count (db.genCell)
	scratch   []byte         // buffer for prefixed keys
	// lower and upper hold the bounds of the iterator being created (Pebble copies them).
	lower, upper []byte

	// idle is a Pebble iterator that the last iterator of this backend left for the next
	// one, with the namespace's write count idleGen when it was created: Pebble iterators
	// read the database as of their creation, so it is reused (with new bounds) only
	// while the namespace has not been written since, which saves creating an iterator
	// and opening its levels for every scan of a store that is read between commits.
	// Guarded by db.iters, which lists the backends that hold one (Close closes it).
	idle    *pebble.Iterator
	idleGen uint64
	// spareKey and spareValue are the buffers of the last iterator, for the next one.
	spareKey, spareValue []byte
}

var _ store.Backend = (*backend)(nil)

func newBackend(d *db, name string, partition int32, id uint32) *backend {
	b := &backend{db: d, name: name, partition: partition, prefix: dataKeyPrefix(id), cpKey: checkpointKey(id), cp: d.checkpointCell(id), gen: d.genCell(id)}
	b.end, _ = successor(b.prefix[:]) // the prefix starts with dataPrefix, so it has one
	return b
}

func (b *backend) errorf(op string, err error) error {
	return fmt.Errorf("pebble store: %s/%d: %s: %w", b.name, b.partition, op, err)
}

func (b *backend) closedError(op string) error { return b.errorf(op, store.ErrClosed) }

// key returns the Pebble key of user key k in b.scratch, valid until the next call.
func (b *backend) key(k []byte) []byte {
	b.scratch = append(append(b.scratch[:0], b.prefix[:]...), k...)
	return b.scratch
}

// dataKey returns a new Pebble key of user key k.
func (b *backend) dataKey(k []byte) []byte {
	return append(append(make([]byte, 0, dataPrefixLen+len(k)), b.prefix[:]...), k...)
}

// Get implements [store.Backend]. The value is copied out of Pebble.
func (b *backend) Get(key []byte) ([]byte, bool, error) {
	if !b.db.rlock() {
		return nil, false, b.closedError("get")
	}
	defer b.db.mu.RUnlock()
	v, closer, err := b.db.pdb.Get(b.key(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, b.errorf("get", err)
	}
	out := append([]byte{}, v...)
	if err := closer.Close(); err != nil {
		return nil, false, b.errorf("get", err)
	}
	return out, true, nil
}

// Set implements [store.Backend].
func (b *backend) Set(key, value []byte) (err error) {
	if !b.db.rlock() {
		return b.closedError("set")
	}
	defer b.db.mu.RUnlock()
	if err := b.db.failed(); err != nil {
		return b.errorf("set", err)
	}
	defer b.db.recoverFatal(&err)
	err = b.db.pdb.Set(b.key(key), value, b.db.wo)
	b.written()
	if err != nil {
		return b.errorf("set", err)
	}
	return nil
}

// Delete implements [store.Backend].
func (b *backend) Delete(key []byte) (err error) {
	if !b.db.rlock() {
		return b.closedError("delete")
	}
	defer b.db.mu.RUnlock()
	if err := b.db.failed(); err != nil {
		return b.errorf("delete", err)
	}
	defer b.db.recoverFatal(&err)
	err = b.db.pdb.Delete(b.key(key), b.db.wo)
	b.written()
	if err != nil {
		return b.errorf("delete", err)
	}
	return nil
}

// DeleteRange implements [store.Backend] with one Pebble range deletion: its cost does not
// depend on the number of keys it removes, whose space later compactions reclaim.
func (b *backend) DeleteRange(from, to []byte) (err error) {
	lower, upper, ok := b.rangeBounds(from, to)
	if !b.db.rlock() {
		return b.closedError("delete range")
	}
	defer b.db.mu.RUnlock()
	if !ok {
		return nil
	}
	if err := b.db.failed(); err != nil {
		return b.errorf("delete range", err)
	}
	defer b.db.recoverFatal(&err)
	err = b.db.pdb.DeleteRange(lower, upper, b.db.wo)
	b.written()
	if err != nil {
		return b.errorf("delete range", err)
	}
	return nil
}

// rangeBounds returns the Pebble keys bounding the user keys in [from, to), nil bounds
// being the namespace's; ok is false for an empty range.
func (b *backend) rangeBounds(from, to []byte) (lower, upper []byte, ok bool) {
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return nil, nil, false
	}
	lower, upper = b.prefix[:], b.end
	if from != nil {
		lower = b.dataKey(from)
	}
	if to != nil {
		upper = b.dataKey(to)
	}
	if bytes.Compare(lower, upper) >= 0 {
		return nil, nil, false // to is empty
	}
	return lower, upper, true
}

// Range implements [store.Backend].
func (b *backend) Range(from, to []byte) (store.Iterator, error) {
	return b.rangeIter("range", from, to, false)
}

// ReverseRange implements [store.Backend].
func (b *backend) ReverseRange(from, to []byte) (store.Iterator, error) {
	return b.rangeIter("reverse range", from, to, true)
}

func (b *backend) rangeIter(op string, from, to []byte, reverse bool) (store.Iterator, error) {
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return b.emptyIter(op)
	}
	lower, upper := b.prefix[:], b.end
	if from != nil {
		b.lower = append(append(b.lower[:0], b.prefix[:]...), from...)
		lower = b.lower
	}
	if to != nil {
		b.upper = append(append(b.upper[:0], b.prefix[:]...), to...)
		upper = b.upper
	}
	if bytes.Compare(lower, upper) >= 0 {
		return b.emptyIter(op)
	}
	return b.newIter(op, lower, upper, reverse)
}

// emptyIter returns an iterator of an empty range.
func (b *backend) emptyIter(op string) (store.Iterator, error) {
	if b.db.isClosed() {
		return nil, b.closedError(op)
	}
	return &iterator{b: b, done: true}, nil
}

// PrefixScan implements [store.Backend].
func (b *backend) PrefixScan(prefix []byte) (store.Iterator, error) {
	lower := b.dataKey(prefix)
	upper, err := successor(lower)
	if err != nil { // unreachable: lower starts with dataPrefix
		return nil, b.errorf("prefix scan", err)
	}
	return b.newIter("prefix scan", lower, upper, false)
}

func (d *db) isClosed() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.mu.closed
}

// newIter returns an iterator over the Pebble keys in [lower, upper), which must be within
// the namespace (Pebble copies them). It reuses the backend's idle Pebble iterator if the
// namespace has not been written since that one was created.
func (b *backend) newIter(op string, lower, upper []byte, reverse bool) (store.Iterator, error) {
	if !b.db.rlock() {
		return nil, b.closedError(op)
	}
	defer b.db.mu.RUnlock()
	gen := b.gen.Load()
	it := &iterator{b: b, reverse: reverse, gen: gen}
	var stale *pebble.Iterator
	b.db.iters.Lock()
	if b.idle != nil {
		if b.idleGen == gen {
			it.pit = b.idle
		} else {
			stale = b.idle
		}
		b.idle = nil
		delete(b.db.iters.idle, b)
	}
	it.key, it.value, b.spareKey, b.spareValue = b.spareKey, b.spareValue, nil, nil
	b.db.iters.Unlock()
	if stale != nil {
		if err := stale.Close(); err != nil {
			return nil, b.errorf(op, err)
		}
	}
	if it.pit != nil {
		it.pit.SetBounds(lower, upper)
	} else {
		pit, err := b.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return nil, b.errorf(op, err)
		}
		it.pit = pit
	}
	b.db.iters.Lock()
	b.db.iters.m[it] = struct{}{}
	b.db.iters.Unlock()
	return it, nil
}

// written notes a write to the namespace, after Pebble applied it: the idle iterator, if
// any, no longer reads the namespace as it is, and is closed.
func (b *backend) written() {
	b.gen.Add(1)
	b.db.iters.Lock()
	stale := b.idle
	b.idle = nil
	delete(b.db.iters.idle, b)
	b.db.iters.Unlock()
	if stale != nil {
		_ = stale.Close() // an iterator that only read; its error is of no use to the write
	}
}

// NewBatch implements [store.Backend].
func (b *backend) NewBatch() store.Batch { return &batch{b: b} }

// ApproximateCount implements [store.Backend]. It counts the first 10 000 keys exactly, so
// smaller namespaces get an exact count. Beyond that it extrapolates from the on-disk size
// of the namespace relative to the on-disk size of the span of those first keys (Pebble's
// EstimateDiskUsage, at data-block granularity); keys still only in memtables are then not
// counted. When none of the first keys are on disk yet, it counts every key (a full scan,
// bounded in practice by the memtables' size).
func (b *backend) ApproximateCount() (int64, error) {
	const op = "approximate count"
	if !b.db.rlock() {
		return 0, b.closedError(op)
	}
	defer b.db.mu.RUnlock()
	pit, err := b.db.pdb.NewIter(&pebble.IterOptions{LowerBound: b.prefix[:], UpperBound: b.end})
	if err != nil {
		return 0, b.errorf(op, err)
	}
	var n int64
	valid := pit.First()
	for ; valid && n < countSample; valid = pit.Next() {
		n++
	}
	if valid {
		// n == countSample and there are more keys: pit is on key number n+1.
		sampleEnd := append([]byte(nil), pit.Key()...)
		all, err1 := b.db.pdb.EstimateDiskUsage(b.prefix[:], b.end)
		sample, err2 := b.db.pdb.EstimateDiskUsage(b.prefix[:], sampleEnd)
		if err := errors.Join(err1, err2); err != nil {
			_ = pit.Close()
			return 0, b.errorf(op, err)
		}
		if sample > 0 {
			_ = pit.Close()
			est := int64(float64(n) * float64(all) / float64(sample))
			return max(est, n+1), nil
		}
		for ; valid; valid = pit.Next() {
			n++
		}
	}
	if err := pit.Close(); err != nil {
		return 0, b.errorf(op, err)
	}
	return n, nil
}

// Checkpoint implements [store.Backend].
func (b *backend) Checkpoint() (int64, error) {
	if !b.db.rlock() {
		return 0, b.closedError("checkpoint")
	}
	defer b.db.mu.RUnlock()
	if cp := b.cp.Load(); cp != cpUnknown {
		return cp, nil
	}
	cp := store.NoCheckpoint
	v, closer, err := b.db.pdb.Get(b.cpKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, b.errorf("checkpoint", err)
	default:
		cp, err = decodeCheckpoint(v)
		if err = errors.Join(err, closer.Close()); err != nil {
			return 0, b.errorf("checkpoint", err)
		}
	}
	// Only if no write has set the cell meanwhile (its value is then newer than ours).
	b.cp.CompareAndSwap(cpUnknown, cp)
	return cp, nil
}

// batch is a store.Batch over one Pebble batch, which holds the prefixed keys and copies of
// the values; the checkpoint is added to it at Commit.
type batch struct {
	b          *backend
	pb         *pebble.Batch // nil until the first write
	n          int
	checkpoint int64
	hasCP      bool
	badOffset  bool
	offset     int64
	err        error // from building the Pebble batch
}

var _ store.Batch = (*batch)(nil)

func (bt *batch) pebbleBatch() *pebble.Batch {
	if bt.pb == nil {
		bt.pb = bt.b.db.pdb.NewBatch() // allocation only; safe on a closed DB
	}
	return bt.pb
}

// Set implements [store.Batch].
func (bt *batch) Set(key, value []byte) {
	op := bt.pebbleBatch().SetDeferred(dataPrefixLen+len(key), len(value))
	copy(op.Key, bt.b.prefix[:])
	copy(op.Key[dataPrefixLen:], key)
	copy(op.Value, value)
	bt.finish(op)
}

// Delete implements [store.Batch].
func (bt *batch) Delete(key []byte) {
	op := bt.pebbleBatch().DeleteDeferred(dataPrefixLen + len(key))
	copy(op.Key, bt.b.prefix[:])
	copy(op.Key[dataPrefixLen:], key)
	bt.finish(op)
}

// DeleteRange implements [store.Batch] with a Pebble range deletion in the batch.
func (bt *batch) DeleteRange(from, to []byte) {
	lower, upper, ok := bt.b.rangeBounds(from, to)
	if !ok {
		bt.n++ // a write that removes nothing
		return
	}
	if err := bt.pebbleBatch().DeleteRange(lower, upper, nil); err != nil && bt.err == nil {
		bt.err = err
	}
	bt.n++
}

func (bt *batch) finish(op *pebble.DeferredBatchOp) {
	if err := op.Finish(); err != nil && bt.err == nil {
		bt.err = err
	}
	bt.n++
}

// SetCheckpoint implements [store.Batch]. An offset below [store.NoCheckpoint] makes
// Commit fail.
func (bt *batch) SetCheckpoint(offset int64) {
	if offset < store.NoCheckpoint {
		bt.badOffset, bt.offset = true, offset
		return
	}
	bt.badOffset = false
	bt.checkpoint, bt.hasCP = offset, true
}

// Len implements [store.Batch].
func (bt *batch) Len() int { return bt.n }

// Commit implements [store.Batch]: the writes and the checkpoint are applied as one
// Pebble batch, synced if [Options.Sync] is set. The batch is empty afterwards, also when
// Commit fails, in which case none of it is applied.
func (bt *batch) Commit() (err error) {
	defer bt.Reset()
	b := bt.b
	if !b.db.rlock() {
		return b.closedError("commit")
	}
	defer b.db.mu.RUnlock()
	if err := b.db.failed(); err != nil {
		return b.errorf("commit", err)
	}
	defer b.db.recoverFatal(&err)
	switch {
	case bt.badOffset:
		return b.errorf("commit", fmt.Errorf("invalid checkpoint %d", bt.offset))
	case bt.err != nil:
		return b.errorf("commit", bt.err)
	case bt.n == 0 && !bt.hasCP:
		return nil
	}
	pb := bt.pebbleBatch()
	if bt.hasCP {
		if err := pb.Set(b.cpKey, encodeCheckpoint(bt.checkpoint), nil); err != nil {
			return b.errorf("commit", err)
		}
	}
	err = b.db.pdb.Apply(pb, b.db.wo)
	if bt.n > 0 {
		b.written()
	}
	if err != nil {
		return b.errorf("commit", err)
	}
	if bt.hasCP {
		b.cp.Store(bt.checkpoint)
	}
	return nil
}

// Reset implements [store.Batch].
func (bt *batch) Reset() {
	if bt.pb != nil {
		// Close returns the batch to Pebble's pool; it is safe after Apply (Pebble keeps
		// its own reference while it still needs the data).
		_ = bt.pb.Close()
		bt.pb = nil
	}
	bt.n, bt.hasCP, bt.badOffset, bt.err = 0, false, false, nil
}
