package pebble

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kstream-go/kstream/store"
)

// iterator is a store.Iterator over a bounded Pebble iterator. Keys and values are copied
// into buffers owned by the iterator, so the caller may modify what it returns.
type iterator struct {
	b       *backend
	reverse bool
	gen     uint64 // the namespace's write count when pit was created or reused

	// mu serializes the iterator's use by its goroutine with DB.Close, which closes the
	// iterators still open.
	mu sync.Mutex
	// pit is nil once the iteration is over (exhausted, failed, closed, or closed by
	// DB.Close); the iterator is then no longer tracked by the DB.
	pit        *pebble.Iterator
	started    bool
	done       bool
	closed     bool
	valid      bool
	key, value []byte
	err        error
}

var _ store.Iterator = (*iterator)(nil)

// Next implements [store.Iterator].
func (it *iterator) Next() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.valid = false
	if it.closed {
		if it.err == nil {
			it.err = it.b.closedError("iterator")
		}
		return false
	}
	if it.pit == nil {
		return false
	}
	var ok bool
	switch {
	case !it.started && it.reverse:
		ok = it.pit.Last()
	case !it.started:
		ok = it.pit.First()
	case it.reverse:
		ok = it.pit.Prev()
	default:
		ok = it.pit.Next()
	}
	it.started = true
	if !ok {
		it.setErr(it.pit.Error())
		it.setErr(it.releaseLocked(it.err == nil))
		return false
	}
	v, err := it.pit.ValueAndErr()
	if err != nil {
		it.setErr(err)
		it.setErr(it.releaseLocked(false))
		return false
	}
	// The empty key and an empty value are empty slices, never nil (as Get's values
	// are): nil would read as a Kafka null.
	if it.key == nil {
		it.key = []byte{}
	}
	if it.value == nil {
		it.value = []byte{}
	}
	it.key = append(it.key[:0], it.pit.Key()[dataPrefixLen:]...)
	it.value = append(it.value[:0], v...)
	it.valid = true
	return true
}

func (it *iterator) setErr(err error) {
	if err != nil && it.err == nil {
		it.err = it.b.errorf("iterator", err)
	}
}

// releaseLocked stops tracking the Pebble iterator, if any, and closes it, or, if reuse
// is set, leaves it to the backend for its next iterator (backend.idle) when the
// namespace has not been written since it was created and the backend has none. it.mu
// must be held.
func (it *iterator) releaseLocked(reuse bool) error {
	it.done = true
	if it.pit == nil {
		return nil
	}
	pit, b := it.pit, it.b
	it.pit = nil
	b.db.iters.Lock()
	delete(b.db.iters.m, it)
	if reuse && !b.db.iters.closed && b.idle == nil && b.gen.Load() == it.gen {
		b.idle, b.idleGen, pit = pit, it.gen, nil
		b.db.iters.idle[b] = struct{}{}
	}
	b.db.iters.Unlock()
	if pit == nil {
		return nil
	}
	return pit.Close()
}

// closeByDB is called by DB.Close for an iterator still open: later calls of Next return
// false and Err an error wrapping store.ErrClosed.
func (it *iterator) closeByDB() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.pit == nil {
		return nil
	}
	err := it.releaseLocked(false)
	it.valid = false
	if it.err == nil {
		it.err = it.b.closedError("iterator")
	}
	if err != nil {
		return it.b.errorf("closing iterator", err)
	}
	return nil
}

// Key implements [store.Iterator]. It returns nil when the iterator is not positioned on a
// key. The slice is valid until the next call of Next or Close.
func (it *iterator) Key() []byte {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.valid {
		return nil
	}
	return it.key
}

// Value implements [store.Iterator]. It returns nil when the iterator is not positioned on
// a key. The slice is valid until the next call of Next or Close.
func (it *iterator) Value() []byte {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.valid {
		return nil
	}
	return it.value
}

// Err implements [store.Iterator].
func (it *iterator) Err() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.err
}

// Close implements [store.Iterator]. It returns the error of closing the Pebble iterator,
// if any; closing twice is not an error.
func (it *iterator) Close() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.closed {
		return nil
	}
	it.closed, it.valid = true, false
	err := it.releaseLocked(it.err == nil)
	// The buffers go to the backend's next iterator: the key and value are no longer
	// valid.
	b := it.b
	b.db.iters.Lock()
	if b.spareKey == nil && b.spareValue == nil {
		b.spareKey, b.spareValue = it.key[:0], it.value[:0]
	}
	b.db.iters.Unlock()
	it.key, it.value = nil, nil
	if err != nil {
		return it.b.errorf("closing iterator", err)
	}
	return nil
}
