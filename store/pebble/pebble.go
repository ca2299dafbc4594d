// Package pebble is a persistent [store.DB] over github.com/cockroachdb/pebble/v2. It
// builds with CGO_ENABLED=0 (with cgo, Pebble uses C for zstd and for its block cache's
// memory; the pebblegozstd build tag keeps zstd in Go). One Pebble database per Open holds every namespace, so one block cache and one
// memtable budget serve every store partition of the process, as one RocksDB instance per
// store cannot.
//
// # Durability
//
// A [store.Batch] is one Pebble batch: its data and the namespace's new checkpoint are
// written together, and Pebble's write-ahead log replays whole batches in commit order.
// After any crash a namespace's data is therefore exactly as of its recovered checkpoint.
// By default ([Options.Sync] false) a commit does not wait for an fsync: a crash (of the
// process or of the machine) may lose the last commits, and the checkpoint goes back with
// them, so restoration replays them from the changelog. This is the trade Kafka Streams
// makes with RocksDB (its WAL is not synced per write). Set Sync to fsync every commit.
// Close flushes and syncs the log, so a clean shutdown loses nothing.
//
// # Iterators
//
// An iterator reads a point-in-time view taken when it is created: later writes are not
// visible to it and do not disturb it. An open iterator pins memtables and files; close it
// promptly. An iterator releases its Pebble resources as soon as it is exhausted.
//
// Only this package imports Pebble; nothing of Pebble appears in its API.
package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kstream-go/kstream/store"
)

// Defaults of [Options].
const (
	// DefaultCacheSize is the block cache size used when Options.CacheSize is 0: 64 MiB.
	DefaultCacheSize int64 = 64 << 20
	// DefaultMemTableSize is the memtable size used when Options.MemTableSize is 0: 8 MiB.
	// A memtable's memory becomes resident as it fills and Pebble keeps the last flushed one
	// for reuse, so the engine's resident set follows this size: 32 MiB kept about 45 MiB of
	// a count's Pebble memory resident, 16 MiB (RocksDB's write_buffer_size in Kafka
	// Streams) about 30 MiB, 8 MiB about 15 MiB, each at the same throughput on a count of
	// 100,000 keys (bench/README.md, memory); 4 MiB saved 7 MiB more but cost CPU (more
	// flushes and compactions).
	DefaultMemTableSize uint64 = 8 << 20
)

// formatVersion is the on-disk format Open creates or ratchets a database to. It is pinned
// (to the newest format of Pebble v2.1) rather than pebble.FormatNewest, so that upgrading
// Pebble never silently moves the files to a format an older binary cannot read.
const formatVersion = pebble.FormatValueSeparation

// Options configures [Open]. The zero value is ready to use.
type Options struct {
	// CacheSize is the size in bytes of the block cache shared by every namespace,
	// overriding the default 64 MiB. Pebble charges its memtables to that cache, so it is
	// created with CacheSize + MemTableSize: blocks get CacheSize while one memtable lives.
	CacheSize int64
	// MemTableSize is the size in bytes of one memtable, overriding the default 8 MiB.
	// It must be below 4 GiB.
	MemTableSize uint64
	// Sync makes every commit (Set, Delete, Batch.Commit, Drop) wait for an fsync of the
	// write-ahead log, overriding the default false: commits are written to the log
	// without waiting, and a crash may lose the last of them (never part of one batch).
	// Kafka Streams' RocksDB stores behave like the default, since state is restored
	// from the changelog.
	Sync bool
	// Logger receives Pebble's log messages, overriding slog.Default(). Pebble's fatal
	// errors (an engine that cannot continue, such as a failed write of its manifest) are
	// logged at error level and then panic.
	Logger *slog.Logger
	// Tune, if set, is called with Pebble's options after this package has set its own
	// (the block cache sized from CacheSize and MemTableSize, bloom filters on every level,
	// L0 thresholds of 8 and 32 files, the format version, the logger) and just before
	// Pebble opens, to change any of them:
	// compaction concurrency, L0 thresholds, level sizes, compression, the WAL's
	// directory... It must not set an older FormatMajorVersion than the one a database
	// was created with, nor replace Comparer or Merger (the stores' order and checkpoints
	// depend on them); a Cache it sets replaces the one sized from CacheSize.
	Tune func(*pebble.Options)
}

// Open opens the database in dir, creating it if needed. The returned DB is safe for
// concurrent use; distinct namespaces may be used from distinct goroutines at once. Only
// one DB may have dir open at a time (Pebble locks the directory).
func Open(dir string, opts Options) (store.DB, error) {
	return open(dir, opts, nil)
}

