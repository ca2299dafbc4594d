package kstream

import (
	"fmt"
	"slices"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
)

// Table reads topic as a table kept in the store named storeName: for each key, the latest
// value; a record with a null value (a tombstone) deletes its key and is forwarded as a
// delete (even for a key that was absent), and records with a null key are dropped and
// counted in [Stats].DroppedRecords. The topic itself serves as the store's changelog, so no changelog topic
// is created (Kafka Streams' source-topic reuse). A key's latest update is forwarded
// downstream once per commit by the record cache, on by default as in Kafka Streams
// (docs/caching.md), or every update with [WithoutCaching] or a negative
// Config.CacheMaxBytes (Kafka Streams' KTableSource, materialized, with caching disabled);
// [KTable.ToStream] turns a delete into a tombstone record.
//
// The records' timestamps come from [Config.DefaultTimestampExtractor], or from the
// extractor given with [TableTimestampExtractor].
func Table[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], storeName string, opts ...StoreOption) KTable[K, V] {
	d := tableStoreDef(storeName, ks, vs, opts)
	var srcOpts []Option
	if d.extractorSet {
		srcOpts = append(srcOpts, WithTimestampExtractor(d.extractor))
	}
	src := Stream(b, topic, ks, vs, srcOpts...)
	d.sourceTopic = topic
	n := b.tableNode(b.newName("KTABLE-SOURCE"), src.n)
	b.addStore(d, n)
	return sourceTable(b, n, d, ks, vs)
}

// Join joins each record of s with the table's current value for its key (an inner join:
// records whose key is not in the table are dropped). Only stream records produce output;
// table updates do not. Stream records with a null key ([Record.HasNullKey]) or a null
// value (tombstones, nil values) are dropped and counted in [Stats].DroppedRecords, as
// Kafka Streams' KStreamKTableJoinProcessor drops them. The table may be one
// without a store of its own (a filtered or mapped table): the lookup reads through to the
// stores it derives from. s and the table must be co-partitioned (checked at start); if a
// key-changing operator ran on s, it is first repartitioned, as Kafka Streams does, through
// "<application.id>-<name>-repartition", where name is the join's [Named] name or, for an
// unnamed join, the name of the operator that s comes out of (a generated name such as
// KSTREAM-KEY-SELECT-0000000003 unless that operator was named). Unnamed joins of one stream
// share the topic, and so do all the joins and aggregations below one key-changing operator
// (see [Count]). A table kept in a versioned store ([Versioned]) is looked up as of the
// stream record's timestamp instead of its latest value. Options: [Named] (it corresponds to
// Kafka Streams' Joined.as, which names the join and its repartition topic), [JoinGrace] (a
// grace period for the stream side, against a versioned table).
func Join[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], joiner func(key K, v V, vt VT) VR, opts ...Option) KStream[K, VR] {
	return joinTable(s, t, "KSTREAM-JOIN", "Join", func(k K, v V, vt VT, found bool) (VR, bool) {
		if !found {
			var zero VR
			return zero, false
		}
		return joiner(k, v, vt), true
	}, opts)
}

// LeftJoin is [Join] that keeps stream records whose key is not in the table: the joiner is
// then called with found false and the zero VT. Since Kafka Streams 3.7 (KIP-962) a left
// join also keeps stream records with a null key ([Record.HasNullKey]): the table is not
// looked up, the joiner is called with found false, and the output keeps the null key.
// Repartitions upstream let null keys through to it (see [KStream.Repartition]). Records
// with a null value are still dropped.
func LeftJoin[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], joiner func(key K, v V, vt VT, found bool) VR, opts ...Option) KStream[K, VR] {
	return joinTable(s, t, "KSTREAM-LEFTJOIN", "LeftJoin", func(k K, v V, vt VT, found bool) (VR, bool) {
		return joiner(k, v, vt, found), true
	}, opts)
}

