package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/kstream-go/kstream/store/pebble"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StoreSpec is a state store of a sub-topology.
type StoreSpec struct {
	Name       string // the store's name (unique in the topology)
	Changelog  string // full changelog topic name; "" if the store is not logged
	Persistent bool   // Pebble (true) or memory (false)
	// SourceTopic means Changelog is the source topic of a table: the store is not written
	// to it (the topic already holds every change), and its checkpoint is the committed
	// offset of that topic.
	SourceTopic bool
	// Timestamped means the store keeps each value as an 8-byte big-endian timestamp (Unix
	// milliseconds) followed by the value bytes, as Kafka Streams' timestamped stores do. The
	// changelog holds the value bytes alone with that timestamp as the record timestamp, so
	// it has the format of a table's source topic; restoring puts the prefix back.
	Timestamped bool
	// Codec, if set, relates the store's backend keys to its changelog keys (window and
	// session stores, whose layout is not their changelog's): a write is logged under
	// Codec.ChangelogKey of its key, or not at all (store metadata), and restoring goes
	// through a Codec.NewRestorer. See store.ChangelogCodec.
	Codec store.ChangelogCodec
	// NoReadCache means the store's write buffer keeps no read cache (StoreCacheBytes): a
	// suppression buffer in memory, read only for keys it wrote, which its engine's B-tree
	// answers as fast, or a stream-stream join's window store, read only by range, which
	// the read cache does not serve; a cache there only costs CPU and budget.
	NoReadCache bool
}

// newRestorer returns the restorer of a store partition whose backend is b, or nil for a
// store without a Codec.
func (spec StoreSpec) newRestorer(b store.Backend) (store.Restorer, error) {
	if spec.Codec == nil {
		return nil, nil
	}
	r, err := spec.Codec.NewRestorer(b)
	if err != nil {
		return nil, fmt.Errorf("kstream: restoring store %s: %w", spec.Name, err)
	}
	return r, nil
}

// tsLen is the length of the timestamp prefix of a value in a Timestamped store.
const tsLen = 8

// RestoreListener observes restoration, as Kafka Streams' StateRestoreListener does. Its
// methods are called from restoring goroutines and must be safe for concurrent use.
type RestoreListener interface {
	OnRestoreStart(store, topic string, partition int32, from, to int64)
	OnBatchRestored(store, topic string, partition int32, batchEnd int64, records int)
	OnRestoreEnd(store, topic string, partition int32, restored int64)
}

// stores holds the process's storage engines, opened on first use.
type stores struct {
	dir           string
	log           *slog.Logger
	cacheBytes    int64
	memTableBytes uint64
	// engine opens the persistent stores' engine in place of Pebble (Config.StoreEngine);
	// tune tunes Pebble's options (Config.PebbleOptions). Either may be nil.
	engine func(dir string) (store.DB, error)
	tune   func(*cpebble.Options)

	mu  sync.Mutex
	mem store.DB
	// pebble is the persistent stores' engine: Pebble, or Config.StoreEngine's.
	pebble store.DB
}

func (s *stores) db(persistent bool) (store.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !persistent {
		if s.mem == nil {
			s.mem = memory.New()
		}
		return s.mem, nil
	}
	if s.pebble == nil && s.engine != nil {
		dir := filepath.Join(s.dir, "store-engine")
		db, err := s.engine(dir)
		if err == nil && db == nil {
			err = errors.New("it returned a nil store.DB")
		}
		if err != nil {
			return nil, fmt.Errorf("kstream: opening the persistent store engine (Config.StoreEngine) in %s: %w", dir, err)
		}
		s.pebble = db
	}
	if s.pebble == nil {
		db, err := pebble.Open(filepath.Join(s.dir, "pebble"), pebble.Options{Logger: s.log, CacheSize: s.cacheBytes, MemTableSize: s.memTableBytes, Tune: s.tune})
		if err != nil {
			return nil, fmt.Errorf("kstream: opening the state directory %s: %w", s.dir, err)
		}
		s.pebble = db
	}
	return s.pebble, nil
}

// hasMemory reports whether the memory engine is open (it holds no state otherwise).
func (s *stores) hasMemory() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem != nil
}

