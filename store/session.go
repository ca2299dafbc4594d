package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// SessionOptions configures a session store. Durations are whole milliseconds (a fraction
// of one rounds up).
type SessionOptions struct {
	// Retention is how long, in stream time, a session is kept after its end: the store
	// drops a session that ends at or before observed stream time minus Retention (Kafka
	// Streams' retentionPeriod). It must not be negative.
	Retention time.Duration
	// SegmentInterval is the time span of a segment (by session end), the unit in which
	// expired sessions are dropped; 0 means Kafka Streams' default max(Retention/2, 1
	// minute).
	SegmentInterval time.Duration
}

// Session store schema keys (Kafka Streams' SessionKeySchema): key, end, start.
const sessionSuffixLen = 16

// appendSessionKey appends the schema key of (key, start, end).
func appendSessionKey(dst, key []byte, start, end int64) []byte {
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(end))
	return binary.BigEndian.AppendUint64(dst, uint64(start))
}

func sessionStart(sk []byte) int64 { return int64(binary.BigEndian.Uint64(sk[len(sk)-8:])) }

func newSessionSegmented(name string, b Backend, retention, interval int64) segmented {
	// The segment timestamp is the session end, 16 bytes from the end of a schema key.
	return segmented{name: name, b: b, retention: retention, interval: interval,
		suffixLen: sessionSuffixLen, timeAt: sessionSuffixLen}
}

// NewSessionChangelog returns the changelog codec of session stores with options o:
// changelog keys are Kafka Streams' SessionKeySchema keys ([serialized key][8-byte
// big-endian session end][8-byte big-endian session start]) and values the values the
// store keeps, as Kafka Streams' ChangeLoggingSessionBytesStore writes them.
func NewSessionChangelog(o SessionOptions) (ChangelogCodec, error) {
	retention, interval, err := checkRetention(o.Retention, o.SegmentInterval)
	if err != nil {
		return nil, fmt.Errorf("store: session changelog: %w", err)
	}
	return sessionCodec{retention: retention, interval: interval, o: o}, nil
}

type sessionCodec struct {
	retention, interval int64
	o                   SessionOptions
}

// SessionOptions returns the options the codec was made with (see
// windowCodec.WindowOptions).
func (c sessionCodec) SessionOptions() SessionOptions { return c.o }

func (sessionCodec) ChangelogKey(k []byte) ([]byte, bool) { return changelogKey(k) }

func (c sessionCodec) TopicConfigs() map[string]*string {
	return WindowedChangelogConfigs(time.Duration(c.retention)*time.Millisecond, DefaultWindowedChangelogAdditionalRetention)
}

// WithExtraRetention implements [RetentionExtender] (see windowCodec's).
func (c sessionCodec) WithExtraRetention(extra time.Duration) any {
	c.retention += extra.Milliseconds()
	c.o.Retention = time.Duration(c.retention) * time.Millisecond
	c.o.SegmentInterval = time.Duration(c.interval) * time.Millisecond // unchanged on disk
	return c
}

func (c sessionCodec) NewRestorer(b Backend) (Restorer, error) {
	st, err := readState(b)
	if err != nil {
		return nil, fmt.Errorf("store: session changelog: reading the stream time: %w", err)
	}
	return &sessionRestorer{s: newSessionSegmented("(restoring)", b, c.retention, c.interval), st: st}, nil
}

type sessionRestorer struct {
	s  segmented
	st segState
}

func (r *sessionRestorer) Restore(bt Batch, key, value []byte) error {
	return r.s.restore(&r.st, bt, key, value, nil)
}

