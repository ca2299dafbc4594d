package store_test

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// The model tests compare the window and session stores with reference models written from
// Kafka Streams' rules (AbstractRocksDBSegmentedBytesStore, AbstractSegments, WindowKeySchema,
// SessionKeySchema) after random writes with late records, over every engine, with a Buffer
// that flushes and discards (an aborted transaction) at random; then they restore the
// changelog the writes produced into a new store, which must hold the same data.

// modelKeys are keys whose serialized forms are prefixes of one another, hold zero bytes, or
// are empty.
var modelKeys = []string{"", "a", "a\x00", "a\x00\x00\x00\x00\x00\x00\x00\x00\x00", "aa", "ab", "b", "b\x7f", "k"}

type modelEntry struct {
	key        string
	start, end int64 // window start (end unused); session start and end
	seq        int32
	val        string
}

// rawKey is the entry's schema key (Kafka Streams' changelog key), built independently of
// the store package.
func (e modelEntry) rawKey(session bool) string {
	b := []byte(e.key)
	if session {
		b = binary.BigEndian.AppendUint64(b, uint64(e.end))
		return string(binary.BigEndian.AppendUint64(b, uint64(e.start)))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(e.start))
	return string(binary.BigEndian.AppendUint32(b, uint32(e.seq)))
}

// segModel is the reference of a segmented store.
type segModel struct {
	session             bool
	retention, interval int64
	size                int64
	dups                bool
	st                  int64
	seq                 int32
	entries             map[string]modelEntry // by raw key
	dropped             int64
}

func newSegModel(session bool, retention, interval, size int64, dups bool) *segModel {
	return &segModel{session: session, retention: retention, interval: interval, size: size, dups: dups, st: -1, entries: map[string]modelEntry{}}
}

func (m *segModel) clone() *segModel {
	c := *m
	c.entries = maps.Clone(m.entries)
	return &c
}

func (m *segModel) segTime(e modelEntry) int64 {
	if m.session {
		return e.end
	}
	return e.start
}

// write is Kafka Streams' put: advance stream time, drop expired segments, skip a write to
// an expired segment.
func (m *segModel) write(e modelEntry, del bool) {
	ts := m.segTime(e)
	m.st = max(m.st, ts)
	minSeg := (m.st - m.retention) / m.interval
	for k, x := range m.entries {
		if m.segTime(x)/m.interval < minSeg {
			delete(m.entries, k)
		}
	}
	if ts/m.interval < minSeg {
		if !del {
			m.dropped++
		}
		return
	}
	if del {
		delete(m.entries, e.rawKey(m.session))
	} else {
		m.entries[e.rawKey(m.session)] = e
	}
}

func (m *segModel) minLive() int64 { return max(0, m.st-m.retention+1) }

// sorted returns the live entries that keep takes, in the stores' order: by segment, then
// raw key.
func (m *segModel) sorted(keep func(modelEntry) bool, reverse bool) []modelEntry {
	var out []modelEntry
	for _, e := range m.entries {
		if m.segTime(e) >= m.minLive() && keep(e) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b modelEntry) int {
		if c := cmp.Compare(m.segTime(a)/m.interval, m.segTime(b)/m.interval); c != 0 {
			return c
		}
		return strings.Compare(a.rawKey(m.session), b.rawKey(m.session))
	})
	if reverse {
		slices.Reverse(out)
	}
	return out
}

func (m *segModel) format(es []modelEntry) []string {
	out := []string{}
	for _, e := range es {
		end := e.end
		if !m.session {
			end = serde.TimeWindowEnd(e.start, time.Duration(m.size)*time.Millisecond)
		}
		out = append(out, fmt.Sprintf("%q@%d/%d=%s", e.key, e.start, end, e.val))
	}
	return out
}

// modelHarness runs a store over a variant and logs its changelog like the runtime.
type modelHarness struct {
	raw   store.Backend
	typed store.Backend
	buf   *store.Buffer
	codec store.ChangelogCodec
	log   [][2][]byte // changelog records: key, value (nil: tombstone)
}

