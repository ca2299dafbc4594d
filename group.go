package kstream

import (
	"fmt"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// KGroupedStream is a stream grouped by key, ready for an aggregation ([Count], [Reduce],
// [Aggregate]). Create one with [KStream.GroupByKey] or [GroupBy].
type KGroupedStream[K, V any] struct {
	s KStream[K, V]
	// name names the repartition topic instead of the store (Kafka Streams' Grouped.as).
	name string
}

// GroupByKey groups the stream by its current key. If a key-changing operator ran before,
// the aggregation first repartitions through "<application.id>-<store name>-repartition",
// using the stream's serdes (set them with [KStream.WithSerdes]); records with a null key
// are dropped there (see [KStream.Repartition]), and by the aggregation otherwise.
//
// As in Kafka Streams with topology.optimization=all, the joins and aggregations below one
// key-changing operator share one repartition topic, named after the first of them: two
// aggregations of one re-keyed stream, or a count and two joins of it, write each record
// to the topic once. The topic and its operators are created, when the first of them is
// defined, right after the key-changing operator, and the filters, peeks and branches
// between that operator and the aggregation move below the topic (they then see records
// partitioned by key; a sink among them reads the repartitioned stream too). After a
// [MapValues] or [FlatMapValues], which Java's optimizer does not look through, each
// aggregation has a topic of its own.
func (s KStream[K, V]) GroupByKey() KGroupedStream[K, V] { return KGroupedStream[K, V]{s: s} }

// GroupBy groups the stream by a new key; the aggregation always repartitions. ks is the
// serde of the new key; the value keeps the stream's value serde. The new key is null only
// if key returns a nil pointer, map, slice or interface (key gets the zero K for a record
// with a null key: a string key function cannot return null); such records are dropped
// before the repartition topic, as Kafka Streams drops null keys there. [Named] names the
// key-selecting operator and the repartition topic, "<application.id>-<name>-repartition",
// as Kafka Streams' Grouped.as does; without it the topic is named after the store of the
// first aggregation. Options: [Named].
func GroupBy[K, V, KR any](s KStream[K, V], key func(K, V) KR, ks serde.Serde[KR], opts ...Option) KGroupedStream[KR, V] {
	c := s.b.options("GroupBy", opts)
	var named []Option
	if c.name != "" {
		named = append(named, Named(c.name))
	}
	rekeyed := SelectKey(s, key, named...).WithSerdes(ks, s.vs)
	return KGroupedStream[KR, V]{s: rekeyed, name: c.name}
}

// Count counts the records of each key into the store named name, a table of counts.
// Records with a null key ([Record.HasNullKey], or a key that serializes to nil) or a null
// value (a tombstone, or a nil value) are skipped and counted in [Stats].DroppedRecords, as
// Kafka Streams skips null keys and values.
func Count[K, V any](g KGroupedStream[K, V], name string, opts ...StoreOption) KTable[K, int64] {
	return Aggregate(g, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64(), name, opts...)
}

// Reduce combines the values of each key with fn (the first value is stored as it is) into
// the store named name. The value serde is the stream's. Records with a null key or value
// are skipped, as by [Count]; a nil result of fn deletes the key.
func Reduce[K, V any](g KGroupedStream[K, V], fn func(acc, v V) V, name string, opts ...StoreOption) KTable[K, V] {
	return aggregate(g, "KSTREAM-REDUCE", "Reduce", nil, func(_ K, v V, acc V, had bool) V {
		if !had {
			return v
		}
		return fn(acc, v)
	}, g.s.vs, name, opts)
}

// Aggregate folds the values of each key into an aggregate of type VA, starting from
// init(), and keeps it in the store named name (serialized with vs).
//
// As in Kafka Streams (KStreamAggregate, KStreamReduce), records with a null key or value
// are skipped (see [Count]), a nil aggregate (for a nilable VA) deletes the key, and each
// update has the largest timestamp of the records aggregated into the key so far.
func Aggregate[K, V, VA any](g KGroupedStream[K, V], init func() VA, agg func(key K, value V, acc VA) VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[K, VA] {
	return aggregate(g, "KSTREAM-AGGREGATE", "Aggregate", init, func(k K, v V, acc VA, _ bool) VA { return agg(k, v, acc) }, vs, name, opts)
}

func aggregate[K, V, VA any](g KGroupedStream[K, V], prefix, opName string, init func() VA, agg func(K, V, VA, bool) VA, vs serde.Serde[VA], name string, opts []StoreOption) KTable[K, VA] {
	b := g.s.b
	s := g.s
	op := fmt.Sprintf("%s %q", opName, name)
	// Java names the operator, then its repartition (GroupedStreamAggregateBuilder).
	nodeName := b.aggName(prefix, opts)
	if s.keyChanged {
		repName := g.name
		if repName == "" {
			repName = name
		}
		s = repartitionForKey(s, repName, false, op)
	}
	if s.ks == nil {
		b.errorf("%s: the stream carries no key serde for the store; use WithSerdes: %w", op, ErrNoSerde)
	}
	if vs == nil {
		b.errorf("%s: no value serde for the store: %w", op, ErrNoSerde)
	}
	d := tableStoreDef(name, s.ks, vs, opts)
	d.accepts = append(d.accepts, "Named")
	if d.versioned {
		versionedStoreDef(d, s.ks, vs)
	}
	n := b.tableNode(nodeName, s.n)
	b.addStore(d, n)
	ks := storeKeySerde(d, s.ks)
	info := ownInfo(d)
	n.instantiate = func(t *task) (any, error) { return newAggregateProcessor(t, n, d, ks, init, agg, info) }
	return KTable[K, VA]{b: b, n: n, ks: s.ks, vs: vs, store: name, info: info,
		getter: ownGetter[K, VA](d), getterStores: []*storeDef{d}, asOf: ownAsOf[K, VA](d)}
}

// newAggregateProcessor is task t's processor of node n, an aggregation into the table
// store d (Kafka Streams' KStreamAggregate, or KStreamReduce when init is nil): the
// processor of [Aggregate], [Count] and [Reduce], and of each stream of a cogroup. With a
// versioned store, an update the store refuses is not forwarded, and one that is not the
// key's latest version is forwarded marked stale.
func newAggregateProcessor[K, V, VA any](t *task, n *node, d *storeDef, ks serde.Serde[K], init func() VA, agg func(K, V, VA, bool) VA, info *tableInfo) (any, error) {
	st, err := openOwnStore[K, VA](t, d)
	if err != nil {
		return nil, err
	}
	keys := newKeyScratch(ks)
	cache := openEmitCache[K, VA](t, d)
	return processorInstance(t, n, ProcessorFunc[K, V, K, change[VA]](func(ctx ProcessorContext[K, change[VA]], r Record[K, V]) (err error) {
		// KStreamAggregate and KStreamReduce skip null keys and values, with a warning
		// and a dropped record.
		if r.HasNullKey() || nullValue(r) {
			t.dropRecord(n, "key or value")
			return nil
		}
		kb, drop, err := storeKeyBytes(t, n, keys, r)
		if drop || err != nil {
			return err
		}
		// The key is serialized once, for the check, the read and the write.
		acc, ts, had, err := st.getSerialized(r.Key, kb)
		if err != nil {
			return err
		}
		newTs := unixMs(r.Timestamp)
		oldOK := had
		if had {
			newTs = max(newTs, ts)
		} else if init != nil {
			// KStreamAggregate forwards the initial aggregate as the old value.
			acc, oldOK = init(), true
		}
		var res change[VA]
		res.setNew(agg(r.Key, r.Value, acc, had))
		code, err := st.putSerialized(r.Key, kb, res.new, res.hasNew, newTs)
		if err != nil {
			return err
		}
		if code == putNotPut {
			return nil // not put to the store: not forwarded either
		}
		res.stale = code != putIsLatest
		if cache != nil {
			// Held back: the old value is the one last forwarded, the store's value before
			// this update (none for a new key: Java's cache reads it from the store).
			if info.sendOld && had {
				res.setOld(acc)
			}
			putTs := newTs
			if !res.hasNew {
				putTs = unixMs(r.Timestamp) // Java's cache forwards a delete at the record's time
			}
			cache.put(ctx, kb, r.Key, res, had, putTs, r.Headers)
			return nil
		}
		if info.sendOld && oldOK {
			res.setOld(acc)
		}
		ctx.Forward(Record[K, change[VA]]{Key: r.Key, Value: res, Timestamp: msTime(newTs), Headers: r.Headers})
		return nil
	}))
}

// nullKeyDropped reports whether r has a null key, a Kafka null or a key that ks writes as
// nil bytes, and then counts it as a record dropped by n (the tables and aggregations of
// Kafka Streams skip such records with a warning). It fails when ks cannot serialize the key.
func nullKeyDropped[K, V any](t *task, n *node, ks serde.Serde[K], r Record[K, V]) (bool, error) {
	_, drop, err := nullKeyBytes(t, n, ks, r)
	return drop, err
}

// keyScratch serializes the keys of a processor's records for its store: into a buffer
// reused from record to record when the serde appends (store.AppendSerializer: the stores
// copy the keys they keep), else with Serialize.
type keyScratch[K any] struct {
	ks  serde.Serde[K]
	app store.AppendSerializer[K]
	buf []byte
}

func newKeyScratch[K any](ks serde.Serde[K]) *keyScratch[K] {
	s := &keyScratch[K]{ks: ks}
	s.app, _ = ks.(store.AppendSerializer[K])
	return s
}

// bytes serializes k: into s's buffer (valid until the next call) when its serde appends,
// else with Serialize.
func (s *keyScratch[K]) bytes(k K) ([]byte, error) {
	if s.app == nil {
		kb, err := serialize(s.ks, k)
		if err != nil {
			return nil, fmt.Errorf("serializing the key: %w", err)
		}
		return kb, nil
	}
	out, isNull, err := s.app.AppendSerialize(s.buf[:0], k)
	if err != nil {
		return nil, fmt.Errorf("serializing the key: %w", err)
	}
	s.buf = out
	if isNull {
		return nil, nil // as Serialize returns it
	}
	if out == nil {
		out = []byte{} // an empty key (the buffer not allocated yet) is not a null one
	}
	return out, nil
}

// storeKeyBytes is nullKeyBytes serializing with s: r's key serialized (valid until the
// next call), or drop when the key is null or serializes to nil bytes, counted as a record
// dropped by n.
func storeKeyBytes[K, V any](t *task, n *node, s *keyScratch[K], r Record[K, V]) (kb []byte, drop bool, err error) {
	if r.HasNullKey() {
		t.dropRecord(n, "key")
		return nil, true, nil
	}
	if kb, err = s.bytes(r.Key); err != nil {
		return nil, false, err
	}
	if kb == nil {
		t.dropRecord(n, "key")
		return nil, true, nil
	}
	return kb, false, nil
}

// nullKeyBytes is nullKeyDropped returning the serialized key too, for a caller that
// reads or writes a store with it.
func nullKeyBytes[K, V any](t *task, n *node, ks serde.Serde[K], r Record[K, V]) ([]byte, bool, error) {
	if r.HasNullKey() {
		t.dropRecord(n, "key")
		return nil, true, nil
	}
	kb, err := ks.Serialize(r.Key)
	if err != nil {
		return nil, false, fmt.Errorf("serializing the key: %w", err)
	}
	if kb == nil {
		t.dropRecord(n, "key")
		return nil, true, nil
	}
	return kb, false, nil
}
