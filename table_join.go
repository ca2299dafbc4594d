package kstream

// joinKind is the kind of a table-table join.
type joinKind int

const (
	innerJoin joinKind = iota
	leftJoin
	outerJoin
)

// TableJoin joins two tables on their keys, as Kafka Streams' KTable.join does
// (KTableKTableInnerJoin): the result has a row for each key present in both, with value
// joiner(key, left, right). An update of either side looks up the other side's current value
// (through its store, or its parents' for a table without one): if the other side has the
// key, the joined row is forwarded, or a delete when the update is a delete; if it does not,
// nothing is forwarded. Each result has the larger of the two sides' timestamps.
//
// left and right must be co-partitioned (checked at start). The result has no store unless
// [Materialized] names one, and it can be joined, filtered or turned into a stream like any
// table. Its value serde is the Materialized one if given, else left's or right's when VR is
// their value type, else none. Options: [Named] (the join's
// nodes are then "<name>", "<name>-join-this" and "<name>-join-other"), [Materialized].
func TableJoin[K, V1, V2, VR any](left KTable[K, V1], right KTable[K, V2], joiner func(key K, v1 V1, v2 V2) VR, opts ...Option) KTable[K, VR] {
	return tableJoin(left, right, innerJoin, "TableJoin", func(k K, v1 V1, _ bool, v2 V2, _ bool) VR { return joiner(k, v1, v2) }, opts)
}

// TableLeftJoin is [TableJoin] that keeps every row of left, as Kafka Streams'
// KTable.leftJoin does (KTableKTableLeftJoin and KTableKTableRightJoin): when right has no
// row for the key, joiner is called with found false and the zero V2. An update of left is
// forwarded whatever right holds (a delete of a key that was never in left is not); an
// update of right is forwarded when left has the key, a delete of right's row giving
// joiner(key, left, zero, false). The timestamp is left's when right has no row.
func TableLeftJoin[K, V1, V2, VR any](left KTable[K, V1], right KTable[K, V2], joiner func(key K, v1 V1, v2 V2, found bool) VR, opts ...Option) KTable[K, VR] {
	return tableJoin(left, right, leftJoin, "TableLeftJoin", func(k K, v1 V1, _ bool, v2 V2, found bool) VR { return joiner(k, v1, v2, found) }, opts)
}

// TableOuterJoin is [TableJoin] that keeps every row of both sides, as Kafka Streams'
// KTable.outerJoin does (KTableKTableOuterJoin): joiner gets each side's value with whether
// that side has the key (the zero value when not). An update of either side is forwarded
// unless it is a delete of a key absent from both sides before and after; when both sides
// are gone, the result is a delete.
func TableOuterJoin[K, V1, V2, VR any](left KTable[K, V1], right KTable[K, V2], joiner func(key K, v1 V1, found1 bool, v2 V2, found2 bool) VR, opts ...Option) KTable[K, VR] {
	return tableJoin(left, right, outerJoin, "TableOuterJoin", joiner, opts)
}