// sync makes the commits of the persistent stores durable (see [store.Syncer]). It runs
// once per commit, after every store's checkpoint: a killed instance then restores at
// most what was written since the last commit, not whatever its engine had buffered.
func (s *stores) sync() error {
	s.mu.Lock()
	db := s.pebble
	s.mu.Unlock()
	if sy, ok := db.(store.Syncer); ok && db != nil {
		return sy.Sync()
	}
	return nil
}

func (s *stores) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.mem != nil {
		errs = append(errs, s.mem.Close())
	}
	if s.pebble != nil {
		errs = append(errs, s.pebble.Close())
	}
	s.mem, s.pebble = nil, nil
	return errors.Join(errs...)
}

// loggedStore is a store partition of one task. Writes go to the backend and, when the
// store is logged, to its changelog partition.
type loggedStore struct {
	spec      StoreSpec
	op        string // the Operator of its changelog records
	partition int32
	raw       store.Backend
	// buf holds the writes of a persistent store between commits: a write costs a map
	// update instead of an engine write and a changelog record, recently used keys are read
	// from memory, and each commit writes its data and checkpoint in one atomic batch and
	// one changelog record per changed key. nil for memory stores, where it only adds work.
	buf     *store.Buffer
	r       *Runtime
	acked   atomic.Int64 // changelog offset after the last acknowledged write; -1 none
	written atomic.Bool  // a changelog write since the last checkpoint
	// position is the store's checkpoint as of its last commit (-1 none), for queries
	// (query.go), which read it without touching the engine.
	position atomic.Int64
	// seenReads and seenEvictions are its buffer's CacheReads and CacheEvictions at the
	// last weighing of the read caches (weighStoreCachesLocked).
	seenReads, seenEvictions uint64
	// retentionMs is the retention.ms of its changelog topic when its cleanup.policy
	// deletes (window and session stores), as the topology asks for it; 0 if none. Only the
	// records of a timestamped store carry an old timestamp (the others are stamped with
	// the time of their production). horizon is the wall-clock time (ms) before which the
	// broker deletes a record of that topic, as of the last logPending; expiring counts the
	// records logPending wrote below it, oldest the smallest of their timestamps (see
	// noteExpiring).
	retentionMs     int64
	horizon, oldest int64
	expiring        int64
}

// storeCacheBytes is the default budget of the read caches of the instance's stores.
const storeCacheBytes = 32 << 20

// resizeStoreCachesLocked divides the cache budget's read part (CacheBudget) among the read
// caches of the instance's tasks, as Kafka Streams divides statestore.cache.max.bytes among
// its threads: however many partitions the instance owns, its caches together stay within
// the budget. A cache whose share fell keeps to it as it inserts and drops what exceeds it
// at its next commit (store.Buffer.Flush).
func (r *Runtime) resizeStoreCachesLocked() {
	if r.cfg.StoreCacheBytes < 0 {
		return
	}
	n := 0
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil && !ls.spec.NoReadCache {
				n++
			}
		}
	}
	r.caches.setReaders(n)
	r.rescaleStoreCachesLocked(n)
}

// rescaleStoreCachesLocked scales the weights of the read caches (weighStoreCachesLocked)
// so that they sum to n, their number, again once tasks came or went: the weights of the
// caches that stay keep their proportions, a new cache's is 1 until the next commit weighs
// them all. Without it, caches that stayed with weights above 1 could together exceed the
// budget until then.
func (r *Runtime) rescaleStoreCachesLocked(n int) {
	weight := func(ls *loggedStore) float64 {
		if d := r.cacheDemands[ls.spec.Name]; d != nil && d.weight > 0 {
			return d.weight
		}
		return 1
	}
	var sum float64
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil && !ls.spec.NoReadCache {
				sum += weight(ls)
			}
		}
	}
	if sum <= 0 {
		return
	}
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil && !ls.spec.NoReadCache {
				ls.buf.SetReadCacheWeight(weight(ls) * float64(n) / sum)
			}
		}
	}
}

// noteStoreCachesLocked records the heap of the tasks' read caches for Stats and weighs
// their shares of the budget again (weighStoreCachesLocked). It runs in a
// commit, the tasks at rest.
func (r *Runtime) noteStoreCachesLocked() {
	var sum int64
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil {
				sum += int64(ls.buf.CacheSize())
			}
		}
	}
	r.stats.cache.Store(sum)
	r.weighStoreCachesLocked()
}

