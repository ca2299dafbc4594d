package kstream

import (
	"fmt"

	"github.com/kstream-go/kstream/serde"
)

// KGroupedStream is a stream grouped by key, ready for an aggregation ([Count], [Reduce],
// [Aggregate]). Create one with [KStream.GroupByKey] or [GroupBy].
type KGroupedStream[K, V any] struct {
	s KStream[K, V]
}

// GroupByKey groups the stream by its current key. If a key-changing operator ran before,
// the aggregation first repartitions through "<application.id>-<store name>-repartition",
// using the stream's serdes (set them with [KStream.WithSerdes]); records with a null key
// are dropped there (see [KStream.Repartition]), and by the aggregation otherwise.
func (s KStream[K, V]) GroupByKey() KGroupedStream[K, V] { return KGroupedStream[K, V]{s: s} }

// GroupBy groups the stream by a new key; the aggregation always repartitions. ks is the
// serde of the new key; the value keeps the stream's value serde. The new key is null only
// if key returns a nil pointer, map, slice or interface (key gets the zero K for a record
// with a null key: a string key function cannot return null); such records are dropped
// before the repartition topic, as Kafka Streams drops null keys there.
func GroupBy[K, V, KR any](s KStream[K, V], key func(K, V) KR, ks serde.Serde[KR], opts ...Option) KGroupedStream[KR, V] {
	rekeyed := SelectKey(s, key, opts...).WithSerdes(ks, s.vs)
	return KGroupedStream[KR, V]{s: rekeyed}
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
	return aggregate(g, "KSTREAM-REDUCE", nil, func(_ K, v V, acc V, had bool) V {
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
	return aggregate(g, "KSTREAM-AGGREGATE", init, func(k K, v V, acc VA, _ bool) VA { return agg(k, v, acc) }, vs, name, opts)
}

func aggregate[K, V, VA any](g KGroupedStream[K, V], prefix string, init func() VA, agg func(K, V, VA, bool) VA, vs serde.Serde[VA], name string, opts []StoreOption) KTable[K, VA] {
	b := g.s.b
	s := g.s
	if s.keyChanged {
		if s.ks == nil || s.vs == nil {
			b.errorf("%s %q: the stream must be repartitioned, but carries no key or value serde; use WithSerdes: %w", prefix, name, ErrNoSerde)
		}
		s = s.Repartition(name)
	}
	if s.ks == nil {
		b.errorf("%s %q: the stream carries no key serde for the store; use WithSerdes: %w", prefix, name, ErrNoSerde)
	}
	if vs == nil {
		b.errorf("%s %q: no value serde for the store: %w", prefix, name, ErrNoSerde)
	}
	d := tableStoreDef(name, s.ks, vs, opts)
	n := b.tableNode(genName(prefix, len(b.nodes)), s.n)
	b.addStore(d, n)
	ks := s.ks
	info := storedInfo()
	n.instantiate = func(t *task) (any, error) {
		st, err := taskTableStore[K, VA](t, name)
		if err != nil {
			return nil, err
		}
		return processorInstance(t, n, ProcessorFunc[K, V, K, change[VA]](func(ctx ProcessorContext[K, change[VA]], r Record[K, V]) error {
			// KStreamAggregate and KStreamReduce skip null keys and values, with a warning
			// and a dropped record.
			if r.HasNullKey() || nullValue(r) {
				t.dropRecord(n, "key or value")
				return nil
			}
			if kb, err := ks.Serialize(r.Key); err != nil {
				return fmt.Errorf("serializing the key: %w", err)
			} else if kb == nil {
				t.dropRecord(n, "key")
				return nil
			}
			acc, ts, had, err := getTS(st, r.Key)
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
			if err := putTS(st, r.Key, res.new, res.hasNew, newTs); err != nil {
				return err
			}
			if info.sendOld && oldOK {
				res.setOld(acc)
			}
			ctx.Forward(Record[K, change[VA]]{Key: r.Key, Value: res, Timestamp: msTime(newTs), Headers: r.Headers})
			return nil
		}))
	}
	return KTable[K, VA]{b: b, n: n, ks: s.ks, vs: vs, store: name, info: info,
		getter: storeGetter[K, VA](name), getterStores: []*storeDef{d}}
}
