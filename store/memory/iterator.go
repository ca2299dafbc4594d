package memory

import (
	"bytes"

	"github.com/google/btree"

	"github.com/kstream-go/kstream/store"
)

// Chunk sizes: an iterator copies item references out of its snapshot this many at a time
// (the B-tree only has callback iteration), starting small for short scans.
const (
	firstChunk = 16
	maxChunk   = 256
)

// iterator walks a read-only snapshot of a namespace in chunks.
type iterator struct {
	db *db
	ns *namespace
	// tree is the snapshot; it is never written, so reading it needs no lock.
	tree    *btree.BTreeG[item]
	lo, hi  []byte // copied bounds; nil is unbounded
	reverse bool

	buf       []item // the current chunk
	pos       int    // next item of buf to return
	chunk     int    // size of the next chunk
	last      []byte // key of the last item of the previous chunk, to resume after
	started   bool   // a chunk has been fetched
	exhausted bool   // no item is left in the snapshot beyond buf
	done      bool   // iteration is over

	valid      bool
	key, value []byte // copies of the current item, reused across Next calls

	err    error
	closed bool
}

var _ store.Iterator = (*iterator)(nil)

// Next implements [store.Iterator].
func (it *iterator) Next() bool {
	it.valid = false
	switch {
	case it.closed:
		if it.err == nil {
			it.err = it.db.errorf(it.ns, "iterator: %w", store.ErrClosed)
		}
		return false
	case it.done:
		return false
	case it.db.closed.Load():
		it.err = it.db.errorf(it.ns, "iterator: %w", store.ErrClosed)
		it.finish()
		return false
	}
	if it.pos == len(it.buf) {
		if it.exhausted {
			it.finish()
			return false
		}
		it.fill()
		if len(it.buf) == 0 {
			it.finish()
			return false
		}
	}
	cur := it.buf[it.pos]
	it.pos++
	// The empty key and an empty value are empty slices, never nil (as Get's values
	// are): nil would read as a Kafka null.
	if it.key == nil {
		it.key = []byte{}
	}
	if it.value == nil {
		it.value = []byte{}
	}
	it.key = append(it.key[:0], cur.key...)
	it.value = append(it.value[:0], cur.value...)
	it.valid = true
	return true
}

// finish ends the iteration and releases the snapshot.
func (it *iterator) finish() {
	it.done = true
	it.tree, it.buf = nil, nil
}

// fill fetches the next chunk of items from the snapshot.
//
// INVARIANT: on return, len(it.buf) < chunk implies it.exhausted.
func (it *iterator) fill() {
	if it.chunk == 0 {
		it.chunk = firstChunk
	} else if it.chunk < maxChunk {
		it.chunk *= 2
	}
	clear(it.buf)
	it.buf, it.pos = it.buf[:0], 0
	// skip is the key the walk starts at but must not return: the last key of the
	// previous chunk, or the exclusive upper bound of a reverse walk.
	var skip []byte
	if it.started {
		skip = it.last
	} else if it.reverse {
		skip = it.hi
	}
	add := func(x item) bool {
		if skip != nil && bytes.Equal(x.key, skip) {
			return true
		}
		if it.reverse {
			if it.lo != nil && bytes.Compare(x.key, it.lo) < 0 {
				return false
			}
		} else if it.hi != nil && bytes.Compare(x.key, it.hi) >= 0 {
			return false
		}
		it.buf = append(it.buf, x)
		return len(it.buf) < it.chunk
	}
	var start []byte
	if it.started {
		start = it.last
	} else if it.reverse {
		start = it.hi
	} else {
		start = it.lo
	}
	switch {
	case it.reverse && start == nil:
		it.tree.Descend(add)
	case it.reverse:
		it.tree.DescendLessOrEqual(item{key: start}, add)
	case start == nil:
		it.tree.Ascend(add)
	default:
		it.tree.AscendGreaterOrEqual(item{key: start}, add)
	}
	it.started = true
	if len(it.buf) < it.chunk {
		it.exhausted = true
	}
	if n := len(it.buf); n > 0 {
		it.last = it.buf[n-1].key // owned by the snapshot and never modified
	}
}

// Key implements [store.Iterator]. It returns nil when the iterator is not positioned on an
// item. The slice is valid until the next call of Next or Close.
func (it *iterator) Key() []byte {
	if !it.valid {
		return nil
	}
	return it.key
}

// Value implements [store.Iterator]. It returns nil when the iterator is not positioned on
// an item. The slice is valid until the next call of Next or Close.
func (it *iterator) Value() []byte {
	if !it.valid {
		return nil
	}
	return it.value
}

// Err implements [store.Iterator].
func (it *iterator) Err() error { return it.err }

// Close implements [store.Iterator]. Closing twice is not an error.
func (it *iterator) Close() error {
	it.closed, it.valid = true, false
	it.finish()
	it.key, it.value = nil, nil
	return nil
}
