package kstream

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// CogroupedKStream is several grouped streams, with values of different types, aggregated
// into one table: Kafka Streams' CogroupedKStream (KGroupedStream.cogroup). Create one with
// [Cogroup], add streams with [CogroupWith], then aggregate it with
// [CogroupedKStream.Aggregate], or window it first with [CogroupedKStream.WindowedBy] or
// [CogroupedKStream.WindowedBySession].
//
// Each stream has its own aggregator, and all of them update the same aggregate of a key
// (in one store), so that a cogroup replaces a join of several aggregations. As in Kafka
// Streams, the aggregation has one operator per stream, each reading its stream and
// writing the one store (COGROUPKSTREAM-AGGREGATE-n, or "<name>-cogroup-agg-<i>" with
// [CogroupedKStream.Named]), and an operator that merges their updates into the table
// (COGROUPKSTREAM-MERGE-n, or "<name>-cogroup-merge"). The streams must be co-partitioned
// (their topics have equal partition counts); a stream grouped by a new key ([GroupBy], or
// [KStream.GroupByKey] after a key-changing operator) is repartitioned first, through
// "<application.id>-<name>-repartition" where name is the grouping's [Named] name or, by
// default, the store's name (so that two such streams without names would need the same
// topic: name one of their groupings).
//
// A CogroupedKStream is a value: CogroupWith returns a new one and leaves its argument as
// it was.
type CogroupedKStream[K, VA any] struct {
	b      *Builder
	inputs []*cogroupInput[K, VA]
	name   string
	err    error
}

// cogroupInput is one grouped stream of a cogroup, with its aggregator. Its closures carry
// the stream's value type, which the cogroup does not have.
type cogroupInput[K, VA any] struct {
	// id and group identify the grouped stream (its node and its grouping's name): a stream
	// cogrouped again replaces its aggregator, as Java's map of grouped streams does.
	id    *node
	group string
	// parent repartitions the stream if it needs it (through a topic named after its
	// grouping's name, or prefix), and returns the node the aggregation reads and the key
	// serde of the stream there.
	parent func(prefix, op string) (*node, serde.Serde[K])
	// processor makes task t's processor of this stream's aggregation node n.
	processor func(t *task, n *node, c *cogroupAgg[K, VA]) (any, error)
}

// cogroupAgg is what the processors of a cogroup's aggregation share: the kind of windows
// (none, time, sliding or session), the store, the initializer and the session merger.
type cogroupAgg[K, VA any] struct {
	windowed bool
	w        windowSpec
	store    string
	def      *storeDef // the store of a cogroup that is not windowed
	ks       serde.Serde[K]
	init     func() VA
	merge    func(key K, a, b VA) VA // sessions only
	info     *tableInfo
}

// Cogroup starts a cogroup with the grouped stream g and its aggregator agg, which folds a
// value of g into the aggregate of its key: Kafka Streams' KGroupedStream.cogroup. Add more
// streams with [CogroupWith].
func Cogroup[K, V, VA any](g KGroupedStream[K, V], agg func(key K, value V, acc VA) VA) CogroupedKStream[K, VA] {
	c := CogroupedKStream[K, VA]{b: g.s.b}
	return CogroupWith(c, g, agg)
}

