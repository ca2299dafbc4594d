// Package memory is an in-memory [store.DB]: each namespace is an ordered map (a B-tree of
// github.com/google/btree) guarded by its own lock. Nothing survives Close or the process;
// a memory store is restored from its changelog on every start.
//
// Iterators read a snapshot of their namespace taken when they are created: writes made
// while an iterator is open (through any backend of the namespace) are never visible to it,
// and never disturb it. The snapshot is a copy-on-write clone of the B-tree, so taking it
// costs O(1); the first writes after it copy the B-tree nodes they touch.
//
// Keys and values are copied in (callers may reuse the slices they pass) and copied out
// (callers may modify what Get and iterators return without affecting the store).
package memory

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/kstream-go/kstream/store"
)

// degree is the B-tree degree: nodes hold degree-1 to 2*degree-1 items. 32 keeps trees
// shallow and the node copies made after a snapshot small (about 3 KiB a node).
const degree = 32

// item is one key-value pair. Its slices are owned by the tree and never modified after
// insertion (a write replaces the item), which is what lets snapshots share them.
type item struct {
	key, value []byte
}

func less(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// newItem copies key and value into one allocation.
func newItem(key, value []byte) item {
	buf := make([]byte, len(key)+len(value))
	n := copy(buf, key)
	copy(buf[n:], value)
	return item{key: buf[:n:n], value: buf[n:]}
}

// New returns an empty in-memory DB. It is safe for concurrent use; each namespace has
// its own lock, so distinct namespaces do not contend.
func New() store.DB {
	d := &db{}
	d.mu.namespaces = make(map[nsKey]*namespace)
	return d
}

type nsKey struct {
	name      string
	partition int32
}

type db struct {
	closed atomic.Bool
	mu     struct {
		sync.Mutex
		// namespaces is nil once the DB is closed.
		namespaces map[nsKey]*namespace
	}
}

// namespace is the data of one store partition.
type namespace struct {
	name      string
	partition int32
	mu        struct {
		sync.RWMutex
		tree       *btree.BTreeG[item]
		checkpoint int64
		// snap is a read-only clone of tree shared by the iterators created since the
		// last write, or nil.
		//
		// INVARIANT: snap is nil or holds exactly the items of tree.
		snap *btree.BTreeG[item]
	}
}

func newNamespace(name string, partition int32) *namespace {
	ns := &namespace{name: name, partition: partition}
	ns.mu.tree = btree.NewG(degree, less)
	ns.mu.checkpoint = store.NoCheckpoint
	return ns
}

func (d *db) errorf(ns *namespace, format string, args ...any) error {
	return fmt.Errorf("memory store: %s/%d: "+format, append([]any{ns.name, ns.partition}, args...)...)
}

// Open implements [store.DB].
func (d *db) Open(name string, partition int32) (store.Backend, error) {
	if name == "" {
		return nil, errors.New("memory store: open: empty store name")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return nil, fmt.Errorf("memory store: %s/%d: open: %w", name, partition, store.ErrClosed)
	}
	k := nsKey{name, partition}
	ns, ok := d.mu.namespaces[k]
	if !ok {
		ns = newNamespace(name, partition)
		d.mu.namespaces[k] = ns
	}
	return &backend{db: d, ns: ns}, nil
}

// Drop implements [store.DB]. Backends already open on the namespace stay usable and see
// it empty; iterators already open keep their snapshot.
func (d *db) Drop(name string, partition int32) error {
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		return fmt.Errorf("memory store: %s/%d: drop: %w", name, partition, store.ErrClosed)
	}
	ns := d.mu.namespaces[nsKey{name, partition}]
	d.mu.Unlock()
	if ns == nil {
		return nil
	}
	ns.mu.Lock()
	ns.mu.tree = btree.NewG(degree, less)
	ns.mu.checkpoint = store.NoCheckpoint
	ns.mu.snap = nil
	ns.mu.Unlock()
	return nil
}

// Close implements [store.DB]. It releases every namespace; later calls on the DB, its
// backends and its iterators return an error wrapping [store.ErrClosed].
func (d *db) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Swap(true) {
		return fmt.Errorf("memory store: close: %w", store.ErrClosed)
	}
	// Release the data even if callers keep backends: they fail with ErrClosed from now
	// on, and an empty tree keeps a racing call (a misuse) from dereferencing nil.
	for _, ns := range d.mu.namespaces {
		ns.mu.Lock()
		ns.mu.tree = btree.NewG(degree, less)
		ns.mu.snap = nil
		ns.mu.Unlock()
	}
	d.mu.namespaces = nil
	return nil
}
