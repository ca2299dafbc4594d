package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// Put return codes of a [VersionedKeyValueStore], as Kafka Streams' VersionedKeyValueStore
// defines them.
const (
	// PutNotPut is returned by Put for a record older than the history retention allows
	// (Java's PUT_RETURN_CODE_NOT_PUT): the store is unchanged.
	PutNotPut int64 = math.MinInt64
	// PutValidToUndefined is returned by Put for a record that is now the latest version of
	// its key (Java's PUT_RETURN_CODE_VALID_TO_UNDEFINED).
	PutValidToUndefined int64 = -1
)

// DefaultVersionedChangelogAdditionalCompactionLag is added to a versioned store's history
// retention to make its changelog's min.compaction.lag.ms, as Kafka Streams'
// VersionedChangelogTopicConfig does.
const DefaultVersionedChangelogAdditionalCompactionLag = 24 * time.Hour

// VersionedRecord is one version of a key's value: the value, the time from which it is
// valid, and the time until which it is (exclusive), as Kafka Streams' VersionedRecord.
// HasValidTo is false for the latest version, valid until further notice.
type VersionedRecord[V any] struct {
	Value      V
	Timestamp  int64
	ValidTo    int64
	HasValidTo bool
}

// version is one stored version of a key: its timestamp and value bytes, or a tombstone.
type version struct {
	ts        int64
	value     []byte
	tombstone bool
}

// Backend key layout of a versioned store (all integers big-endian, timestamps with their
// sign bit flipped so that they order as signed numbers):
//
//	0x01 | len(key) (4) | key | ts (8)                          -> flag (1: 0 value, 1 tombstone) | value
//	0x02 | expiry (8) | len(key) (4) | key | ts (8)             -> empty: expiry index
//	0x03                                                        -> observed stream time (8)
//
// Every version of a key has its own backend key, and the versions of a key are adjacent,
// ordered by timestamp. A version that is not the latest of its key (and a tombstone that
// is) has an entry in the expiry index under the time after which it can no longer be read:
// its validTo (for a latest tombstone, its own timestamp, as Java's degenerate segments).
// When the observed stream time minus the history retention passes that time, the version
// is deleted; the latest value of a key never expires (Kafka Streams' latest value store).
// Only version keys are logged, one changelog record per version: the key, the value (null
// for a tombstone) and the version's timestamp as the record timestamp, which is the
// changelog format of Kafka Streams' ChangeLoggingVersionedKeyValueBytesStore.
const (
	vPrefixVersion byte = 1
	vPrefixExpiry  byte = 2
	vPrefixMeta    byte = 3
)

var vMetaKey = []byte{vPrefixMeta}

func flipTS(ts int64) uint64  { return uint64(ts) ^ (1 << 63) }
func unflipTS(u uint64) int64 { return int64(u ^ (1 << 63)) }

func versionPrefix(key []byte) []byte {
	p := make([]byte, 0, 5+len(key)+8)
	p = append(p, vPrefixVersion)
	p = binary.BigEndian.AppendUint32(p, uint32(len(key)))
	return append(p, key...)
}

func versionKey(key []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(versionPrefix(key), flipTS(ts))
}

func expiryKey(expiry int64, key []byte, ts int64) []byte {
	p := make([]byte, 0, 1+8+4+len(key)+8)
	p = append(p, vPrefixExpiry)
	p = binary.BigEndian.AppendUint64(p, flipTS(expiry))
	p = binary.BigEndian.AppendUint32(p, uint32(len(key)))
	p = append(p, key...)
	return binary.BigEndian.AppendUint64(p, flipTS(ts))
}

var errBadVersionedKey = errors.New("store: malformed versioned store key")

// parseVersionKey splits a version key into its key and timestamp.
func parseVersionKey(k []byte) (key []byte, ts int64, err error) {
	if len(k) < 13 || k[0] != vPrefixVersion {
		return nil, 0, errBadVersionedKey
	}
	n := binary.BigEndian.Uint32(k[1:])
	if uint64(len(k)) != 13+uint64(n) {
		return nil, 0, errBadVersionedKey
	}
	return k[5 : 5+n], unflipTS(binary.BigEndian.Uint64(k[5+n:])), nil
}