// CogroupWith returns c with the grouped stream g and its aggregator added: Kafka Streams'
// CogroupedKStream.cogroup. The streams may have values of different types; their keys have
// the same type (and must be serialized alike). Cogrouping the same grouped stream again
// replaces its aggregator, as in Kafka Streams.
func CogroupWith[K, V, VA any](c CogroupedKStream[K, VA], g KGroupedStream[K, V], agg func(key K, value V, acc VA) VA) CogroupedKStream[K, VA] {
	if c.b == nil {
		c.b = g.s.b
	}
	switch {
	case g.s.b != c.b:
		c.err = fmt.Errorf("CogroupWith: the grouped stream comes from another builder")
		return c
	case agg == nil:
		c.err = fmt.Errorf("CogroupWith: the aggregator is nil")
		return c
	}
	in := &cogroupInput[K, VA]{id: g.s.n, group: g.name}
	in.parent = func(prefix, op string) (*node, serde.Serde[K]) {
		s := g.s
		if s.keyChanged {
			repName := g.name
			if repName == "" {
				repName = prefix
			}
			s = repartitionForKey(s, repName, false, op)
		}
		return s.n, s.ks
	}
	in.processor = func(t *task, n *node, a *cogroupAgg[K, VA]) (any, error) {
		if !a.windowed {
			return newAggregateProcessor(t, n, a.def, a.ks, a.init, func(k K, v V, acc VA, _ bool) VA { return agg(k, v, acc) }, a.info)
		}
		if a.w.kind == sessionWindowKind {
			st, err := taskSessionStore[K, VA](t, a.store)
			if err != nil {
				return nil, err
			}
			return newSessionAggregator(t, n, &sessionAgg[K, V, VA]{
				w:     a.w,
				init:  func() (VA, bool) { return a.init(), true },
				merge: func(k K, acc VA, _ bool, s VA) (VA, bool) { return a.merge(k, acc, s), true },
				agg:   func(k K, v V, _ bool, acc VA, _ bool) (VA, bool) { return agg(k, v, acc), true },
				ks:    a.ks, store: a.store, info: a.info,
			}, st)
		}
		st, err := taskWindowStore[K, VA](t, a.store)
		if err != nil {
			return nil, err
		}
		wa := &windowAgg[K, V, VA]{w: a.w, init: a.init, agg: func(k K, v V, acc VA, _ bool) VA { return agg(k, v, acc) },
			ks: a.ks, store: a.store, info: a.info}
		if a.w.kind == slidingWindowKind {
			return newSlidingAggregator(t, n, wa, st)
		}
		return newTimeWindowAggregator(t, n, wa, st)
	}
	// A new slice, so that c's copies keep their streams.
	inputs := make([]*cogroupInput[K, VA], 0, len(c.inputs)+1)
	replaced := false
	for _, x := range c.inputs {
		if x.id == in.id && x.group == in.group {
			x, replaced = in, true
		}
		inputs = append(inputs, x)
	}
	if !replaced {
		inputs = append(inputs, in)
	}
	c.inputs = inputs
	return c
}

// Named names the operators of the aggregation: "<name>-cogroup-agg-<i>" for the one of
// the i-th stream (from 0) and "<name>-cogroup-merge" for the one that merges them, as
// Kafka Streams' aggregate(initializer, Named.as(name), ...) does. It does not name the
// store. Passing [Named] to the aggregation (Aggregate(init, vs, store, Named(name))) does
// the same.
func (c CogroupedKStream[K, VA]) Named(name string) CogroupedKStream[K, VA] {
	c.name = name
	return c
}

// namedBy returns c named as a [Named] among opts says, if one does (see
// [CogroupedKStream.Named]).
func (c CogroupedKStream[K, VA]) namedBy(opts []StoreOption) CogroupedKStream[K, VA] {
	if n := opNameOf(opts); n != "" {
		c.name = n
	}
	return c
}

