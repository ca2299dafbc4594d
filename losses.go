package kstream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
)

// Nothing is dropped silently: every record an operator drops as late, and every final
// result it never emits, is counted by operator and reason ([Stats].Losses, the metrics
// kstream_operator_dropped_records_total and kstream_operator_lost_results_total, the ops
// page) and logged at warn, at most one line per operator every lossLogEvery for its dropped
// records and one for its lost final results, with the count of the lines left out since
// (they go to the debug level).

// OperatorLoss counts what one operator lost for one reason, all tasks of the instance
// together, since the instance started: the input records it dropped, or (LostResults)
// the final results it never emitted. See docs/metrics.md for the reasons.
type OperatorLoss struct {
	// Operator is the operator's name, as [Topology.Describe] shows it.
	Operator string
	// Reason is why: for dropped records, the reasons of the metric
	// kstream_task_dropped_records_total ("expired_window" for a record too late for its
	// window, "expired_history" for a versioned table's write older than its history
	// retention, "null_key", "skipped_deserialization_error" and
	// "skipped_processing_error" for a record an error handler skipped or dead-lettered, at
	// the operator that failed on it, ...); for lost final results, "window_expired" (a
	// window that expired from its store before it closed). The skipped_* reasons are not in
	// [Stats].DroppedRecords.
	Reason string
	// LostResults says that Count counts final results that were never emitted; otherwise
	// it counts input records dropped.
	LostResults bool
	Count       int64
}

// Reasons of losses counted from the operators' files.
const lostWindowExpired = runtime.LostWindowExpired

// lossLogEvery is the shortest time between two warn lines about the losses of one
// operator (records dropped as late, final results lost).
const lossLogEvery = 10 * time.Second

// lossLog limits the warn lines about losses to one per operator every lossLogEvery, all
// tasks together, for dropped records, and one for lost final results (rarer, and not to be
// hidden by a storm of late records). It is safe for concurrent use.
type lossLog struct {
	mu   sync.Mutex
	byOp map[lossLogKey]*lossLimit
}

type lossLogKey struct {
	operator string
	lost     bool
}

// lossLimit is the limit of one operator's warn lines: when the next may be written (Unix
// nanoseconds of the task's clock), and how many were left out since the last one.
type lossLimit struct {
	next       atomic.Int64
	suppressed atomic.Int64
}

func (l *lossLog) limit(operator string, lost bool) *lossLimit {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byOp == nil {
		l.byOp = map[lossLogKey]*lossLimit{}
	}
	k := lossLogKey{operator, lost}
	x := l.byOp[k]
	if x == nil {
		x = &lossLimit{}
		l.byOp[k] = x
	}
	return x
}

// allow reports whether a warn line may be written at now and, if so, how many were left
// out since the last one; otherwise it counts one more left out.
func (x *lossLimit) allow(now time.Time) (bool, int64) {
	ns := now.UnixNano()
	next := x.next.Load()
	if ns >= next && x.next.CompareAndSwap(next, ns+int64(lossLogEvery)) {
		return true, x.suppressed.Swap(0)
	}
	x.suppressed.Add(1)
	return false, 0
}

// lossKey names the counter of one operator's losses for one reason in a task.
type lossKey struct {
	n      *node
	lost   bool
	reason string
}

// lossCounter is what a task keeps of one lossKey: the counter and its operator's log limit.
type lossCounter struct {
	n   *atomic.Int64
	lim *lossLimit
}

// lossFor returns the counter of operator n's losses for reason (lost: final results,
// else dropped records) in task t.
func (t *task) lossFor(n *node, lost bool, reason string) lossCounter {
	k := lossKey{n, lost, reason}
	if c, ok := t.losses[k]; ok {
		return c
	}
	counts := t.h.counts
	if counts == nil {
		counts = runtime.NewOperatorCounts() // a task made without compile (internal tests)
	}
	c := lossCounter{
		n:   counts.Counter(runtime.OperatorCountKey{Task: t.id, Operator: n.name, Lost: lost, Reason: reason}),
		lim: t.h.lossLog.limit(n.name, lost),
	}
	if t.losses == nil {
		t.losses = map[lossKey]lossCounter{}
	}
	t.losses[k] = c
	return c
}

// late describes a record an operator dropped as late (or a final result it lost), for its
// log line: the record's timestamp, the operator's stream time, how late it was (ms: how
// long before the close time the window ended, or before the retention's start the record
// was), and the window, if any.
type late struct {
	reason         string
	ts, streamTime int64
	lateBy         int64
	hasWindow      bool
	start, end     int64
	store          string
}

func (l late) attrs(t *task, n *node) []any {
	attrs := []any{"operator", n.name, "task", t.id.String(), "reason", l.reason, "timestamp", l.ts, "stream_time", l.streamTime, "late_by_ms", l.lateBy}
	if l.hasWindow {
		attrs = append(attrs, "window_start", l.start, "window_end", l.end)
	}
	if l.store != "" {
		attrs = append(attrs, "store", l.store)
	}
	if r := t.cur; r != nil {
		attrs = append(attrs, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	}
	return attrs
}

// dropLate counts the record in hand as dropped late by operator n (in Stats.DroppedRecords,
// the task's and the operator's dropped-records metrics) and logs it (see lossLog).
func (t *task) dropLate(n *node, l late) {
	t.env.RecordDropped()
	t.droppedFor(l.reason)
	t.logLoss(n, t.lossFor(n, false, l.reason), "kstream: dropping a late record", l)
}

// loseResult counts a final result that operator n will never emit (its window expired
// before it closed) and logs it (see lossLog). l.ts is the window's timestamp.
func (t *task) loseResult(n *node, l late) {
	t.logLoss(n, t.lossFor(n, true, l.reason), "kstream: a window expired before it closed; its final result is lost", l)
}

func (t *task) logLoss(n *node, c lossCounter, msg string, l late) {
	c.n.Add(1)
	ok, suppressed := c.lim.allow(t.env.Now())
	if ok {
		t.log.Warn(msg, append(l.attrs(t, n), "suppressed", suppressed)...)
	} else if t.log.Enabled(context.Background(), slog.LevelDebug) {
		t.log.Debug(msg, l.attrs(t, n)...)
	}
}

// lossesOf sums a table's counts over tasks.
func lossesOf(c *runtime.OperatorCounts) []OperatorLoss {
	var out []OperatorLoss
	for _, oc := range c.Snapshot() { // sorted by operator, lost, reason, then task
		if k := len(out) - 1; k >= 0 && out[k].Operator == oc.Operator && out[k].LostResults == oc.Lost && out[k].Reason == oc.Reason {
			out[k].Count += oc.N
			continue
		}
		out = append(out, OperatorLoss{Operator: oc.Operator, Reason: oc.Reason, LostResults: oc.Lost, Count: oc.N})
	}
	return out
}

// lateJoinRecord counts and logs the record in hand, of timestamp ts, that the join window
// store st of operator n (a KSTREAM-WINDOWED node) dropped because its window's segment had
// expired: Kafka Streams' "Skipping record for expired segment". A join window has no
// close of its own: the record is late by how far it falls before the store's retention.
func (t *task) lateJoinRecord(n *node, st interface {
	Name() string
	Retention() time.Duration
	ObservedStreamTime() (time.Time, bool, error)
}, ts int64) error {
	now, _, err := st.ObservedStreamTime()
	if err != nil {
		return err
	}
	streamTime := now.UnixMilli()
	t.dropLate(n, late{reason: dropExpiredWindow, ts: ts, streamTime: streamTime, lateBy: streamTime - st.Retention().Milliseconds() - ts, store: st.Name()})
	return nil
}