func newModelHarness(t *testing.T, v goldenVariant, codec store.ChangelogCodec) *modelHarness {
	db := v.engine.open(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	raw, err := db.Open("store", 0)
	if err != nil {
		t.Fatal(err)
	}
	h := &modelHarness{raw: raw, codec: codec}
	if v.buffered {
		h.buf = store.NewBuffer(raw).WithReadCache(4 << 10)
		h.typed = h.buf
	} else {
		h.typed = logBackend{raw, h}
	}
	return h
}

func (h *modelHarness) record(k, v []byte) {
	if ck, ok := h.codec.ChangelogKey(k); ok {
		var val []byte
		if v != nil {
			val = append([]byte{}, v...)
		}
		h.log = append(h.log, [2][]byte{append([]byte(nil), ck...), val})
	}
}

// flush logs the buffer's pending writes and flushes it, as a commit does.
func (h *modelHarness) flush(t *testing.T) {
	if h.buf == nil {
		return
	}
	h.buf.Pending(func(k, v []byte, deleted bool) {
		if deleted {
			v = nil
		} else if v == nil {
			v = []byte{}
		}
		h.record(k, v)
	})
	if err := h.buf.Flush(-1); err != nil {
		t.Fatal(err)
	}
}

// restoreAndCompare restores the changelog into a new store of the same engine and checks
// its data and stream time against the store's.
func (h *modelHarness) restoreAndCompare(t *testing.T, v goldenVariant) {
	h.flush(t)
	db := v.engine.open(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	restored, err := db.Open("restored", 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.codec.NewRestorer(restored)
	if err != nil {
		t.Fatal(err)
	}
	bt := restored.NewBatch()
	for i, rec := range h.log {
		if err := r.Restore(bt, rec[0], rec[1]); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			mustCommitBatch(t, bt)
		}
	}
	mustCommitBatch(t, bt)
	data := func(b store.Backend) []kv {
		it, err := b.Range([]byte{0x01}, nil)
		return drain(t, it, err)
	}
	got, want := data(restored), data(h.raw)
	if !slices.Equal(got, want) {
		t.Errorf("restored data (%d entries) differs from the store's (%d entries):\n got %s\nwant %s", len(got), len(want), fmtPairs(got), fmtPairs(want))
	}
	streamTime := func(b store.Backend) string {
		v, _, err := b.Get([]byte{0x00, 0x01})
		if err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(v[:min(8, len(v))])
	}
	if g, w := streamTime(restored), streamTime(h.raw); g != w {
		t.Errorf("restored stream time %s; want %s", g, w)
	}
}

type logBackend struct {
	store.Backend
	h *modelHarness
}

func (l logBackend) Set(k, v []byte) error { l.h.record(k, v); return l.Backend.Set(k, v) }
func (l logBackend) Delete(k []byte) error { l.h.record(k, nil); return l.Backend.Delete(k) }

// modelTimes draws timestamps that mostly advance, with late records.
type modelTimes struct {
	r    *rand.Rand
	base int64
	step int64
	late int64
}

func (mt *modelTimes) next() int64 {
	mt.base += mt.r.Int64N(mt.step)
	return max(0, mt.base-mt.r.Int64N(mt.late))
}

func TestWindowStoreModel(t *testing.T) {
	configs := []struct {
		name                      string
		retention, interval, size int64
		dups                      bool
		step, late                int64
	}{
		{"default-segments", 300_000, 0, 10_000, false, 4_000, 400_000},
		{"small-segments", 30_000, 5_000, 5_000, false, 1_000, 40_000},
		{"dups", 60_000, 0, 1_000, true, 1_500, 80_000},
		{"retention-equals-size", 10_000, 1_000, 10_000, false, 700, 12_000},
	}
	for _, c := range configs {
		for _, v := range goldenVariants() {
			t.Run(c.name+"/"+v.String(), func(t *testing.T) {
				o := store.WindowOptions{Retention: time.Duration(c.retention) * time.Millisecond,
					SegmentInterval: time.Duration(c.interval) * time.Millisecond,
					WindowSize:      time.Duration(c.size) * time.Millisecond, RetainDuplicates: c.dups}
				codec, err := store.NewWindowChangelog(o)
				if err != nil {
					t.Fatal(err)
				}
				h := newModelHarness(t, v, codec)
				w, err := store.NewWindowStore("w", h.typed, serde.String(), serde.Nullable(serde.String()), o)
				if err != nil {
					t.Fatal(err)
				}
				interval := int64(w.SegmentInterval() / time.Millisecond)
				m := newSegModel(false, c.retention, interval, c.size, c.dups)
				flushed := m.clone()
				r := rand.New(rand.NewPCG(11, uint64(len(c.name))))
				mt := &modelTimes{r: r, step: c.step, late: c.late}
				steps := 1500
				if testing.Short() {
					steps = 500
				}
				for step := range steps {
					key := modelKeys[r.IntN(len(modelKeys))]
					ts := mt.next()
					if c.dups {
						ts -= ts % 1000 // many duplicates
					}
					switch x := r.IntN(100); {
					case x < 70:
						val := fmt.Sprintf("v%d", step)
						if err := w.Put(key, &val, time.UnixMilli(ts)); err != nil {
							t.Fatal(err)
						}
						if c.dups {
							m.seq = (m.seq + 1) & math.MaxInt32
						}
						m.write(modelEntry{key: key, start: ts, seq: m.seq, val: val}, false)
					case x < 80:
						if err := w.Delete(key, time.UnixMilli(ts)); err != nil {
							t.Fatal(err)
						}
						if c.dups {
							for rk, e := range m.entries {
								if e.key == key && e.start == ts {
									delete(m.entries, rk)
								}
							}
						} else {
							m.write(modelEntry{key: key, start: ts}, true)
						}
					case x < 85 && h.buf != nil:
						h.flush(t)
						flushed = m.clone()
					case x < 87 && h.buf != nil:
						h.buf.Discard()
						m = flushed.clone()
					default:
						checkWindowQueries(t, r, w, m, step)
					}
					if t.Failed() {
						t.FailNow()
					}
				}
				checkWindowQueries(t, r, w, m, steps)
				if got := w.DroppedExpired(); h.buf == nil && got != m.dropped {
					t.Errorf("DroppedExpired = %d; want %d", got, m.dropped)
				}
				h.restoreAndCompare(t, v)
			})
		}
	}
}

func checkWindowQueries(t *testing.T, r *rand.Rand, w *store.WindowStore[string, *string], m *segModel, step int) {
	t.Helper()
	var err error
	it := func(i *store.WindowedIterator[string, *string], err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for i.Next() {
			k := i.Key()
			out = append(out, fmt.Sprintf("%q@%d/%d=%s", k.Key, k.StartMs(), k.EndMs(), *i.Value()))
		}
		if err := i.Err(); err != nil {
			t.Fatal(err)
		}
		if err := i.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got []string, want []modelEntry) {
		t.Helper()
		if w := m.format(want); !slices.Equal(got, w) {
			t.Errorf("step %d: %s (stream time %d):\n got %q\nwant %q", step, what, m.st, got, w)
		}
	}
	span := max(m.st, 1)
	from := r.Int64N(span + 1)
	to := from + r.Int64N(span/2+2)
	if r.IntN(5) == 0 {
		from, to = 0, math.MaxInt64
	}
	key := modelKeys[r.IntN(len(modelKeys))]
	kf, kt := modelKeys[r.IntN(len(modelKeys))], modelKeys[r.IntN(len(modelKeys))]
	tf, tt := time.UnixMilli(from), time.UnixMilli(to)
	inTime := func(e modelEntry) bool { return e.start >= from && e.start <= to }
	inKeys := func(e modelEntry) bool { return e.key >= kf && e.key <= kt }
	for _, rev := range []bool{false, true} {
		var i *store.WindowedIterator[string, *string]
		if rev {
			i, err = w.BackwardFetchRange(key, tf, tt)
		} else {
			i, err = w.FetchRange(key, tf, tt)
		}
		check(fmt.Sprintf("FetchRange(%q, %d, %d) reverse=%v", key, from, to, rev), it(i, err),
			m.sorted(func(e modelEntry) bool { return e.key == key && inTime(e) }, rev))
		if rev {
			i, err = w.BackwardFetchKeyRange(kf, kt, tf, tt)
		} else {
			i, err = w.FetchKeyRange(kf, kt, tf, tt)
		}
		check(fmt.Sprintf("FetchKeyRange(%q, %q, %d, %d) reverse=%v", kf, kt, from, to, rev), it(i, err),
			m.sorted(func(e modelEntry) bool { return inKeys(e) && inTime(e) }, rev))
		if rev {
			i, err = w.BackwardFetchAll(tf, tt)
		} else {
			i, err = w.FetchAll(tf, tt)
		}
		check(fmt.Sprintf("FetchAll(%d, %d) reverse=%v", from, to, rev), it(i, err), m.sorted(inTime, rev))
		if rev {
			i, err = w.BackwardAll()
		} else {
			i, err = w.All()
		}
		check(fmt.Sprintf("All reverse=%v", rev), it(i, err), m.sorted(func(modelEntry) bool { return true }, rev))
	}
	// Fetches of recent windows, which the store may answer from its Buffer's pending
	// writes alone, and AppendFetchRange, which must return what FetchRange iterates over.
	recent := max(0, m.st-r.Int64N(3_000))
	for _, q := range [][2]int64{{from, to}, {recent, recent + r.Int64N(3_000)}} {
		what := fmt.Sprintf("FetchRange(%q, %d, %d)", key, q[0], q[1])
		want := m.sorted(func(e modelEntry) bool { return e.key == key && e.start >= q[0] && e.start <= q[1] }, false)
		i, err := w.FetchRange(key, time.UnixMilli(q[0]), time.UnixMilli(q[1]))
		check(what, it(i, err), want)
		vs, err := w.AppendFetchRange(nil, key, time.UnixMilli(q[0]), time.UnixMilli(q[1]))
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, v := range vs {
			got = append(got, fmt.Sprintf("%q@%d/%d=%s", key, v.Start, serde.TimeWindowEnd(v.Start, time.Duration(m.size)*time.Millisecond), *v.Value))
		}
		check("Append"+what, got, want)
	}
	// Fetch of one window: the lowest sequence number with duplicates.
	ts := from
	if es := m.sorted(func(e modelEntry) bool { return e.key == key }, false); len(es) > 0 && r.IntN(2) == 0 {
		ts = es[r.IntN(len(es))].start
	}
	v, ok, err := w.Fetch(key, time.UnixMilli(ts))
	if err != nil {
		t.Fatal(err)
	}
	want := m.sorted(func(e modelEntry) bool { return e.key == key && e.start == ts }, false)
	switch {
	case len(want) == 0 && ok:
		t.Errorf("step %d: Fetch(%q, %d) = %q; want none", step, key, ts, *v)
	case len(want) > 0 && (!ok || *v != want[0].val):
		t.Errorf("step %d: Fetch(%q, %d) = %v, %v; want %q", step, key, ts, v, ok, want[0].val)
	}
	if st, ok, err := w.ObservedStreamTime(); err != nil || (ok && st.UnixMilli() != m.st) || (!ok && m.st != -1) {
		t.Errorf("step %d: ObservedStreamTime = %v, %v, %v; want %d", step, st.UnixMilli(), ok, err, m.st)
	}
}

func TestSessionStoreModel(t *testing.T) {
	configs := []struct {
		name                string
		retention, interval int64
		step, late          int64
	}{
		{"default-segments", 600_000, 0, 3_000, 700_000},
		{"small-segments", 20_000, 4_000, 700, 25_000},
		{"retention-0", 0, 1_000, 300, 3_000},
	}
	for _, c := range configs {
		for _, v := range goldenVariants() {
			t.Run(c.name+"/"+v.String(), func(t *testing.T) {
				o := store.SessionOptions{Retention: time.Duration(c.retention) * time.Millisecond,
					SegmentInterval: time.Duration(c.interval) * time.Millisecond}
				codec, err := store.NewSessionChangelog(o)
				if err != nil {
					t.Fatal(err)
				}
				h := newModelHarness(t, v, codec)
				s, err := store.NewSessionStore("s", h.typed, serde.String(), serde.Nullable(serde.String()), o)
				if err != nil {
					t.Fatal(err)
				}
				interval := int64(s.SegmentInterval() / time.Millisecond)
				m := newSegModel(true, c.retention, interval, 0, false)
				flushed := m.clone()
				r := rand.New(rand.NewPCG(13, uint64(len(c.name))))
				mt := &modelTimes{r: r, step: c.step, late: c.late}
				steps := 1500
				if testing.Short() {
					steps = 500
				}
				existing := func() (modelEntry, bool) {
					if len(m.entries) == 0 {
						return modelEntry{}, false
					}
					keys := slices.Sorted(maps.Keys(m.entries))
					return m.entries[keys[r.IntN(len(keys))]], true
				}
				for step := range steps {
					key := modelKeys[r.IntN(len(modelKeys))]
					end := mt.next()
					start := max(0, end-r.Int64N(3*c.step+1))
					if r.IntN(4) == 0 {
						start = end
					}
					if e, ok := existing(); ok && r.IntN(3) == 0 {
						key, start, end = e.key, e.start, e.end // rewrite or remove an existing session
					}
					w := serde.WindowedMs(key, start, end)
					switch x := r.IntN(100); {
					case x < 65:
						val := fmt.Sprintf("v%d", step)
						if err := s.Put(w, &val); err != nil {
							t.Fatal(err)
						}
						m.write(modelEntry{key: key, start: start, end: end, val: val}, false)
					case x < 72:
						if err := s.Remove(w); err != nil {
							t.Fatal(err)
						}
						m.write(modelEntry{key: key, start: start, end: end}, true)
					case x < 75:
						if err := s.Put(w, nil); err != nil { // a nil aggregate removes
							t.Fatal(err)
						}
						m.write(modelEntry{key: key, start: start, end: end}, true)
					case x < 80 && h.buf != nil:
						h.flush(t)
						flushed = m.clone()
					case x < 82 && h.buf != nil:
						h.buf.Discard()
						m = flushed.clone()
					default:
						checkSessionQueries(t, r, s, m, step)
					}
					if t.Failed() {
						t.FailNow()
					}
				}
				checkSessionQueries(t, r, s, m, steps)
				h.restoreAndCompare(t, v)
			})
		}
	}
}

func checkSessionQueries(t *testing.T, r *rand.Rand, s *store.SessionStore[string, *string], m *segModel, step int) {
	t.Helper()
	it := func(i *store.WindowedIterator[string, *string], err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for i.Next() {
			k := i.Key()
			out = append(out, fmt.Sprintf("%q@%d/%d=%s", k.Key, k.StartMs(), k.EndMs(), *i.Value()))
		}
		if err := i.Err(); err != nil {
			t.Fatal(err)
		}
		if err := i.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got []string, want []modelEntry) {
		t.Helper()
		if w := m.format(want); !slices.Equal(got, w) {
			t.Errorf("step %d: %s (stream time %d):\n got %q\nwant %q", step, what, m.st, got, w)
		}
	}
	span := max(m.st, 1)
	// A record at t with gap g merges with the sessions ending at or after t-g and starting
	// at or before t+g.
	t0, gap := r.Int64N(span+1), r.Int64N(span/4+2)
	earliestEnd, latestStart := max(0, t0-gap), t0+gap
	if r.IntN(5) == 0 {
		earliestEnd, latestStart = 0, math.MaxInt64
	}
	key := modelKeys[r.IntN(len(modelKeys))]
	kf, kt := modelKeys[r.IntN(len(modelKeys))], modelKeys[r.IntN(len(modelKeys))]
	ee, ls := time.UnixMilli(earliestEnd), time.UnixMilli(latestStart)
	overlaps := func(e modelEntry) bool { return e.end >= earliestEnd && e.start <= latestStart }
	inKeys := func(e modelEntry) bool { return e.key >= kf && e.key <= kt }
	for _, rev := range []bool{false, true} {
		var (
			i   *store.WindowedIterator[string, *string]
			err error
		)
		if rev {
			i, err = s.BackwardFindSessions(key, ee, ls)
		} else {
			i, err = s.FindSessions(key, ee, ls)
		}
		check(fmt.Sprintf("FindSessions(%q, %d, %d) reverse=%v", key, earliestEnd, latestStart, rev), it(i, err),
			m.sorted(func(e modelEntry) bool { return e.key == key && overlaps(e) }, rev))
		if rev {
			i, err = s.BackwardFindSessionsKeyRange(kf, kt, ee, ls)
		} else {
			i, err = s.FindSessionsKeyRange(kf, kt, ee, ls)
		}
		check(fmt.Sprintf("FindSessionsKeyRange(%q, %q, %d, %d) reverse=%v", kf, kt, earliestEnd, latestStart, rev), it(i, err),
			m.sorted(func(e modelEntry) bool { return inKeys(e) && overlaps(e) }, rev))
		if rev {
			i, err = s.BackwardFetch(key)
		} else {
			i, err = s.Fetch(key)
		}
		check(fmt.Sprintf("Fetch(%q) reverse=%v", key, rev), it(i, err), m.sorted(func(e modelEntry) bool { return e.key == key }, rev))
		if rev {
			i, err = s.BackwardFetchKeyRange(kf, kt)
		} else {
			i, err = s.FetchKeyRange(kf, kt)
		}
		check(fmt.Sprintf("FetchKeyRange(%q, %q) reverse=%v", kf, kt, rev), it(i, err), m.sorted(inKeys, rev))
	}
	lateEnd := earliestEnd + r.Int64N(span/2+1)
	i, err := s.FindSessionsByEnd(ee, time.UnixMilli(lateEnd))
	check(fmt.Sprintf("FindSessionsByEnd(%d, %d)", earliestEnd, lateEnd), it(i, err),
		m.sorted(func(e modelEntry) bool { return e.end >= earliestEnd && e.end <= lateEnd }, false))
	// FetchSession of an existing or absent session.
	var probe modelEntry
	if es := m.sorted(func(modelEntry) bool { return true }, false); len(es) > 0 && r.IntN(2) == 0 {
		probe = es[r.IntN(len(es))]
	} else {
		probe = modelEntry{key: key, start: earliestEnd, end: earliestEnd + r.Int64N(10)}
	}
	v, ok, err := s.FetchSession(probe.key, time.UnixMilli(probe.start), time.UnixMilli(probe.end))
	if err != nil {
		t.Fatal(err)
	}
	e, exists := m.entries[probe.rawKey(true)]
	exists = exists && e.end >= m.minLive()
	switch {
	case exists != ok:
		t.Errorf("step %d: FetchSession(%q, %d, %d): ok = %v; want %v", step, probe.key, probe.start, probe.end, ok, exists)
	case ok && *v != e.val:
		t.Errorf("step %d: FetchSession(%q, %d, %d) = %q; want %q", step, probe.key, probe.start, probe.end, *v, e.val)
	}
}
