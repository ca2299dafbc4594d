package kstream

import (
	"strconv"

	"github.com/kstream-go/kstream/serde"
)

// KTable is a changelog stream: for each key, the latest value. Create one with [Table],
// [KStream.ToTable] or an aggregation, and derive others with [KTable.Filter],
// [TableMapValues], the table-table joins ([TableJoin], ...) and [TableGroupBy].
//
// Table operators see every update of a row with the value it replaced, as Kafka Streams'
// KTable operators do. A table kept in a key-value or time-window store forwards a key's
// latest update once per commit (the record cache, on by default as in Kafka Streams:
// Config.CacheMaxBytes, docs/caching.md); other tables, and all with the cache off, emit
// every update (Kafka Streams with caching disabled). A delete travels as a tombstone, and
// [KTable.ToStream] turns the updates into records. A
// table has a state store when it comes from a topic, a stream or an aggregation, or when
// [Materialized] names one; a table derived without a store reads through to its parents'
// stores applying its function, so it can still be joined.
//
// A nil value returned by a table operator's function (for V a pointer, map, slice or
// interface type) is a null, that is a delete, as null is in Java. KTable values are cheap
// handles into their [Builder]; the zero KTable is not usable.
type KTable[K, V any] struct {
	b     *Builder
	n     *node // forwards Record[K, change[V]]
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	store string // the table's own store; "" if it has none
	info  *tableInfo
	// getter makes a task's value getter of the table; getterStores are the stores it reads,
	// which an operator using the getter must be connected to.
	getter       func(t *task) (valueGetter[K, V], error)
	getterStores []*storeDef
	// asOf, set for a versioned table, makes a task's as-of value getter of the table.
	asOf func(t *task) (asOfGetter[K, V], error)
}

// tableInfo is the build-time state of one table node that its downstream operators may
// change: whether it forwards old values with each update (Kafka Streams' sendOldValues).
// Operators read sendOld when they run, after the topology is built.
type tableInfo struct {
	sendOld bool
	// enable is KTableImpl.enableSendingOldValues: it asks the node (and, for a node without
	// a store, its parents) to forward old values, and reports whether it will. force is
	// Java's forceMaterialization; every table with no parent here has a store, so it only
	// matters for the order in which flags are set.
	enable func(force bool) bool
	// versioned says the table's output is versioned (Java's isOutputVersioned): it is a
	// versioned source, or derived without a store of its own from one. Operators below it
	// then use versioned semantics (Java's useVersionedSemantics): they ignore updates that
	// are not the latest of their key (change.stale).
	versioned bool
}

// storedInfo is the tableInfo of a table with its own store: it can always send old values
// (Java's materialized KTableSource, aggregations and KTableKTableJoinMerger).
func storedInfo() *tableInfo {
	info := &tableInfo{}
	info.enable = func(bool) bool { info.sendOld = true; return true }
	return info
}

// derivedInfo is the tableInfo of a table computed from parent without a store of its own:
// it sends old values if its parent does (KTableFilter and KTableMapValues).
func derivedInfo(parent *tableInfo) *tableInfo {
	info := &tableInfo{versioned: parent.versioned}
	info.enable = func(force bool) bool {
		if !info.sendOld && parent.enable(force) {
			info.sendOld = true
		}
		return info.sendOld
	}
	return info
}

// StoreName is the name of the table's state store, or "" when the table has none (a
// filtered, mapped or joined table that [Materialized] did not name).
func (t KTable[K, V]) StoreName() string { return t.store }

// tableNode adds a processor node named name under parents.
func (b *Builder) tableNode(name string, parents ...*node) *node {
	n := &node{kind: kindProcessor}
	b.addNode(n, "", name, parents...)
	return n
}

// nameOr returns c's name, or a generated one of kind prefix. Either way it takes a name
// from the counter, as Kafka Streams' NamedInternal.orElseGenerateWithPrefix does.
func (b *Builder) nameOr(c opConfig, prefix string) string {
	if gen := b.newName(prefix); c.name == "" {
		return gen
	}
	return c.name
}

