package kstream

import (
	"fmt"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GlobalKTable is a table of which every instance of the application holds a full copy:
// all partitions of its topic. Create one with [GlobalTable] and look records up in it with
// [JoinGlobal] or [LeftJoinGlobal]. It corresponds to Kafka Streams' GlobalKTable.
//
// Because every instance has every key, a join with a global table needs neither
// co-partitioning nor a repartition, and the lookup key may be computed from the stream
// record (a foreign key). In exchange, every instance reads the whole topic, and lookups
// are not synchronized with stream time: a stream record sees whatever the table holds when
// it is processed. The zero GlobalKTable is not usable.
type GlobalKTable[K, V any] struct {
	b  *Builder
	d  *storeDef
	ks serde.Serde[K]
	vs serde.Serde[V]
}

// StoreName is the name of the table's state store.
func (g GlobalKTable[K, V]) StoreName() string {
	if g.d == nil {
		return ""
	}
	return g.d.name
}

// GlobalTable reads every partition of topic into the global store named storeName: for
// each key, the latest value; a record with a null value (a tombstone) deletes its key, and
// records with a null key are skipped. The topic itself serves as the store's changelog,
// so no changelog topic is created. It corresponds to Kafka Streams'
// StreamsBuilder.globalTable.
//
// At start, before any task processes a record, each instance reads the topic up to its
// end offsets (the last stable offsets: reads are read_committed) measured then; the
// instance stays REBALANCING until that is done. It then keeps following the topic on a
// goroutine of its own, with its own consumer (outside the consumer group), until the
// application stops. A persistent store (the default) resumes from the positions it had
// reached; an [InMemory] one reads the topic from the start on every start.
//
// Each record is decoded with ks and vs before it is stored; a record that cannot be
// decoded goes to [Config.DeserializationErrorHandler], with its topic, partition and
// offset (Fail stops the application, Continue and DeadLetter skip the record). The store
// is read-only for tasks. [WithoutChangelog] does not apply.
func GlobalTable[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], storeName string, opts ...StoreOption) GlobalKTable[K, V] {
	if topic == "" {
		b.errorf("GlobalTable: no topic given")
	}
	if ks == nil || vs == nil {
		b.errorf("GlobalTable(%s): key and value serdes are required: %w", topic, ErrNoSerde)
	}
	src := &node{kind: kindSource, topics: []string{topic}, global: true}
	b.addNode(src, "SOURCE", "")
	d := &storeDef{name: storeName, persistent: true, logged: true, sourceTopic: topic, global: true}
	applyStoreOpts(d, opts)
	if !d.logged {
		b.errorf("GlobalTable(%s): WithoutChangelog does not apply: the topic is the store's changelog", topic)
	}
	// The topic is the store's changelog: the serdes name their subjects after it, for the
	// records read and for the store (Kafka Streams' global state manager does the same).
	ks, vs = serde.ForTopic(ks, topic, true), serde.ForTopic(vs, topic, false)
	d.key, d.value = ks, vs
	d.typed = func(bk store.Backend) any { return store.NewKeyValueStore(storeName, bk, ks, vs) }
	d.query = newQueryCodec(KeyValueKind, ks, vs, false)
	d.accept = func(h *handlers) func(runtime.TaskEnv, *kgo.Record) (bool, error) {
		return func(env runtime.TaskEnv, rec *kgo.Record) (bool, error) {
			var err error
			if _, err = deserialize(ks, rec.Key); err != nil {
				err = fmt.Errorf("key: %w", err)
			} else if rec.Value != nil {
				if _, err = deserialize(vs, rec.Value); err != nil {
					err = fmt.Errorf("value: %w", err)
				}
			}
			if err == nil {
				return true, nil
			}
			// The same handling as a source's, outside any task.
			t := &task{env: env, log: env.Logger(), h: h, cur: rec}
			t.deserializationError(src, err)
			return false, t.fatal
		}
	}
	n := &node{kind: kindProcessor, global: true}
	b.addNode(n, "", b.newName("KTABLE-SOURCE"), src)
	b.addStore(d, n)
	noTask := func(*task) (any, error) {
		return nil, fmt.Errorf("kstream: internal error: global table %s instantiated in a task", storeName)
	}
	src.instantiate, n.instantiate = noTask, noTask
	return GlobalKTable[K, V]{b: b, d: d, ks: ks, vs: vs}
}