// open is Open on fs (nil for the operating system's file system); tests pass an
// in-memory file system to simulate crashes.
func open(dir string, opts Options, fs vfs.FS) (*db, error) {
	if dir == "" {
		return nil, errors.New("pebble store: open: empty directory")
	}
	if opts.CacheSize < 0 {
		return nil, fmt.Errorf("pebble store: open %s: negative cache size %d", dir, opts.CacheSize)
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = DefaultMemTableSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Pebble charges its memtables to the block cache (each reserves its full size there
	// while it lives, and Pebble keeps the last flushed one for reuse), so a cache of
	// CacheSize alone held no block at all once two memtables of 32 MiB existed:
	// every read went to the files. The cache is sized to the engine's whole budget,
	// CacheSize + MemTableSize, leaving CacheSize for blocks while one memtable lives (less
	// while a second one is flushing or kept for reuse); the memory that blocks and memtables
	// use together stays within that budget.
	cache := pebble.NewCache(opts.CacheSize + int64(opts.MemTableSize))
	defer cache.Unref() // the DB holds its own reference
	popts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: formatVersion,
		Logger:             logger{opts.Logger.With("component", "pebble")},
		FS:                 fs,
	}
	// Bloom filters (10 bits per key, about 1% false positives) on every level: a Get of
	// a key the store does not hold (the first update of a key, or of a key's new window)
	// then reads a filter block, usually cached, instead of the index and data blocks of
	// every table that could hold it. RocksDB's stores in Kafka Streams use them too.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		popts.Levels[i].FilterType = pebble.TableFilter
	}
	// L0 compactions start at 8 files instead of Pebble's 4 (writes stop at 32): window,
	// session and join stores write data that a range deletion drops once it expires, and
	// the later compaction leaves more of it to be dropped unread. A stream-stream join of
	// 2M records took 0.8x the CPU with it (the count and windowed count unchanged or
	// better); bloom filters keep point lookups cheap over the extra L0 files.
	popts.L0CompactionThreshold = 8
	popts.L0StopWritesThreshold = 32
	if opts.Tune != nil {
		opts.Tune(popts)
	}
	pdb, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("pebble store: open %s: %w", dir, err)
	}
	d := &db{dir: dir, pdb: pdb, wo: pebble.NoSync}
	if opts.Sync {
		d.wo = pebble.Sync
	}
	d.ns.ids = make(map[nsKey]uint32)
	d.ns.nextID = 1
	d.ns.cps = make(map[uint32]*atomic.Int64)
	d.ns.gens = make(map[uint32]*atomic.Uint64)
	d.iters.m = make(map[*iterator]struct{})
	d.iters.idle = make(map[*backend]struct{})
	if err := d.load(); err != nil {
		_ = pdb.Close()
		return nil, fmt.Errorf("pebble store: open %s: %w", dir, err)
	}
	return d, nil
}

type nsKey struct {
	name      string
	partition int32
}

// db is a store.DB over one Pebble database.
//
// Lock order: mu, then ns or iters; iterator.mu, then iters.
type db struct {
	dir string
	wo  *pebble.WriteOptions
	// pdb is only called with mu read-locked and mu.closed false: Pebble panics on use
	// after Close.
	pdb *pebble.DB
	// fatal is the error of a write Pebble could not make (recoverFatal), nil while it
	// can: every later write fails with it, without calling Pebble.
	fatal atomic.Pointer[error]

	mu struct {
		sync.RWMutex
		closed bool
	}
	ns struct {
		sync.Mutex
		ids    map[nsKey]uint32
		nextID uint32
		// cps caches each namespace's checkpoint (see checkpointCell).
		cps map[uint32]*atomic.Int64
		// gens counts each namespace's writes (see genCell).
		gens map[uint32]*atomic.Uint64
	}
	// iters tracks the iterators holding a Pebble iterator, which Close must close
	// before it closes Pebble.
	iters struct {
		sync.Mutex
		m map[*iterator]struct{}
		// idle are the backends holding an idle Pebble iterator for reuse
		// (backend.idle), which Close closes too; closed is set by Close, after which
		// no iterator is kept for reuse.
		idle   map[*backend]struct{}
		closed bool
	}
}

