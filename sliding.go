package kstream

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// slidingAggregator is the processor of an aggregation over sliding windows: Kafka Streams'
// KStreamSlidingWindowAggregate (its KStreamSlidingWindowAggregateProcessor, with the
// reverse iteration that Kafka Streams' window stores support).
//
// The windows of a key are those of its records: a record at ts has a left window [ts -
// timeDifference, ts] and, when a later record of the key falls within the time difference,
// a right window [ts+1, ts+1+timeDifference]; both bounds are inclusive and a window's end is
// start + timeDifference. A record updates every existing window that contains it, creates
// its left window (from the aggregate of the window just before it, when that window's
// records all fall into it), its right window (from the aggregate of a later window), and
// the right window of the previous record if it falls into it. Records earlier than the
// time difference go into the window [0, timeDifference] instead of a left window that would
// start before 0, as Kafka Streams' processEarly does.
type slidingAggregator[K, V, VA any] struct {
	a  *windowAgg[K, V, VA]
	t  *task
	n  *node
	st *windowKV[K, VA]
	windowClock
	// kapp is the key serde when it appends to a buffer, kbuf that buffer: the check of a
	// record's key allocates nothing.
	kapp store.AppendSerializer[K]
	kbuf []byte
	// kb is the record's serialized key (in kbuf), for the record cache's keys.
	kb []byte
	// cache is the store's record cache, nil without one (or when emitting on close);
	// ckey the buffer of its keys: the serialized key, then the window start.
	cache *emitCache[serde.Windowed[K], VA]
	ckey  []byte
}

// slidingValue is a window's aggregate and timestamp as the Java processor holds it (a
// ValueAndTimestamp): ok is false for a null (a reduce's initial aggregate, or an
// initializer that returns a nil pointer).
type slidingValue[VA any] struct {
	v  VA
	ts int64
	ok bool
}

// slidingWindow is a window of the store: its start and its value.
type slidingWindow[VA any] struct {
	start int64
	val   slidingValue[VA]
}

func newSlidingAggregator[K, V, VA any](t *task, n *node, a *windowAgg[K, V, VA], st *windowKV[K, VA]) (any, error) {
	p := &slidingAggregator[K, V, VA]{a: a, t: t, n: n, st: st, windowClock: newWindowClock()}
	p.kapp, _ = a.ks.(store.AppendSerializer[K])
	if !a.onClose && a.def != nil {
		p.cache = openEmitCache[serde.Windowed[K], VA](t, a.def)
	}
	if err := p.recover(); err != nil {
		return nil, err
	}
	p.start(t, p.st, a.onClose)
	return processorInstance(t, n, ProcessorFunc[K, V, serde.Windowed[K], change[VA]](p.process))
}

// recover sets the observed stream time and the last emitted close time from the store, for
// a task that starts with state, as timeWindowAggregator.recover does for time windows (see
// there for how Kafka Streams differs). The latest record of the store, at the observed
// stream time M, has its left window [M - timeDifference, M] (or [0, timeDifference] for an
// early record), and every window starts at or before the record it holds with the largest
// timestamp, so the store's latest window start S is in [M - timeDifference, M]: M is the
// largest timestamp of the windows that start in [S - timeDifference, S]. Final results,
// emitted after every record that moves stream time, were emitted up to M's close time
// unless no window had closed yet (see windowClock.recoverLastEmit).
func (p *slidingAggregator[K, V, VA]) recover() error {
	latest, ok, err := p.st.ObservedStreamTime()
	if err != nil || !ok {
		return err
	}
	start := latest.UnixMilli()
	p.observed = start
	it, err := p.st.FetchAll(msTime(max(0, start-p.a.w.size)), latest)
	if err != nil {
		return err
	}
	for it.Next() {
		p.observed = max(p.observed, it.Value().ts)
	}
	if err := it.Err(); err != nil {
		it.Close()
		return err
	}
	it.Close()
	if !p.a.onClose {
		return nil
	}
	closeTime := p.observed - p.a.w.grace
	return p.recoverLastEmit(p.st, p.t.h.eos && !p.t.aligned(), closeTime, closeTime-p.a.w.size-1 >= 0)
}

// slidingCtx is the record in hand and where its results go.
type slidingCtx[K, V, VA any] struct {
	ctx       ProcessorContext[serde.Windowed[K], change[VA]]
	r         Record[K, V]
	ts        int64
	closeTime int64
}