// tableJoin builds Kafka Streams' three-node table-table join (KTableImpl.doJoin): a
// processor under each side that looks up the other side, and a merge node
// (KTableKTableJoinMerger) that forwards both and optionally materializes the result.
func tableJoin[K, V1, V2, VR any](l KTable[K, V1], r KTable[K, V2], kind joinKind, op string,
	j func(k K, v1 V1, ok1 bool, v2 V2, ok2 bool) VR, opts []Option) KTable[K, VR] {
	b := l.b
	c := b.options(op, opts, "Materialized")
	if r.b != b {
		b.errorf("%s: the tables come from different builders", op)
		return KTable[K, VR]{b: b, n: l.n, info: storedInfo()}
	}
	// Names as Java generates them: the merge node first, then this side, then the other.
	mergeName, thisName, otherName := c.name, c.name+"-join-this", c.name+"-join-other"
	// Each takes a name from the counter, named or not (NamedInternal).
	if gen := [3]string{b.newName("KTABLE-MERGE"), b.newName("KTABLE-JOINTHIS"), b.newName("KTABLE-JOINOTHER")}; c.name == "" {
		mergeName, thisName, otherName = gen[0], gen[1], gen[2]
	}
	b.copart = append(b.copart, []*node{l.n, r.n})
	// Left and outer joins need the old values of their outer sides, to tell a delete of a
	// row from a delete of nothing.
	if kind != innerJoin {
		l.info.enable(true)
	}
	if kind == outerJoin {
		r.info.enable(true)
	}
	info := &tableInfo{}
	info.enable = func(bool) bool {
		// KTableKTableJoinMerger: "Table-table joins require upstream materialization".
		l.info.enable(true)
		r.info.enable(true)
		info.sendOld = true
		return true
	}

	thisN := b.tableNode(thisName, l.n)
	otherN := b.tableNode(otherName, r.n)
	for _, d := range r.getterStores {
		b.addStore(d, thisN)
	}
	for _, d := range l.getterStores {
		b.addStore(d, otherN)
	}
	mergeN := b.tableNode(mergeName, thisN, otherN)
	vs := carry[V1, VR](l.vs)
	if vs == nil {
		vs = carry[V2, VR](r.vs)
	}
	d, vs := materialize(b, op, c, mergeN, l.ks, vs)

	// This side: an update of left, joined with right's current value.
	thisN.instantiate = func(t *task) (any, error) {
		get, err := r.getter(t)
		if err != nil {
			return nil, err
		}
		return processorInstance(t, thisN, ProcessorFunc[K, change[V1], K, change[VR]](func(ctx ProcessorContext[K, change[VR]], rec Record[K, change[V1]]) error {
			in := rec.Value
			if in.stale && l.info.versioned {
				return nil // versioned semantics: not the latest update of its key
			}
			v2, ts2, ok2, err := get(rec.Key)
			if err != nil {
				return err
			}
			ts := unixMs(rec.Timestamp)
			var res change[VR]
			switch kind {
			case innerJoin: // KTableKTableInnerJoin
				if !ok2 {
					return nil
				}
				ts = max(ts, ts2)
				if in.hasNew {
					res.setNew(j(rec.Key, in.new, true, v2, true))
				}
				if info.sendOld && in.hasOld {
					res.setOld(j(rec.Key, in.old, true, v2, true))
				}
			case leftJoin: // KTableKTableLeftJoin
				if !ok2 && !in.hasNew && !in.hasOld {
					return nil
				}
				if ok2 {
					ts = max(ts, ts2)
				}
				if in.hasNew {
					res.setNew(j(rec.Key, in.new, true, v2, ok2))
				}
				if info.sendOld && in.hasOld {
					res.setOld(j(rec.Key, in.old, true, v2, ok2))
				}
			case outerJoin: // KTableKTableOuterJoin
				if !ok2 && !in.hasNew && !in.hasOld {
					return nil
				}
				if ok2 {
					ts = max(ts, ts2)
				}
				if ok2 || in.hasNew {
					res.setNew(j(rec.Key, in.new, in.hasNew, v2, ok2))
				}
				if info.sendOld && (ok2 || in.hasOld) {
					res.setOld(j(rec.Key, in.old, in.hasOld, v2, ok2))
				}
			}
			ctx.Forward(Record[K, change[VR]]{Key: rec.Key, Value: res, Timestamp: msTime(ts), Headers: rec.Headers})
			return nil
		}))
	}

	// The other side: an update of right, joined with left's current value.
	otherN.instantiate = func(t *task) (any, error) {
		get, err := l.getter(t)
		if err != nil {
			return nil, err
		}
		return processorInstance(t, otherN, ProcessorFunc[K, change[V2], K, change[VR]](func(ctx ProcessorContext[K, change[VR]], rec Record[K, change[V2]]) error {
			in := rec.Value
			if in.stale && r.info.versioned {
				return nil // versioned semantics: not the latest update of its key
			}
			v1, ts1, ok1, err := get(rec.Key)
			if err != nil {
				return err
			}
			ts := unixMs(rec.Timestamp)
			var res change[VR]
			switch kind {
			case innerJoin: // KTableKTableInnerJoin, with the joiner reversed
				if !ok1 {
					return nil
				}
				ts = max(ts, ts1)
				if in.hasNew {
					res.setNew(j(rec.Key, v1, true, in.new, true))
				}
				if info.sendOld && in.hasOld {
					res.setOld(j(rec.Key, v1, true, in.old, true))
				}
			case leftJoin: // KTableKTableRightJoin: the joiner runs even for a delete
				if !ok1 {
					return nil
				}
				ts = max(ts, ts1)
				res.setNew(j(rec.Key, v1, true, in.new, in.hasNew))
				if info.sendOld {
					res.setOld(j(rec.Key, v1, true, in.old, in.hasOld))
				}
			case outerJoin: // KTableKTableOuterJoin, with the joiner reversed
				if !ok1 && !in.hasNew && !in.hasOld {
					return nil
				}
				if ok1 {
					ts = max(ts, ts1)
				}
				if ok1 || in.hasNew {
					res.setNew(j(rec.Key, v1, ok1, in.new, in.hasNew))
				}
				if info.sendOld && (ok1 || in.hasOld) {
					res.setOld(j(rec.Key, v1, ok1, in.old, in.hasOld))
				}
			}
			ctx.Forward(Record[K, change[VR]]{Key: rec.Key, Value: res, Timestamp: msTime(ts), Headers: rec.Headers})
			return nil
		}))
	}

	// The merge node (KTableKTableJoinMerger): stores the result if materialized, forwards it.
	mergeN.instantiate = func(t *task) (any, error) {
		var st *ownStore[K, VR]
		var cache *ownCache[K, VR]
		if d != nil {
			var err error
			if st, err = openOwnStore[K, VR](t, d); err != nil {
				return nil, err
			}
			cache = openOwnCache(t, d, st)
		}
		return processorInstance(t, mergeN, ProcessorFunc[K, change[VR], K, change[VR]](func(ctx ProcessorContext[K, change[VR]], rec Record[K, change[VR]]) error {
			var existed bool
			var prev VR
			if cache != nil {
				var err error
				if prev, existed, err = cache.existed(rec.Key); err != nil {
					return err
				}
			}
			if st != nil {
				code, err := st.put(rec.Key, rec.Value.new, rec.Value.hasNew, unixMs(rec.Timestamp))
				if err != nil {
					return err
				}
				if code == putNotPut {
					return nil // not put to the store: not forwarded either
				}
				rec.Value.stale = code != putIsLatest
			}
			rec.Value = rec.Value.withoutOld(info.sendOld)
			if cache != nil {
				// The old value forwarded is the store's, as Java's caching store reads it.
				rec.Value.old, rec.Value.hasOld = prev, existed && info.sendOld
				if !rec.Value.hasOld {
					var zero VR
					rec.Value.old = zero
				}
				return cache.hold(ctx, rec.Key, rec.Value, existed, rec.Timestamp, rec.Headers)
			}
			ctx.Forward(rec)
			return nil
		}))
	}

	out := KTable[K, VR]{b: b, n: mergeN, ks: l.ks, vs: vs, info: info}
	if d != nil {
		out.store, out.getter, out.getterStores = d.name, ownGetter[K, VR](d), []*storeDef{d}
		out.asOf, info.versioned = ownAsOf[K, VR](d), d.versioned
		return out
	}
	out.getterStores = append(append([]*storeDef(nil), l.getterStores...), r.getterStores...)
	out.getter = func(t *task) (valueGetter[K, VR], error) {
		g1, err := l.getter(t)
		if err != nil {
			return nil, err
		}
		g2, err := r.getter(t)
		if err != nil {
			return nil, err
		}
		return func(k K) (res VR, ts int64, ok bool, err error) {
			var zero VR
			v1, ts1, ok1, err := g1(k)
			if err != nil || (!ok1 && kind != outerJoin) {
				return zero, 0, false, err
			}
			v2, ts2, ok2, err := g2(k)
			if err != nil || (!ok2 && kind == innerJoin) || (!ok1 && !ok2) {
				return zero, 0, false, err
			}
			// The value getters of KTableKTableInnerJoin, LeftJoin and OuterJoin: the result
			// has the larger timestamp of the sides that have the key.
			switch {
			case !ok1:
				ts = ts2
			case !ok2:
				ts = ts1
			default:
				ts = max(ts1, ts2)
			}
			if res = j(k, v1, ok1, v2, ok2); isNil(res) {
				return zero, 0, false, nil
			}
			return res, ts, true, nil
		}, nil
	}
	return out
}
