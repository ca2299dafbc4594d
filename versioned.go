package kstream

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// Versioned keeps a table in a versioned key-value store with the given history retention
// instead of a timestamped one, as Kafka Streams' Materialized.as(
// Stores.persistentVersionedKeyValueStore(name, historyRetention)) does (KIP-889, KIP-914):
// the store keeps every version of a key's value written within the history retention (see
// [store.VersionedKeyValueStore]), and a stream-table join ([Join], [LeftJoin]) looks the
// table up as of each stream record's timestamp instead of reading its latest value.
//
// A versioned table source ([Table], [KStream.ToTable]) forwards an update older than the
// key's latest version (an out-of-order update) marked as not the latest, which the
// table-table joins and [TableGroupBy] below it ignore, as Java's do, while
// [KTable.ToStream] emits it; an update older than the observed stream time minus the
// history retention is not stored and not forwarded. The changelog holds one record per
// version, timestamped with it, compacted with min.compaction.lag.ms = history retention +
// 1 day, as Java's. Applies to [Table], [KStream.ToTable], the aggregations ([Count],
// [Reduce], [Aggregate], [TableCount], [TableReduce], [TableAggregate]) and, through
// [Materialized], to [KTable.Filter], [KTable.FilterNot], [TableMapValues] and the
// table-table joins, whose results are then versioned too: an update the store refuses
// (too old) is not forwarded, and one that is not the latest of its key is forwarded marked
// so. Global tables and window and session stores do not take it (a Build error).
func Versioned(historyRetention time.Duration) StoreOption {
	return storeOpt{"Versioned", func(d *storeDef) { d.versioned, d.historyRetention = true, historyRetention }}
}

// JoinGrace gives a stream-table join ([Join], [LeftJoin]) against a versioned table (see
// [Versioned]) a grace period for its stream side, as Kafka Streams' Joined.withGracePeriod
// (KIP-923): stream records wait in a changelogged buffer ordered by time, and are joined,
// in timestamp order, once the buffer's stream time reaches their timestamp plus grace, so
// that table updates arriving up to grace late are seen by the lookups. A stream record
// older than the buffer's stream time minus grace is not buffered but joined at once, as
// Java does. The buffer store is named "<join name>-Buffer" and logged to
// "<application.id>-<join name>-Buffer-changelog". Build fails, as Java's does, when the
// table is not versioned or grace exceeds its history retention.
func JoinGrace(grace time.Duration) Option {
	return optFunc{"JoinGrace", func(c *opConfig) { g := grace; c.joinGrace = &g }}
}

// versionedKV is the typed store of a versioned table.
type versionedKV[K, V any] = store.VersionedKeyValueStore[K, V]

// versionedStoreDef turns d, a table's store definition, into a versioned store's.
func versionedStoreDef[K, V any](d *storeDef, ks serde.Serde[K], vs serde.Serde[V]) {
	d.timestamped = false
	d.codec = store.NewVersionedChangelog(d.historyRetention)
	name, ret := d.name, d.historyRetention
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.typed = func(b store.Backend) any { return store.NewVersionedKeyValueStore(name, b, ks, vs, ret) }
	d.query = newQueryCodec(VersionedKind, ks, vs, false)
}

// taskVersionedStore returns task t's instance of the versioned table store named name.
func taskVersionedStore[K, V any](t *task, name string) (*versionedKV[K, V], error) {
	s, ok := t.stores[name].(*versionedKV[K, V])
	if !ok {
		return nil, fmt.Errorf("kstream: internal error: task %s has no versioned store %q of these types (it has a %T)", t.id, name, t.stores[name])
	}
	return s, nil
}

// asOfGetter reads a versioned table's value of a key as of a time: Kafka Streams'
// KTableValueGetter.get(key, asOfTimestamp).
type asOfGetter[K, V any] func(k K, asOf int64) (v V, ts int64, ok bool, err error)