func (p *slidingAggregator[K, V, VA]) process(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V]) error {
	a, t := p.a, p.t
	// Unlike KStreamWindowAggregate, KStreamSlidingWindowAggregate skips a record with a
	// null value as well as one with a null key.
	if r.HasNullKey() || nullValue(r) {
		t.dropRecord(p.n, "key or value")
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
	c := &slidingCtx[K, V, VA]{ctx: ctx, r: r, ts: ts, closeTime: p.now() - a.w.grace}
	td := a.w.size
	// The record's latest window, its right window [ts+1, ts+1+td], closed: every window
	// that could hold it has.
	if ts+td < c.closeTime {
		t.lateRecord(p.n, ts, ts, ts+td, c.closeTime, p.observed)
		return nil
	}
	if ts < td {
		// Kafka Streams emits no final results after an early record.
		return p.processEarly(c)
	}
	// The windows that close are read before the record's writes, which may move the
	// store's stream time past their retention (see emitFinal).
	var finals []slidingFinal[K, VA]
	var due bool
	if a.onClose {
		var err error
		if finals, due, err = p.closed(c); err != nil {
			return err
		}
	}
	if err := p.processReverse(c); err != nil {
		return err
	}
	if due {
		return p.emitFinal(c, finals)
	}
	return nil
}

// fetch returns the windows of key k that start in [from, to], in descending order of start
// if reverse, up to and including the first one for which stop returns true. The windows
// are read before any is updated, so that no write happens while the store is iterated
// (Kafka Streams' RocksDB iterators read a snapshot: it updates windows as it goes, which
// comes to the same).
func (p *slidingAggregator[K, V, VA]) fetch(k K, from, to int64, reverse bool, stop func(start int64) bool) ([]slidingWindow[VA], error) {
	var it *store.WindowedIterator[K, tsValue[VA]]
	var err error
	if reverse {
		it, err = p.st.BackwardFetchRange(k, msTime(from), msTime(to))
	} else {
		it, err = p.st.FetchRange(k, msTime(from), msTime(to))
	}
	if err != nil {
		return nil, err
	}
	var ws []slidingWindow[VA]
	for it.Next() {
		start, v := it.Key().StartMs(), it.Value()
		ws = append(ws, slidingWindow[VA]{start: start, val: slidingValue[VA]{v: v.v, ts: v.ts, ok: true}})
		if stop != nil && stop(start) {
			break
		}
	}
	err = it.Err()
	it.Close()
	return ws, err
}

// processReverse is Kafka Streams' processReverse: it walks the windows of the key that
// start in [ts - 2*timeDifference, ts + 1] from the latest, updates those that contain the
// record, notes the record's right window if it exists, the aggregate for it (the first
// window that ends after ts), and stops at the first window that ends before ts: the left
// window of the previous record, whose aggregate goes into the record's left window.
func (p *slidingAggregator[K, V, VA]) processReverse(c *slidingCtx[K, V, VA]) error {
	ts, td := c.ts, p.a.w.size
	ws, err := p.fetch(c.r.Key, max(0, ts-2*td), ts+1, true, func(start int64) bool {
		return start != ts+1 && start+td < ts
	})
	if err != nil {
		return err
	}
	starts := make(map[int64]bool, len(ws))
	var leftAgg, rightAgg *slidingValue[VA]
	var leftCreated, rightCreated, hasPrev bool
	var prev int64 // the previous record's timestamp, if hasPrev
	for i := range ws {
		w := &ws[i]
		starts[w.start] = true
		end := w.start + td
		switch {
		case w.start == ts+1:
			rightCreated = true
		case end > ts:
			if rightAgg == nil {
				rightAgg = &w.val
			}
			if err := p.update(c, w.start, w.val, true); err != nil {
				return err
			}
		case end == ts:
			leftCreated = true
			if err := p.update(c, w.start, w.val, true); err != nil {
				return err
			}
			if w.val.ts >= ts {
				return nil
			}
			prev, hasPrev = w.val.ts, true
		default: // end < ts
			leftAgg = &w.val
			prev, hasPrev = w.val.ts, true
		}
	}
	return p.createWindows(c, starts, rightAgg, leftAgg, leftCreated, rightCreated, prev, hasPrev)
}

// createWindows is Kafka Streams' createWindows: the previous record's right window if the
// record falls into it and it does not exist, the record's left window if it does not
// exist, and the record's right window if a later record falls into it and it does not
// exist.
func (p *slidingAggregator[K, V, VA]) createWindows(c *slidingCtx[K, V, VA], starts map[int64]bool, rightAgg, leftAgg *slidingValue[VA], leftCreated, rightCreated bool, prev int64, hasPrev bool) error {
	ts, td := c.ts, p.a.w.size
	if hasPrev {
		if start := prev + 1; !starts[start] && start+td >= ts {
			if err := p.update(c, start, p.initial(ts), false); err != nil {
				return err
			}
		}
	}
	if !leftCreated {
		var v slidingValue[VA]
		if hasPrev && ts-td <= prev {
			// The previous record's window holds the records of the left window.
			v = slidingValue[VA]{v: leftAgg.v, ts: ts, ok: !isNil(leftAgg.v)}
		} else {
			v = p.initial(ts)
		}
		if err := p.update(c, ts-td, v, false); err != nil {
			return err
		}
	}
	if !rightCreated && rightAgg != nil && rightAgg.ts > ts {
		return p.createRightWindow(c, *rightAgg)
	}
	return nil
}

// processEarly is Kafka Streams' processEarly, for a record earlier than the time
// difference: its left window would start before 0, so that the window [0, timeDifference]
// (the combined window) holds every early record instead.
func (p *slidingAggregator[K, V, VA]) processEarly(c *slidingCtx[K, V, VA]) error {
	ts := c.ts
	ws, err := p.fetch(c.r.Key, 0, ts+1, false, nil)
	if err != nil {
		return err
	}
	starts := make(map[int64]bool, len(ws))
	var combined, rightAgg *slidingValue[VA]
	var rightCreated, hasPrev bool
	var prev int64
	for i := range ws {
		w := &ws[i]
		starts[w.start] = true
		switch {
		case w.start == 0:
			combined = &w.val
			// A previous record at or after ts already has its right window.
			if w.val.ts < ts {
				prev, hasPrev = w.val.ts, true
			}
		case w.start <= ts:
			rightAgg = &w.val
			if err := p.update(c, w.start, w.val, true); err != nil {
				return err
			}
		case w.start == ts+1:
			rightCreated = true
		default:
			return fmt.Errorf("kstream: operator %s: unexpected window starting at %d for a record at %d", p.n.name, w.start, ts)
		}
	}
	// With no other window holding the record, the records of the combined window that come
	// after it are those of its right window.
	if rightAgg == nil && combined != nil && combined.ts > ts {
		rightAgg = combined
	}
	if !rightCreated && rightAgg != nil && rightAgg.ts > ts {
		if err := p.createRightWindow(c, *rightAgg); err != nil {
			return err
		}
	}
	if hasPrev && !starts[prev+1] {
		if err := p.update(c, prev+1, p.initial(ts), false); err != nil {
			return err
		}
	}
	if combined == nil {
		return p.update(c, 0, p.initial(ts), false)
	}
	return p.update(c, 0, *combined, true)
}

// initial is the aggregate of a new window: the initializer's value (none for a reduce),
// with the record's timestamp.
func (p *slidingAggregator[K, V, VA]) initial(ts int64) slidingValue[VA] {
	if p.a.init == nil {
		return slidingValue[VA]{ts: ts}
	}
	v := p.a.init()
	return slidingValue[VA]{v: v, ts: ts, ok: !isNil(v)}
}

// createRightWindow stores v as the record's right window [ts+1, ts+1+timeDifference] and
// forwards it (with no old value), as Kafka Streams' createCurrentRecordRightWindow: the
// window does not hold the record, and it is not checked against the close time.
func (p *slidingAggregator[K, V, VA]) createRightWindow(c *slidingCtx[K, V, VA], v slidingValue[VA]) error {
	start := c.ts + 1
	if err := p.st.Put(c.r.Key, tsValue[VA]{v: v.v, ts: v.ts}, msTime(start)); err != nil {
		return err
	}
	if p.a.onClose {
		return nil
	}
	var res change[VA]
	res.setNew(v.v)
	if p.cache != nil {
		p.hold(c, start, start+p.a.w.size, res, false, v.ts)
		return nil
	}
	c.ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: serde.WindowedMs(c.r.Key, start, start+p.a.w.size), Value: res,
		Timestamp: msTime(v.ts), Headers: c.r.Headers})
	return nil
}