// Weights of the read caches (weighStoreCachesLocked), in units of an equal share.
const (
	// readCacheFloor is the weight every read cache has whatever its reads: a quarter of
	// the budget is shared equally, so that a cache read little keeps its recent keys.
	readCacheFloor = 0.25
	// readCacheMinWeight is the smallest weight of a cache whose store is held to twice
	// what its fullest cache holds: room to grow until the next commit weighs it again.
	readCacheMinWeight = 1.0 / 16
)

// cacheDemand is what weighStoreCachesLocked knows of the read caches of one store (all
// its partitions on the instance).
type cacheDemand struct {
	demand float64 // reads per commit, decayed by half at each commit
	// reads, evictions, maxSize and caches are of this weighing: the reads and the
	// evictions since the last one, the heap its fullest cache holds, and how many
	// caches there are.
	reads, evictions uint64
	maxSize          int
	caches           int
	weight           float64 // the weight of each of its caches, in units of an equal share
}

// weighStoreCachesLocked divides the read part of the cache budget among the stores by how
// much each is read, instead of equally among the read caches: a read cache's bound is its
// equal share (CacheBudget.ReadShare) times the weight of its store, and the weights of
// all the caches sum to their number. A store's demand is the reads of its caches per
// commit, decayed by half at each commit; all its partitions have the same weight, so that
// a partition that got no records for a while keeps its keys.
//
// A store's part is readCacheFloor of an equal share per cache plus its part of the rest
// by demand. When some stores' caches are full (they evicted since the last weighing), a
// store whose caches are not and hold less than half its part is held, in each cache, to
// twice what its fullest cache holds (at least readCacheMinWeight), and the rest goes to
// the other stores by their demand. So a store read on every record (a table that a join
// looks up) gets the budget that a store only written (a foreign-key join's
// subscriptions) or one whose keys all fit (a small table) would leave unused, where equal
// shares left it missing most of its keys. It runs in a commit, the tasks at rest.
func (r *Runtime) weighStoreCachesLocked() {
	if r.cfg.StoreCacheBytes < 0 {
		return
	}
	if r.cacheDemands == nil {
		r.cacheDemands = make(map[string]*cacheDemand)
	}
	for _, d := range r.cacheDemands {
		d.reads, d.evictions, d.maxSize, d.caches = 0, 0, 0, 0
	}
	n := 0
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf == nil || ls.spec.NoReadCache {
				continue
			}
			d := r.cacheDemands[ls.spec.Name]
			if d == nil {
				d = &cacheDemand{}
				r.cacheDemands[ls.spec.Name] = d
			}
			reads, evictions := ls.buf.CacheReads(), ls.buf.CacheEvictions()
			d.reads += reads - ls.seenReads
			d.evictions += evictions - ls.seenEvictions
			ls.seenReads, ls.seenEvictions = reads, evictions
			d.maxSize = max(d.maxSize, ls.buf.CacheSize())
			d.caches++
			n++
		}
	}
	var demand float64
	full := false
	for name, d := range r.cacheDemands {
		if d.caches == 0 {
			delete(r.cacheDemands, name) // no partition of it here any more
			continue
		}
		d.demand = d.demand/2 + float64(d.reads)
		demand += d.demand
		full = full || d.evictions > 0
	}
	share := float64(r.caches.ReadShare())
	var spare, wanting float64 // weight left by the stores held to what they hold; demand of the others
	for _, d := range r.cacheDemands {
		if demand == 0 || share <= 0 {
			d.weight = 1
			continue
		}
		part := readCacheFloor*float64(d.caches) + (1-readCacheFloor)*float64(n)*d.demand/demand
		// Twice what the fullest cache holds, for each: the store's keys may all be in one
		// partition.
		need := max(2*float64(d.maxSize)/share, readCacheMinWeight) * float64(d.caches)
		if full && d.evictions == 0 && need < part {
			spare += part - need
			part = -need // negative: gets no more
		} else {
			wanting += d.demand
		}
		d.weight = part / float64(d.caches)
	}
	for _, d := range r.cacheDemands {
		switch {
		case d.weight < 0:
			d.weight = -d.weight
		case wanting > 0:
			d.weight += spare * d.demand / wanting / float64(d.caches)
		}
	}
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil && !ls.spec.NoReadCache {
				ls.buf.SetReadCacheWeight(r.cacheDemands[ls.spec.Name].weight)
			}
		}
	}
}

// flushBytes is the size of a store partition's buffered writes above which they are
// written out before the next commit.
const flushBytes = 32 << 20