// SessionStore is a typed session store over a [Backend], with Kafka Streams' SessionStore
// semantics: each entry is a key, a session window [start, end] and a value (the session's
// aggregate); entries are kept for the retention period in stream time, by session end.
// See the package's segmented-store layout (segmented.go) for the key layout and
// [NewSessionChangelog] for the changelog format.
//
// The observed stream time is the largest session end written (put or removed) so far. A
// put whose session has expired (its end's segment is before the segment of observed
// stream time minus retention) is dropped (counted by [SessionStore.DroppedExpired]); reads
// never return a session that ends at or before observed stream time minus retention;
// whole expired segments leave the backend with one range deletion.
//
// Scans of one key return its sessions by end time, then start time; scans of several keys
// return them by segment, then serialized key, then end and start, as Kafka Streams' RocksDB
// session store does. Sessions must not start before 0 nor end before they start.
//
// It keeps its stream time in the backend and caches it, as [WindowStore] does, and is used
// from one goroutine at a time.
type SessionStore[K, V any] struct {
	s       segmented
	ks      serde.Serde[K]
	vs      serde.Serde[V]
	expired int64
}

// NewSessionStore returns a typed session store over b. name appears in errors. It fails
// only for invalid options.
func NewSessionStore[K, V any](name string, b Backend, ks serde.Serde[K], vs serde.Serde[V], o SessionOptions) (*SessionStore[K, V], error) {
	retention, interval, err := checkRetention(o.Retention, o.SegmentInterval)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	return &SessionStore[K, V]{s: newSessionSegmented(name, b, retention, interval), ks: ks, vs: vs}, nil
}

// Name returns the store's name.
func (s *SessionStore[K, V]) Name() string { return s.s.name }

// WithExtraRetention implements [RetentionExtender]: it lengthens s's retention by extra and
// returns s. Call it before the first read or write.
func (s *SessionStore[K, V]) WithExtraRetention(extra time.Duration) any {
	s.s.retention += extra.Milliseconds()
	return s
}

// Retention returns the retention period.
func (s *SessionStore[K, V]) Retention() time.Duration {
	return time.Duration(s.s.retention) * time.Millisecond
}

// SegmentInterval returns the segment interval.
func (s *SessionStore[K, V]) SegmentInterval() time.Duration {
	return time.Duration(s.s.interval) * time.Millisecond
}

// ObservedStreamTime returns the largest session end written so far; ok is false before
// the first write.
func (s *SessionStore[K, V]) ObservedStreamTime() (t time.Time, ok bool, err error) {
	st, err := s.s.state()
	if err != nil || st.streamTime == NoTimestamp {
		return time.Time{}, false, err
	}
	return time.UnixMilli(st.streamTime), true, nil
}

// DroppedExpired returns the number of values this value of the store dropped because their
// session had expired (removals of expired sessions are not counted).
func (s *SessionStore[K, V]) DroppedExpired() int64 { return s.expired }

// Held reports whether the store still holds the sessions that end at end: whether their
// segment has not expired at the current observed stream time (what
// [SessionStore.FindHeldSessionsByEnd] returns). A caller that read sessions before writes
// that may advance the stream time learns with it which of them expired meanwhile.
func (s *SessionStore[K, V]) Held(end time.Time) (bool, error) {
	st, err := s.s.state()
	if err != nil {
		return false, err
	}
	e := ms(end)
	return e >= 0 && s.s.live(st.streamTime, e), nil
}

func (s *SessionStore[K, V]) key(k K) ([]byte, error) {
	b, err := s.ks.Serialize(k)
	if err != nil {
		return nil, s.s.errorf("serializing key: %w", err)
	}
	if b == nil {
		return nil, s.s.errorf("a null key")
	}
	return b, nil
}

// dataKey returns the data key of a session, checking its window; it is valid until the
// next use of the scratch buffer.
func (s *SessionStore[K, V]) dataKey(w serde.Windowed[K]) (dk []byte, end int64, err error) {
	kb, err := s.key(w.Key)
	if err != nil {
		return nil, 0, err
	}
	start, end := w.StartMs(), w.EndMs()
	if start < 0 || end < start {
		return nil, 0, s.s.errorf("invalid session window [%d, %d]", start, end)
	}
	return appendSessionKey(s.s.dataKeyBuf(segmentID(end, s.s.interval), len(kb)+sessionSuffixLen), kb, start, end), end, nil
}

