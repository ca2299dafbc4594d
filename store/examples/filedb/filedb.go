// Package filedb is an example storage engine for kstream's persistent stores: a small,
// complete [store.DB] to read before writing one over another key-value engine, and to plug
// in with kstream.Config.StoreEngine.
//
// Every namespace (store name, partition) is a Go map in memory. Every write (a Set, a
// Delete, a committed Batch with its checkpoint, a Drop) is appended to one log file as a
// frame (length, CRC-32, operations); Open replays the log, and stops at the first frame
// that is incomplete or corrupt (a crash during a write), so a batch is either all there or
// not at all. Sync (store.Syncer) fsyncs the log; kstream calls it at every commit.
//
// It is meant to be read, not run in production: the whole data set lives in memory, the
// log is never compacted (it grows with every write until the state directory is cleaned
// up), and an iterator copies and sorts the keys of its range when it is created (which is
// what gives it the snapshot the store contract asks for).
package filedb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kstream-go/kstream/store"
)

// logName is the name of the log file in the engine's directory.
const logName = "filedb.log"

// Operation codes of a frame.
const (
	opSet byte = iota + 1
	opDelete
	opDeleteRange
	opCheckpoint
	opDrop
)

type nsKey struct {
	name      string
	partition int32
}

// namespace is one store partition's data.
type namespace struct {
	m  map[string][]byte
	cp int64
}

func newNamespace() *namespace { return &namespace{m: map[string][]byte{}, cp: store.NoCheckpoint} }

// DB is the engine. It is safe for concurrent use (one lock guards everything).
type DB struct {
	closed atomic.Bool
	mu     sync.Mutex
	f      *os.File
	ns     map[nsKey]*namespace
}

// Open opens (creating it if needed) the engine in dir and replays its log.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("filedb: open %s: %w", dir, err)
	}
	path := filepath.Join(dir, logName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("filedb: open %s: %w", dir, err)
	}
	d := &DB{f: f, ns: map[nsKey]*namespace{}}
	good, err := d.replay(f)
	if err == nil {
		// Cut a torn tail off, so that new frames follow the last good one.
		err = f.Truncate(good)
	}
	if err == nil {
		_, err = f.Seek(good, io.SeekStart)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("filedb: open %s: %w", path, err)
	}
	return d, nil
}

// replay applies every complete frame of the log and returns the offset after the last.
func (d *DB) replay(f *os.File) (int64, error) {
	r := bufio.NewReader(f)
	var good int64
	var head [8]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return good, nil // the end, or a torn frame header
		}
		n, sum := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil || crc32.ChecksumIEEE(body) != sum {
			return good, nil // a torn or corrupt frame: what follows was never acknowledged
		}
		if err := d.apply(body); err != nil {
			return 0, fmt.Errorf("frame at offset %d: %w", good, err)
		}
		good += int64(8 + n)
	}
}

// ns returns the namespace of k, creating it. d.mu must be held.
func (d *DB) nsLocked(k nsKey) *namespace {
	n := d.ns[k]
	if n == nil {
		n = newNamespace()
		d.ns[k] = n
	}
	return n
}

// writeLocked appends one frame holding body and applies it. d.mu must be held.
func (d *DB) writeLocked(body []byte) error {
	if d.closed.Load() {
		return store.ErrClosed
	}
	frame := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(frame[:4], uint32(len(body)))
	binary.BigEndian.PutUint32(frame[4:], crc32.ChecksumIEEE(body))
	if _, err := d.f.Write(append(frame, body...)); err != nil {
		return fmt.Errorf("filedb: writing the log: %w", err)
	}
	return d.apply(body)
}