// Backend returns the store as the task sees it. A persistent store is its buffer, whose
// changes reach the changelog when the buffer is written out (see logPending), one record
// per changed key, as Kafka Streams' caching store writes its changelog on flush. A memory
// store is written directly, each change logged as it is made.
func (s *loggedStore) Backend() store.Backend {
	if s.buf != nil {
		return s.buf
	}
	if s.spec.Changelog == "" || s.spec.SourceTopic {
		return s.raw
	}
	return loggingBackend{s}
}

// loggingBackend writes every change to the changelog as well.
type loggingBackend struct{ s *loggedStore }

func (l loggingBackend) Get(key []byte) ([]byte, bool, error) { return l.s.raw.Get(key) }
func (l loggingBackend) Set(key, value []byte) error {
	if err := l.s.raw.Set(key, value); err != nil {
		return err
	}
	l.s.log(key, value)
	return nil
}
func (l loggingBackend) Delete(key []byte) error {
	if err := l.s.raw.Delete(key); err != nil {
		return err
	}
	l.s.log(key, nil)
	return nil
}

// DeleteRange is not logged: a range deletion is a store's housekeeping (a window or
// session store dropping its expired segments), which Kafka Streams does not log either;
// the changelog topic's retention.ms removes those records.
func (l loggingBackend) DeleteRange(from, to []byte) error { return l.s.raw.DeleteRange(from, to) }

func (l loggingBackend) Range(from, to []byte) (store.Iterator, error) {
	return l.s.raw.Range(from, to)
}
func (l loggingBackend) ReverseRange(from, to []byte) (store.Iterator, error) {
	return l.s.raw.ReverseRange(from, to)
}
func (l loggingBackend) PrefixScan(p []byte) (store.Iterator, error) { return l.s.raw.PrefixScan(p) }
func (l loggingBackend) NewBatch() store.Batch                       { return &loggingBatch{s: l.s, b: l.s.raw.NewBatch()} }
func (l loggingBackend) ApproximateCount() (int64, error)            { return l.s.raw.ApproximateCount() }
func (l loggingBackend) Checkpoint() (int64, error)                  { return l.s.raw.Checkpoint() }

type loggingBatch struct {
	s    *loggedStore
	b    store.Batch
	logs [][2][]byte
}

func (lb *loggingBatch) Set(k, v []byte) {
	lb.b.Set(k, v)
	lb.logs = append(lb.logs, [2][]byte{append([]byte(nil), k...), append([]byte{}, v...)})
}
func (lb *loggingBatch) Delete(k []byte) {
	lb.b.Delete(k)
	lb.logs = append(lb.logs, [2][]byte{append([]byte(nil), k...), nil})
}
func (lb *loggingBatch) SetCheckpoint(o int64) { lb.b.SetCheckpoint(o) }
func (lb *loggingBatch) Len() int              { return lb.b.Len() }
func (lb *loggingBatch) Reset()                { lb.b.Reset(); lb.logs = lb.logs[:0] }

// DeleteRange is not logged (see loggingBackend.DeleteRange).
func (lb *loggingBatch) DeleteRange(from, to []byte) { lb.b.DeleteRange(from, to) }

func (lb *loggingBatch) Commit() error {
	if err := lb.b.Commit(); err != nil {
		return err
	}
	for _, kv := range lb.logs {
		lb.s.log(kv[0], kv[1])
	}
	lb.logs = lb.logs[:0]
	return nil
}

// logPending writes the buffered changes to the changelog (once per key changed since the
// last flush). It runs before the producer is flushed in a commit, and before an early
// flush.
func (s *loggedStore) logPending() {
	if s.buf == nil || s.spec.Changelog == "" || s.spec.SourceTopic {
		return
	}
	// The records and their bytes are allocated for all the changes at once: Size is the
	// bytes of the pending keys and values, Len bounds their number.
	lb := logBatch{recs: make([]OutRecord, 0, s.buf.Len()), arena: make([]byte, 0, s.buf.Size())}
	if s.retentionMs > 0 {
		s.horizon = time.Now().UnixMilli() - s.retentionMs
	}
	s.buf.Pending(func(k, v []byte, deleted bool) {
		if deleted {
			v = nil
		} else if v == nil {
			v = []byte{}
		}
		s.logTo(&lb, k, v)
	})
	s.noteExpiring()
}