// update aggregates the record into the window starting at start, whose aggregate is v, and
// forwards the result, unless the window has closed (its end, inclusive, is before the
// close time): Kafka Streams' updateWindowAndForward.
func (p *slidingAggregator[K, V, VA]) update(c *slidingCtx[K, V, VA], start int64, v slidingValue[VA], existed bool) error {
	a := p.a
	end := start + a.w.size
	if end < c.closeTime {
		p.t.lateRecord(p.n, c.ts, start, end, c.closeTime, p.observed)
		return nil
	}
	var res change[VA]
	res.setNew(a.agg(c.r.Key, c.r.Value, v.v, v.ok))
	newTs := c.ts
	if v.ok {
		newTs = max(c.ts, v.ts)
	}
	var err error
	if res.hasNew {
		err = p.st.Put(c.r.Key, tsValue[VA]{v: res.new, ts: newTs}, msTime(start))
	} else {
		err = p.st.Delete(c.r.Key, msTime(start))
	}
	if err != nil {
		return err
	}
	if a.onClose {
		return nil
	}
	if p.cache != nil {
		// Held back (recordcache.go): the old value is the window's stored aggregate, none
		// for a new window, as Java's caching window store reads it.
		if a.info.sendOld && existed && v.ok {
			res.setOld(v.v)
		}
		p.hold(c, start, end, res, existed, newTs)
		return nil
	}
	if a.info.sendOld && v.ok {
		res.setOld(v.v)
	}
	c.ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: serde.WindowedMs(c.r.Key, start, end), Value: res,
		Timestamp: msTime(newTs), Headers: c.r.Headers})
	return nil
}