// parseExpiryKey returns the version key an expiry index key stands for.
func parseExpiryKey(k []byte) ([]byte, error) {
	if len(k) < 21 || k[0] != vPrefixExpiry {
		return nil, errBadVersionedKey
	}
	vk := append([]byte{vPrefixVersion}, k[9:]...)
	if _, _, err := parseVersionKey(vk); err != nil {
		return nil, err
	}
	return vk, nil
}

func encodeVersionValue(v version) []byte {
	out := make([]byte, 0, 1+len(v.value))
	if v.tombstone {
		return append(out, 1)
	}
	return append(append(out, 0), v.value...)
}

// versionedCore is the layout and the put logic shared by the typed store and its restorer.
type versionedCore struct {
	name      string
	retention int64 // ms
}

// expiryOf is the time after which version i of vs can no longer be read, or false for the
// latest value of a key (which never expires).
func expiryOf(vs []version, i int) (int64, bool) {
	if i+1 < len(vs) {
		return vs[i+1].ts, true
	}
	if vs[i].tombstone {
		return vs[i].ts, true
	}
	return 0, false
}

// vWriter is where a put writes: a backend or a batch.
type vWriter interface {
	set(k, v []byte)
	del(k []byte)
}

type vBackendWriter struct {
	b   Backend
	err error
}

func (w *vBackendWriter) set(k, v []byte) {
	if w.err == nil {
		w.err = w.b.Set(k, v)
	}
}

func (w *vBackendWriter) del(k []byte) {
	if w.err == nil {
		w.err = w.b.Delete(k)
	}
}

type vBatchWriter struct{ bt Batch }

func (w vBatchWriter) set(k, v []byte) { w.bt.Set(k, v) }
func (w vBatchWriter) del(k []byte)    { w.bt.Delete(k) }

// put inserts (ts, value) into the versions vs of key (sorted by timestamp), given the
// observed stream time before the put, writes the changes through w, and returns the new
// versions, the new stream time and the put's return code (Java's validTo semantics).
func (c *versionedCore) put(w vWriter, key []byte, vs []version, streamTime int64, nv version) ([]version, int64, int64) {
	if nv.ts < streamTime-c.retention {
		return vs, streamTime, PutNotPut
	}
	streamTime = max(streamTime, nv.ts)
	i := sort.Search(len(vs), func(i int) bool { return vs[i].ts >= nv.ts })
	// The expiry entries of the neighbours change: drop the old ones first.
	dropExpiry := func(j int) {
		if j >= 0 && j < len(vs) {
			if e, ok := expiryOf(vs, j); ok {
				w.del(expiryKey(e, key, vs[j].ts))
			}
		}
	}
	addExpiry := func(j int) {
		if j >= 0 && j < len(vs) {
			if e, ok := expiryOf(vs, j); ok {
				w.set(expiryKey(e, key, vs[j].ts), nil)
			}
		}
	}
	if i < len(vs) && vs[i].ts == nv.ts {
		dropExpiry(i)
		vs[i] = nv
		addExpiry(i)
	} else {
		dropExpiry(i - 1)
		vs = append(vs, version{})
		copy(vs[i+1:], vs[i:])
		vs[i] = nv
		addExpiry(i - 1)
		addExpiry(i)
	}
	w.set(versionKey(key, nv.ts), encodeVersionValue(nv))
	code := PutValidToUndefined
	if i+1 < len(vs) {
		code = vs[i+1].ts
	}
	return vs, streamTime, code
}

// find returns the version of vs valid at asOf, given the stream time: Java's
// RocksDBVersionedStore.get(key, asOf), including its rule that only the latest value is
// read for a time older than the history retention.
func (c *versionedCore) find(vs []version, streamTime, asOf int64) (version, int64, bool, bool) {
	i := sort.Search(len(vs), func(i int) bool { return vs[i].ts > asOf }) - 1
	if i < 0 {
		return version{}, 0, false, false
	}
	latest := i == len(vs)-1
	if asOf < streamTime-c.retention && !latest {
		return version{}, 0, false, false
	}
	if vs[i].tombstone {
		return version{}, 0, false, false
	}
	if latest {
		return vs[i], 0, false, true
	}
	return vs[i], vs[i+1].ts, true, true
}

// loadVersions reads the versions of key from b.
func loadVersions(b Backend, key []byte) ([]version, error) {
	it, err := b.PrefixScan(versionPrefix(key))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var vs []version
	for it.Next() {
		k, v := it.Key(), it.Value()
		_, ts, err := parseVersionKey(k)
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: empty version value", errBadVersionedKey)
		}
		vs = append(vs, version{ts: ts, tombstone: v[0] == 1, value: append([]byte(nil), v[1:]...)})
	}
	return vs, it.Err()
}