// noteExpiring counts and logs (at warn, rate-limited) the changelog records of the last
// logPending whose timestamp was already past their topic's retention.ms. The store of a
// time or sliding window aggregation (a timestamped window store) logs each window with its
// timestamp (event time, Kafka Streams' format), and the broker deletes a record of a
// compact,delete topic once the wall clock is retention.ms past it, at its next retention
// check: records of data older than that (a reprocessing of old input, an application far
// behind) leave the changelog within seconds, while the store still holds their windows. A
// restore of the store elsewhere (a failover, a new instance, a wiped state directory) then
// lacks them, and their windows' results are wrong with nothing else to say so. Kafka
// Streams behaves the same, silently.
func (s *loggedStore) noteExpiring() {
	if s.expiring == 0 {
		return
	}
	n, oldest := s.expiring, s.oldest
	s.expiring, s.oldest = 0, 0
	s.r.stats.expiring.Add(n)
	s.r.warnEvery("changelog retention "+s.spec.Changelog,
		"kstream: a windowed aggregation's store logs records older than its changelog topic's retention.ms: the broker deletes them at its next retention check, and a restore of the store (a failover, a new instance) will not have them; when processing input that old, raise the topic's retention.ms (WithChangelogConfig, or on the existing topic) above the input's age",
		"store", s.spec.Name, "topic", s.spec.Changelog, "partition", s.partition, "records", n,
		"oldest", time.UnixMilli(oldest).UTC(), "retention_ms", s.retentionMs)
}

// logBatch holds the storage of the changelog records of one logPending.
type logBatch struct {
	recs  []OutRecord
	arena []byte
}

// record returns a new record of the batch.
func (lb *logBatch) record() *OutRecord {
	if lb == nil || len(lb.recs) == cap(lb.recs) {
		return new(OutRecord)
	}
	lb.recs = lb.recs[:len(lb.recs)+1]
	return &lb.recs[len(lb.recs)-1]
}

// copyBytes returns a copy of b (never nil; empty for an empty b), from the batch's arena.
func (lb *logBatch) copyBytes(b []byte) []byte {
	if lb == nil || len(b) == 0 {
		return append([]byte{}, b...)
	}
	n := len(lb.arena)
	lb.arena = append(lb.arena, b...) // a reallocation leaves the earlier copies valid
	return lb.arena[n:len(lb.arena):len(lb.arena)]
}

// maybeFlush writes the buffered changes to the changelog and the engine early when they
// grew large. It runs on the task's goroutine, at-least-once only: the data then runs ahead
// of its checkpoint, which restoration tolerates by replaying the changelog in order.
func (s *loggedStore) maybeFlush() error {
	if s.buf == nil || s.buf.Size() < flushBytes {
		return nil
	}
	if s.r.sess != nil || s.r.committing.Load() {
		// Exactly-once: the buffer may reach the store only after its transaction
		// commits, so commit early instead. At-least-once with a commit in flight: its
		// frozen changes are written first (commitasync.go), so commit next instead.
		s.r.commitNow.Store(true)
		return nil
	}
	s.logPending()
	if err := s.buf.Flush(-1); err != nil {
		return fmt.Errorf("kstream: writing the buffered changes of store %s partition %d: %w", s.spec.Name, s.partition, err)
	}
	return nil
}

// operator names the store's changelog as the operator of its records (for errors): made
// once, when the store opens, rather than for every record.
func (s *loggedStore) operator() string {
	if s.op == "" { // a loggedStore made elsewhere (tests)
		return "changelog of " + s.spec.Name
	}
	return s.op
}

// log writes one change to the changelog partition of the task.
func (s *loggedStore) log(key, value []byte) { s.logTo(nil, key, value) }