// hold puts the update res of the window [start, end] into the record cache.
func (p *slidingAggregator[K, V, VA]) hold(c *slidingCtx[K, V, VA], start, end int64, res change[VA], existed bool, ts int64) {
	p.ckey = binary.BigEndian.AppendUint64(append(p.ckey[:0], p.kb...), uint64(start))
	p.cache.put(c.ctx, p.ckey, serde.WindowedMs(c.r.Key, start, end), res, existed, ts, c.r.Headers)
}

// slidingFinal is a closed window read from the store: its key, serialized key and value.
type slidingFinal[K, VA any] struct {
	k  serde.Windowed[K]
	kb []byte
	v  tsValue[VA]
}

// closed returns the windows that closed since the last emission, as Kafka Streams'
// maybeForwardFinalResult reads them with the sliding processor's bounds (and without its
// wall-clock throttle, as timeWindowAggregator.closed): a sliding window's end is
// inclusive, so the windows that closed are those that end before the close time, that is
// start before closeTime - timeDifference; those that ended before the last close time were
// emitted then. due says that emitFinal must run. They are read before the record in hand
// is aggregated, as timeWindowAggregator.closed explains.
//
// The windows are in the order of start, then serialized key: with
// EmitStrategy.onWindowClose Kafka Streams keeps the windows in a time-ordered window store
// (RocksDbIndexedTimeOrderedWindowBytesStoreSupplier, whose fetchAll returns them in that
// order), not in the key-ordered store this store reads like.
func (p *slidingAggregator[K, V, VA]) closed(c *slidingCtx[K, V, VA]) ([]slidingFinal[K, VA], bool, error) {
	td := p.a.w.size
	if p.lastEmit != -1 && p.lastEmit >= c.closeTime {
		return nil, false, nil
	}
	upper := c.closeTime - td - 1
	if upper < 0 {
		return nil, false, nil
	}
	lower := int64(0)
	if p.lastEmit != -1 {
		lower = max(0, p.lastEmit-td)
	}
	it, err := p.st.FetchAll(msTime(lower), msTime(upper))
	if err != nil {
		return nil, false, err
	}
	var ws []slidingFinal[K, VA]
	for it.Next() {
		k := it.Key()
		kb, err := p.a.ks.Serialize(k.Key)
		if err != nil {
			it.Close()
			return nil, false, fmt.Errorf("serializing a key of the store: %w", err)
		}
		ws = append(ws, slidingFinal[K, VA]{k: k, kb: kb, v: it.Value()})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return nil, false, err
	}
	slices.SortStableFunc(ws, func(a, b slidingFinal[K, VA]) int {
		if c := cmp.Compare(a.k.StartMs(), b.k.StartMs()); c != 0 {
			return c
		}
		return bytes.Compare(a.kb, b.kb)
	})
	return ws, true, nil
}

// emitFinal forwards the closed windows that closed() read and notes the emission; a window
// that expired from the store meanwhile is emitted under EmitBeforeExpiry, else counted and
// logged as lost, as timeWindowAggregator.emitFinal does.
func (p *slidingAggregator[K, V, VA]) emitFinal(c *slidingCtx[K, V, VA], ws []slidingFinal[K, VA]) error {
	for _, w := range ws {
		if !p.a.beforeExpiry {
			live, err := p.st.Live(w.k.Start)
			if err != nil {
				return err
			}
			if !live {
				p.t.loseResult(p.n, late{reason: lostWindowExpired, ts: w.v.ts, streamTime: p.observed,
					lateBy: c.closeTime - w.k.EndMs(), hasWindow: true, start: w.k.StartMs(), end: w.k.EndMs(), store: p.a.store})
				continue
			}
		}
		var res change[VA]
		res.setNew(w.v.v)
		c.ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: w.k, Value: res, Timestamp: msTime(w.v.ts), Headers: c.r.Headers})
	}
	return p.emitted(p.st, c.closeTime)
}