// ToStream returns the stream of the table's updates: one record per change forwarded. A
// cached table (the default for tables kept in a store, Config.CacheMaxBytes) forwards a
// key's latest change once per commit, as Kafka Streams does (docs/caching.md); with the
// cache off, one record per change, as Kafka Streams emits them with caching disabled. A delete is a tombstone record (see
// [Record.IsTombstone]): its value is the zero V (nil for pointer types), and a sink writes
// it as a null value.
func (t KTable[K, V]) ToStream(opts ...Option) KStream[K, V] {
	c := t.b.options("ToStream", opts)
	n := t.b.tableNode(t.b.nameOr(c, "KTABLE-TOSTREAM"), t.n)
	n.instantiate = func(tk *task) (any, error) {
		ctx, err := childInputs[K, V](tk, n)
		if err != nil {
			return nil, err
		}
		return func(r Record[K, change[V]]) {
			ctx.Forward(Record[K, V]{Key: r.Key, Value: r.Value.new, Timestamp: r.Timestamp, Headers: r.Headers, null: !r.Value.hasNew})
		}, nil
	}
	return KStream[K, V]{b: t.b, n: n, ks: t.ks, vs: t.vs}
}

// matConfig is the store a [Materialized] option asks for.
type matConfig struct {
	name string
	vs   any // serde.Serde[V] of the operator's result, or nil
	opts []StoreOption
}

// Materialized gives the table made by an operator a state store named storeName, with
// value serde vs (nil: the table's own value serde when the operator keeps the value type)
// and the key serde of the input table. The store is persistent and logged to
// "<application.id>-<storeName>-changelog" unless opts say otherwise. Without it, a
// filtered, mapped or joined table has no store and reads through to its parents'. It
// corresponds to Kafka Streams' Materialized.as. Applies to [KTable.Filter],
// [KTable.FilterNot], [TableMapValues], [TableMapValuesWithKey], [TableJoin],
// [TableLeftJoin], [TableOuterJoin] and the foreign-key joins [TableJoinOn] and
// [TableLeftJoinOn].
//
// An empty storeName gives the table the value serde vs and no store, as Kafka Streams'
// Materialized.with(keySerde, valueSerde) does for filter and mapValues: a table whose
// values changed type ([TableMapValues]) carries no value serde, which an operator that
// serializes them ([KTable.Suppress], a sink without serdes) then needs. It applies to
// [KTable.Filter], [KTable.FilterNot], [TableMapValues] and [TableMapValuesWithKey]; the
// joins need a store name.
func Materialized[V any](storeName string, vs serde.Serde[V], opts ...StoreOption) Option {
	return optFunc{"Materialized", func(c *opConfig) {
		c.mat = &matConfig{name: storeName, opts: opts}
		if vs != nil {
			c.mat.vs = vs
		}
	}}
}

// burnStoreName takes a name from the counter for a Materialized without a store name, as
// Kafka Streams' KTableImpl.doFilter and doMapValues do before naming the operator ("we
// still need to burn one index BEFORE generating the processor to keep compatibility").
func burnStoreName(b *Builder, c opConfig, prefix string) {
	if c.mat != nil && c.mat.name == "" {
		b.newName(prefix + "-STATE-STORE")
	}
}

// materialize declares the store asked for by c for node n, or returns nil when c has none.
// It also returns the value serde of the result: the Materialized one, or vs.
func materialize[K, V any](b *Builder, op string, c opConfig, n *node, ks serde.Serde[K], vs serde.Serde[V]) (*storeDef, serde.Serde[V]) {
	if c.mat == nil {
		return nil, vs
	}
	if c.mat.name == "" && !c.serdeOnly {
		b.errorf("%s: Materialized needs a store name here (an empty one, a serde without a store, applies to KTable.Filter, KTable.FilterNot and TableMapValues)", op)
		return nil, vs
	}
	if c.mat.vs != nil {
		typed, ok := c.mat.vs.(serde.Serde[V])
		if !ok {
			b.errorf("%s: the Materialized value serde is a %T, not a serde of the table's values (%T)", op, c.mat.vs, *new(V))
			return nil, vs
		}
		vs = typed
	}
	if c.mat.name == "" {
		// Materialized.with: serdes, no store.
		if len(c.mat.opts) > 0 {
			b.errorf("%s: Materialized with no store name gives a serde only; its store options do not apply", op)
		}
		return nil, vs
	}
	if ks == nil || vs == nil {
		b.errorf("%s: the table carries no key or value serde for the store %q; pass one to Materialized: %w", op, c.mat.name, ErrNoSerde)
	}
	d := tableStoreDef(c.mat.name, ks, vs, c.mat.opts)
	if d.versioned {
		versionedStoreDef(d, ks, vs)
	}
	b.addStore(d, n)
	return d, vs
}