// logTo is log taking the record and its bytes from lb, if not nil.
//
// A store key is never null: the empty key (which a store or a buffer may hand over as a
// nil slice) is written as an empty key, length 0 on the wire, as Kafka Streams' changelogs
// write it. A null key would be lost: restoring skips null keys, as Kafka Streams'
// StoreChangelogReader does, and Apache Kafka refuses them in a compacted topic
// (INVALID_RECORD). copyBytes never returns nil.
func (s *loggedStore) logTo(lb *logBatch, key, value []byte) {
	if rc, ok := s.spec.Codec.(store.ChangelogRecordCodec); ok {
		// A versioned store: the codec makes the whole record (key, value, timestamp).
		k, v, ts, logged := rc.ChangelogRecord(key, value)
		if !logged {
			return
		}
		s.written.Store(true)
		s.r.stats.changelog.Add(1)
		o := lb.record()
		*o = OutRecord{
			Record:    kgo.Record{Topic: s.spec.Changelog, Partition: s.partition, Key: lb.copyBytes(k), Timestamp: time.UnixMilli(ts)},
			Operator:  s.operator(),
			changelog: s,
		}
		if v != nil {
			o.Record.Value = lb.copyBytes(v)
		}
		s.r.Produce(o)
		return
	}
	if s.spec.Codec != nil {
		k, logged := s.spec.Codec.ChangelogKey(key)
		if !logged {
			return
		}
		key = k
	}
	s.written.Store(true)
	s.r.stats.changelog.Add(1)
	o := lb.record()
	*o = OutRecord{
		Record:    kgo.Record{Topic: s.spec.Changelog, Partition: s.partition, Key: lb.copyBytes(key), Value: value},
		Operator:  s.operator(),
		changelog: s,
	}
	if value != nil {
		if s.spec.Timestamped && len(value) >= tsLen {
			ts := int64(binary.BigEndian.Uint64(value))
			o.Record.Timestamp = time.UnixMilli(ts)
			value = value[tsLen:]
			if s.retentionMs > 0 && ts < s.horizon {
				if s.expiring == 0 || ts < s.oldest {
					s.oldest = ts
				}
				s.expiring++
			}
		}
		o.Record.Value = lb.copyBytes(value)
	}
	s.r.Produce(o)
}

// checkpoint writes the buffered changes and the acknowledged changelog position to the
// store, atomically. It runs in a commit, after every produced record was acknowledged.
func (s *loggedStore) checkpoint(committed map[string]map[int32]kgo.EpochOffset) error {
	at := int64(-1)
	switch {
	case s.spec.Changelog == "":
	case s.spec.SourceTopic:
		if o, ok := committed[s.spec.Changelog][s.partition]; ok {
			at = o.Offset
		}
	default:
		if s.written.Swap(false) {
			at = s.acked.Load()
		}
	}
	if s.buf != nil {
		if err := s.buf.Flush(at); err != nil {
			return fmt.Errorf("kstream: checkpointing store %s partition %d at %d: %w", s.spec.Name, s.partition, at, err)
		}
		if at >= 0 {
			s.position.Store(at)
		}
		return nil
	}
	if at < 0 {
		return nil
	}
	b := s.raw.NewBatch()
	b.SetCheckpoint(at)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("kstream: checkpointing store %s partition %d at %d: %w", s.spec.Name, s.partition, at, err)
	}
	s.position.Store(at)
	return nil
}

// openStores opens, and restores from their changelogs, the stores of a new task.
func (r *Runtime) openStores(ctx context.Context, id TaskID, specs []StoreSpec) (map[string]*loggedStore, error) {
	out := make(map[string]*loggedStore, len(specs))
	for _, spec := range specs {
		db, err := r.stores.db(spec.Persistent)
		if err != nil {
			return nil, err
		}
		raw, err := db.Open(spec.Name, id.Partition)
		if err != nil {
			return nil, fmt.Errorf("kstream: opening store %s partition %d: %w", spec.Name, id.Partition, err)
		}
		ls := &loggedStore{spec: spec, partition: id.Partition, raw: raw, r: r, op: "changelog of " + spec.Name,
			retentionMs: r.deletingRetention(spec.Changelog)}
		ls.acked.Store(-1)
		if spec.Changelog != "" {
			if err := r.restore(ctx, id, db, ls); err != nil {
				return nil, err
			}
		}
		switch {
		case spec.Persistent:
			ls.buf = store.NewBuffer(raw)
			if r.cfg.StoreCacheBytes >= 0 && !spec.NoReadCache {
				ls.buf.WithSharedReadCache(&r.caches.share)
			}
		case r.cfg.ExactlyOnce || spec.Changelog != "":
			// Exactly-once: writes must wait for their transaction to commit. A logged
			// memory store is buffered too, so that a key updated many times between
			// commits is logged once per commit (as Kafka Streams' caching and its
			// in-memory suppression buffer do), not once per update. Its read cache, as
			// Kafka Streams' record cache over an in-memory store, makes the read of a key
			// written or read recently a map lookup instead of a search of the engine's
			// B-tree.
			ls.buf = store.NewBuffer(raw)
			if r.cfg.StoreCacheBytes >= 0 && !spec.NoReadCache {
				ls.buf.WithSharedReadCache(&r.caches.share)
			}
		}
		cp, err := raw.Checkpoint()
		if err != nil {
			return nil, fmt.Errorf("kstream: reading the checkpoint of store %s partition %d: %w", spec.Name, id.Partition, err)
		}
		ls.position.Store(cp)
		out[spec.Name] = ls
	}
	return out, nil
}