func joinTable[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], prefix, op string, join func(K, V, VT, bool) (VR, bool), opts []Option) KStream[K, VR] {
	b := s.b
	c := b.options(op, opts, "JoinGrace")
	if t.b != b {
		b.errorf("%s: the stream and the table come from different builders", op)
		return KStream[K, VR]{b: b, n: s.n}
	}
	if s.keyChanged {
		// KStreamImpl.join: repartitionForJoin(name != null ? name : this.name).
		repName := c.name
		if repName == "" {
			repName = s.n.name
		}
		s = repartitionForKey(s, repName, c.name == "", op)
	}
	n := b.tableNode(b.nameOr(c, prefix), s.n)
	n.relaxedJoin = op == "LeftJoin"
	for _, d := range t.getterStores {
		b.addStore(d, n)
	}
	// A versioned table is looked up as of the stream record's time, and a grace period
	// buffers the stream side (versioned.go).
	bufDef := streamTableGrace(b, op, c, s, t, n)
	bufKs, bufVs := s.ks, s.vs
	if bufDef != nil {
		b.addStore(bufDef, n)
		bufKs, bufVs = storeSerde(bufDef, s.ks, true), storeSerde(bufDef, s.vs, false)
	}
	n.instantiate = func(tk *task) (any, error) {
		get, err := t.getter(tk)
		if err != nil {
			return nil, err
		}
		var getAsOf asOfGetter[K, VT]
		if t.asOf != nil {
			if getAsOf, err = t.asOf(tk); err != nil {
				return nil, err
			}
		}
		var buf *graceBuffer[K, V]
		if bufDef != nil {
			st, err := taskBufferStore(tk, bufDef.name)
			if err != nil {
				return nil, err
			}
			buf = &graceBuffer[K, V]{st: st, ks: bufKs, vs: bufVs, grace: c.joinGrace.Milliseconds()}
		}
		doJoin := func(ctx ProcessorContext[K, VR], r Record[K, V]) error {
			nullKey := r.HasNullKey()
			var vt VT
			var found bool
			if !nullKey {
				var err error
				if getAsOf != nil {
					vt, _, found, err = getAsOf(r.Key, unixMs(r.Timestamp))
				} else {
					vt, _, found, err = get(r.Key)
				}
				if err != nil {
					return err
				}
			}
			if vr, ok := join(r.Key, r.Value, vt, found); ok {
				ctx.Forward(Record[K, VR]{Key: r.Key, Value: vr, Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey})
			}
			return nil
		}
		return processorInstance(tk, n, ProcessorFunc[K, V, K, VR](func(ctx ProcessorContext[K, VR], r Record[K, V]) error {
			// KStreamKTableJoinProcessor drops records with a null value, and those with a
			// null key unless the join is a left join, which joins them with nothing.
			nullKey := r.HasNullKey()
			if nullValue(r) || (nullKey && !n.relaxedJoin) {
				tk.dropRecord(n, "join key or value")
				return nil
			}
			if buf == nil || nullKey {
				return doJoin(ctx, r)
			}
			topic := ""
			if m, ok := ctx.RecordMetadata(); ok {
				topic = m.Topic
			}
			buffered, now, err := buf.put(r, topic)
			if err != nil {
				return fmt.Errorf("buffer %s: %w", bufDef.name, err)
			}
			if !buffered {
				return doJoin(ctx, r)
			}
			if err := buf.evict(now, func(br Record[K, V]) error { return doJoin(ctx, br) }); err != nil {
				return fmt.Errorf("buffer %s: %w", bufDef.name, err)
			}
			return nil
		}))
	}
	b.copart = append(b.copart, []*node{s.n, t.n})
	return KStream[K, VR]{b: b, n: n, ks: s.ks}
}

// sourceTopicsOf returns the topics of the sources upstream of n, within its sub-topology.
func (b *Builder) sourceTopicsOf(n *node) []string {
	var out []string
	for _, src := range b.sourceNodesOf(n) {
		out = append(out, sourceTopics(src)...)
	}
	return out
}

// sourceNodesOf returns the source nodes n reads from, depth first through its parents.
func (b *Builder) sourceNodesOf(n *node) []*node {
	seen := map[*node]bool{}
	var out []*node
	var walk func(*node)
	walk = func(x *node) {
		if seen[x] {
			return
		}
		seen[x] = true
		if x.kind == kindSource {
			out = append(out, x)
		}
		for _, p := range x.parents {
			walk(p)
		}
	}
	walk(n)
	return out
}

// sourceTopics returns the topics of source src: its topics, or the marker of its pattern
// (runtime.PatternMarker) until the runtime knows the topics that match.
func sourceTopics(src *node) []string {
	if src.pattern != nil {
		return append(slices.Clone(src.topics), runtime.PatternMarker(src.pattern.String()))
	}
	return src.topics
}