// Put writes v as the aggregate of session w (key and window), advancing the observed
// stream time to the session's end if it is later. A value that serializes to nil (a nil
// pointer of a [serde.Nullable] serde) removes the session, as Kafka Streams' put(key,
// null) does.
func (s *SessionStore[K, V]) Put(w serde.Windowed[K], v V) error {
	dk, end, err := s.dataKey(w)
	if err != nil {
		return err
	}
	vb, err := s.vs.Serialize(v)
	if err != nil {
		return s.s.errorf("serializing value: %w", err)
	}
	return s.write(dk, end, vb)
}

// Remove removes session w. As in Kafka Streams, it advances the observed stream time to the
// session's end if it is later.
func (s *SessionStore[K, V]) Remove(w serde.Windowed[K]) error {
	dk, end, err := s.dataKey(w)
	if err != nil {
		return err
	}
	return s.write(dk, end, nil)
}

func (s *SessionStore[K, V]) write(dk []byte, end int64, vb []byte) error {
	st, err := s.s.state()
	if err != nil {
		return err
	}
	kept, err := s.s.write(s.s.b, &st, dk, end, vb, false)
	s.s.remember(st, err)
	if err != nil {
		return s.s.errorf("put: %w", err)
	}
	if !kept && vb != nil {
		s.expired++
	}
	return nil
}

// FetchSession returns the aggregate of key k's session [start, end]; ok is false if there
// is none or it has expired.
func (s *SessionStore[K, V]) FetchSession(k K, start, end time.Time) (v V, ok bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return v, false, err
	}
	a, b := ms(start), ms(end)
	st, err := s.s.state()
	if err != nil {
		return v, false, err
	}
	if a < 0 || b < a || b < minLiveTime(st.streamTime, s.s.retention) {
		return v, false, nil
	}
	vb, ok, err := s.s.b.Get(appendSessionKey(s.s.dataKeyBuf(segmentID(b, s.s.interval), len(kb)+sessionSuffixLen), kb, a, b))
	if err != nil || !ok {
		if err != nil {
			err = s.s.errorf("fetch session: %w", err)
		}
		return v, false, err
	}
	v, err = s.vs.Deserialize(vb)
	if err != nil {
		return v, false, s.s.errorf("deserializing value: %w", err)
	}
	return v, true, nil
}

// endBounds returns the stream time and the first live session end no earlier than
// earliestEnd.
func (s *SessionStore[K, V]) endBounds(earliestEnd int64) (st, lo int64, err error) {
	state, err := s.s.state()
	if err != nil {
		return 0, 0, err
	}
	return state.streamTime, max(earliestEnd, minLiveTime(state.streamTime, s.s.retention), 0), nil
}

// findScan scans the sessions of serialized key kb that end at or after earliestEnd and
// start at or before latestStart.
func (s *SessionStore[K, V]) findScan(kb []byte, earliestEnd, latestStart int64, reverse bool) *segScan {
	st, lo, err := s.endBounds(earliestEnd)
	if err != nil {
		return &segScan{done: true, err: err}
	}
	if lo > st || latestStart < 0 {
		return emptyScan()
	}
	iv := s.s.interval
	span := func(seg int64) (segSpan, bool) {
		a := max(lo, segmentStart(seg, iv))
		from := dataKey(seg, appendSessionKey(nil, kb, 0, a))
		to := dataKey(seg, appendSessionKey(nil, kb, 0, segmentEnd(seg, iv))) // ends before the next segment
		return segSpan{from, to}, true
	}
	n := len(kb) + sessionSuffixLen
	accept := func(sk []byte) bool {
		return len(sk) == n && bytes.Equal(sk[:len(kb)], kb) &&
			s.s.segTime(sk) >= lo && sessionStart(sk) <= latestStart
	}
	return s.s.scan(segmentID(lo, iv), segmentID(st, iv), reverse, span, accept)
}