// restore replays the committed records of the changelog partition of ls from its
// checkpoint to the end (last stable) offset measured now. Local state that cannot have been
// built from this changelog is wiped first (checkLocal). The end is reached when the
// consumer's position reaches that offset, not when a record at end-1 is seen: a partition
// may end in transaction markers, be empty, or have offsets removed by compaction.
// Conditions that heal by waiting (no leader yet, a broker down) are retried.
func (r *Runtime) restore(ctx context.Context, id TaskID, db store.DB, ls *loggedStore) error {
	topic, p := ls.spec.Changelog, ls.partition
	// Restoration reads read_committed, so aborted writes of a zombie never reach a store;
	// it ends at the changelog's high watermark (see checkLocal), after a previous owner's
	// open transaction, if any, has ended.
	lc, err := r.checkLocal(ctx, db, ls.spec, p, ls.raw, "active")
	if err != nil {
		return err
	}
	// A checkpoint below the log start (or none) restores from the log start: the records
	// before it were deleted by retention, and a consumer asked for them would be reset by
	// its out-of-range policy, possibly to the end, where no record tells it where it is.
	from, end := max(lc.from, lc.start, 0), lc.end
	ls.acked.Store(end)
	restorer, err := ls.spec.newRestorer(ls.raw)
	if err != nil {
		return err
	}
	if from >= end {
		r.log.Info("kstream: store is up to date", "store", ls.spec.Name, "partition", p, "checkpoint", from, "end", end)
		return nil
	}
	if r.cfg.RestoreListener != nil {
		r.cfg.RestoreListener.OnRestoreStart(ls.spec.Name, topic, p, from, end)
	}
	began := time.Now()
	prog := r.startRestore(id, ls, from, end) // Status (status.go)
	defer r.endRestore(prog)
	cl, err := kgo.NewClient(append(r.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		r.clientIDOpt(roleRestoreConsumer),
	), r.clientMetrics("restore", fmt.Sprintf("%s-%d", ls.spec.Name, p))...)...)
	if err != nil {
		return fmt.Errorf("kstream: creating the restore consumer of %q: %w", topic, err)
	}
	defer cl.Close()
	var restored int64
	pos := from
	lastLog := began
	var failingSince time.Time // first of the retriable fetch errors in a row
	for pos < end {
		// A poll waits at most 5s, so that waiting for an open transaction is logged.
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		fetches := cl.PollFetches(pctx)
		pcancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kstream: restoring store %s from %q partition %d at offset %d: %w", ls.spec.Name, topic, p, pos, err)
		}
		var ferr, retry error
		fetches.EachError(func(t string, pp int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				return // the poll's own timeout
			}
			err = fmt.Errorf("kstream: restoring store %s: fetching %q partition %d at offset %d: %w", ls.spec.Name, t, pp, pos, err)
			var dl *kgo.ErrDataLoss
			switch {
			case retriable(err) || errors.As(err, &dl):
				retry = err
			case ferr == nil:
				ferr = err
			}
		})
		if ferr != nil {
			return ferr
		}
		if retry != nil {
			// kgo retries the fetch by itself; the error is reported, not fatal.
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if g := r.cfg.GiveUpAfter; g > 0 && time.Since(failingSince) >= g {
				return fmt.Errorf("kstream: gave up after %s (Config.GiveUpAfter): %w", g, retry)
			}
			r.warnEvery("restore-fetch "+topic, "kstream: restoring: fetch error; retrying", "store", ls.spec.Name, "topic", topic, "partition", p, "offset", pos, "err", retry)
		} else {
			failingSince = time.Time{}
		}
		if fetches.NumRecords() == 0 && time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			r.log.Warn("kstream: restoring: waiting for an open transaction on the changelog to end (a previous owner that stopped mid-transaction; it ends within its transaction timeout)",
				"store", ls.spec.Name, "topic", topic, "partition", p, "position", pos, "end", end)
		}
		b := ls.raw.NewBatch()
		n := 0
		var aerr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, rec := range fp.Records {
				if rec.Offset >= end {
					// The fetch got past end: the offsets before it that returned no
					// record were an aborted transaction's (read_committed drops them;
					// its abort marker, written later, lies at end or after).
					pos = end
					break
				}
				pos = rec.Offset + 1
				if rec.Attrs.IsControl() {
					continue
				}
				applied, err := applyChangelogRecord(b, ls.spec, restorer, rec)
				if err != nil {
					aerr = fmt.Errorf("kstream: restoring store %s from %q partition %d at offset %d: %w", ls.spec.Name, topic, p, rec.Offset, err)
					return
				}
				if applied {
					n++
				}
			}
			// Offsets removed by compaction or retention: the fetch may start past "pos".
			if fp.LogStartOffset > pos {
				pos = min(fp.LogStartOffset, end)
			}
		})
		if aerr != nil {
			return aerr
		}
		if n == 0 && b.Len() == 0 && retry != nil {
			continue
		}
		b.SetCheckpoint(pos)
		if err := b.Commit(); err != nil {
			return fmt.Errorf("kstream: restoring store %s partition %d: writing a batch: %w", ls.spec.Name, p, err)
		}
		restored += int64(n)
		prog.update(pos, n)
		if r.cfg.RestoreListener != nil && n > 0 {
			r.cfg.RestoreListener.OnBatchRestored(ls.spec.Name, topic, p, pos, n)
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			r.log.Info("kstream: restoring", "store", ls.spec.Name, "partition", p, "position", pos, "end", end,
				"progress", progress(pos-from, end-from), "records_per_s", rate(restored, time.Since(began)))
		}
	}
	el := time.Since(began)
	r.log.Info("kstream: restored store", "store", ls.spec.Name, "partition", p, "records", restored,
		"from", from, "to", end, "took", el.Round(time.Millisecond), "records_per_s", rate(restored, el))
	if r.cfg.RestoreListener != nil {
		r.cfg.RestoreListener.OnRestoreEnd(ls.spec.Name, topic, p, restored)
	}
	return nil
}

