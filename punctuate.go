package kstream

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
)

// PunctuationType says which clock drives a punctuator scheduled with
// [ProcessorContext.Schedule].
type PunctuationType int

const (
	// StreamTime punctuators are driven by the task's stream time: the largest timestamp
	// of the records it processed (see [TimestampExtractor]). They fire after a record
	// that moves stream time to or past the next scheduled time, at most once per record
	// however far stream time jumped, and never while no record arrives. The schedule is
	// aligned to the epoch: with an interval of 10s, punctuations are due at stream times
	// 0, 10s, 20s, ..., so the first fires after the first record. Kafka Streams'
	// PunctuationType.STREAM_TIME.
	StreamTime PunctuationType = iota
	// WallClockTime punctuators are driven by the instance's clock: the first is due one
	// interval after Schedule, the next ones every interval after, and they fire when due
	// whether records arrive or not (an idle task punctuates too). A punctuation late by
	// more than one interval (a long pause) fires once and the schedule skips what it
	// missed. In the test driver they fire when [kstreamtest.Driver.AdvanceWallClockTime]
	// moves its clock. Kafka Streams' PunctuationType.WALL_CLOCK_TIME.
	WallClockTime
)

// String returns "STREAM_TIME" or "WALL_CLOCK_TIME", Kafka Streams' names.
func (p PunctuationType) String() string {
	switch p {
	case StreamTime:
		return "STREAM_TIME"
	case WallClockTime:
		return "WALL_CLOCK_TIME"
	}
	return fmt.Sprintf("PunctuationType(%d)", int(p))
}

// Punctuator is a function called on a schedule (see [ProcessorContext.Schedule]). ts is
// the punctuation time: the task's stream time for a [StreamTime] punctuator, the wall-clock
// time for a [WallClockTime] one (not the scheduled time, which it may be past). It may
// forward records, which get ts as their timestamp unless they carry one, and write stores.
// An error or a panic goes to [Config.ProcessingErrorHandler], with the punctuator's
// operator and no input record (ErrorContext Topic "", Partition and Offset -1).
type Punctuator func(ts time.Time) error

// Cancellable cancels a punctuation schedule: once Cancel returns, the punctuator is not
// called again (a punctuator may cancel its own schedule).
type Cancellable interface{ Cancel() }

// schedule is one punctuation schedule of a task.
type schedule struct {
	n         *node
	typ       PunctuationType
	interval  int64 // ms
	next      int64 // ms: when it is due next
	saved     int64 // next at the last commit
	seq       int   // order of scheduling, for punctuators due at the same time
	fn        Punctuator
	cancelled atomic.Bool
}

func (s *schedule) Cancel() { s.cancelled.Store(true) }

// advance moves the schedule past now, which it was due at: one interval on, or, if it
// missed some (a stream-time jump, a late wall-clock punctuation), to the first due time
// after now (Kafka Streams' PunctuationSchedule.next).
func (s *schedule) advance(now int64) {
	next := s.next + s.interval
	if now >= next {
		next = s.next + ((now-s.next)/s.interval+1)*s.interval
	}
	s.next = next
}

var errNoPunctuator = errors.New("kstream: Schedule: the punctuator is nil")

// schedule adds a punctuation schedule for operator n.
func (t *task) schedule(n *node, interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error) {
	ms := interval.Milliseconds()
	if ms < 1 {
		return nil, fmt.Errorf("kstream: Schedule (operator %s): the interval is %s; the smallest is 1ms", n.name, interval)
	}
	if fn == nil {
		return nil, errNoPunctuator
	}
	s := &schedule{n: n, typ: typ, interval: ms, fn: fn, seq: t.schedSeq}
	switch typ {
	case StreamTime:
		s.next = 0 // due as soon as stream time is known
	case WallClockTime:
		s.next = t.env.Now().UnixMilli() + ms
	default:
		return nil, fmt.Errorf("kstream: Schedule (operator %s): unknown punctuation type %d", n.name, int(typ))
	}
	s.saved = s.next
	t.schedSeq++
	t.scheds = append(t.scheds, s)
	return s, nil
}

