package serde

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Windowed is a key with the window it belongs to, as Kafka Streams' Windowed<K>: the key of
// a windowed aggregation's result, of a window store's entries and of a session store's.
//
// Times are whole Unix milliseconds, as Kafka's timestamps are. For a time window (tumbling,
// hopping, sliding) the window is [Start, End), End being Start plus the window size; for a
// session window it is [Start, End], both being timestamps of records of the session.
type Windowed[K any] struct {
	Key   K
	Start time.Time
	End   time.Time
}

// WindowedMs returns the Windowed of key over [startMs, endMs] in Unix milliseconds.
func WindowedMs[K any](key K, startMs, endMs int64) Windowed[K] {
	return Windowed[K]{Key: key, Start: time.UnixMilli(startMs), End: time.UnixMilli(endMs)}
}

// StartMs returns Start in Unix milliseconds.
func (w Windowed[K]) StartMs() int64 { return w.Start.UnixMilli() }

// EndMs returns End in Unix milliseconds.
func (w Windowed[K]) EndMs() int64 { return w.End.UnixMilli() }

// String formats the key and window as Kafka Streams' Windowed.toString does:
// "[key@start/end]" in milliseconds.
func (w Windowed[K]) String() string {
	return fmt.Sprintf("[%v@%d/%d]", w.Key, w.StartMs(), w.EndMs())
}

// TimeWindowEnd returns the end of the time window of size size starting at startMs, as
// Kafka Streams computes it: startMs+size, or math.MaxInt64 if that overflows.
func TimeWindowEnd(startMs int64, size time.Duration) int64 {
	end := startMs + size.Milliseconds()
	if end < startMs {
		return math.MaxInt64
	}
	return end
}

// windowTimeLen is the length of one timestamp in a windowed key.
const windowTimeLen = 8

// TimeWindowed returns the serde of time-windowed keys, byte-identical to Kafka Streams'
// TimeWindowedSerializer and TimeWindowedDeserializer (WindowedSerdes.timeWindowedSerdeFrom):
// the inner key's bytes followed by the window start as an 8-byte big-endian Unix
// millisecond timestamp. The end is not written; Deserialize computes it as start plus
// windowSize ([TimeWindowEnd]). A key whose inner serde writes null (nil bytes) is written as
// its empty bytes. Deserialize(nil) returns the zero Windowed.
func TimeWindowed[K any](inner Serde[K], windowSize time.Duration) Serde[Windowed[K]] {
	return timeWindowed[K]{inner: inner, size: windowSize}
}

type timeWindowed[K any] struct {
	inner Serde[K]
	size  time.Duration
}

func (s timeWindowed[K]) Serialize(w Windowed[K]) ([]byte, error) {
	if _, ok := s.inner.(appender[K]); ok {
		// One allocation for the whole key, not one for the inner key and one for the
		// windowed key.
		return s.appendTo(make([]byte, 0, windowedKeyCap), w)
	}
	kb, err := s.inner.Serialize(w.Key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(kb)+windowTimeLen)
	out = append(out, kb...)
	return binary.BigEndian.AppendUint64(out, uint64(w.StartMs())), nil
}

// AppendSerialize appends Serialize's bytes to dst. A windowed key is never a null.
func (s timeWindowed[K]) AppendSerialize(dst []byte, w Windowed[K]) ([]byte, bool, error) {
	out, err := s.appendTo(dst, w)
	return out, false, err
}

func (s timeWindowed[K]) appendTo(dst []byte, w Windowed[K]) ([]byte, error) {
	out, err := appendInner(dst, s.inner, w.Key)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(out, uint64(w.StartMs())), nil
}

// appender is a serde that appends its bytes to a buffer, as the built-in strings and
// integers do (store.AppendSerializer): a windowed key over it is written with one
// allocation, and appended to a store's buffer with none.
type appender[K any] interface {
	AppendSerialize(dst []byte, v K) ([]byte, bool, error)
}

// windowedKeyCap is the room Serialize allocates for a windowed key whose inner serde
// appends: an inner key of up to 24 bytes and two timestamps (a longer key grows it).
const windowedKeyCap = 40

// appendInner appends the bytes of k, serialized by inner, to dst: nothing for a null.
func appendInner[K any](dst []byte, inner Serde[K], k K) ([]byte, error) {
	if app, ok := inner.(appender[K]); ok {
		out, isNull, err := app.AppendSerialize(dst, k)
		if err != nil {
			return nil, err
		}
		if isNull {
			return dst, nil
		}
		return out, nil
	}
	kb, err := inner.Serialize(k)
	if err != nil {
		return nil, err
	}
	return append(dst, kb...), nil
}

func (s timeWindowed[K]) Deserialize(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if b == nil {
		return w, nil
	}
	if len(b) < windowTimeLen {
		return w, fmt.Errorf("serde: time-windowed key: got %d bytes, want at least %d", len(b), windowTimeLen)
	}
	n := len(b) - windowTimeLen
	k, err := s.inner.Deserialize(b[:n:n])
	if err != nil {
		return w, err
	}
	start := int64(binary.BigEndian.Uint64(b[n:]))
	return WindowedMs(k, start, TimeWindowEnd(start, s.size)), nil
}

// SessionWindowed returns the serde of session-windowed keys, byte-identical to Kafka
// Streams' SessionWindowedSerializer and SessionWindowedDeserializer: the inner key's bytes,
// the session's end, then its start, each an 8-byte big-endian Unix millisecond timestamp
// (SessionKeySchema). A key whose inner serde writes null (nil bytes) is written as its
// empty bytes. Deserialize(nil) returns the zero Windowed.
func SessionWindowed[K any](inner Serde[K]) Serde[Windowed[K]] { return sessionWindowed[K]{inner} }

type sessionWindowed[K any] struct{ inner Serde[K] }

func (s sessionWindowed[K]) Serialize(w Windowed[K]) ([]byte, error) {
	if _, ok := s.inner.(appender[K]); ok {
		return s.appendTo(make([]byte, 0, windowedKeyCap), w)
	}
	kb, err := s.inner.Serialize(w.Key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(kb)+2*windowTimeLen)
	out = append(out, kb...)
	out = binary.BigEndian.AppendUint64(out, uint64(w.EndMs()))
	return binary.BigEndian.AppendUint64(out, uint64(w.StartMs())), nil
}

// AppendSerialize appends Serialize's bytes to dst. A windowed key is never a null.
func (s sessionWindowed[K]) AppendSerialize(dst []byte, w Windowed[K]) ([]byte, bool, error) {
	out, err := s.appendTo(dst, w)
	return out, false, err
}

func (s sessionWindowed[K]) appendTo(dst []byte, w Windowed[K]) ([]byte, error) {
	out, err := appendInner(dst, s.inner, w.Key)
	if err != nil {
		return nil, err
	}
	out = binary.BigEndian.AppendUint64(out, uint64(w.EndMs()))
	return binary.BigEndian.AppendUint64(out, uint64(w.StartMs())), nil
}

func (s sessionWindowed[K]) Deserialize(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if b == nil {
		return w, nil
	}
	if len(b) < 2*windowTimeLen {
		return w, fmt.Errorf("serde: session-windowed key: got %d bytes, want at least %d", len(b), 2*windowTimeLen)
	}
	n := len(b) - 2*windowTimeLen
	k, err := s.inner.Deserialize(b[:n:n])
	if err != nil {
		return w, err
	}
	end := int64(binary.BigEndian.Uint64(b[n:]))
	start := int64(binary.BigEndian.Uint64(b[n+windowTimeLen:]))
	return WindowedMs(k, start, end), nil
}
