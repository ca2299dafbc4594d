package kstream

import (
	"fmt"
	"time"
)

// Windows defines the time windows of a windowed aggregation: [TimeWindows] (tumbling and
// hopping) or [SlidingWindows]. Pass one to [KGroupedStream.WindowedBy]; session windows
// have their own [KGroupedStream.WindowedBySession].
type Windows interface {
	// spec returns the windows' definition in milliseconds.
	spec() windowSpec
}

// windowSpec is a window definition in milliseconds.
type windowSpec struct {
	kind    windowKind
	size    int64 // time windows: size; sliding windows: the time difference
	advance int64 // time windows only
	grace   int64
	err     error // a definition error, reported when the windows are used
}

type windowKind int

const (
	timeWindowKind windowKind = iota
	slidingWindowKind
	sessionWindowKind
)

// windowsFor returns the starts of the time windows (size w.size, advancing by w.advance)
// that contain ts, in ascending order, as Kafka Streams' TimeWindows.windowsFor does: the
// first start is the largest multiple of advance that is at most ts - size + advance (and
// not below 0).
func (w windowSpec) windowsFor(ts int64) []int64 {
	start := max(0, ts-w.size+w.advance) / w.advance * w.advance
	var starts []int64
	for ; start <= ts; start += w.advance {
		starts = append(starts, start)
	}
	return starts
}

// windowEnd is the end of the window starting at start, as Kafka Streams' TimeWindow
// computes it (saturating at the largest timestamp).
func (w windowSpec) windowEnd(start int64) int64 {
	if start > maxTimestamp-w.size {
		return maxTimestamp
	}
	return start + w.size
}

// maxTimestamp is Java's Long.MAX_VALUE, the end of a window that would overflow.
const maxTimestamp = int64(^uint64(0) >> 1)

// millis converts d to whole milliseconds, failing for a negative duration or a fraction of
// a millisecond: Kafka Streams' windows are defined in milliseconds.
func millis(what string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("%s must not be negative, got %v", what, d)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%s must be a whole number of milliseconds, got %v", what, d)
	}
	return d.Milliseconds(), nil
}

// TimeWindows are fixed-size windows: tumbling (each record in exactly one window) unless
// [TimeWindows.AdvanceBy] makes them hopping (overlapping windows every advance). A window
// covers [start, start+size); starts are multiples of the advance since the Unix epoch.
// This is Kafka Streams' TimeWindows.
//
// The grace period ([TimeWindows.WithGrace], none by default as with Java's
// TimeWindows.ofSizeWithNoGrace) is how long after a window's end, in stream time, records
// for it are still accepted: a window closes when the largest timestamp the aggregation has
// seen reaches its end plus the grace, and a later record for it is dropped as late (see
// [Stats].DroppedRecords).
type TimeWindows struct {
	s windowSpec
}

// TimeWindowsOf returns tumbling windows of the given size (at least 1ms), with no grace
// period: Kafka Streams' TimeWindows.ofSizeWithNoGrace.
func TimeWindowsOf(size time.Duration) TimeWindows {
	w := TimeWindows{windowSpec{kind: timeWindowKind}}
	ms, err := millis("the window size", size)
	if err == nil && ms == 0 {
		err = fmt.Errorf("the window size must be at least 1ms")
	}
	w.s.size, w.s.advance, w.s.err = ms, ms, err
	return w
}

// AdvanceBy makes the windows hopping: a new window starts every advance, which must be at
// least 1ms and at most the size (an advance equal to the size gives tumbling windows).
func (w TimeWindows) AdvanceBy(advance time.Duration) TimeWindows {
	ms, err := millis("the window advance", advance)
	if err == nil && (ms == 0 || ms > w.s.size) {
		err = fmt.Errorf("the window advance must be at least 1ms and at most the window size (%dms), got %v", w.s.size, advance)
	}
	w.s.advance = ms
	if w.s.err == nil {
		w.s.err = err
	}
	return w
}

