package kstream

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// SessionWindowedKStream is a grouped stream with session windows, ready for a session
// aggregation ([SessionCount], [SessionReduce], [SessionAggregate]). Create one with
// [KGroupedStream.WindowedBySession].
type SessionWindowedKStream[K, V any] struct {
	g       KGroupedStream[K, V]
	w       windowSpec
	onClose bool
	close   closeOptions
}

// WindowedBySession windows the grouped stream by sessions ([SessionWindowsOf]): Kafka
// Streams' KGroupedStream.windowedBy(SessionWindows).
func (g KGroupedStream[K, V]) WindowedBySession(w SessionWindows) SessionWindowedKStream[K, V] {
	s := w.s
	if s.err == nil && (s.kind != sessionWindowKind || s.size <= 0) {
		s.err = fmt.Errorf("WindowedBySession: the session windows have no inactivity gap; create them with SessionWindowsOf")
	}
	return SessionWindowedKStream[K, V]{g: g, w: s}
}

// EmitOnWindowClose makes the aggregation emit one final result per session, when the
// session closes (stream time reaches its end plus the inactivity gap plus the grace
// period), instead of an update for every record: Kafka Streams' EmitStrategy.onWindowClose.
// The final results are read from the session store, so that it keeps no buffer of its own.
//
// As in Kafka Streams, the sessions that closed are emitted when a record of the same task
// moves stream time past their close, with that record's headers and the session's end as
// their timestamp, ordered by session end, then session start, then serialized key (the
// order of Kafka Streams' time-ordered session store, which such aggregations use). No
// tombstone is emitted for the sessions that merges replaced.
//
// As in Kafka Streams, the sessions of a store segment that expires before they close
// (when stream time jumps further than the segment interval, at least a minute, past
// their retention at once) have no final result; they are counted ([Stats].LostResults,
// kstream_operator_lost_results_total) and logged at warn. [EmitBeforeExpiry] emits them
// instead (see docs/windows.md).
func (w SessionWindowedKStream[K, V]) EmitOnWindowClose(opts ...CloseOption) SessionWindowedKStream[K, V] {
	w.onClose = true
	for _, o := range opts {
		o(&w.close)
	}
	return w
}

// SessionCount counts the records of each key and session into the session store named
// name. Records with a null key are skipped and counted in [Stats].DroppedRecords; so are
// late records (whose session, merged with the sessions it joins, has closed). As in Kafka
// Streams' session count, a record with a null value is counted, and merged sessions add
// up their counts.
func SessionCount[K, V any](w SessionWindowedKStream[K, V], name string, opts ...StoreOption) KTable[serde.Windowed[K], int64] {
	a := &sessionAgg[K, V, int64]{
		init:  func() (int64, bool) { return 0, true },
		merge: func(_ K, acc int64, _ bool, s int64) (int64, bool) { return acc + s, true },
		agg:   func(_ K, _ V, _ bool, n int64, _ bool) (int64, bool) { return n + 1, true },
	}
	return sessionAggregate(w, "KSTREAM-AGGREGATE", "SessionCount", a, serde.Int64(), name, opts)
}

// SessionReduce combines the values of each key and session with fn into the session store
// named name, with the stream's value serde. A session's first value is stored as it is,
// and the aggregates of merged sessions are combined with fn too (in the order of the
// sessions, the earlier aggregate first), as Kafka Streams' session reduce does.
//
// A record with a null value is not skipped: fn gets the zero V (nil for a nilable V), as
// Java's reducer gets null; a null first value of a session makes no session (a
// tombstone is forwarded for it), and a nil result of fn removes the session.
func SessionReduce[K, V any](w SessionWindowedKStream[K, V], fn func(acc, v V) V, name string, opts ...StoreOption) KTable[serde.Windowed[K], V] {
	combine := func(acc V, has bool, v V, vNull bool) (V, bool) {
		if !has {
			return v, !vNull
		}
		res := fn(acc, v)
		return res, !isNil(res)
	}
	a := &sessionAgg[K, V, V]{
		init: func() (V, bool) {
			var zero V
			return zero, false
		},
		merge: func(_ K, acc V, has bool, s V) (V, bool) { return combine(acc, has, s, false) },
		agg:   func(_ K, v V, vNull bool, acc V, has bool) (V, bool) { return combine(acc, has, v, vNull) },
	}
	return sessionAggregate(w, "KSTREAM-REDUCE", "SessionReduce", a, w.g.s.vs, name, opts)
}