// apply applies the operations of one frame to the maps.
func (d *DB) apply(body []byte) error {
	r := bytes.NewReader(body)
	for r.Len() > 0 {
		op, _ := r.ReadByte()
		name, err := readBytes(r)
		if err != nil {
			return err
		}
		part, err := binary.ReadVarint(r)
		if err != nil {
			return err
		}
		k := nsKey{string(name), int32(part)}
		switch op {
		case opSet:
			key, err1 := readBytes(r)
			value, err2 := readBytes(r)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			d.nsLocked(k).m[string(key)] = value
		case opDelete:
			key, err := readBytes(r)
			if err != nil {
				return err
			}
			delete(d.nsLocked(k).m, string(key))
		case opDeleteRange:
			from, err1 := readBound(r)
			to, err2 := readBound(r)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			n := d.nsLocked(k)
			for key := range n.m {
				if inRange([]byte(key), from, to) {
					delete(n.m, key)
				}
			}
		case opCheckpoint:
			cp, err := binary.ReadVarint(r)
			if err != nil {
				return err
			}
			d.nsLocked(k).cp = cp
		case opDrop:
			d.ns[k] = newNamespace()
		default:
			return fmt.Errorf("unknown operation %d", op)
		}
	}
	return nil
}

func readBytes(r *bytes.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Len()) {
		return nil, io.ErrUnexpectedEOF
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// readBound reads a range bound: a flag (0: nil, unbounded) and the bytes.
func readBound(r *bytes.Reader) ([]byte, error) {
	flag, err := r.ReadByte()
	if err != nil || flag == 0 {
		return nil, err
	}
	return readBytes(r)
}

// encoder builds the body of a frame.
type encoder struct{ buf []byte }

func (e *encoder) head(op byte, k nsKey) {
	e.buf = append(e.buf, op)
	e.bytes([]byte(k.name))
	e.buf = binary.AppendVarint(e.buf, int64(k.partition))
}

func (e *encoder) bytes(b []byte) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) bound(b []byte) {
	if b == nil {
		e.buf = append(e.buf, 0)
		return
	}
	e.buf = append(e.buf, 1)
	e.bytes(b)
}

// inRange reports whether key is in [from, to), nil bounds being unbounded.
func inRange(key, from, to []byte) bool {
	return (from == nil || bytes.Compare(key, from) >= 0) && (to == nil || bytes.Compare(key, to) < 0)
}

// Open returns the backend of one store partition.
func (d *DB) Open(name string, partition int32) (store.Backend, error) {
	if name == "" {
		return nil, errors.New("filedb: open: empty store name")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	d.nsLocked(nsKey{name, partition})
	return &backend{d: d, k: nsKey{name, partition}}, nil
}

// Drop deletes every key and the checkpoint of one store partition.
func (d *DB) Drop(name string, partition int32) error {
	var e encoder
	e.head(opDrop, nsKey{name, partition})
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writeLocked(e.buf)
}

// Sync makes every write so far durable (fsync of the log).
func (d *DB) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return store.ErrClosed
	}
	return d.f.Sync()
}

// Close syncs and closes the log. Closing twice returns an error wrapping store.ErrClosed.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Swap(true) {
		return fmt.Errorf("filedb: close: %w", store.ErrClosed)
	}
	d.ns = nil
	return errors.Join(d.f.Sync(), d.f.Close())
}

// backend is one namespace.
type backend struct {
	d *DB
	k nsKey
}

func (b *backend) Get(key []byte) ([]byte, bool, error) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if b.d.closed.Load() {
		return nil, false, store.ErrClosed
	}
	v, ok := b.d.nsLocked(b.k).m[string(key)]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

func (b *backend) write(f func(e *encoder)) error {
	var e encoder
	f(&e)
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.writeLocked(e.buf)
}

func (b *backend) Set(key, value []byte) error {
	return b.write(func(e *encoder) { e.head(opSet, b.k); e.bytes(key); e.bytes(value) })
}

func (b *backend) Delete(key []byte) error {
	return b.write(func(e *encoder) { e.head(opDelete, b.k); e.bytes(key) })
}

func (b *backend) DeleteRange(from, to []byte) error {
	return b.write(func(e *encoder) { e.head(opDeleteRange, b.k); e.bound(from); e.bound(to) })
}