// load checks the layout version and reads the namespace registry.
func (d *db) load() error {
	v, closer, err := d.pdb.Get(versionKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := d.pdb.Set(versionKey, []byte{layoutVersion}, pebble.Sync); err != nil {
			return fmt.Errorf("writing layout version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("reading layout version: %w", err)
	default:
		ok := len(v) == 1 && v[0] == layoutVersion
		_ = closer.Close()
		if !ok {
			return fmt.Errorf("unsupported layout version %x (want %d)", v, layoutVersion)
		}
	}
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: namespaceKeysLow, UpperBound: namespaceKeysEnd})
	if err != nil {
		return fmt.Errorf("reading namespaces: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		name, partition, err := parseNamespaceKey(it.Key())
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("reading namespaces: %w", err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Close reports it
		}
		id, err := decodeID(v)
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("reading namespace %s/%d: %w", name, partition, err)
		}
		d.ns.ids[nsKey{name, partition}] = id
		if id >= d.ns.nextID {
			d.ns.nextID = id + 1
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("reading namespaces: %w", err)
	}
	return nil
}

// rlock read-locks d.mu and reports whether d is open. The caller must call
// d.mu.RUnlock when it returns true.
func (d *db) rlock() bool {
	d.mu.RLock()
	if d.mu.closed {
		d.mu.RUnlock()
		return false
	}
	return true
}

// Open implements [store.DB]. Creating a namespace writes its id to the registry with an
// fsync.
func (d *db) Open(name string, partition int32) (store.Backend, error) {
	if name == "" {
		return nil, errors.New("pebble store: open: empty store name")
	}
	if !d.rlock() {
		return nil, fmt.Errorf("pebble store: %s/%d: open: %w", name, partition, store.ErrClosed)
	}
	defer d.mu.RUnlock()
	id, err := d.namespaceID(name, partition, true)
	if err != nil {
		return nil, fmt.Errorf("pebble store: %s/%d: open: %w", name, partition, err)
	}
	return newBackend(d, name, partition, id), nil
}

// namespaceID returns the id of (name, partition), allocating it if create is set; it
// returns 0 if the namespace does not exist and create is not set. d.mu must be read-locked.
func (d *db) namespaceID(name string, partition int32, create bool) (_ uint32, err error) {
	d.ns.Lock()
	defer d.ns.Unlock()
	k := nsKey{name, partition}
	if id, ok := d.ns.ids[k]; ok || !create {
		return id, nil
	}
	if err := d.failed(); err != nil {
		return 0, err
	}
	defer d.recoverFatal(&err)
	id := d.ns.nextID
	if id == 0 { // wrapped around
		return 0, errors.New("namespace ids exhausted")
	}
	// Always synced: a data write of the namespace may be synced before the next write
	// of the registry, and data whose id is lost would be unreachable.
	if err := d.pdb.Set(namespaceKey(name, partition), encodeID(id), pebble.Sync); err != nil {
		return 0, fmt.Errorf("registering namespace: %w", err)
	}
	d.ns.nextID++
	d.ns.ids[k] = id
	return id, nil
}

// Sync implements [store.Syncer]: every commit made so far reaches the disk, also those
// made without [Options.Sync] (Pebble keeps the last partial block of its write-ahead log
// in memory until a sync, so a killed process would lose them).
func (d *db) Sync() (err error) {
	if !d.rlock() {
		return fmt.Errorf("pebble store: sync: %w", store.ErrClosed)
	}
	defer d.mu.RUnlock()
	if err := d.failed(); err != nil {
		return fmt.Errorf("pebble store: sync: %w", err)
	}
	defer d.recoverFatal(&err)
	if err := d.pdb.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("pebble store: sync: %w", err)
	}
	return nil
}

// Drop implements [store.DB]. It deletes the namespace's data with one range deletion and
// its checkpoint, in one batch. Backends already open on the namespace stay usable and see
// it empty; iterators already open keep their view. The space is reclaimed by later
// compactions.
func (d *db) Drop(name string, partition int32) (err error) {
	if !d.rlock() {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, store.ErrClosed)
	}
	defer d.mu.RUnlock()
	if err := d.failed(); err != nil {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, err)
	}
	defer d.recoverFatal(&err)
	id, err := d.namespaceID(name, partition, false)
	if err != nil {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, err)
	}
	if id == 0 {
		return nil // never opened: nothing to delete
	}
	p := dataKeyPrefix(id)
	end, _ := successor(p[:]) // p starts with dataPrefix, so it has a successor
	b := d.pdb.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(p[:], end, nil); err != nil {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, err)
	}
	if err := b.Delete(checkpointKey(id), nil); err != nil {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, err)
	}
	if err := d.pdb.Apply(b, d.wo); err != nil {
		return fmt.Errorf("pebble store: %s/%d: drop: %w", name, partition, err)
	}
	d.checkpointCell(id).Store(store.NoCheckpoint)
	d.genCell(id).Add(1)
	return nil
}

// cpUnknown marks a checkpoint cell whose namespace's checkpoint has not been read or
// written yet by this process.
const cpUnknown = math.MinInt64