// noStreamTime is the observed stream time of an empty store: Java's NO_TIMESTAMP.
const noStreamTime int64 = -1

func readStreamTime(b Backend) (int64, error) {
	v, ok, err := b.Get(vMetaKey)
	if err != nil || !ok {
		return noStreamTime, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stream time of %d bytes", errBadVersionedKey, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// expire deletes the versions that expired by the stream time (their expiry is before
// streamTime - retention).
func (c *versionedCore) expire(b Backend, w vWriter, streamTime int64) error {
	bound := streamTime - c.retention
	to := binary.BigEndian.AppendUint64([]byte{vPrefixExpiry}, flipTS(bound))
	it, err := b.Range([]byte{vPrefixExpiry}, to)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		vk, err := parseExpiryKey(it.Key())
		if err != nil {
			return err
		}
		w.del(vk)
		w.del(append([]byte(nil), it.Key()...))
	}
	return it.Err()
}

// VersionedKeyValueStore is a typed versioned key-value store over a [Backend], as Kafka
// Streams' RocksDBVersionedStore (KIP-889): it keeps, for each key, the versions of its
// value written within the history retention, each valid from its timestamp until the next
// version's, and answers reads of the latest value ([VersionedKeyValueStore.Get]) and of
// the value as of a time ([VersionedKeyValueStore.GetAsOf]). A delete is a version too (a
// tombstone). Versions whose validity ended before the observed stream time minus the
// history retention are dropped; the latest value of a key is kept whatever its age. Puts
// may come out of timestamp order and are inserted into the history where they belong,
// unless they are older than the history retention allows.
//
// Its changelog has Kafka Streams' format ([NewVersionedChangelog]). It is used from one
// goroutine at a time (its task's).
type VersionedKeyValueStore[K, V any] struct {
	core versionedCore
	b    Backend
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// NewVersionedKeyValueStore returns a typed versioned view of b with the given history
// retention (Java's Stores.persistentVersionedKeyValueStore(name, historyRetention)).
func NewVersionedKeyValueStore[K, V any](name string, b Backend, ks serde.Serde[K], vs serde.Serde[V], historyRetention time.Duration) *VersionedKeyValueStore[K, V] {
	return &VersionedKeyValueStore[K, V]{core: versionedCore{name: name, retention: historyRetention.Milliseconds()}, b: b, ks: ks, vs: vs}
}

// Name returns the store's name.
func (s *VersionedKeyValueStore[K, V]) Name() string { return s.core.name }

// HistoryRetention returns the store's history retention.
func (s *VersionedKeyValueStore[K, V]) HistoryRetention() time.Duration {
	return time.Duration(s.core.retention) * time.Millisecond
}

// ObservedStreamTime returns the largest timestamp put so far, or -1 (Java's NO_TIMESTAMP).
func (s *VersionedKeyValueStore[K, V]) ObservedStreamTime() (int64, error) {
	t, err := readStreamTime(s.b)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	return t, nil
}

func (s *VersionedKeyValueStore[K, V]) key(k K) ([]byte, error) {
	b, err := s.ks.Serialize(k)
	if err != nil {
		return nil, fmt.Errorf("store %s: serializing key: %w", s.core.name, err)
	}
	return b, nil
}

// Put writes v as the value of k from time ts on, and returns the time until which it is
// valid ([PutValidToUndefined] if it is the latest version), or [PutNotPut] if ts is older
// than the observed stream time minus the history retention (Java's
// VersionedKeyValueStore.put).
func (s *VersionedKeyValueStore[K, V]) Put(k K, v V, ts int64) (int64, error) {
	vb, err := s.vs.Serialize(v)
	if err != nil {
		return 0, fmt.Errorf("store %s: serializing value: %w", s.core.name, err)
	}
	if vb == nil {
		return s.put(k, version{ts: ts, tombstone: true})
	}
	return s.put(k, version{ts: ts, value: vb})
}

// PutTombstone writes a tombstone for k at time ts (Java's put(key, null, timestamp)) and
// returns what [VersionedKeyValueStore.Put] returns.
func (s *VersionedKeyValueStore[K, V]) PutTombstone(k K, ts int64) (int64, error) {
	return s.put(k, version{ts: ts, tombstone: true})
}

func (s *VersionedKeyValueStore[K, V]) put(k K, nv version) (int64, error) {
	kb, err := s.key(k)
	if err != nil {
		return 0, err
	}
	st, err := readStreamTime(s.b)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	vs, err := loadVersions(s.b, kb)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	w := &vBackendWriter{b: s.b}
	_, nst, code := s.core.put(w, kb, vs, st, nv)
	if code == PutNotPut {
		return code, nil
	}
	if nst != st {
		w.set(vMetaKey, binary.BigEndian.AppendUint64(nil, uint64(nst)))
		if w.err == nil {
			if err := s.core.expire(s.b, w, nst); err != nil {
				return 0, fmt.Errorf("store %s: expiring versions: %w", s.core.name, err)
			}
		}
	}
	if w.err != nil {
		return 0, fmt.Errorf("store %s: %w", s.core.name, w.err)
	}
	return code, nil
}

// Delete writes a tombstone for k at time ts and returns the version it ends, the one that
// was valid at ts (ok false if there was none, or if ts is older than the history
// retention allows, in which case nothing is written), as Java's delete(key, timestamp).
func (s *VersionedKeyValueStore[K, V]) Delete(k K, ts int64) (rec VersionedRecord[V], ok bool, err error) {
	st, err := s.ObservedStreamTime()
	if err != nil {
		return rec, false, err
	}
	if ts < st-s.core.retention {
		return rec, false, nil
	}
	rec, ok, err = s.GetAsOf(k, ts)
	if err != nil {
		return rec, false, err
	}
	_, err = s.put(k, version{ts: ts, tombstone: true})
	return rec, ok, err
}

// Get returns the latest value of k (ok false if k has none, or its latest version is a
// tombstone).
func (s *VersionedKeyValueStore[K, V]) Get(k K) (VersionedRecord[V], bool, error) {
	return s.GetAsOf(k, math.MaxInt64)
}

// GetAsOf returns the value of k valid at time asOf: the version with the largest
// timestamp not after asOf, unless that is a tombstone. As in Kafka Streams, a time older
// than the observed stream time minus the history retention finds only the latest value.
func (s *VersionedKeyValueStore[K, V]) GetAsOf(k K, asOf int64) (rec VersionedRecord[V], ok bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return rec, false, err
	}
	st, err := readStreamTime(s.b)
	if err != nil {
		return rec, false, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	vs, err := loadVersions(s.b, kb)
	if err != nil {
		return rec, false, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	v, validTo, hasValidTo, found := s.core.find(vs, st, asOf)
	if !found {
		return rec, false, nil
	}
	val, err := s.vs.Deserialize(v.value)
	if err != nil {
		return rec, false, fmt.Errorf("store %s: deserializing value: %w", s.core.name, err)
	}
	return VersionedRecord[V]{Value: val, Timestamp: v.ts, ValidTo: validTo, HasValidTo: hasValidTo}, true, nil
}

// Versions returns the versions of k that are readable now and overlap [from, to]: valid
// at some time in it, newest first, as Java's MultiVersionedKeyQuery (KIP-968) returns
// them. Tombstones are not returned.
func (s *VersionedKeyValueStore[K, V]) Versions(k K, from, to int64) ([]VersionedRecord[V], error) {
	kb, err := s.key(k)
	if err != nil {
		return nil, err
	}
	st, err := readStreamTime(s.b)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	vs, err := loadVersions(s.b, kb)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.core.name, err)
	}
	var out []VersionedRecord[V]
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		latest := i == len(vs)-1
		if v.tombstone || v.ts > to {
			continue
		}
		if !latest && (vs[i+1].ts <= from || vs[i+1].ts <= st-s.core.retention) {
			break
		}
		val, err := s.vs.Deserialize(v.value)
		if err != nil {
			return nil, fmt.Errorf("store %s: deserializing value: %w", s.core.name, err)
		}
		r := VersionedRecord[V]{Value: val, Timestamp: v.ts}
		if !latest {
			r.ValidTo, r.HasValidTo = vs[i+1].ts, true
		}
		out = append(out, r)
	}
	return out, nil
}