// SessionAggregate folds the values of each key and session into an aggregate of type VA,
// starting from init() for each new session, and keeps it in the session store named name
// (values serialized with vs). When a record joins existing sessions, their aggregates are
// merged into init() with merge, in the order of the sessions (by end, then start), before
// agg adds the record.
//
// As in Kafka Streams (KStreamSessionWindowAggregate): a record with a null key is skipped,
// one with a null value is aggregated (agg gets the zero V); each record makes or extends a
// session [first timestamp, last timestamp] and merges the sessions of its key that are
// within the inactivity gap of it; every merged session is removed, with a tombstone
// forwarded for it (with its end as timestamp), then the merged session is forwarded with
// its end as timestamp and no headers. A record whose merged session ends before the close
// time (the largest timestamp seen minus the grace period minus the inactivity gap) is
// dropped as late. The table's keys are [serde.Windowed] with [serde.SessionWindowed] as
// their serde; the old values of updates are never forwarded (Java's processor forwards
// none), those of tombstones are when a downstream operator asks for them.
//
// The store is a session store (values without timestamps) kept for the inactivity gap
// plus the grace period after a session's end unless [WithRetention] says more, logged to
// "<application.id>-<name>-changelog" (compact,delete, retained one day longer than the
// store), in Java's format. A nil aggregate (for a nilable VA) removes the session.
func SessionAggregate[K, V, VA any](w SessionWindowedKStream[K, V], init func() VA, agg func(key K, value V, acc VA) VA, merge func(key K, a, b VA) VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[serde.Windowed[K], VA] {
	a := &sessionAgg[K, V, VA]{
		init:  func() (VA, bool) { return init(), true },
		merge: func(k K, acc VA, _ bool, s VA) (VA, bool) { return merge(k, acc, s), true },
		agg:   func(k K, v V, _ bool, acc VA, _ bool) (VA, bool) { return agg(k, v, acc), true },
	}
	return sessionAggregate(w, "KSTREAM-AGGREGATE", "SessionAggregate", a, vs, name, opts)
}

// sessionAgg is what a session aggregation processor needs of its definition. The
// aggregate travels with a flag saying whether it is present (false: Java's null, which
// only a reduce has).
type sessionAgg[K, V, VA any] struct {
	w       windowSpec
	onClose bool
	// beforeExpiry is EmitBeforeExpiry (see windowAgg).
	beforeExpiry bool
	init         func() (VA, bool)
	merge        func(key K, acc VA, has bool, session VA) (VA, bool)
	agg          func(key K, v V, vNull bool, acc VA, has bool) (VA, bool)
	ks           serde.Serde[K]
	store        string
	info         *tableInfo
	def          *storeDef // the store, for its record cache (recordcache.go)
}

func sessionAggregate[K, V, VA any](w SessionWindowedKStream[K, V], prefix, opName string, a *sessionAgg[K, V, VA], vs serde.Serde[VA], name string, opts []StoreOption) KTable[serde.Windowed[K], VA] {
	b := w.g.s.b
	s := w.g.s
	op := fmt.Sprintf("%s %q", opName, name)
	nodeName := b.aggName(prefix, opts)
	if w.w.err != nil {
		b.errorf("%s: %w", op, w.w.err)
	}
	if s.keyChanged {
		repName := w.g.name
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
	if w.close.idle > 0 {
		b.errorf("%s: CloseWhenIdle is an option of time windows' EmitOnWindowClose; session windows close only when records move stream time on", op)
	}
	d := sessionStoreDef(b, op, name, s.ks, vs, w.w.size, w.w.grace, opts)
	d.window = w.w.def()
	n := b.tableNode(nodeName, s.n)
	n.windowGrace, n.hasWindowGrace = w.w.grace+w.w.size, true // for KTable.Suppress(UntilWindowCloses): Java's session grace plus gap
	b.addStore(d, n)
	a.w, a.onClose, a.beforeExpiry, a.ks, a.store, a.info, a.def = w.w, w.onClose, w.close.beforeExpiry, storeKeySerde(d, s.ks), name, storedInfo(), d
	n.instantiate = func(t *task) (any, error) {
		st, err := taskSessionStore[K, VA](t, name)
		if err != nil {
			return nil, err
		}
		return newSessionAggregator(t, n, a, st)
	}
	var ks serde.Serde[serde.Windowed[K]]
	if s.ks != nil {
		ks = serde.SessionWindowed(s.ks)
	}
	return KTable[serde.Windowed[K], VA]{b: b, n: n, ks: ks, vs: vs, store: name, info: a.info,
		getter: sessionGetter[K, VA](name), getterStores: []*storeDef{d}}
}

// sessionKV is the typed store of a session aggregation: a session store of aggregates.
type sessionKV[K, V any] = store.SessionStore[K, V]

// sessionStoreDef declares the session store of a session aggregation with inactivity gap
// gap and grace period grace (ms): Kafka Streams' SessionStoreMaterializer, whose
// retention defaults to, and may not be less than, gap + grace.
func sessionStoreDef[K, V any](b *Builder, op, name string, ks serde.Serde[K], vs serde.Serde[V], gap, grace int64, opts []StoreOption) *storeDef {
	d := &storeDef{name: name, persistent: true, logged: true, accepts: []string{"Named", "WithRetention"}}
	applyStoreOpts(d, opts)
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	minRetention := gap + grace
	retention := minRetention
	if d.retentionSet {
		ms, err := millis("the retention period", d.retention)
		if err != nil {
			b.errorf("%s: %w", op, err)
		}
		retention = ms
		if retention < minRetention {
			b.errorf("%s: the retention period of the session store %s must be no smaller than the session inactivity gap plus the grace period (%dms + %dms), got %dms",
				op, name, gap, grace, retention)
		}
	}
	o := store.SessionOptions{Retention: time.Duration(max(retention, minRetention)) * time.Millisecond}
	codec, err := store.NewSessionChangelog(o)
	if err != nil {
		b.errorf("%s: %w", op, err)
	}
	d.codec = codec
	d.query = newQueryCodec(SessionKind, ks, vs, false)
	d.typed = func(bk store.Backend) any {
		ss, err := store.NewSessionStore(name, bk, ks, vs, o)
		if err != nil {
			return err
		}
		return ss
	}
	return d
}

// taskSessionStore returns task t's instance of the session store named name.
func taskSessionStore[K, V any](t *task, name string) (*sessionKV[K, V], error) {
	switch s := t.stores[name].(type) {
	case *sessionKV[K, V]:
		return s, nil
	case error:
		return nil, fmt.Errorf("kstream: task %s: session store %q: %w", t.id, name, s)
	default:
		return nil, fmt.Errorf("kstream: internal error: task %s has no session store %q of these types (it has a %T)", t.id, name, t.stores[name])
	}
}

// sessionGetter is the value getter of a session-windowed table kept in the session store
// named name: Kafka Streams' KTableSessionWindowValueGetter, which reads the session with
// exactly the key's window and gives it the session's end as timestamp.
func sessionGetter[K, V any](name string) func(t *task) (valueGetter[serde.Windowed[K], V], error) {
	return func(t *task) (valueGetter[serde.Windowed[K], V], error) {
		st, err := taskSessionStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return func(k serde.Windowed[K]) (V, int64, bool, error) {
			v, ok, err := st.FetchSession(k.Key, k.Start, k.End)
			if err != nil {
				err = fmt.Errorf("session store %q: %w", name, err)
			}
			return v, k.EndMs(), ok, err
		}, nil
	}
}

// sessionAggregator is the processor of a session aggregation: Kafka Streams'
// KStreamSessionWindowAggregateProcessor.
type sessionAggregator[K, V, VA any] struct {
	a  *sessionAgg[K, V, VA]
	t  *task
	n  *node
	st *sessionKV[K, VA]
	windowClock
	// kapp is the key serde when it appends to a buffer, kbuf that buffer: the check of a
	// record's key allocates nothing.
	kapp store.AppendSerializer[K]
	kbuf []byte
	// kb is the record's serialized key (in kbuf), for the record cache's keys.
	kb []byte
	// cache is the store's record cache, nil without one (or when emitting on close);
	// ckey the buffer of its keys: the serialized key, then the session's start and end.
	cache *emitCache[serde.Windowed[K], VA]
	ckey  []byte
}

func newSessionAggregator[K, V, VA any](t *task, n *node, a *sessionAgg[K, V, VA], st *sessionKV[K, VA]) (any, error) {
	p := &sessionAggregator[K, V, VA]{a: a, t: t, n: n, st: st, windowClock: newWindowClock()}
	p.kapp, _ = a.ks.(store.AppendSerializer[K])
	if !a.onClose && a.def != nil {
		p.cache = openEmitCache[serde.Windowed[K], VA](t, a.def)
	}
	if err := p.recover(); err != nil {
		return nil, fmt.Errorf("operator %s: session store %q: %w", n.name, a.store, err)
	}
	p.start(t, p.st, a.onClose)
	return processorInstance(t, n, ProcessorFunc[K, V, serde.Windowed[K], change[VA]](p.process))
}

// recover sets the observed stream time and the last emitted close time from the store, for
// a task that starts with state (restored, or kept on disk), as the time-window aggregation
// does (Kafka Streams starts again from no stream time, and keeps the last emitted close
// time in the committed offsets' metadata). The store's observed stream time, the largest
// session end written, is the largest timestamp aggregated: the record with that timestamp
// wrote a session ending at or after it, and no session ends after the largest timestamp.
// Under exactly-once, final results, emitted after every record, were emitted up to its
// close time; under at-least-once, the close time of the last commit is in the store's
// metadata.
func (p *sessionAggregator[K, V, VA]) recover() error {
	latest, ok, err := p.st.ObservedStreamTime()
	if err != nil || !ok {
		return err
	}
	p.observed = latest.UnixMilli()
	if !p.a.onClose {
		return nil
	}
	closeTime := p.closeTime()
	return p.recoverLastEmit(p.st, p.t.h.eos && !p.t.aligned(), closeTime, closeTime >= 1)
}

// closeTime is the close time of sessions: a session that ends before it has closed.
func (p *sessionAggregator[K, V, VA]) closeTime() int64 {
	return p.now() - p.a.w.grace - p.a.w.size
}

// sessionEntry is a session read from the store.
type sessionEntry[K, V any] struct {
	w serde.Windowed[K]
	v V
}

func (p *sessionAggregator[K, V, VA]) process(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V]) error {
	a, t := p.a, p.t
	if r.HasNullKey() {
		t.dropRecord(p.n, "key")
		return nil
	}
	kb, err := appendSerialize(p.kapp, a.ks, &p.kbuf, r.Key)
	if err != nil {
		return fmt.Errorf("serializing the key: %w", err)
	} else if kb == nil {
		t.dropRecord(p.n, "key")
		return nil
	}
	p.kb = kb
	ts := unixMs(r.Timestamp)
	p.observed = max(p.observed, ts)
	closeTime := p.closeTime()
	gap := a.w.size
	// The sessions that close are read before the record's writes, which may move the
	// store's stream time past their segment's retention (see emitFinal).
	var finals []sessionFinal[K, VA]
	var due bool
	if a.onClose {
		var err error
		if finals, due, err = p.closed(closeTime); err != nil {
			return err
		}
	}

	// The sessions of the key within the gap of the record merge with it, in the store's
	// order (by end, then start).
	acc, has := a.init()
	start, end := ts, ts
	merged, err := p.find(r.Key, ts-gap, satAddMs(ts, gap))
	if err != nil {
		return err
	}
	for _, m := range merged {
		acc, has = a.merge(r.Key, acc, has, m.v)
		start, end = min(start, m.w.StartMs()), max(end, m.w.EndMs())
	}
	if end < closeTime {
		t.lateRecord(p.n, ts, start, end, closeTime, p.observed)
	} else if err := p.update(ctx, r, merged, acc, has, start, end); err != nil {
		return err
	}
	if due {
		return p.emitFinal(ctx, r, closeTime, finals)
	}
	return nil
}

// find returns the sessions of key k that end at or after earliestEnd and start at or
// before latestStart.
func (p *sessionAggregator[K, V, VA]) find(k K, earliestEnd, latestStart int64) ([]sessionEntry[K, VA], error) {
	it, err := p.st.FindSessions(k, msTime(earliestEnd), msTime(latestStart))
	if err != nil {
		return nil, fmt.Errorf("session store %q: %w", p.a.store, err)
	}
	var out []sessionEntry[K, VA]
	for it.Next() {
		out = append(out, sessionEntry[K, VA]{w: it.Key(), v: it.Value()})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return nil, fmt.Errorf("session store %q: %w", p.a.store, err)
	}
	return out, nil
}

// update aggregates record r into the session [start, end] (the merge of its own session
// and merged, whose aggregates acc holds): it removes the merged sessions, unless the
// session is the record's own [ts, ts], and writes the new one, forwarding each change
// unless the aggregation emits on window close.
func (p *sessionAggregator[K, V, VA]) update(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V], merged []sessionEntry[K, VA], acc VA, has bool, start, end int64) error {
	a := p.a
	ts := unixMs(r.Timestamp)
	if start != ts || end != ts {
		for _, m := range merged {
			if err := p.st.Remove(m.w); err != nil {
				return fmt.Errorf("session store %q: %w", a.store, err)
			}
			if !a.onClose {
				var res change[VA]
				if a.info.sendOld {
					res.setOld(m.v)
				}
				if p.cache != nil {
					p.hold(ctx, m.w, res, true, m.w.EndMs(), r.Headers)
					continue
				}
				ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: m.w, Value: res, Timestamp: msTime(m.w.EndMs())})
			}
		}
	}
	acc, has = a.agg(r.Key, r.Value, nullValue(r), acc, has)
	var res change[VA]
	if has {
		res.setNew(acc)
	}
	w := serde.WindowedMs(r.Key, start, end)
	var err error
	if res.hasNew {
		err = p.st.Put(w, res.new)
	} else {
		err = p.st.Remove(w)
	}
	if err != nil {
		return fmt.Errorf("session store %q: %w", a.store, err)
	}
	if a.onClose {
		return nil
	}
	if p.cache != nil {
		// Held back (recordcache.go): the session existed if the record fell into one
		// that keeps its bounds; its removal above is then the entry's first update, whose
		// old value (the stored aggregate) the forward carries, as Java's caching session
		// store reads it from the underlying store. Java's cache forwards the headers of
		// the record that made the update.
		existed := false
		for _, m := range merged {
			existed = existed || m.w.StartMs() == start && m.w.EndMs() == end
		}
		p.hold(ctx, w, res, existed, end, r.Headers)
		return nil
	}
	// Java forwards the new aggregate only (no old value), with the session's end as
	// timestamp and no headers.
	ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: w, Value: res, Timestamp: msTime(end)})
	return nil
}