// progress is done/total as a percentage string; an empty range is complete.
func progress(done, total int64) string {
	if total <= 0 {
		return "100%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(done)/float64(total))
}

// rate is n per second over d; zero durations give 0 rather than a division by zero.
func rate(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}

// applyChangelogRecord adds one changelog record to a batch of its store: a null value
// deletes; a timestamped store gets the record's timestamp in front of the value. A record
// with a null key is skipped, as Kafka Streams' StoreChangelogReader skips it: a source
// table's topic, which is its changelog, may hold some, and the table never stored them.
// It reports whether it applied rec.
func applyChangelogRecord(b store.Batch, spec StoreSpec, r store.Restorer, rec *kgo.Record) (bool, error) {
	if rec.Key == nil {
		return false, nil
	}
	value := rec.Value
	if value != nil && spec.Timestamped {
		value = append(binary.BigEndian.AppendUint64(make([]byte, 0, tsLen+len(rec.Value)), uint64(rec.Timestamp.UnixMilli())), rec.Value...)
	}
	if tr, ok := r.(store.TimestampedRestorer); ok {
		return true, tr.RestoreAt(b, rec.Key, rec.Value, rec.Timestamp.UnixMilli())
	}
	switch {
	case r != nil:
		return true, r.Restore(b, rec.Key, value)
	case value == nil:
		b.Delete(rec.Key)
	default:
		b.Set(rec.Key, value)
	}
	return true, nil
}

// deletingRetention is the retention.ms that the topology asks for the internal topic
// topic (a store's changelog) if its cleanup.policy deletes records by time, else 0.
func (r *Runtime) deletingRetention(topic string) int64 {
	if topic == "" {
		return 0
	}
	for _, it := range r.topo.InternalTopics {
		if it.Name != topic {
			continue
		}
		policy, ret := it.Configs["cleanup.policy"], it.Configs["retention.ms"]
		if policy == nil || ret == nil || !strings.Contains(*policy, "delete") {
			return 0
		}
		ms, err := strconv.ParseInt(*ret, 10, 64)
		if err != nil || ms <= 0 {
			return 0
		}
		return ms
	}
	return 0
}