// findKeyRangeScan scans the sessions of serialized keys in [kFrom, kTo] that end at or
// after earliestEnd and start at or before latestStart.
func (s *SessionStore[K, V]) findKeyRangeScan(kFrom, kTo []byte, earliestEnd, latestStart int64, reverse bool) *segScan {
	if bytes.Compare(kFrom, kTo) > 0 {
		return emptyScan()
	}
	st, lo, err := s.endBounds(earliestEnd)
	if err != nil {
		return &segScan{done: true, err: err}
	}
	if lo > st || latestStart < 0 {
		return emptyScan()
	}
	upper := keyUpperBound(kTo, appendSessionKey(nil, nil, min(latestStart, st), st))
	span := func(seg int64) (segSpan, bool) {
		return segSpan{dataKey(seg, kFrom), dataKey(seg, upper)}, true
	}
	accept := func(sk []byte) bool {
		return s.s.segTime(sk) >= lo && sessionStart(sk) <= latestStart && s.s.inKeyRange(sk, kFrom, kTo)
	}
	return s.s.scan(segmentID(lo, s.s.interval), segmentID(st, s.s.interval), reverse, span, accept)
}

// FindSessions iterates over the sessions of key k that end at or after earliestEnd and
// start at or before latestStart: the sessions overlapping [earliestEnd, latestStart], or
// (with earliestEnd = t - gap, latestStart = t + gap) the sessions a record at t merges
// with. They come by end, then start (Kafka Streams' findSessions).
func (s *SessionStore[K, V]) FindSessions(k K, earliestEnd, latestStart time.Time) (*WindowedIterator[K, V], error) {
	return s.find(k, ms(earliestEnd), ms(latestStart), false)
}

// BackwardFindSessions is FindSessions in the opposite order.
func (s *SessionStore[K, V]) BackwardFindSessions(k K, earliestEnd, latestStart time.Time) (*WindowedIterator[K, V], error) {
	return s.find(k, ms(earliestEnd), ms(latestStart), true)
}

// Fetch iterates over every live session of key k (Kafka Streams' fetch(key)).
func (s *SessionStore[K, V]) Fetch(k K) (*WindowedIterator[K, V], error) {
	return s.find(k, 0, math.MaxInt64, false)
}

// BackwardFetch is Fetch in the opposite order.
func (s *SessionStore[K, V]) BackwardFetch(k K) (*WindowedIterator[K, V], error) {
	return s.find(k, 0, math.MaxInt64, true)
}

func (s *SessionStore[K, V]) find(k K, earliestEnd, latestStart int64, reverse bool) (*WindowedIterator[K, V], error) {
	kb, err := s.key(k)
	if err != nil {
		return nil, err
	}
	return s.iter(s.findScan(kb, earliestEnd, latestStart, reverse), func([]byte) (K, error) { return k, nil })
}

// FindSessionsKeyRange is FindSessions over the keys whose serialized form is in [kFrom,
// kTo].
func (s *SessionStore[K, V]) FindSessionsKeyRange(kFrom, kTo K, earliestEnd, latestStart time.Time) (*WindowedIterator[K, V], error) {
	return s.findKeyRange(kFrom, kTo, ms(earliestEnd), ms(latestStart), false)
}

// BackwardFindSessionsKeyRange is FindSessionsKeyRange in the opposite order.
func (s *SessionStore[K, V]) BackwardFindSessionsKeyRange(kFrom, kTo K, earliestEnd, latestStart time.Time) (*WindowedIterator[K, V], error) {
	return s.findKeyRange(kFrom, kTo, ms(earliestEnd), ms(latestStart), true)
}

// FetchKeyRange iterates over every live session of the keys whose serialized form is in
// [kFrom, kTo] (Kafka Streams' fetch(keyFrom, keyTo)).
func (s *SessionStore[K, V]) FetchKeyRange(kFrom, kTo K) (*WindowedIterator[K, V], error) {
	return s.findKeyRange(kFrom, kTo, 0, math.MaxInt64, false)
}

// BackwardFetchKeyRange is FetchKeyRange in the opposite order.
func (s *SessionStore[K, V]) BackwardFetchKeyRange(kFrom, kTo K) (*WindowedIterator[K, V], error) {
	return s.findKeyRange(kFrom, kTo, 0, math.MaxInt64, true)
}