// hold puts the update res of session w into the record cache.
func (p *sessionAggregator[K, V, VA]) hold(ctx ProcessorContext[serde.Windowed[K], change[VA]], w serde.Windowed[K], res change[VA], existed bool, ts int64, headers []Header) {
	p.ckey = binary.BigEndian.AppendUint64(append(p.ckey[:0], p.kb...), uint64(w.StartMs()))
	p.ckey = binary.BigEndian.AppendUint64(p.ckey, uint64(w.EndMs()))
	p.cache.put(ctx, p.ckey, w, res, existed, ts, headers)
}

// sessionFinal is a closed session read from the store, with its serialized key.
type sessionFinal[K, VA any] struct {
	sessionEntry[K, VA]
	kb []byte
}

// closed returns the sessions that closed since the last emission (those that end in
// [lastEmit, closeTime)), as Kafka Streams' KStreamSessionWindowAggregateProcessor reads
// them (without its wall-clock throttle, so that the results do not depend on the wall
// clock), by end, then start, then serialized key (the order of Java's time-ordered session
// store); due says that emitFinal must run. They are read before the record in hand is
// aggregated, as timeWindowAggregator.closed explains.
func (p *sessionAggregator[K, V, VA]) closed(closeTime int64) ([]sessionFinal[K, VA], bool, error) {
	if p.lastEmit != -1 && p.lastEmit >= closeTime {
		return nil, false, nil
	}
	upper := closeTime - 1
	lower := max(0, p.lastEmit)
	if upper < 0 || upper < lower {
		return nil, false, nil
	}
	it, err := p.st.FindHeldSessionsByEnd(msTime(lower), msTime(upper))
	if err != nil {
		return nil, false, fmt.Errorf("session store %q: %w", p.a.store, err)
	}
	var out []sessionFinal[K, VA]
	for it.Next() {
		e := sessionFinal[K, VA]{sessionEntry: sessionEntry[K, VA]{w: it.Key(), v: it.Value()}}
		if e.kb, err = p.a.ks.Serialize(e.w.Key); err != nil {
			break
		}
		out = append(out, e)
	}
	if err == nil {
		err = it.Err()
	}
	it.Close()
	if err != nil {
		return nil, false, fmt.Errorf("session store %q: %w", p.a.store, err)
	}
	slices.SortStableFunc(out, func(x, y sessionFinal[K, VA]) int {
		if c := cmp.Compare(x.w.EndMs(), y.w.EndMs()); c != 0 {
			return c
		}
		if c := cmp.Compare(x.w.StartMs(), y.w.StartMs()); c != 0 {
			return c
		}
		return bytes.Compare(x.kb, y.kb)
	})
	return out, true, nil
}