// Aggregate aggregates the cogrouped streams into the table kept in the store named name
// (values serialized with vs): each record of a stream is folded into the aggregate of its
// key, starting from init(), with the stream's aggregator. It is Kafka Streams'
// CogroupedKStream.aggregate; an empty name gives the store Java's generated name,
// "COGROUPKSTREAM-AGGREGATE-STATE-STORE-n".
//
// As in Kafka Streams (a KStreamAggregate per stream), records with a null key or value are
// skipped and counted in [Stats].DroppedRecords, a nil aggregate (for a nilable VA) deletes
// the key, and each update has the largest timestamp of the records aggregated into the key
// so far, from any stream. The store is a timestamped key-value store logged to
// "<application.id>-<name>-changelog", as [Aggregate]'s.
func (c CogroupedKStream[K, VA]) Aggregate(init func() VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[K, VA] {
	b := c.b
	if b == nil {
		return KTable[K, VA]{}
	}
	name = cogroupStoreName(b, name)
	op := fmt.Sprintf("Cogroup Aggregate %q", name)
	c = c.namedBy(opts)
	parents, ks := c.prepare(op, name, init)
	d := tableStoreDef(name, ks, vs, opts)
	d.accepts = append(d.accepts, "Named")
	a := &cogroupAgg[K, VA]{store: name, def: d, ks: ks, init: init, info: ownInfo(d)}
	if vs == nil {
		b.errorf("%s: no value serde for the store: %w", op, ErrNoSerde)
	}
	n := c.build(parents, d, a, 0, false)
	return KTable[K, VA]{b: b, n: n, ks: ks, vs: vs, store: name, info: a.info,
		getter: ownGetter[K, VA](d), getterStores: []*storeDef{d}, asOf: ownAsOf[K, VA](d)}
}

// cogroupStoreName is name, or the store name that Kafka Streams generates for an unnamed
// cogroup (MaterializedInternal with the prefix COGROUPKSTREAM-AGGREGATE-).
func cogroupStoreName(b *Builder, name string) string {
	if name == "" {
		return b.newName("COGROUPKSTREAM-AGGREGATE-STATE-STORE")
	}
	return name
}

// prepare checks the cogroup and repartitions the streams that need it, as Kafka Streams'
// CogroupedStreamAggregateBuilder.processRepartitions: it returns the node each stream's
// aggregation reads and the key serde of the store (the first stream's that has one).
func (c CogroupedKStream[K, VA]) prepare(op, store string, init func() VA) ([]*node, serde.Serde[K]) {
	b := c.b
	if c.err != nil {
		b.errorf("%s: %w", op, c.err)
	}
	if len(c.inputs) == 0 {
		b.errorf("%s: no stream is cogrouped; start with Cogroup", op)
	}
	if init == nil {
		b.errorf("%s: the initializer is nil", op)
	}
	var parents []*node
	var ks serde.Serde[K]
	for _, in := range c.inputs {
		n, s := in.parent(store, op)
		parents = append(parents, n)
		if ks == nil {
			ks = s
		}
	}
	if ks == nil {
		b.errorf("%s: the streams carry no key serde for the store; use WithSerdes: %w", op, ErrNoSerde)
	}
	if len(parents) > 1 {
		b.copart = append(b.copart, parents)
	}
	return parents, ks
}

// build adds an aggregation node per stream, under parents, each writing store d, and the
// node that merges their updates (Kafka Streams' KTablePassThrough), which it returns.
// grace is the window grace of the aggregation nodes (hasGrace: a windowed aggregation),
// for [KTable.Suppress].
func (c CogroupedKStream[K, VA]) build(parents []*node, d *storeDef, a *cogroupAgg[K, VA], grace int64, hasGrace bool) *node {
	b := c.b
	aggs := make([]*node, len(parents))
	for i, p := range parents {
		name := b.newName("COGROUPKSTREAM-AGGREGATE") // Java takes one, named or not
		if c.name != "" {
			name = c.name + "-cogroup-agg-" + strconv.Itoa(i)
		}
		n := b.tableNode(name, p)
		n.windowGrace, n.hasWindowGrace = grace, hasGrace
		b.addStore(d, n)
		in := c.inputs[i]
		n.instantiate = func(t *task) (any, error) { return in.processor(t, n, a) }
		aggs[i] = n
	}
	name := b.newName("COGROUPKSTREAM-MERGE")
	if c.name != "" {
		name = c.name + "-cogroup-merge"
	}
	m := b.tableNode(name, aggs...)
	m.instantiate = func(t *task) (any, error) {
		// Every aggregation node forwards a Record[K', change[VA]], where K' is K or
		// serde.Windowed[K]: the merge node passes them on, whatever K' is.
		return mergeInstance(t, m, a)
	}
	return m
}

// mergeInstance is task t's instance of the merge node m of a cogroup: it forwards the
// updates of the aggregation nodes as they come.
func mergeInstance[K, VA any](t *task, m *node, a *cogroupAgg[K, VA]) (any, error) {
	if !a.windowed {
		return passThrough[K, change[VA]](t, m)
	}
	return passThrough[serde.Windowed[K], change[VA]](t, m)
}

// passThrough is an operator that forwards its input unchanged.
func passThrough[K, V any](t *task, n *node) (any, error) {
	ctx, err := childInputs[K, V](t, n)
	if err != nil {
		return nil, err
	}
	return func(r Record[K, V]) { ctx.Forward(r) }, nil
}

// TimeWindowedCogroupedKStream is a cogroup with time windows ([TimeWindows] or
// [SlidingWindows]), ready for [TimeWindowedCogroupedKStream.Aggregate]: Kafka Streams'
// TimeWindowedCogroupedKStream. Create one with [CogroupedKStream.WindowedBy].
type TimeWindowedCogroupedKStream[K, VA any] struct {
	c CogroupedKStream[K, VA]
	w windowSpec
}

// WindowedBy windows the cogroup by time: [TimeWindowsOf] (tumbling or hopping) or
// [SlidingWindowsOf], as Kafka Streams' CogroupedKStream.windowedBy. As in Kafka Streams, a
// windowed cogroup emits an update per record (there is no EmitOnWindowClose for it; use
// [KTable.Suppress] for final results).
func (c CogroupedKStream[K, VA]) WindowedBy(w Windows) TimeWindowedCogroupedKStream[K, VA] {
	var s windowSpec
	if w == nil {
		s.err = fmt.Errorf("WindowedBy: the windows are nil")
	} else {
		s = w.spec()
	}
	return TimeWindowedCogroupedKStream[K, VA]{c: c, w: s}
}

// Aggregate aggregates the cogrouped streams by key and window into the window store named
// name (values serialized with vs; an empty name is Java's generated one, as for
// [CogroupedKStream.Aggregate]): Kafka Streams' TimeWindowedCogroupedKStream.aggregate.
//
// Each stream's records are aggregated as by [WindowedAggregate] (over sliding windows, as
// [WindowedAggregate] over [SlidingWindowsOf]) with the stream's aggregator, into windows
// shared by all the streams; each stream's operator keeps a stream time of its own, the
// largest timestamp of its stream's records, and drops the records of its stream that come
// too late for a window by it, as Kafka Streams' processors do. The store, its retention
// ([WithRetention]), its changelog and the table's key serde are those of
// [WindowedAggregate].
func (w TimeWindowedCogroupedKStream[K, VA]) Aggregate(init func() VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[serde.Windowed[K], VA] {
	c := w.c
	b := c.b
	if b == nil {
		return KTable[serde.Windowed[K], VA]{}
	}
	name = cogroupStoreName(b, name)
	op := fmt.Sprintf("Cogroup WindowedAggregate %q", name)
	c = c.namedBy(opts)
	if w.w.err != nil {
		b.errorf("%s: %w", op, w.w.err)
	}
	parents, ks := c.prepare(op, name, init)
	if vs == nil {
		b.errorf("%s: no value serde for the store: %w", op, ErrNoSerde)
	}
	minRetention := w.w.size + w.w.grace
	if w.w.kind == slidingWindowKind {
		minRetention = 2*w.w.size + w.w.grace
	}
	d := windowStoreDef(b, op, name, ks, vs, w.w.size, minRetention, w.w.grace, false, opts)
	d.window = w.w.def()
	a := &cogroupAgg[K, VA]{windowed: true, w: w.w, store: name, ks: ks, init: init, info: storedInfo()}
	n := c.build(parents, d, a, w.w.grace, true)
	var tks serde.Serde[serde.Windowed[K]]
	if ks != nil {
		tks = serde.TimeWindowed(ks, time.Duration(w.w.size)*time.Millisecond)
	}
	return KTable[serde.Windowed[K], VA]{b: b, n: n, ks: tks, vs: vs, store: name, info: a.info,
		getter: windowGetter[K, VA](name), getterStores: []*storeDef{d}}
}

// SessionWindowedCogroupedKStream is a cogroup with session windows, ready for
// [SessionWindowedCogroupedKStream.Aggregate]: Kafka Streams'
// SessionWindowedCogroupedKStream. Create one with [CogroupedKStream.WindowedBySession].
type SessionWindowedCogroupedKStream[K, VA any] struct {
	c CogroupedKStream[K, VA]
	w windowSpec
}

// WindowedBySession windows the cogroup by sessions ([SessionWindowsOf]): Kafka Streams'
// CogroupedKStream.windowedBy(SessionWindows). As in Kafka Streams, it emits an update per
// record (there is no EmitOnWindowClose for it).
func (c CogroupedKStream[K, VA]) WindowedBySession(w SessionWindows) SessionWindowedCogroupedKStream[K, VA] {
	s := w.s
	if s.err == nil && (s.kind != sessionWindowKind || s.size <= 0) {
		s.err = fmt.Errorf("WindowedBySession: the session windows have no inactivity gap; create them with SessionWindowsOf")
	}
	return SessionWindowedCogroupedKStream[K, VA]{c: c, w: s}
}

// Aggregate aggregates the cogrouped streams by key and session into the session store
// named name (values serialized with vs; an empty name is Java's generated one, as for
// [CogroupedKStream.Aggregate]): Kafka Streams' SessionWindowedCogroupedKStream.aggregate.
// When a record joins existing sessions, their aggregates are merged into init() with
// merge before the record's stream's aggregator adds it.
//
// Each stream's records are aggregated as by [SessionAggregate], into sessions shared by
// all the streams; each stream's operator keeps a stream time of its own, as Kafka
// Streams' processors do. The store, its retention, its changelog and the table's key serde
// are those of [SessionAggregate].
func (w SessionWindowedCogroupedKStream[K, VA]) Aggregate(init func() VA, merge func(key K, a, b VA) VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[serde.Windowed[K], VA] {
	c := w.c
	b := c.b
	if b == nil {
		return KTable[serde.Windowed[K], VA]{}
	}
	name = cogroupStoreName(b, name)
	op := fmt.Sprintf("Cogroup SessionAggregate %q", name)
	c = c.namedBy(opts)
	if w.w.err != nil {
		b.errorf("%s: %w", op, w.w.err)
	}
	if merge == nil {
		b.errorf("%s: the session merger is nil", op)
	}
	parents, ks := c.prepare(op, name, init)
	if vs == nil {
		b.errorf("%s: no value serde for the store: %w", op, ErrNoSerde)
	}
	d := sessionStoreDef(b, op, name, ks, vs, w.w.size, w.w.grace, opts)
	d.window = w.w.def()
	a := &cogroupAgg[K, VA]{windowed: true, w: w.w, store: name, ks: ks, init: init, merge: merge, info: storedInfo()}
	// Java's session grace for Suppress is the grace period plus the inactivity gap.
	n := c.build(parents, d, a, w.w.grace+w.w.size, true)
	var sks serde.Serde[serde.Windowed[K]]
	if ks != nil {
		sks = serde.SessionWindowed(ks)
	}
	return KTable[serde.Windowed[K], VA]{b: b, n: n, ks: sks, vs: vs, store: name, info: a.info,
		getter: sessionGetter[K, VA](name), getterStores: []*storeDef{d}}
}