// JoinGlobal joins each record of s with the global table's current value for the key
// that keyOf computes from the record (an inner join: records whose mapped key is not in
// the table are dropped). The output keeps the stream record's key (a null one too),
// timestamp and headers. Only stream records produce output; table updates do not.
//
// As in Kafka Streams (KStreamKTableJoinProcessor), a stream record with a null value
// (a tombstone or a nil value) is dropped and keyOf is not called; so is a record whose
// mapped key is null: a nil pointer, map, slice or interface, or a key the table's key
// serde writes as nil bytes. Both count in [Stats].DroppedRecords. The stream record's own
// key plays no part: keyOf gets the zero K for a null key, and what it returns decides.
//
// Unlike [Join], s and the table need not be co-partitioned, and s is never repartitioned,
// even after a key-changing operator. Options: [Named]. It corresponds to Kafka Streams'
// KStream.join(GlobalKTable, KeyValueMapper, ValueJoinerWithKey).
func JoinGlobal[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], keyOf func(key K, v V) KG, joiner func(key K, v V, vg VG) VR, opts ...Option) KStream[K, VR] {
	return joinGlobal(s, g, "JoinGlobal", keyOf, func(k K, v V, vg VG, found bool) (VR, bool) {
		if !found {
			var zero VR
			return zero, false
		}
		return joiner(k, v, vg), true
	}, opts)
}

// LeftJoinGlobal is [JoinGlobal] that keeps stream records whose mapped key is not in the
// global table, or is null: the joiner is then called with found false and the zero VG.
// Records with a null value are dropped, as by JoinGlobal.
func LeftJoinGlobal[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], keyOf func(key K, v V) KG, joiner func(key K, v V, vg VG, found bool) VR, opts ...Option) KStream[K, VR] {
	return joinGlobal(s, g, "LeftJoinGlobal", keyOf, func(k K, v V, vg VG, found bool) (VR, bool) {
		return joiner(k, v, vg, found), true
	}, opts)
}

func joinGlobal[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], op string, keyOf func(K, V) KG, join func(K, V, VG, bool) (VR, bool), opts []Option) KStream[K, VR] {
	b := s.b
	c := b.options(op, opts)
	if g.b != b {
		b.errorf("%s: the stream and the global table come from different builders", op)
		return KStream[K, VR]{b: b, n: s.n}
	}
	// Kafka Streams 4.4 names inner and left global-table joins alike
	// (KStreamImpl.doGlobalTableJoinWithStreamAndMappedKey uses LEFTJOIN_NAME).
	c.name = b.nameOr(c, "KSTREAM-LEFTJOIN")
	n := &node{kind: kindProcessor, globals: []*storeDef{g.d}, relaxedJoin: op == "LeftJoinGlobal"}
	b.addNode(n, "", c.name, s.n)
	name := g.d.name
	n.instantiate = func(t *task) (any, error) {
		ctx, err := childInputs[K, VR](t, n)
		if err != nil {
			return nil, err
		}
		st, ok := t.stores[name].(*store.KeyValueStore[KG, VG])
		if !ok {
			return nil, fmt.Errorf("kstream: operator %s: global store %q is a %T, not a KeyValueStore of these key and value types", n.name, name, t.stores[name])
		}
		return func(r Record[K, V]) {
			defer t.recoverIn(n)
			// KStreamKTableJoinProcessor, which Kafka Streams runs for global joins too: a
			// record with a null value is dropped, and so is one whose mapped key is null,
			// unless the join is a left join, which joins it with nothing.
			if nullValue(r) {
				t.dropRecord(n, "value")
				return
			}
			kg := keyOf(r.Key, r.Value)
			var kb []byte
			if !isNil(kg) {
				var err error
				if kb, err = serialize(g.ks, kg); err != nil {
					t.processingError(n, fmt.Errorf("serializing the key of global store %s: %w", name, err))
					return
				}
			}
			if kb == nil && !n.relaxedJoin {
				t.dropRecord(n, "join key")
				return
			}
			var vg VG
			found := false
			if kb != nil {
				var err error
				if vg, found, err = st.Get(kg); err != nil {
					t.processingError(n, err)
					return
				}
			}
			if vr, ok := join(r.Key, r.Value, vg, found); ok {
				ctx.Forward(Record[K, VR]{Key: r.Key, Value: vr, Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey})
			}
		}, nil
	}
	return KStream[K, VR]{b: b, n: n, ks: s.ks, vs: carry[V, VR](s.vs), keyChanged: s.keyChanged}
}
