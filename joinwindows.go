package kstream

import (
	"fmt"
	"time"
)

// JoinWindows are the windows of a stream-stream join ([JoinWindowed], [LeftJoinWindowed],
// [OuterJoinWindowed]): a record of the left stream with timestamp ts joins the records of
// the right stream with the same key and a timestamp in [ts - before, ts + after], and a
// record of the right stream with timestamp ts those of the left stream in
// [ts - after, ts + before]. This is Kafka Streams' JoinWindows.
//
// The grace period ([JoinWindows.WithGrace], none by default, as with Java's
// JoinWindows.ofTimeDifferenceWithNoGrace) is how long, in stream time, a window stays
// open after its end for out-of-order records; the non-match of a left or outer join is
// emitted only when its window has closed. The join's window stores keep records for
// before + after + grace.
//
// The zero JoinWindows joins records with equal timestamps only, with no grace period.
type JoinWindows struct {
	before, after, grace int64
	err                  error
}

// JoinWindowsOf returns windows joining records whose timestamps differ by at most
// timeDifference (before = after = timeDifference), with no grace period: Kafka Streams'
// JoinWindows.ofTimeDifferenceWithNoGrace. Add one with [JoinWindows.WithGrace] (Java's
// JoinWindows.ofTimeDifferenceAndGrace).
func JoinWindowsOf(timeDifference time.Duration) JoinWindows {
	var w JoinWindows
	ms, err := millis("the join windows' time difference", timeDifference)
	w.before, w.after, w.err = ms, ms, err
	return w
}

// signedMillis converts d to whole milliseconds, which may be negative.
func signedMillis(what string, d time.Duration) (int64, error) {
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%s must be a whole number of milliseconds, got %v", what, d)
	}
	return d.Milliseconds(), nil
}

// Before sets how far before a left record's timestamp the right records it joins may be
// (Kafka Streams' JoinWindows.before). It may be negative (the window then starts after the
// record) as long as before + after is not.
func (w JoinWindows) Before(d time.Duration) JoinWindows {
	ms, err := signedMillis("the join windows' before", d)
	w.before = ms
	w.keep(err)
	return w
}

// After sets how far after a left record's timestamp the right records it joins may be
// (Kafka Streams' JoinWindows.after). It may be negative as long as before + after is not.
func (w JoinWindows) After(d time.Duration) JoinWindows {
	ms, err := signedMillis("the join windows' after", d)
	w.after = ms
	w.keep(err)
	return w
}

// WithGrace sets the grace period: how long after its end, in stream time, a window
// accepts out-of-order records, and after which a left or outer join emits its non-matches.
func (w JoinWindows) WithGrace(grace time.Duration) JoinWindows {
	ms, err := millis("the grace period", grace)
	w.grace = ms
	w.keep(err)
	return w
}

func (w *JoinWindows) keep(err error) {
	if w.err == nil {
		w.err = err
	}
}

// BeforeDuration returns how far before a left record the joined right records may be.
func (w JoinWindows) BeforeDuration() time.Duration {
	return time.Duration(w.before) * time.Millisecond
}

// AfterDuration returns how far after a left record the joined right records may be.
func (w JoinWindows) AfterDuration() time.Duration {
	return time.Duration(w.after) * time.Millisecond
}

// Size returns before + after, the size of the join's windows (Kafka Streams'
// JoinWindows.size).
func (w JoinWindows) Size() time.Duration { return time.Duration(w.size()) * time.Millisecond }

// Grace returns the grace period.
func (w JoinWindows) Grace() time.Duration { return time.Duration(w.grace) * time.Millisecond }

func (w JoinWindows) size() int64 { return w.before + w.after }

// check returns the windows' definition error, if any, as Kafka Streams' JoinWindows
// constructor finds them.
func (w JoinWindows) check() error {
	if w.err != nil {
		return w.err
	}
	if w.before+w.after < 0 {
		return fmt.Errorf("the join windows' interval (before + after = %dms + %dms) must not be negative", w.before, w.after)
	}
	return nil
}

// String describes the windows as Kafka Streams' JoinWindows.toString does.
func (w JoinWindows) String() string {
	return fmt.Sprintf("JoinWindows{beforeMs=%d, afterMs=%d, graceMs=%d}", w.before, w.after, w.grace)
}