// versionedSourceTable makes n the source of a table kept in the versioned store d: Kafka
// Streams' KTableSource over a versioned store.
func versionedSourceTable[K, V any](b *Builder, n *node, d *storeDef, ks serde.Serde[K], vs serde.Serde[V]) KTable[K, V] {
	versionedStoreDef(d, ks, vs)
	storeKs := storeKeySerde(d, ks) // bound to the store's topic, as the store's own
	info := storedInfo()
	info.versioned = true
	n.instantiate = func(t *task) (any, error) {
		st, err := taskVersionedStore[K, V](t, d.name)
		if err != nil {
			return nil, err
		}
		return processorInstance(t, n, ProcessorFunc[K, V, K, change[V]](func(ctx ProcessorContext[K, change[V]], r Record[K, V]) error {
			if drop, err := nullKeyDropped(t, n, storeKs, r); drop || err != nil {
				return err
			}
			old, had, err := st.Get(r.Key)
			if err != nil {
				return err
			}
			res := change[V]{new: r.Value, hasNew: !nullValue(r)}
			var code int64
			ts := unixMs(r.Timestamp)
			if res.hasNew {
				code, err = st.Put(r.Key, r.Value, ts)
			} else {
				var zero V
				res.new = zero
				code, err = st.PutTombstone(r.Key, ts)
			}
			if err != nil {
				return err
			}
			if code == store.PutNotPut {
				// Older than the history retention: neither stored nor forwarded (Kafka
				// Streams' "Skipping record for expired put"), but counted and logged.
				now, err := st.ObservedStreamTime()
				if err != nil {
					return err
				}
				t.dropLate(n, late{reason: dropExpiredHistory, ts: ts, streamTime: now,
					lateBy: now - st.HistoryRetention().Milliseconds() - ts, store: d.name})
				return nil
			}
			res.stale = code != store.PutValidToUndefined
			if info.sendOld {
				res.old, res.hasOld = old.Value, had
			}
			ctx.Forward(Record[K, change[V]]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		}))
	}
	name := d.name
	getter := func(t *task) (valueGetter[K, V], error) {
		st, err := taskVersionedStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return func(k K) (V, int64, bool, error) {
			r, ok, err := st.Get(k)
			return r.Value, r.Timestamp, ok, err
		}, nil
	}
	asOf := func(t *task) (asOfGetter[K, V], error) {
		st, err := taskVersionedStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return func(k K, at int64) (V, int64, bool, error) {
			r, ok, err := st.GetAsOf(k, at)
			return r.Value, r.Timestamp, ok, err
		}, nil
	}
	return KTable[K, V]{b: b, n: n, ks: ks, vs: vs, store: d.name, info: info,
		getter: getter, asOf: asOf, getterStores: []*storeDef{d}}
}

// streamTableGrace checks a stream-table join's grace period against its table, as Kafka
// Streams' StreamTableJoinNode does, and declares the join's buffer store for node n. It
// returns nil when the join has no grace period.
func streamTableGrace[K, V, VT any](b *Builder, op string, c opConfig, s KStream[K, V], t KTable[K, VT], n *node) *storeDef {
	if c.joinGrace == nil {
		return nil
	}
	grace := *c.joinGrace
	if grace < 0 {
		b.errorf("%s %s: the grace period must not be negative", op, n.name)
		return nil
	}
	if t.asOf == nil {
		b.errorf("%s %s: KTable must be versioned to use a grace period in a stream table join.", op, n.name)
		return nil
	}
	for _, d := range t.getterStores {
		if !d.versioned {
			b.errorf("%s %s: KTable must be versioned to use a grace period in a stream table join.", op, n.name)
			return nil
		}
		if grace > d.historyRetention {
			b.errorf("%s %s: History retention must be at least grace period.", op, n.name)
			return nil
		}
	}
	if s.ks == nil || s.vs == nil {
		b.errorf("%s %s: the stream carries no key or value serde for the grace buffer; use WithSerdes: %w", op, n.name, ErrNoSerde)
		return nil
	}
	name := n.name + "-Buffer"
	d := &storeDef{name: name, persistent: true, logged: true}
	d.typed = func(bk store.Backend) any { return store.NewKeyValueStore(name, bk, serde.Bytes(), serde.Bytes()) }
	return d
}

// graceBuffer is a stream-table join's buffer of stream records, Kafka Streams'
// RocksDBTimeOrderedKeyValueBuffer: keys are the record's timestamp (8 bytes, big-endian),
// its serialized key and a sequence number (4 bytes), so that the store orders records by
// time; values are bufferEntry encodings holding the record's value, timestamp, topic and
// headers. The buffer's observed stream time (the largest timestamp buffered) is kept in
// the store under graceMetaKey, which sorts after every record (timestamps are not
// negative), so that it survives a restart with the records.
type graceBuffer[K, V any] struct {
	st    *bufferKV
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	grace int64
	seq   uint32
}

var graceMetaKey = []byte{0xff, 's', 't'}

func (g *graceBuffer[K, V]) streamTime() (int64, error) {
	v, ok, err := g.st.Get(graceMetaKey)
	if err != nil || !ok {
		return -1, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("kstream: buffer %s: stream time of %d bytes", g.st.Name(), len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// put buffers r unless it is older than the stream time minus grace; it reports whether it
// did, and the new stream time.
func (g *graceBuffer[K, V]) put(r Record[K, V], topic string) (bool, int64, error) {
	now, err := g.streamTime()
	if err != nil {
		return false, 0, err
	}
	ts := unixMs(r.Timestamp)
	if now-g.grace > ts || ts < 0 {
		return false, now, nil
	}
	kb, err := g.ks.Serialize(r.Key)
	if err != nil {
		return false, 0, fmt.Errorf("serializing the key: %w", err)
	}
	vb, err := g.vs.Serialize(r.Value)
	if err != nil {
		return false, 0, fmt.Errorf("serializing the value: %w", err)
	}
	var key []byte
	for {
		g.seq = (g.seq + 1) & 0x7fffffff
		key = binary.BigEndian.AppendUint64(make([]byte, 0, 12+len(kb)), uint64(ts))
		key = binary.BigEndian.AppendUint32(append(key, kb...), g.seq)
		if _, taken, err := g.st.Get(key); err != nil {
			return false, 0, err
		} else if !taken {
			break
		}
	}
	e := bufferEntry{time: ts, ts: ts, topic: topic, headers: r.Headers, new: vb, hasNew: true}
	if err := g.st.Put(key, e.encode()); err != nil {
		return false, 0, err
	}
	if ts > now {
		now = ts
		if err := g.st.Put(graceMetaKey, binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
			return false, 0, err
		}
	}
	return true, now, nil
}

// evict calls emit, in time order, for each record buffered with a timestamp up to the
// stream time minus grace, and removes it.
func (g *graceBuffer[K, V]) evict(now int64, emit func(Record[K, V]) error) error {
	bound := now - g.grace
	if bound < 0 {
		return nil
	}
	var to []byte
	if bound < math.MaxInt64 {
		to = binary.BigEndian.AppendUint64(nil, uint64(bound+1))
	}
	it, err := g.st.Range(nil, to)
	if err != nil {
		return err
	}
	type item struct {
		key []byte
		rec Record[K, V]
	}
	var out []item
	for it.Next() {
		key := append([]byte(nil), it.Key()...)
		if len(key) < 12 {
			continue
		}
		e, err := decodeBufferEntry(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		k, err := g.ks.Deserialize(key[8 : len(key)-4])
		if err != nil {
			it.Close()
			return fmt.Errorf("deserializing a buffered key: %w", err)
		}
		v, err := g.vs.Deserialize(e.new)
		if err != nil {
			it.Close()
			return fmt.Errorf("deserializing a buffered value: %w", err)
		}
		out = append(out, item{key: key, rec: Record[K, V]{Key: k, Value: v, Timestamp: msTime(e.ts), Headers: e.headers}})
	}
	if err := it.Err(); err != nil {
		it.Close()
		return err
	}
	it.Close()
	for _, x := range out {
		if err := emit(x.rec); err != nil {
			return err
		}
		if err := g.st.Delete(x.key); err != nil {
			return err
		}
	}
	return nil
}

// derivedAsOf is the as-of getter of a table derived without a store from a table whose
// as-of getter is parent (nil: not versioned): the parent's value as of the time, mapped by
// fn, which may reject it (Java's KTableFilter and KTableMapValues value getters with
// get(key, asOfTimestamp)).
func derivedAsOf[K, V, VR any](parent func(t *task) (asOfGetter[K, V], error), fn func(K, V) (VR, bool)) func(t *task) (asOfGetter[K, VR], error) {
	if parent == nil {
		return nil
	}
	return func(t *task) (asOfGetter[K, VR], error) {
		get, err := parent(t)
		if err != nil {
			return nil, err
		}
		return func(k K, at int64) (VR, int64, bool, error) {
			var zero VR
			v, ts, ok, err := get(k, at)
			if err != nil || !ok {
				return zero, 0, false, err
			}
			vr, ok := fn(k, v)
			if !ok {
				return zero, 0, false, nil
			}
			return vr, ts, true, nil
		}, nil
	}
}

// ownStore is the store of a table operator that keeps its result ([Materialized]): a
// timestamped store, or a versioned one (Java's KeyValueStoreWrapper).
type ownStore[K, V any] struct {
	ts  *tableKV[K, V]
	ver *versionedKV[K, V]
}

// openOwnStore returns task t's instance of the store d of a table operator.
func openOwnStore[K, V any](t *task, d *storeDef) (*ownStore[K, V], error) {
	if d.versioned {
		st, err := taskVersionedStore[K, V](t, d.name)
		return &ownStore[K, V]{ver: st}, err
	}
	st, err := taskTableStore[K, V](t, d.name)
	return &ownStore[K, V]{ts: st}, err
}

// get reads the latest value of k.
func (o *ownStore[K, V]) get(k K) (V, int64, bool, error) {
	if o.ver != nil {
		r, ok, err := o.ver.Get(k)
		return r.Value, r.Timestamp, ok, err
	}
	return getTS(o.ts, k)
}

// getSerialized is get of k, whose serialized form is kb.
func (o *ownStore[K, V]) getSerialized(k K, kb []byte) (V, int64, bool, error) {
	if o.ver != nil {
		return o.get(k)
	}
	tv, ok, err := o.ts.GetSerialized(kb)
	return tv.v, tv.ts, ok, err
}

// putSerialized is put of k, whose serialized form is kb.
func (o *ownStore[K, V]) putSerialized(k K, kb []byte, v V, present bool, ts int64) (int64, error) {
	if o.ver != nil {
		return o.put(k, v, present, ts)
	}
	if !present {
		return store.PutValidToUndefined, o.ts.DeleteSerialized(kb)
	}
	return store.PutValidToUndefined, o.ts.PutSerialized(kb, tsValue[V]{v: v, ts: ts})
}

// put writes k = v at time ts (a delete when !present) and returns Java's put return code:
// store.PutNotPut when a versioned store refused the write, store.PutValidToUndefined when
// it is the latest (always, for a timestamped store), else the version's validTo.
func (o *ownStore[K, V]) put(k K, v V, present bool, ts int64) (int64, error) {
	if o.ver != nil {
		if !present {
			return o.ver.PutTombstone(k, ts)
		}
		return o.ver.Put(k, v, ts)
	}
	return store.PutValidToUndefined, putTS(o.ts, k, v, present, ts)
}

// ownGetter is the value getter of a table kept in d, and ownAsOf its as-of getter (nil
// unless d is versioned).
func ownGetter[K, V any](d *storeDef) func(t *task) (valueGetter[K, V], error) {
	if !d.versioned {
		return storeGetter[K, V](d.name)
	}
	return func(t *task) (valueGetter[K, V], error) {
		o, err := openOwnStore[K, V](t, d)
		if err != nil {
			return nil, err
		}
		return o.get, nil
	}
}

func ownAsOf[K, V any](d *storeDef) func(t *task) (asOfGetter[K, V], error) {
	if !d.versioned {
		return nil
	}
	return func(t *task) (asOfGetter[K, V], error) {
		st, err := taskVersionedStore[K, V](t, d.name)
		if err != nil {
			return nil, err
		}
		return func(k K, at int64) (V, int64, bool, error) {
			r, ok, err := st.GetAsOf(k, at)
			return r.Value, r.Timestamp, ok, err
		}, nil
	}
}

// ownInfo is the tableInfo of a table with its own store d.
func ownInfo(d *storeDef) *tableInfo {
	info := storedInfo()
	info.versioned = d.versioned
	return info
}

// Java's put return codes (VersionedKeyValueStore.PUT_RETURN_CODE_NOT_PUT and
// KeyValueStoreWrapper.PUT_RETURN_CODE_IS_LATEST).
const (
	putNotPut   = store.PutNotPut
	putIsLatest = store.PutValidToUndefined
)

// VersionedKeyValueStore declares a versioned key-value store named name with the given
// history retention for the Processor API (Java's
// Stores.versionedKeyValueStoreBuilder(Stores.persistentVersionedKeyValueStore(name,
// historyRetention), ...)): pass it to [Process] with [WithStores], and reach it in the
// processor with [GetVersionedKeyValueStore]. The store is persistent and logged to
// "<application.id>-<name>-changelog" in Kafka Streams' versioned changelog format unless
// options say otherwise ([InMemory], [WithoutChangelog]).
func VersionedKeyValueStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], historyRetention time.Duration, opts ...StoreOption) StoreBuilder {
	d := &storeDef{name: name, persistent: true, logged: true}
	applyStoreOpts(d, opts)
	d.versioned, d.historyRetention = true, historyRetention
	versionedStoreDef(d, ks, vs)
	return storeBuilder{d}
}

// GetVersionedKeyValueStore returns the typed versioned store named name, which must have
// been connected to the processor with [WithStores] (with the same key and value types).
func GetVersionedKeyValueStore[K, V any](ctx interface {
	Store(name string) (any, error)
}, name string) (*store.VersionedKeyValueStore[K, V], error) {
	s, err := ctx.Store(name)
	if err != nil {
		return nil, err
	}
	vs, ok := s.(*store.VersionedKeyValueStore[K, V])
	if !ok {
		return nil, fmt.Errorf("kstream: store %q is a %T, not a VersionedKeyValueStore of these key and value types", name, s)
	}
	return vs, nil
}