// punctuate runs the punctuators of type typ due at now, earliest first, each at most once,
// until a fatal error. It reports whether any ran.
func (t *task) punctuate(typ PunctuationType, now int64) bool {
	ran := false
	for t.fatal == nil {
		var s *schedule
		for _, x := range t.scheds {
			if x.typ != typ || x.cancelled.Load() || x.next > now {
				continue
			}
			if s == nil || x.next < s.next || (x.next == s.next && x.seq < s.seq) {
				s = x
			}
		}
		if s == nil {
			break
		}
		t.runPunctuator(s, now)
		s.advance(now)
		ran = true
	}
	t.scheds = slices.DeleteFunc(t.scheds, func(s *schedule) bool { return s.cancelled.Load() })
	return ran
}

// runPunctuator calls s's punctuator at time now, with no input record in hand: records it
// forwards get now as their timestamp unless they carry one.
func (t *task) runPunctuator(s *schedule, now int64) {
	t.cur, t.curTS, t.hasTS, t.punctuating = nil, now, true, true
	defer func() { t.hasTS, t.punctuating = false, false }()
	defer t.recoverIn(s.n)
	if err := s.fn(time.UnixMilli(now)); err != nil {
		t.processingError(s.n, err)
	}
}

// Punctuate implements runtime.Task: the wall-clock punctuators due at now.
func (t *task) Punctuate(now time.Time) (bool, error) {
	t.fatal, t.idleEmitted = nil, false
	ran := t.punctuate(WallClockTime, now.UnixMilli())
	t.flushDue(now) // batches held for their longest wait (batch_sink.go), idle windows (windowed.go)
	return ran || t.idleEmitted, t.fatal
}

// NextPunctuation implements runtime.Task.
func (t *task) NextPunctuation() time.Time {
	next := int64(-1)
	for _, s := range t.scheds {
		if s.typ == WallClockTime && !s.cancelled.Load() && (next < 0 || s.next < next) {
			next = s.next
		}
	}
	if at := t.nextFlush(); !at.IsZero() && (next < 0 || at.UnixMilli() < next) {
		return at // a batch's longest wait ends first (batch_sink.go)
	}
	if next < 0 {
		return time.Time{}
	}
	return time.UnixMilli(next)
}

// taskCut is what a task's commit covers, taken when the commit cut the task (Cut): under
// exactly-once the task goes on processing, for the next transaction, while the cut one
// ends, so what an aborted transaction goes back to is the state at the last cut whose
// transaction committed, not the state when it committed.
type taskCut struct {
	valid      bool
	streamTime int64
	scheds     []schedCut
	hooks      []func() // the operators' promotions (txnHook.cut), nil entries left out
}

type schedCut struct {
	s    *schedule
	next int64
}

// Cut implements runtime.Task: the stream time, the punctuation schedules and the
// operators' transactional state as of now are what the next Committed saves.
func (t *task) Cut() {
	c := &t.cut
	c.valid, c.streamTime = true, t.streamTime
	c.scheds, c.hooks = c.scheds[:0], c.hooks[:0]
	for _, s := range t.scheds {
		c.scheds = append(c.scheds, schedCut{s, s.next})
	}
	for _, h := range t.txnHooks {
		if fn := h.cut(); fn != nil {
			c.hooks = append(c.hooks, fn)
		}
	}
}

// Committed implements runtime.Task: the state taken by the last Cut is committed, and is
// what an aborted transaction goes back to. Without a Cut since the last Committed it does
// nothing (the task was created after the cut: nothing of it was in the commit).
func (t *task) Committed() {
	c := &t.cut
	if !c.valid {
		return
	}
	t.savedStreamTime = c.streamTime
	for _, sc := range c.scheds {
		sc.s.saved = sc.next
	}
	for _, fn := range c.hooks {
		fn()
	}
	c.valid = false
	clear(c.hooks) // let the closures go
}

// Aborted implements runtime.Task: back to the stream time and schedules of the last
// commit, so that the punctuations of the aborted transaction happen again when its records
// are processed again. A cut not committed yet is forgotten.
func (t *task) Aborted() {
	t.cut.valid = false
	clear(t.cut.hooks)
	t.streamTime = t.savedStreamTime
	for _, s := range t.scheds {
		s.next = s.saved
	}
	for _, h := range t.txnHooks {
		h.aborted()
	}
}

// txnHook is the in-memory state of an operator that must follow its stores: taken when
// the task's commit cuts it, saved once that commit succeeds, and put back when a
// transaction aborts (whose store writes are discarded), so that the operator and its
// stores agree when the records are processed again.
type txnHook interface {
	// cut returns the function that saves the state as of now as committed, or nil if the
	// operator has nothing to save.
	cut() func()
	aborted()
}

var _ runtime.Task = (*task)(nil)
