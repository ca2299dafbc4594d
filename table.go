package kstream

import (
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// KGroupedStream is a stream grouped by key, ready for an aggregation ([Count], [Reduce],
// [Aggregate]). Create one with [KStream.GroupByKey] or [GroupBy].
type KGroupedStream[K, V any] struct {
	s KStream[K, V]
}

// GroupByKey groups the stream by its current key. If a key-changing operator ran before,
// the aggregation first repartitions through "<application.id>-<store name>-repartition",
// using the stream's serdes (set them with [KStream.WithSerdes]).
func (s KStream[K, V]) GroupByKey() KGroupedStream[K, V] { return KGroupedStream[K, V]{s: s} }

// GroupBy groups the stream by a new key; the aggregation always repartitions. ks is the
// serde of the new key; the value keeps the stream's value serde.
func GroupBy[K, V, KR any](s KStream[K, V], key func(K, V) KR, ks serde.Serde[KR], opts ...Option) KGroupedStream[KR, V] {
	rekeyed := SelectKey(s, key, opts...).WithSerdes(ks, s.vs)
	return KGroupedStream[KR, V]{s: rekeyed}
}

// KTable is a changelog stream: for each key, the latest value. Aggregations return one.
type KTable[K, V any] struct {
	b     *Builder
	n     *node
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	store string
}

// StoreName is the name of the table's state store.
func (t KTable[K, V]) StoreName() string { return t.store }

// ToStream returns the stream of the table's updates: one record per change, as Kafka
// Streams emits them with caching disabled.
func (t KTable[K, V]) ToStream(opts ...Option) KStream[K, V] {
	c := t.b.options("ToStream", opts)
	if c.name == "" {
		c.name = genName("KTABLE-TOSTREAM", len(t.b.nodes))
	}
	n := &node{kind: kindProcessor}
	t.b.addNode(n, "", c.name, t.n)
	n.instantiate = func(tk *task) (any, error) {
		ctx, err := childInputs[K, V](tk, n)
		if err != nil {
			return nil, err
		}
		return func(r Record[K, V]) { ctx.Forward(r) }, nil
	}
	return KStream[K, V]{b: t.b, n: n, ks: t.ks, vs: t.vs}
}

// Count counts the records of each key into the store named name, a table of counts. Records
// whose key serializes to nil are skipped, as Kafka Streams skips null keys.
func Count[K, V any](g KGroupedStream[K, V], name string, opts ...StoreOption) KTable[K, int64] {
	return Aggregate(g, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64(), name, opts...)
}

// Reduce combines the values of each key with fn (the first value is stored as it is) into
// the store named name. The value serde is the stream's.
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
	sb := KeyValueStore(name, s.ks, vs, opts...)
	ks := s.ks
	out := Process(s, func() Processor[K, V, K, VA] {
		var st *store.KeyValueStore[K, VA]
		return ProcessorFunc[K, V, K, VA](func(ctx ProcessorContext[K, VA], r Record[K, V]) error {
			if st == nil {
				var err error
				if st, err = GetKeyValueStore[K, VA](ctx, name); err != nil {
					return err
				}
			}
			if kb, err := ks.Serialize(r.Key); err != nil {
				return err
			} else if kb == nil {
				return nil // null keys are not aggregated
			}
			acc, had, err := st.Get(r.Key)
			if err != nil {
				return err
			}
			if !had && init != nil {
				acc = init()
			}
			acc = agg(r.Key, r.Value, acc, had)
			if err := st.Put(r.Key, acc); err != nil {
				return err
			}
			ctx.Forward(Record[K, VA]{Key: r.Key, Value: acc, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		})
	}, Named(prefixName(b, prefix)), WithStores(sb))
	return KTable[K, VA]{b: b, n: out.n, ks: s.ks, vs: vs, store: name}
}

// prefixName returns the generated name an operator of kind prefix would get next.
func prefixName(b *Builder, prefix string) string {
	return genName(prefix, len(b.nodes))
}