// checkpointCell returns the cell caching the checkpoint of namespace id, shared by every
// backend of the namespace: cpUnknown until the checkpoint is first read, then the value
// of its key as of the last write (a commit with a checkpoint stores it after Pebble applied
// it, Drop stores NoCheckpoint), so that Checkpoint, which interactive queries call for
// every read, costs no Pebble lookup.
func (d *db) checkpointCell(id uint32) *atomic.Int64 {
	d.ns.Lock()
	defer d.ns.Unlock()
	c := d.ns.cps[id]
	if c == nil {
		c = new(atomic.Int64)
		c.Store(cpUnknown)
		d.ns.cps[id] = c
	}
	return c
}

// genCell returns the write count of namespace id, shared by every backend of the
// namespace: each write to the namespace's data adds one after Pebble applied it, so that
// an iterator kept for reuse (backend.idle) is known to read the namespace as it is when
// the count has not changed since the iterator was created.
func (d *db) genCell(id uint32) *atomic.Uint64 {
	d.ns.Lock()
	defer d.ns.Unlock()
	c := d.ns.gens[id]
	if c == nil {
		c = new(atomic.Uint64)
		d.ns.gens[id] = c
	}
	return c
}

// Close implements [store.DB]. It closes the iterators still open (their Next then
// returns false and Err an error wrapping [store.ErrClosed]), then Pebble, which flushes
// and syncs its log. It waits for calls in progress on other goroutines. Later calls on the
// DB, its backends and iterators return errors wrapping [store.ErrClosed].
func (d *db) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return fmt.Errorf("pebble store: close %s: %w", d.dir, store.ErrClosed)
	}
	d.mu.closed = true
	d.iters.Lock()
	open := make([]*iterator, 0, len(d.iters.m))
	for it := range d.iters.m {
		open = append(open, it)
	}
	d.iters.closed = true
	var err error
	for b := range d.iters.idle {
		err = errors.Join(err, b.idle.Close())
		b.idle = nil
	}
	clear(d.iters.idle)
	d.iters.Unlock()
	for _, it := range open {
		err = errors.Join(err, it.closeByDB())
	}
	if ferr := d.failed(); ferr != nil {
		// Pebble's commit pipeline is stuck after a fatal write error: closing it could
		// wait forever. The files stay as they are; a new Open replays the log.
		err = errors.Join(err, ferr)
	} else if cerr := d.pdb.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("pebble store: close %s: %w", d.dir, err)
	}
	return nil
}

// flush flushes the memtables to sstables (for tests of ApproximateCount).
func (d *db) flush() (err error) {
	if !d.rlock() {
		return store.ErrClosed
	}
	defer d.mu.RUnlock()
	if err := d.failed(); err != nil {
		return err
	}
	defer d.recoverFatal(&err)
	return d.pdb.Flush()
}

// logger adapts a *slog.Logger to Pebble's Logger.
type logger struct{ l *slog.Logger }

// Infof logs at debug level: Pebble's routine messages (WAL replay, compactions) are not
// the application's news.
func (l logger) Infof(format string, args ...any) {
	if l.l.Enabled(context.Background(), slog.LevelDebug) {
		l.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (l logger) Errorf(format string, args ...any) { l.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs and panics with a fatalError: Pebble calls it when it cannot continue, and
// does not expect it to return. The writes of this package recover it (recoverFatal).
func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.l.Error(msg, "fatal", true)
	panic(fatalError{fmt.Errorf("%w: %s", ErrFatal, msg)})
}

// ErrFatal is wrapped by the error of a write that Pebble could not make, because its
// write-ahead log could not be written (a full or failing disk): Pebble cannot go on with
// the database, so that every later write of it fails with the same error, and Close does
// not close Pebble (its commit pipeline is stuck). The application fails with the error
// instead of crashing; its state is restored from the changelogs on the next start.
var ErrFatal = errors.New("pebble store: fatal write error")

// fatalError is what logger.Fatalf panics with.
type fatalError struct{ err error }

// recoverFatal, deferred by every call of this package that writes into Pebble, turns the
// panic of logger.Fatalf into the call's error (*errp) and marks d failed. Pebble calls
// Fatalf on the writer's goroutine, inside the write. Other panics go on.
func (d *db) recoverFatal(errp *error) {
	r := recover()
	if r == nil {
		return
	}
	f, ok := r.(fatalError)
	if !ok {
		panic(r)
	}
	d.fatal.CompareAndSwap(nil, &f.err)
	*errp = f.err
}

// failed returns the error of d's failed write, nil if none failed.
func (d *db) failed() error {
	if e := d.fatal.Load(); e != nil {
		return *e
	}
	return nil
}