// WithGrace sets the grace period: how long after its end a window accepts late records.
func (w TimeWindows) WithGrace(grace time.Duration) TimeWindows {
	ms, err := millis("the grace period", grace)
	w.s.grace = ms
	if w.s.err == nil {
		w.s.err = err
	}
	return w
}

// Size returns the windows' size.
func (w TimeWindows) Size() time.Duration { return time.Duration(w.s.size) * time.Millisecond }

// Advance returns the windows' advance (their size for tumbling windows).
func (w TimeWindows) Advance() time.Duration { return time.Duration(w.s.advance) * time.Millisecond }

// Grace returns the grace period.
func (w TimeWindows) Grace() time.Duration { return time.Duration(w.s.grace) * time.Millisecond }

func (w TimeWindows) spec() windowSpec { return w.s }

// SlidingWindows are windows of a fixed size, the time difference, that slide continuously
// over the time axis: two records fall into a common window if their timestamps differ by
// at most the time difference. Windows are created only where records are, so an
// aggregation over sliding windows emits one result per distinct window content, unlike
// hopping windows with a 1ms advance. Window bounds are inclusive on both ends ([start,
// end] with end = start + time difference). This is Kafka Streams' SlidingWindows.
type SlidingWindows struct {
	s windowSpec
}

// SlidingWindowsOf returns sliding windows with the given time difference (at least 1ms)
// and no grace period: Kafka Streams' SlidingWindows.ofTimeDifferenceWithNoGrace.
func SlidingWindowsOf(timeDifference time.Duration) SlidingWindows {
	w := SlidingWindows{windowSpec{kind: slidingWindowKind}}
	ms, err := millis("the sliding windows' time difference", timeDifference)
	if err == nil && ms == 0 {
		err = fmt.Errorf("the sliding windows' time difference must be at least 1ms")
	}
	w.s.size, w.s.err = ms, err
	return w
}

// WithGrace sets the grace period: how long after its end a window accepts late records.
func (w SlidingWindows) WithGrace(grace time.Duration) SlidingWindows {
	ms, err := millis("the grace period", grace)
	w.s.grace = ms
	if w.s.err == nil {
		w.s.err = err
	}
	return w
}

// TimeDifference returns the windows' size.
func (w SlidingWindows) TimeDifference() time.Duration {
	return time.Duration(w.s.size) * time.Millisecond
}

// Grace returns the grace period.
func (w SlidingWindows) Grace() time.Duration { return time.Duration(w.s.grace) * time.Millisecond }

func (w SlidingWindows) spec() windowSpec { return w.s }

// SessionWindows group the records of a key into sessions, periods of activity separated
// by gaps of inactivity longer than the inactivity gap: a record within the gap of an
// existing session extends it, and a record that bridges two sessions merges them. A
// session's bounds are the timestamps of its first and last records, both inclusive. This
// is Kafka Streams' SessionWindows.
type SessionWindows struct {
	s windowSpec
}

// SessionWindowsOf returns session windows with the given inactivity gap (at least 1ms) and
// no grace period: Kafka Streams' SessionWindows.ofInactivityGapWithNoGrace.
func SessionWindowsOf(inactivityGap time.Duration) SessionWindows {
	w := SessionWindows{windowSpec{kind: sessionWindowKind}}
	ms, err := millis("the session inactivity gap", inactivityGap)
	if err == nil && ms == 0 {
		err = fmt.Errorf("the session inactivity gap must be at least 1ms")
	}
	w.s.size, w.s.err = ms, err
	return w
}

// WithGrace sets the grace period: how long after a session's end (plus the gap) it
// accepts late records.
func (w SessionWindows) WithGrace(grace time.Duration) SessionWindows {
	ms, err := millis("the grace period", grace)
	w.s.grace = ms
	if w.s.err == nil {
		w.s.err = err
	}
	return w
}

// InactivityGap returns the inactivity gap.
func (w SessionWindows) InactivityGap() time.Duration {
	return time.Duration(w.s.size) * time.Millisecond
}

// Grace returns the grace period.
func (w SessionWindows) Grace() time.Duration { return time.Duration(w.s.grace) * time.Millisecond }