// scan copies the pairs of the namespace in [from, to) with prefix, sorted.
func (b *backend) scan(from, to []byte, prefix []byte, reverse bool) (store.Iterator, error) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if b.d.closed.Load() {
		return nil, store.ErrClosed
	}
	it := &iterator{d: b.d, i: -1}
	for k, v := range b.d.nsLocked(b.k).m {
		if inRange([]byte(k), from, to) && strings.HasPrefix(k, string(prefix)) {
			it.pairs = append(it.pairs, [2][]byte{[]byte(k), append([]byte{}, v...)})
		}
	}
	slices.SortFunc(it.pairs, func(x, y [2][]byte) int {
		if reverse {
			return bytes.Compare(y[0], x[0])
		}
		return bytes.Compare(x[0], y[0])
	})
	return it, nil
}

func (b *backend) Range(from, to []byte) (store.Iterator, error) {
	return b.scan(from, to, nil, false)
}

func (b *backend) ReverseRange(from, to []byte) (store.Iterator, error) {
	return b.scan(from, to, nil, true)
}

func (b *backend) PrefixScan(prefix []byte) (store.Iterator, error) {
	return b.scan(nil, nil, prefix, false)
}

func (b *backend) NewBatch() store.Batch { return &batch{b: b} }

func (b *backend) ApproximateCount() (int64, error) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if b.d.closed.Load() {
		return 0, store.ErrClosed
	}
	return int64(len(b.d.nsLocked(b.k).m)), nil
}

func (b *backend) Checkpoint() (int64, error) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if b.d.closed.Load() {
		return 0, store.ErrClosed
	}
	return b.d.nsLocked(b.k).cp, nil
}

// batch collects operations as the body of one frame.
type batch struct {
	b     *backend
	e     encoder
	n     int
	cp    int64
	cpSet bool
}

func (t *batch) Set(key, value []byte) {
	t.e.head(opSet, t.b.k)
	t.e.bytes(key)
	t.e.bytes(value)
	t.n++
}
func (t *batch) Delete(key []byte) { t.e.head(opDelete, t.b.k); t.e.bytes(key); t.n++ }
func (t *batch) DeleteRange(from, to []byte) {
	t.e.head(opDeleteRange, t.b.k)
	t.e.bound(from)
	t.e.bound(to)
	t.n++
}
func (t *batch) SetCheckpoint(offset int64) { t.cp, t.cpSet = offset, true }
func (t *batch) Len() int                   { return t.n }

func (t *batch) Commit() error {
	if t.cpSet && t.cp < store.NoCheckpoint {
		return fmt.Errorf("filedb: commit of store %s partition %d: invalid checkpoint %d", t.b.k.name, t.b.k.partition, t.cp)
	}
	body := t.e.buf
	if t.cpSet {
		var e encoder
		e.buf = body
		e.head(opCheckpoint, t.b.k)
		e.buf = binary.AppendVarint(e.buf, t.cp)
		body = e.buf
	}
	t.b.d.mu.Lock()
	err := t.b.d.writeLocked(body)
	t.b.d.mu.Unlock()
	if err != nil {
		return err
	}
	t.Reset()
	return nil
}

func (t *batch) Reset() { t.e.buf, t.n, t.cpSet = t.e.buf[:0], 0, false }

// iterator walks a copy of its range taken when it was created.
type iterator struct {
	d      *DB
	pairs  [][2][]byte
	i      int
	err    error
	closed bool
}

func (it *iterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.closed || it.d.closed.Load() {
		it.err = store.ErrClosed
		return false
	}
	it.i++
	return it.i < len(it.pairs)
}

func (it *iterator) Key() []byte   { return it.pairs[it.i][0] }
func (it *iterator) Value() []byte { return it.pairs[it.i][1] }
func (it *iterator) Err() error    { return it.err }
func (it *iterator) Close() error {
	it.closed = true
	it.pairs = nil
	return nil
}

// Interface checks.
var (
	_ store.DB     = (*DB)(nil)
	_ store.Syncer = (*DB)(nil)
)