// emitFinal forwards the closed sessions that closed() read, with the headers of the record
// in hand and the session's end as timestamp, and notes the emission. A session whose
// segment expired meanwhile is emitted under EmitBeforeExpiry; otherwise, as in Kafka
// Streams, it is not, and it is counted and logged as a lost final result.
func (p *sessionAggregator[K, V, VA]) emitFinal(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V], closeTime int64, out []sessionFinal[K, VA]) error {
	for _, e := range out {
		if !p.a.beforeExpiry {
			held, err := p.st.Held(e.w.End)
			if err != nil {
				return fmt.Errorf("session store %q: %w", p.a.store, err)
			}
			if !held {
				p.t.loseResult(p.n, late{reason: lostWindowExpired, ts: e.w.EndMs(), streamTime: p.observed,
					lateBy: closeTime - e.w.EndMs(), hasWindow: true, start: e.w.StartMs(), end: e.w.EndMs(), store: p.a.store})
				continue
			}
		}
		var res change[VA]
		res.setNew(e.v)
		ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: e.w, Value: res, Timestamp: msTime(e.w.EndMs()), Headers: r.Headers})
	}
	return p.emitted(p.st, closeTime)
}

// satAddMs is a + b for a timestamp a and a non-negative b, saturating at the largest
// timestamp.
func satAddMs(a, b int64) int64 {
	if a > maxTimestamp-b {
		return maxTimestamp
	}
	return a + b
}