func (s *SessionStore[K, V]) findKeyRange(kFrom, kTo K, earliestEnd, latestStart int64, reverse bool) (*WindowedIterator[K, V], error) {
	fb, err := s.key(kFrom)
	if err != nil {
		return nil, err
	}
	tb, err := s.key(kTo)
	if err != nil {
		return nil, err
	}
	return s.iter(s.findKeyRangeScan(fb, tb, earliestEnd, latestStart, reverse), s.ks.Deserialize)
}

// FindSessionsByEnd iterates over the sessions of every key that end in [earliestEnd,
// latestEnd], by segment, then serialized key, then end and start (Kafka Streams'
// findSessions(earliestSessionEndTime, latestSessionEndTime), which emitting final
// session results uses).
func (s *SessionStore[K, V]) FindSessionsByEnd(earliestEnd, latestEnd time.Time) (*WindowedIterator[K, V], error) {
	st, lo, err := s.endBounds(ms(earliestEnd))
	if err != nil {
		return nil, err
	}
	hi := min(ms(latestEnd), st)
	sc := emptyScan()
	if lo <= hi {
		sc = s.s.wholeScan(segmentID(lo, s.s.interval), segmentID(hi, s.s.interval), false, func(sk []byte) bool {
			end := s.s.segTime(sk)
			return end >= lo && end <= hi
		})
	}
	return s.iter(sc, s.ks.Deserialize)
}

// FindHeldSessionsByEnd is FindSessionsByEnd without the retention filter on single
// sessions: it returns every session still held (in a segment not dropped yet) that ends in
// [earliestEnd, latestEnd], even one that ends at or before observed stream time minus
// retention. This is what Kafka Streams' time-ordered session store (the store of a session
// aggregation that emits on window close) returns from findSessions(earliestSessionEndTime,
// latestSessionEndTime). The order is that of FindSessionsByEnd.
func (s *SessionStore[K, V]) FindHeldSessionsByEnd(earliestEnd, latestEnd time.Time) (*WindowedIterator[K, V], error) {
	st, err := s.s.state()
	if err != nil {
		return nil, err
	}
	lo, hi := max(ms(earliestEnd), 0), min(ms(latestEnd), st.streamTime)
	sc := emptyScan()
	if lo <= hi {
		sc = s.s.wholeScan(segmentID(lo, s.s.interval), segmentID(hi, s.s.interval), false, func(sk []byte) bool {
			end := s.s.segTime(sk)
			return end >= lo && end <= hi
		})
	}
	return s.iter(sc, s.ks.Deserialize)
}

func (s *SessionStore[K, V]) iter(sc *segScan, key func([]byte) (K, error)) (*WindowedIterator[K, V], error) {
	if sc.err != nil {
		return nil, sc.err
	}
	return &WindowedIterator[K, V]{s: &s.s, sc: sc, vs: s.vs, key: key, window: func(sk []byte) (int64, int64) {
		return sessionStart(sk), s.s.segTime(sk)
	}}, nil
}

// Meta returns the operator metadata value named name; see [WindowStore.Meta].
func (s *SessionStore[K, V]) Meta(name string) (v int64, ok bool, err error) {
	return s.s.meta(segOpMetaPrefix, name)
}

// SetMeta writes the operator metadata value named name; see [WindowStore.Meta].
func (s *SessionStore[K, V]) SetMeta(name string, v int64) error {
	return s.s.setMeta(segOpMetaPrefix, name, v)
}

// LoggedMeta returns the logged operator metadata value named name; see
// [WindowStore.LoggedMeta].
func (s *SessionStore[K, V]) LoggedMeta(name string) (v int64, ok bool, err error) {
	return s.s.meta(segLoggedMetaPrefix, name)
}

// SetLoggedMeta writes the logged operator metadata value named name; see
// [WindowStore.LoggedMeta].
func (s *SessionStore[K, V]) SetLoggedMeta(name string, v int64) error {
	return s.s.setMeta(segLoggedMetaPrefix, name, v)
}