// Filter keeps the rows for which pred is true, as Kafka Streams' KTable.filter does
// (KTableFilter): an update that pred rejects is forwarded as a delete of its key, unless
// the row's previous value was rejected (or absent) too, so that a key never seen downstream
// gets no tombstone; deletes pass as deletes, and pred is not called on them. (Java
// suppresses that tombstone only when the parent table sends old values; every parent here
// can, because every table without a parent has a store, so Filter always does.) Options:
// [Named], [Materialized].
func (t KTable[K, V]) Filter(pred func(K, V) bool, opts ...Option) KTable[K, V] {
	return t.filter("KTable.Filter", pred, false, opts)
}

// FilterNot keeps the rows for which pred is false; see [KTable.Filter].
func (t KTable[K, V]) FilterNot(pred func(K, V) bool, opts ...Option) KTable[K, V] {
	return t.filter("KTable.FilterNot", pred, true, opts)
}

func (t KTable[K, V]) filter(op string, pred func(K, V) bool, not bool, opts []Option) KTable[K, V] {
	b := t.b
	c := b.options(op, opts, "Materialized")
	c.serdeOnly = true
	burnStoreName(b, c, "KTABLE-FILTER")
	n := b.tableNode(b.nameOr(c, "KTABLE-FILTER"), t.n)
	d, vs := materialize(b, op, c, n, t.ks, t.vs)
	keep := func(k K, v V) bool { return pred(k, v) != not }
	out := KTable[K, V]{b: b, n: n, ks: t.ks, vs: vs}
	if d != nil {
		out.store, out.info = d.name, ownInfo(d)
		out.getter, out.getterStores, out.asOf = ownGetter[K, V](d), []*storeDef{d}, ownAsOf[K, V](d)
	} else {
		out.info = derivedInfo(t.info)
		out.getterStores = t.getterStores
		out.getter = func(tk *task) (valueGetter[K, V], error) {
			parent, err := t.getter(tk)
			if err != nil {
				return nil, err
			}
			return func(k K) (v V, ts int64, ok bool, err error) {
				v, ts, ok, err = parent(k)
				if err != nil || !ok || !keep(k, v) {
					var zero V
					return zero, 0, false, err
				}
				return v, ts, true, nil
			}, nil
		}
		out.asOf = derivedAsOf(t.asOf, func(k K, v V) (V, bool) { return v, keep(k, v) })
	}
	// KTableFilter's constructor: "If upstream is already materialized, enable sending old
	// values to avoid sending unnecessary tombstones".
	out.info.sendOld = t.info.enable(false)
	info := out.info
	// KTableFilter with versioned semantics forwards every update, even a delete of a row
	// that was never forwarded.
	useVersioned := t.info.versioned
	n.instantiate = func(tk *task) (any, error) {
		var st *ownStore[K, V]
		var cache *ownCache[K, V]
		if d != nil {
			var err error
			if st, err = openOwnStore[K, V](tk, d); err != nil {
				return nil, err
			}
			cache = openOwnCache(tk, d, st)
		}
		return processorInstance(tk, n, ProcessorFunc[K, change[V], K, change[V]](func(ctx ProcessorContext[K, change[V]], r Record[K, change[V]]) error {
			in := r.Value
			res := change[V]{stale: in.stale}
			if in.hasNew && keep(r.Key, in.new) {
				res.new, res.hasNew = in.new, true
			}
			if info.sendOld {
				if st != nil {
					var err error
					if res.old, _, res.hasOld, err = st.get(r.Key); err != nil {
						return err
					}
				} else if in.hasOld && keep(r.Key, in.old) {
					res.old, res.hasOld = in.old, true
				}
				if !res.hasOld && !res.hasNew && !useVersioned {
					return nil // unnecessary to forward
				}
			}
			var existed bool
			if cache != nil {
				var err error
				if _, existed, err = cache.existed(r.Key); err != nil {
					return err
				}
			}
			if st != nil {
				code, err := st.put(r.Key, res.new, res.hasNew, unixMs(r.Timestamp))
				if err != nil {
					return err
				}
				if code == putNotPut {
					return nil // not put to the store: not forwarded either
				}
				res.stale = code != putIsLatest
			}
			if cache != nil {
				return cache.hold(ctx, r.Key, res, existed, r.Timestamp, r.Headers)
			}
			ctx.Forward(Record[K, change[V]]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		}))
	}
	return out
}

// TableMapValues maps each row's value with fn, as Kafka Streams' KTable.mapValues does
// (KTableMapValues): fn is not called on deletes, which pass as deletes. The result carries
// t's value serde only if VR is V; give it one with [Materialized] otherwise, if it is
// written to a topic, a store or a suppression buffer: Materialized("", vs) gives the
// serde alone, without a store (Kafka Streams' Materialized.with). Options: [Named],
// [Materialized].
func TableMapValues[K, V, VR any](t KTable[K, V], fn func(V) VR, opts ...Option) KTable[K, VR] {
	return TableMapValuesWithKey(t, func(_ K, v V) VR { return fn(v) }, opts...)
}

// TableMapValuesWithKey is [TableMapValues] with read-only access to the key.
func TableMapValuesWithKey[K, V, VR any](t KTable[K, V], fn func(K, V) VR, opts ...Option) KTable[K, VR] {
	const op = "TableMapValues"
	b := t.b
	c := b.options(op, opts, "Materialized")
	c.serdeOnly = true
	burnStoreName(b, c, "KTABLE-MAPVALUES")
	n := b.tableNode(b.nameOr(c, "KTABLE-MAPVALUES"), t.n)
	d, vs := materialize(b, op, c, n, t.ks, carry[V, VR](t.vs))
	out := KTable[K, VR]{b: b, n: n, ks: t.ks, vs: vs}
	if d != nil {
		out.store, out.info = d.name, ownInfo(d)
		out.getter, out.getterStores, out.asOf = ownGetter[K, VR](d), []*storeDef{d}, ownAsOf[K, VR](d)
	} else {
		out.info = derivedInfo(t.info)
		out.getterStores = t.getterStores
		out.getter = func(tk *task) (valueGetter[K, VR], error) {
			parent, err := t.getter(tk)
			if err != nil {
				return nil, err
			}
			return func(k K) (VR, int64, bool, error) {
				var zero VR
				v, ts, ok, err := parent(k)
				if err != nil || !ok {
					return zero, 0, false, err
				}
				vr := fn(k, v)
				if isNil(vr) {
					return zero, 0, false, nil
				}
				return vr, ts, true, nil
			}, nil
		}
		out.asOf = derivedAsOf(t.asOf, func(k K, v V) (VR, bool) { vr := fn(k, v); return vr, !isNil(vr) })
	}
	info := out.info
	n.instantiate = func(tk *task) (any, error) {
		var st *ownStore[K, VR]
		var cache *ownCache[K, VR]
		if d != nil {
			var err error
			if st, err = openOwnStore[K, VR](tk, d); err != nil {
				return nil, err
			}
			cache = openOwnCache(tk, d, st)
		}
		return processorInstance(tk, n, ProcessorFunc[K, change[V], K, change[VR]](func(ctx ProcessorContext[K, change[VR]], r Record[K, change[V]]) error {
			in := r.Value
			res := change[VR]{stale: in.stale}
			if in.hasNew {
				res.setNew(fn(r.Key, in.new))
			}
			if info.sendOld {
				if st != nil {
					var err error
					if res.old, _, res.hasOld, err = st.get(r.Key); err != nil {
						return err
					}
				} else if in.hasOld {
					res.setOld(fn(r.Key, in.old))
				}
			}
			var existed bool
			if cache != nil {
				var err error
				if _, existed, err = cache.existed(r.Key); err != nil {
					return err
				}
			}
			if st != nil {
				code, err := st.put(r.Key, res.new, res.hasNew, unixMs(r.Timestamp))
				if err != nil {
					return err
				}
				if code == putNotPut {
					return nil // not put to the store: not forwarded either
				}
				res.stale = code != putIsLatest
			}
			if cache != nil {
				return cache.hold(ctx, r.Key, res, existed, r.Timestamp, r.Headers)
			}
			ctx.Forward(Record[K, change[VR]]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		}))
	}
	return out
}

// ToTable reads the stream as a changelog, as Kafka Streams' KStream.toTable does: each
// record is the new value of its key, kept in the store named storeName (a timestamped
// store, logged to "<application.id>-<storeName>-changelog" unless opts say otherwise); a
// record whose value is a Kafka null (see [Record.IsTombstone]) or nil deletes its key
// (forwarded as a delete even if the key was absent), and records with a null key
// ([Record.HasNullKey], or a key that serializes to nil) are dropped and counted in
// [Stats].DroppedRecords. The operator is named KSTREAM-TOTABLE-
// followed by a generated number, or as [Named] among opts says. If a key-changing operator ran before, the stream is
// first repartitioned, as Kafka Streams' toTable(Materialized.as(storeName)) does, through
// "<application.id>-<operator>-repartition" (for example
// "<application.id>-KSTREAM-TOTABLE-0000000002-repartition"), a topic shared with the other
// joins and aggregations below the same key-changing operator (see [Count]). The stream must
// carry its key and value serdes ([KStream.WithSerdes]).
func (s KStream[K, V]) ToTable(storeName string, opts ...StoreOption) KTable[K, V] {
	b := s.b
	if s.ks == nil || s.vs == nil {
		b.errorf("ToTable %q: the stream carries no key or value serde for the store; use WithSerdes: %w", storeName, ErrNoSerde)
	}
	// Java names the operator first, then its repartition (KStreamImpl.toTable).
	name := b.aggName("KSTREAM-TOTABLE", opts)
	if s.keyChanged && s.ks != nil && s.vs != nil {
		s = repartitionForKey(s, name, false, "ToTable "+strconv.Quote(storeName))
	}
	d := tableStoreDef(storeName, s.ks, s.vs, opts)
	d.accepts = append(d.accepts, "Named")
	n := b.tableNode(name, s.n)
	b.addStore(d, n)
	return sourceTable(b, n, d, s.ks, s.vs)
}

// sourceTable makes n, which takes Record[K, V], the source of a table kept in d, as Kafka
// Streams' KTableSource (materialized) is: each record replaces its key's row, or deletes
// it if its value is null; the update is forwarded with the old value when asked for.
func sourceTable[K, V any](b *Builder, n *node, d *storeDef, ks serde.Serde[K], vs serde.Serde[V]) KTable[K, V] {
	if d.versioned {
		return versionedSourceTable(b, n, d, ks, vs)
	}
	info := storedInfo()
	storeKs := storeKeySerde(d, ks) // bound to the store's topic, as the store's own
	n.instantiate = func(t *task) (any, error) {
		st, err := taskTableStore[K, V](t, d.name)
		if err != nil {
			return nil, err
		}
		keys := newKeyScratch(storeKs)
		cache := openEmitCache[K, V](t, d)
		return processorInstance(t, n, ProcessorFunc[K, V, K, change[V]](func(ctx ProcessorContext[K, change[V]], r Record[K, V]) error {
			// Records with a null key are dropped: KTableSource skips them with a warning
			// and a dropped record.
			// The key is serialized once, for the check, the read and the write.
			kb, drop, err := storeKeyBytes(t, n, keys, r)
			if drop || err != nil {
				return err
			}
			old, _, had, err := getTSSerialized(st, kb)
			if err != nil {
				return err
			}
			res := change[V]{new: r.Value, hasNew: !nullValue(r)}
			if !res.hasNew {
				var zero V
				res.new = zero
			}
			if err := putTSSerialized(st, kb, res.new, res.hasNew, unixMs(r.Timestamp)); err != nil {
				return err
			}
			if info.sendOld {
				res.old, res.hasOld = old, had
			}
			if cache != nil {
				cache.put(ctx, kb, r.Key, res, had, unixMs(r.Timestamp), r.Headers)
				return nil
			}
			ctx.Forward(Record[K, change[V]]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		}))
	}
	return KTable[K, V]{b: b, n: n, ks: ks, vs: vs, store: d.name, info: info,
		getter: storeGetter[K, V](d.name), getterStores: []*storeDef{d}}
}
