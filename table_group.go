package kstream

import (
	"bytes"
	"fmt"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
)

// KGroupedTable is a table regrouped by a new key, ready for an aggregation ([TableCount],
// [TableReduce], [TableAggregate]). Create one with [TableGroupBy].
type KGroupedTable[K, V any] struct {
	b  *Builder
	n  *node // forwards Record[K, change[V]], the selected old and new rows
	ks serde.Serde[K]
	vs serde.Serde[V]
	// name names the repartition topic, which the aggregations then share (Kafka Streams'
	// Grouped.as); shared holds it once made.
	name   string
	shared *KStream[K, change[V]]
	// topic is set by the first aggregation to the short name of its repartition topic,
	// to which the selector binds the key serde it compares keys with.
	topic *string
}

// TableGroupBy regroups t by a new key and value chosen by selector, as Kafka Streams'
// KTable.groupBy does (KTableRepartitionMap). Every update of t is a subtraction of the old
// row from the group it was in and an addition of the new row to its group: when both have
// the same key, one change carrying both values goes to that group; otherwise the
// subtraction goes first, to the old key's partition, then the addition to the new key's.
// selector is not called on deletes, and a selected pair whose key serializes to nil or
// whose value is nil is skipped.
//
// The aggregation always repartitions, through "<application.id>-<store name>-repartition";
// the changes are written there in Kafka Streams' format (see the doc of changeSerde in
// change.go: the same bytes as Java's ChangedSerializer). ks and vs are the serdes of the
// new key and value; nil means t's own serde, if the type is unchanged. [Named] names the
// selecting operator and the repartition topic, "<application.id>-<name>-repartition",
// which the aggregations of the grouped table then share, as Kafka Streams' Grouped.as
// does; without it each aggregation has its own topic. Options: [Named].
func TableGroupBy[K, V, KR, VR any](t KTable[K, V], selector func(K, V) KeyValue[KR, VR], ks serde.Serde[KR], vs serde.Serde[VR], opts ...Option) KGroupedTable[KR, VR] {
	b := t.b
	c := b.options("TableGroupBy", opts)
	if ks == nil {
		ks = carry[K, KR](t.ks)
	}
	if vs == nil {
		vs = carry[V, VR](t.vs)
	}
	if ks == nil || vs == nil {
		b.errorf("TableGroupBy: no serde for the new key or value, which go through a repartition topic: %w", ErrNoSerde)
	}
	n := b.tableNode(b.nameOr(c, "KTABLE-SELECT"), t.n)
	// The selector needs both the old and the new value of each update.
	t.info.enable(true)
	versioned := t.info.versioned
	topic := new(string)
	n.instantiate = func(tk *task) (any, error) {
		ks := ks
		if *topic != "" {
			// Keys are compared as the repartition topic's key serde writes them.
			ks = taskBound(tk, ks, *topic, true)
		}
		return processorInstance(tk, n, ProcessorFunc[K, change[V], KR, change[VR]](func(ctx ProcessorContext[KR, change[VR]], r Record[K, change[V]]) error {
			in := r.Value
			if in.stale && versioned {
				return nil // KTableRepartitionMap's versioned semantics
			}
			type pair struct {
				kv KeyValue[KR, VR]
				kb []byte
				ok bool
			}
			sel := func(v V) (p pair, err error) {
				p.kv = selector(r.Key, v)
				if isNil(p.kv.Value) {
					return p, nil
				}
				if p.kb, err = ks.Serialize(p.kv.Key); err != nil {
					return p, fmt.Errorf("serializing the selected key: %w", err)
				}
				p.ok = p.kb != nil
				return p, nil
			}
			var np, op pair
			var err error
			if in.hasNew {
				if np, err = sel(in.new); err != nil {
					return err
				}
			}
			if in.hasOld {
				if op, err = sel(in.old); err != nil {
					return err
				}
			}
			fwd := func(k KR, c change[VR]) {
				ctx.Forward(Record[KR, change[VR]]{Key: k, Value: c, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			if np.ok && op.ok && bytes.Equal(np.kb, op.kb) {
				fwd(op.kv.Key, change[VR]{new: np.kv.Value, old: op.kv.Value, hasNew: true, hasOld: true})
				return nil
			}
			if op.ok {
				fwd(op.kv.Key, change[VR]{old: op.kv.Value, hasOld: true})
			}
			if np.ok {
				fwd(np.kv.Key, change[VR]{new: np.kv.Value, hasNew: true})
			}
			return nil
		}))
	}
	g := KGroupedTable[KR, VR]{b: b, n: n, ks: ks, vs: vs, name: c.name, topic: topic}
	if c.name != "" {
		g.shared = new(KStream[KR, change[VR]])
	}
	return g
}

// TableCount counts the rows of each group into the store named name, as Kafka Streams'
// KGroupedTable.count does: a row joining a group adds one, a row leaving it (updated into
// another group, or deleted) subtracts one. A count that falls to 0 stays in the table as
// 0; it is not deleted.
func TableCount[K, V any](g KGroupedTable[K, V], name string, opts ...StoreOption) KTable[K, int64] {
	return TableAggregate(g, func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, _ V, n int64) int64 { return n - 1 },
		serde.Int64(), name, opts...)
}

// TableReduce combines the rows of each group into the store named name, as Kafka Streams'
// KGroupedTable.reduce does (KTableReduce): the first row of a group is its value; a row
// joining the group is combined with adder(acc, v), a row leaving it is removed with
// subtractor(acc, v). A group whose rows all left keeps the value subtractor returned; it is
// deleted only if that value is nil. A nil value returned by adder deletes the group too, and
// the next row to join it starts it afresh. The value serde is the grouped table's.
func TableReduce[K, V any](g KGroupedTable[K, V], adder, subtractor func(acc, v V) V, name string, opts ...StoreOption) KTable[K, V] {
	return tableAggregate(g, "KTABLE-REDUCE", g.vs, name, opts, func(_ K, in change[V], acc V, had bool, accTs, ts int64) (res V, ok bool, newTs int64) {
		inter, interOK := acc, had
		newTs = ts
		if in.hasOld && had {
			inter = subtractor(acc, in.old)
			interOK = !isNil(inter)
			newTs = max(ts, accTs)
		}
		if !in.hasNew {
			return inter, interOK, newTs
		}
		if !interOK {
			return in.new, true, newTs
		}
		// A nil result is stored as KTableReduce stores it: the key is deleted.
		res = adder(inter, in.new)
		return res, !isNil(res), max(ts, accTs)
	})
}

// TableAggregate folds the rows of each group into an aggregate of type VA, kept in the
// store named name (serialized with vs), as Kafka Streams' KGroupedTable.aggregate does
// (KTableAggregate): a row leaving a group is removed with subtractor, then a row joining it
// is added with adder, starting from init() for a group without an aggregate. An aggregate
// is deleted only when the function that made it returned nil (for a nilable VA); a group
// whose rows all left keeps what subtractor returned.
//
// Each update has the largest of the record's timestamp and the aggregate's previous one.
func TableAggregate[K, V, VA any](g KGroupedTable[K, V], init func() VA, adder, subtractor func(key K, v V, acc VA) VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[K, VA] {
	return tableAggregate(g, "KTABLE-AGGREGATE", vs, name, opts, func(k K, in change[V], acc VA, had bool, accTs, ts int64) (VA, bool, int64) {
		inter, interOK := acc, had
		newTs := ts
		if in.hasOld && had {
			inter = subtractor(k, in.old, acc)
			interOK = !isNil(inter)
			newTs = max(ts, accTs)
		}
		if !in.hasNew {
			return inter, interOK, newTs
		}
		if !interOK {
			inter = init()
		}
		res := adder(k, in.new, inter)
		if had {
			newTs = max(ts, accTs)
		}
		return res, !isNil(res), newTs
	})
}

// tableRepartition writes the changes out of parent to topic and reads them back, with a
// sink and a source but no null-key filter, as Kafka Streams' GroupedTableOperationRepartitionNode.
func tableRepartition[K, V any](b *Builder, parent *node, topic, sinkName, sourceName string, ks serde.Serde[K], vs serde.Serde[change[V]]) KStream[K, change[V]] {
	b.internal = append(b.internal, runtime.InternalTopic{
		Name:    topic,
		Configs: map[string]*string{"cleanup.policy": ptr("delete"), "retention.ms": ptr("-1")},
	})
	sink := &node{kind: kindSink, sinkTopic: topic, internal: true}
	sink.serdeIDs = func() (string, string) { return serdeID(ks), serdeID(vs) }
	b.addNode(sink, "", sinkName, parent)
	sink.instantiate = sinkInstance(sink, func() (serde.Serde[K], serde.Serde[change[V]]) { return ks, vs },
		func(Record[K, change[V]]) string { return topic }, nil)
	sink.checks = append(sink.checks, checkTopicSerde(ks, topic, true, true), checkTopicSerde(vs, topic, true, false))
	src := &node{kind: kindSource, topics: []string{topic}, internal: true}
	b.addNode(src, "", sourceName)
	src.instantiate = sourceInstance(src, ks, vs)
	return KStream[K, change[V]]{b: b, n: src, ks: ks, vs: vs}
}

// tableAggregate repartitions g's changes through "<name>-repartition" and aggregates them
// into the store named name with step, which returns the new aggregate (ok false: none, the
// key is deleted) and its timestamp.
func tableAggregate[K, V, VA any](g KGroupedTable[K, V], prefix string, vs serde.Serde[VA], name string, opts []StoreOption,
	step func(k K, in change[V], acc VA, had bool, accTs, ts int64) (VA, bool, int64)) KTable[K, VA] {
	b := g.b
	if vs == nil {
		b.errorf("%s %q: no value serde for the store: %w", prefix, name, ErrNoSerde)
	}
	// Names as KGroupedTableImpl.doAggregate takes them: sink, source, then the operator,
	// each from the counter; with Named n, they are n-sink, n-source and n.
	sinkName, sourceName := b.newName("KSTREAM-SINK"), b.newName("KSTREAM-SOURCE")
	nodeName := b.aggName(prefix, opts)
	if n := opNameOf(opts); n != "" {
		sinkName, sourceName = n+"-sink", n+"-source"
	}
	var changes KStream[K, change[V]]
	switch {
	case g.shared != nil && g.shared.n != nil:
		changes = *g.shared
	case g.ks != nil && g.vs != nil:
		topic := name + "-repartition"
		if g.name != "" {
			topic = g.name + "-repartition"
		}
		changes = tableRepartition(b, g.n, topic, sinkName, sourceName, g.ks, changeSerde[V]{g.vs})
		if g.topic != nil && *g.topic == "" {
			*g.topic = topic
		}
		if g.shared != nil {
			*g.shared = changes
		}
	default: // reported by TableGroupBy; build on so that every error shows
		changes = KStream[K, change[V]]{b: b, n: g.n}
	}
	d := tableStoreDef(name, g.ks, vs, opts)
	d.accepts = append(d.accepts, "Named")
	if d.versioned {
		versionedStoreDef(d, g.ks, vs)
	}
	n := b.tableNode(nodeName, changes.n)
	b.addStore(d, n)
	info := ownInfo(d)
	ks := storeKeySerde(d, g.ks)
	n.instantiate = func(t *task) (any, error) {
		st, err := openOwnStore[K, VA](t, d)
		if err != nil {
			return nil, err
		}
		cache := openEmitCache[K, VA](t, d)
		return processorInstance(t, n, ProcessorFunc[K, change[V], K, change[VA]](func(ctx ProcessorContext[K, change[VA]], r Record[K, change[V]]) error {
			acc, accTs, had, err := st.get(r.Key)
			if err != nil {
				return err
			}
			agg, ok, ts := step(r.Key, r.Value, acc, had, accTs, unixMs(r.Timestamp))
			code, err := st.put(r.Key, agg, ok, ts)
			if err != nil {
				return err
			}
			if code == putNotPut {
				return nil // not put to the store: not forwarded either
			}
			res := change[VA]{new: agg, hasNew: ok, stale: code != putIsLatest}
			if !ok {
				var zero VA
				res.new = zero
			}
			if info.sendOld && had {
				res.old, res.hasOld = acc, true
			}
			if cache != nil {
				kb, err := ks.Serialize(r.Key)
				if err != nil {
					return fmt.Errorf("serializing the key: %w", err)
				}
				putTs := ts
				if !ok {
					putTs = unixMs(r.Timestamp) // Java's cache forwards a delete at the record's time
				}
				cache.put(ctx, kb, r.Key, res, had, putTs, r.Headers)
				return nil
			}
			ctx.Forward(Record[K, change[VA]]{Key: r.Key, Value: res, Timestamp: msTime(ts), Headers: r.Headers})
			return nil
		}))
	}
	return KTable[K, VA]{b: b, n: n, ks: g.ks, vs: vs, store: name, info: info,
		getter: ownGetter[K, VA](d), getterStores: []*storeDef{d}, asOf: ownAsOf[K, VA](d)}
}