// versionedCodec is the [ChangelogCodec] of a versioned store.
type versionedCodec struct{ core versionedCore }

// NewVersionedChangelog returns the changelog codec of a versioned store with the given
// history retention. Each version is logged as one record with the key, the value (null for
// a tombstone) and the version's timestamp, as Kafka Streams'
// ChangeLoggingVersionedKeyValueBytesStore logs put(key, value, timestamp); expiry is not
// logged. Its topic is compacted with min.compaction.lag.ms = history retention + 1 day
// (Java's VersionedChangelogTopicConfig), so that versions within the history outlive
// compaction.
func NewVersionedChangelog(historyRetention time.Duration) ChangelogRecordCodec {
	return versionedCodec{core: versionedCore{name: "versioned changelog", retention: historyRetention.Milliseconds()}}
}

// ChangelogRecordCodec is a [ChangelogCodec] that also maps the value and timestamp of a
// changelog record: the runtime logs a write of backend key k with value v (nil for a
// deletion) as ChangelogRecord returns it, and restores through a [TimestampedRestorer].
type ChangelogRecordCodec interface {
	ChangelogCodec
	// ChangelogRecord returns the changelog record of a write of k = v (v nil: a deletion of
	// k): its key, value (nil for a null) and timestamp (Unix ms); logged is false for
	// writes that are not logged.
	ChangelogRecord(k, v []byte) (key, value []byte, ts int64, logged bool)
}

