package kstream

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event-time alignment across repartition topics (Config.EventTimeAlignment; see
// docs/eventtime.md, "Reprocessing with aligned event time").
//
// Kafka Streams' stream time is the largest timestamp a task has seen. Behind a repartition
// topic, a task sees the records of every upstream task interleaved as they were written:
// when the upstream tasks replay their input at different speeds (after a reset, or when
// one of them restarts far behind), a fast one's records push the downstream stream time
// past the slow ones' windows, whose records then come late and are dropped.
//
// With alignment, each upstream task writes its progress into every partition of the
// repartition topics it writes: a control record (header watermarkHeader, ignored by every
// operator) with its task id, its stream time, and whether it is caught up with its input.
// Since it is written after the records it covers, a downstream task reads it in order
// with them. The downstream task's aligned time is the smallest stream time of the
// upstream tasks that are not caught up, and of its own stream time when it last heard of
// each that is (unknown until it has heard of every upstream task; see compute). Its
// windowed operators judge lateness and close windows by the smaller of their own stream
// time and the aligned time, so that a record is late only if it is late for the slowest
// upstream task, as it would have been in a live run; and their stores keep windows the
// extra time the alignment allows, since windows are now put ahead of the time that closes
// them.

// watermarkHeader marks a control record of event-time alignment.
const watermarkHeader = "kstream.watermark"

// watermarkVersion is the format of a control record's value: version (1 byte), upstream
// sub-topology (4), upstream partition (4), stream time in ms (8, -1 for none), caught up
// (1), and the writer's wall-clock time in ms when it wrote it (8).
const watermarkVersion = 2

// watermarkLen is the length of a control record's value.
const watermarkLen = 26

// watermarkEvery is how often (wall-clock) an upstream task writes its progress when it
// changed; caughtUpResend how often when it did not and the task is caught up (each report
// keeps it believed: see caughtUpFor); watermarkResend how often otherwise (so that a
// downstream task that starts hears of every upstream task within it).
const (
	watermarkEvery  = 100 * time.Millisecond
	caughtUpResend  = 250 * time.Millisecond
	watermarkResend = 2 * time.Second
)

// upstreamMark is the last progress a downstream task heard of one upstream task, when the
// upstream task wrote it (its wall clock, ms), and the downstream task's stream time when
// it read it (readAt).
type upstreamMark struct {
	time     int64
	caughtUp bool
	written  int64
	readAt   int64
}

// caughtUpFor is how long a downstream task believes an upstream task that said it was
// caught up: until it reads a report of another upstream task written caughtUpFor after
// it, without a newer one from that task (which says so every caughtUpResend while it is).
// The clock is the writers', read in the order of the partition, not the reader's: a
// downstream task that reads a backlog (it restarted, or it lags) does not believe an old
// report because it reads it now.
//
// While it is believed, a caught-up upstream task holds the aligned time at the downstream
// task's stream time when its last report was read (compute); then at its own stream time.
// An upstream task that died says nothing more: the aligned time stays there, and windows
// wait for its successor, which replays what the dead one processed after its last commit
// (whose outputs may have been lost with it) and the input that came in meanwhile.
const caughtUpFor = time.Second

// alignment is a task's state of event-time alignment: as an upstream task (sinks), what
// it writes; as a downstream task (sources), what it heard.
type alignment struct {
	extra time.Duration // Config.EventTimeAlignment

	// Upstream: the repartition topics the task writes, with their partition counts.
	sinks    []alignedSink
	sentAt   time.Time
	sentTime int64
	sentIdle bool
	sentOnce bool

	// Downstream: the repartition topics the task reads, the number of upstream tasks, what
	// it heard of each, and the resulting aligned time (runtime.UnknownTime until it heard of
	// every upstream task), which holds until
	// the next report; latest is the newest writer's time of the reports heard.
	sources   map[string]bool
	upstreams int
	marks     map[runtime.TaskID]upstreamMark
	aligned   int64
	latest    int64
	// restored is the largest stream time the task's windowed operators took back from
	// their stores when the task started (a task that moved or restarted): what the task
	// had read before, although its own stream time starts again from the records it reads
	// now. A caught-up upstream task is not behind that either (see noteWatermark).
	restored int64
	// onAdvance are the operators to run when the aligned time moves on (windows that
	// emit on close, suppression buffers), with no record in hand.
	onAdvance []func() error

	// saved is the state as of the cut of the last committed transaction, which an aborted
	// transaction goes back to (cut, aborted).
	saved alignState
}

// alignState is the part of a task's alignment that the records it processes change: what
// it last wrote as an upstream task, and what it heard as a downstream task. Under
// exactly-once an aborted transaction puts it back as of the last commit, with the task's
// stream time: the reports written in the transaction are gone with it, and those read in
// it are read again. Without that, a downstream task that processes its records again
// would judge them by an aligned time that its upstream tasks' later reports had moved on,
// and drop as late records that it had taken the first time.
type alignState struct {
	sentAt   time.Time
	sentTime int64
	sentIdle bool
	sentOnce bool
	marks    map[runtime.TaskID]upstreamMark
	aligned  int64
	latest   int64
}

// snapshot returns the state as of now.
func (a *alignment) snapshot() alignState {
	return alignState{sentAt: a.sentAt, sentTime: a.sentTime, sentIdle: a.sentIdle, sentOnce: a.sentOnce,
		marks: maps.Clone(a.marks), aligned: a.aligned, latest: a.latest}
}

// cut implements txnHook: the state as of this cut is what an abort goes back to once
// the transaction that the cut ends has committed.
func (a *alignment) cut() func() {
	v := a.snapshot()
	return func() { a.saved = v }
}

// aborted implements txnHook: back to the state of the last commit.
func (a *alignment) aborted() {
	v := &a.saved
	a.sentAt, a.sentTime, a.sentIdle, a.sentOnce = v.sentAt, v.sentTime, v.sentIdle, v.sentOnce
	a.aligned, a.latest = v.aligned, v.latest
	clear(a.marks)
	maps.Copy(a.marks, v.marks)
}

// alignedSink is a repartition topic an upstream task writes its progress into.
type alignedSink struct {
	topic string
	keys  [][]byte // keys[p] hashes to partition p
}

// setUpAlignment prepares t's alignment for sub-topology nodes sub, if Config.
// EventTimeAlignment is set.
func (t *task) setUpAlignment(sub []*node) error {
	if t.h.align <= 0 {
		return nil
	}
	a := &alignment{extra: t.h.align, sources: map[string]bool{}, marks: map[runtime.TaskID]upstreamMark{}, aligned: math.MaxInt64, restored: runtime.UnknownTime}
	writers := map[int]bool{}
	for _, n := range sub {
		switch {
		case n.kind == kindSink && n.internal && isRepartition(n.sinkTopic):
			topic := internalTopic(t.appID, n.sinkTopic)
			_, _, parts, ok := t.env.Upstream(topic)
			if !ok {
				return fmt.Errorf("kstream: task %s: event-time alignment: the partition count of %q is not known", t.id, topic)
			}
			a.sinks = append(a.sinks, alignedSink{topic: topic, keys: watermarkKeys(parts)})
		case n.kind == kindSource && n.internal:
			for _, short := range n.topics {
				if !isRepartition(short) {
					continue
				}
				topic := internalTopic(t.appID, short)
				sub, tasks, _, ok := t.env.Upstream(topic)
				if !ok {
					return fmt.Errorf("kstream: task %s: event-time alignment: the writer of %q is not known", t.id, topic)
				}
				a.sources[topic] = true
				if !writers[sub] {
					writers[sub] = true
					a.upstreams += int(tasks)
				}
			}
		}
	}
	if len(a.sources) > 0 {
		a.aligned = runtime.UnknownTime
		// Windows are put ahead of the time that closes them by as much as the fastest
		// upstream task leads: the stores keep them that much longer (their changelogs'
		// codecs too: see compile).
		for name, s := range t.stores {
			if x, ok := s.(store.RetentionExtender); ok {
				t.stores[name] = x.WithExtraRetention(a.extra)
			}
		}
	}
	if len(a.sinks) == 0 && len(a.sources) == 0 {
		return nil
	}
	t.align = a
	a.saved = a.snapshot() // the state an abort before the first commit goes back to
	t.txnHooks = append(t.txnHooks, a)
	if len(a.sinks) > 0 {
		t.flushers = append(t.flushers, watermarkWriter{t})
	}
	return nil
}

// isRepartition reports whether the internal topic named short is a repartition topic.
func isRepartition(short string) bool { return strings.HasSuffix(short, "-repartition") }

// watermarkKeys returns, for a topic of n partitions, a key that the default partitioner
// places on each partition.
func watermarkKeys(n int32) [][]byte {
	keys := make([][]byte, n)
	left := n
	for i := 0; left > 0; i++ {
		k := []byte("kstream-watermark-" + strconv.Itoa(i))
		if p := partition.ForKey(k, n); keys[p] == nil {
			keys[p] = k
			left--
		}
	}
	return keys
}

// eventTime is the time by which a windowed operator of t whose own stream time is
// observed judges lateness and closes windows: observed, or the aligned time if smaller.
func (t *task) eventTime(observed int64) int64 {
	if !t.aligned() {
		return observed
	}
	return min(observed, t.align.aligned)
}

// aligned reports whether t judges event time by its upstream tasks' progress.
func (t *task) aligned() bool { return t.align != nil && len(t.align.sources) > 0 }

// onAlignedAdvance registers fn to run when t's aligned time moves on (only under
// alignment of a downstream task).
func (t *task) onAlignedAdvance(fn func() error) {
	if t.aligned() {
		t.align.onAdvance = append(t.align.onAdvance, fn)
	}
}

// watermark decodes r if it is a control record of alignment.
func watermark(r *kgo.Record) (runtime.TaskID, upstreamMark, bool, error) {
	for _, h := range r.Headers {
		if h.Key != watermarkHeader {
			continue
		}
		v := r.Value
		if len(v) != watermarkLen || v[0] != watermarkVersion {
			return runtime.TaskID{}, upstreamMark{}, true, fmt.Errorf("kstream: a malformed event-time alignment record at topic %q partition %d offset %d (%d bytes)", r.Topic, r.Partition, r.Offset, len(v))
		}
		id := runtime.TaskID{SubTopology: int(int32(binary.BigEndian.Uint32(v[1:]))), Partition: int32(binary.BigEndian.Uint32(v[5:]))}
		return id, upstreamMark{time: int64(binary.BigEndian.Uint64(v[9:])), caughtUp: v[17] == 1, written: int64(binary.BigEndian.Uint64(v[18:]))}, true, nil
	}
	return runtime.TaskID{}, upstreamMark{}, false, nil
}

// noteWatermark takes in what an upstream task said of its progress, and runs the
// operators waiting for the aligned time if it moved on.
func (t *task) noteWatermark(id runtime.TaskID, m upstreamMark) error {
	a := t.align
	// The latest report holds, also when it is behind the one before: a task that took
	// over from one that died replays from its last commit, and what it replays may
	// include outputs the dead one lost; windows wait for them (at-least-once may then
	// count an output twice, never miss one).
	// What the task had read when it read this: its stream time, or, if it started again
	// from its stores (it moved, or restarted), the stream time they had, if later. Without
	// the latter, a task that moved after reading its partition's last record (its own
	// stream time then stays below that record's for good) would hold the aligned time, and
	// the windows that record closed, below it for ever.
	m.readAt = max(t.streamTime, a.restored)
	a.marks[id] = m
	a.latest = max(a.latest, m.written)
	prev := a.aligned
	a.aligned = a.compute()
	if a.aligned == prev || len(a.onAdvance) == 0 {
		return nil
	}
	t.punctuating, t.hasTS, t.curTS = true, true, max(t.eventTime(t.streamTime), 0)
	defer func() { t.punctuating, t.hasTS = false, false }()
	for _, fn := range a.onAdvance {
		if err := fn(); err != nil {
			return err
		}
		if t.fatal != nil {
			return t.fatal
		}
	}
	return nil
}

// compute is the aligned time: unknown until every upstream task was heard of; else the
// smallest, over the upstream tasks, of the stream time of one that is not caught up, and,
// for one that said it was, of the downstream task's own stream time when it read that (a
// caught-up task is not behind what the downstream task had read then, and says so again
// every caughtUpResend while it is; one that died says nothing more, and the aligned time
// stays where it was when its last word was read, until its successor reports). A caught-up
// task whose last word is stale (see caughtUpFor) counts with its stream time.
func (a *alignment) compute() int64 {
	if len(a.marks) < a.upstreams {
		return runtime.UnknownTime
	}
	aligned := int64(math.MaxInt64)
	stale := a.latest - caughtUpFor.Milliseconds()
	for _, m := range a.marks {
		if m.caughtUp && m.written >= stale {
			aligned = min(aligned, m.readAt)
		} else {
			aligned = min(aligned, m.time)
		}
	}
	return aligned
}

// watermarkWriter is the flusher that writes an upstream task's progress into its
// repartition topics: at every commit, and every watermarkEvery when it changed (when it
// did not, every caughtUpResend while it is caught up, every watermarkResend otherwise).
type watermarkWriter struct{ t *task }

// due is watermarkEvery after the last report while the stream time moves, the resend
// interval after it otherwise (a task that only became caught up tells so then, or at the
// next commit): an idle task does not wake up every watermarkEvery (under exactly-once,
// each wake-up is a transaction).
func (w watermarkWriter) due() time.Time {
	a := w.t.align
	switch {
	case w.t.env.Holding():
		// No report while the task's outputs are held (see TaskEnv.Holding): the first
		// turn after the next transaction begins writes it, after the held outputs.
		return time.Time{}
	case a.sentAt.IsZero():
		return w.t.env.Now()
	case a.sentOnce && w.t.streamTime == a.sentTime:
		return a.sentAt.Add(a.resend())
	}
	return a.sentAt.Add(watermarkEvery)
}

// resend is how long an upstream task's last report holds when nothing changed.
func (a *alignment) resend() time.Duration {
	if a.sentIdle {
		return caughtUpResend
	}
	return watermarkResend
}

func (w watermarkWriter) flush(context.Context) error {
	t, a := w.t, w.t.align
	if t.env.Holding() {
		return nil // see due
	}
	now := t.env.Now()
	idle := t.env.CaughtUp(t.id)
	st := t.streamTime
	changed := !a.sentOnce || st != a.sentTime || idle != a.sentIdle
	if !changed && now.Sub(a.sentAt) < a.resend() {
		return nil
	}
	// A task that processed nothing yet and is not caught up says so too (stream time
	// unknown): downstream tasks wait for it, as they must for a task that took over from
	// one that died.
	a.sentAt, a.sentTime, a.sentIdle, a.sentOnce = now, st, idle, true
	v := make([]byte, watermarkLen)
	v[0] = watermarkVersion
	binary.BigEndian.PutUint32(v[1:], uint32(int32(t.id.SubTopology)))
	binary.BigEndian.PutUint32(v[5:], uint32(t.id.Partition))
	binary.BigEndian.PutUint64(v[9:], uint64(st))
	if idle {
		v[17] = 1
	}
	binary.BigEndian.PutUint64(v[18:], uint64(now.UnixMilli()))
	ts := time.UnixMilli(max(st, 0))
	for _, s := range a.sinks {
		for p, k := range s.keys {
			o := &runtime.OutRecord{Operator: "event-time alignment", Record: kgo.Record{Topic: s.topic, Partition: int32(p), Key: k, Value: v, Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: watermarkHeader}}}}
			t.env.Produce(o)
		}
	}
	return nil
}