// TimestampedRestorer is a [Restorer] that needs each changelog record's timestamp.
type TimestampedRestorer interface {
	Restorer
	// RestoreAt adds to bt the writes applying one changelog record with its timestamp; value
	// is the record's value as it is in the changelog (nil for a null).
	RestoreAt(bt Batch, key, value []byte, ts int64) error
}

func (c versionedCodec) ChangelogKey(k []byte) ([]byte, bool) {
	key, _, err := parseVersionKey(k)
	if err != nil {
		return nil, false
	}
	return key, true
}

func (c versionedCodec) ChangelogRecord(k, v []byte) (key, value []byte, ts int64, logged bool) {
	key, ts, err := parseVersionKey(k)
	if err != nil || v == nil || len(v) == 0 {
		return nil, nil, 0, false
	}
	if v[0] == 1 {
		return key, nil, ts, true
	}
	return key, v[1:], ts, true
}

// HistoryRetention returns the history retention of the store the codec logs.
func (c versionedCodec) HistoryRetention() time.Duration {
	return time.Duration(c.core.retention) * time.Millisecond
}

func (c versionedCodec) TopicConfigs() map[string]*string {
	policy := "compact"
	lag := strconv.FormatInt(c.core.retention+DefaultVersionedChangelogAdditionalCompactionLag.Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "min.compaction.lag.ms": &lag}
}

func (c versionedCodec) NewRestorer(b Backend) (Restorer, error) {
	st, err := readStreamTime(b)
	if err != nil {
		return nil, err
	}
	return &versionedRestorer{core: c.core, b: b, streamTime: st, pending: map[string][]version{}}, nil
}

// versionedRestorer applies changelog records as puts. A batch's writes are not visible
// through the backend before it commits, so the restorer keeps the versions of the keys it
// changed since its batch was last empty (committed) in memory, as Java's
// RocksDBVersionedStoreRestoreWriteBuffer does.
type versionedRestorer struct {
	core       versionedCore
	b          Backend
	streamTime int64
	pending    map[string][]version
}

func (r *versionedRestorer) Restore(bt Batch, key, value []byte) error {
	return fmt.Errorf("store: a versioned store's changelog record needs its timestamp")
}

func (r *versionedRestorer) RestoreAt(bt Batch, key, value []byte, ts int64) error {
	if bt.Len() == 0 {
		clear(r.pending)
	}
	vs, ok := r.pending[string(key)]
	if !ok {
		var err error
		if vs, err = loadVersions(r.b, key); err != nil {
			return err
		}
	}
	nv := version{ts: ts, value: append([]byte(nil), value...), tombstone: value == nil}
	w := vBatchWriter{bt}
	vs, nst, code := r.core.put(w, key, vs, r.streamTime, nv)
	if code == PutNotPut {
		return nil
	}
	r.pending[string(key)] = vs
	if nst != r.streamTime {
		r.streamTime = nst
		bt.Set(vMetaKey, binary.BigEndian.AppendUint64(nil, uint64(nst)))
	}
	return nil
}

var (
	_ ChangelogRecordCodec = versionedCodec{}
	_ TimestampedRestorer  = (*versionedRestorer)(nil)
)
