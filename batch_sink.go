package kstream

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BatchConfig configures a [KStream.ForeachBatch] sink. The zero value takes every default.
type BatchConfig struct {
	// MaxRecords is the most records handed to the function at once: a batch is handed over
	// as soon as it has this many (default 500).
	MaxRecords int
	// MaxWait is the longest a record waits in a partial batch, in wall-clock time from
	// the first record of the batch, before the batch is handed over (default 1s). The
	// batch of a task whose turn is busy may wait a little longer: it is handed over at the
	// task's next turn (in the test driver, when [kstreamtest.Driver.AdvanceWallClockTime]
	// moves the clock past it).
	MaxWait time.Duration
	// Retry says how a batch the function failed is handed over again.
	Retry BatchRetry
}

// BatchRetry is the retry policy of a [KStream.ForeachBatch] sink: exponential backoff, from
// InitialBackoff, doubling after every failed attempt up to MaxBackoff, for MaxAttempts
// calls in all.
type BatchRetry struct {
	// MaxAttempts is how many times a batch is handed to the function, the first call
	// included, before the processing error handler decides (default 5; 1 never retries).
	MaxAttempts int
	// InitialBackoff is the wait after the first failed attempt (default 100ms).
	InitialBackoff time.Duration
	// MaxBackoff bounds every wait (default 10s).
	MaxBackoff time.Duration
}

// Defaults of BatchConfig.
const (
	defaultBatchRecords  = 500
	defaultBatchWait     = time.Second
	defaultBatchAttempts = 5
	defaultBatchBackoff  = 100 * time.Millisecond
	defaultBatchMaxBack  = 10 * time.Second
)

// withDefaults returns c with its zero fields set to the defaults, or an error naming the
// field that is out of range.
func (c BatchConfig) withDefaults() (BatchConfig, error) {
	switch {
	case c.MaxRecords < 0:
		return c, fmt.Errorf("BatchConfig.MaxRecords is %d; it must not be negative (0: the default %d)", c.MaxRecords, defaultBatchRecords)
	case c.MaxWait < 0:
		return c, fmt.Errorf("BatchConfig.MaxWait is %s; it must not be negative (0: the default %s)", c.MaxWait, defaultBatchWait)
	case c.Retry.MaxAttempts < 0:
		return c, fmt.Errorf("BatchRetry.MaxAttempts is %d; it must not be negative (0: the default %d)", c.Retry.MaxAttempts, defaultBatchAttempts)
	case c.Retry.InitialBackoff < 0 || c.Retry.MaxBackoff < 0:
		return c, fmt.Errorf("BatchRetry backoffs (%s, %s) must not be negative", c.Retry.InitialBackoff, c.Retry.MaxBackoff)
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = defaultBatchRecords
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultBatchWait
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = defaultBatchAttempts
	}
	if c.Retry.InitialBackoff == 0 {
		c.Retry.InitialBackoff = defaultBatchBackoff
	}
	if c.Retry.MaxBackoff == 0 {
		c.Retry.MaxBackoff = max(defaultBatchMaxBack, c.Retry.InitialBackoff)
	}
	if c.Retry.MaxBackoff < c.Retry.InitialBackoff {
		return c, fmt.Errorf("BatchRetry.MaxBackoff (%s) is less than InitialBackoff (%s)", c.Retry.MaxBackoff, c.Retry.InitialBackoff)
	}
	return c, nil
}

// BatchRecord is one record of a batch handed to a [KStream.ForeachBatch] function: the
// record as it reached the sink, and where the input record whose processing brought it
// there was read.
type BatchRecord[K, V any] struct {
	Record[K, V]
	// Topic, Partition and Offset locate the input record. A record forwarded by a
	// punctuator has none: Topic "", Partition and Offset -1.
	Topic     string
	Partition int32
	Offset    int64
}

// OffsetRange is the input records of one partition in a batch: offsets First to Last,
// both included (records of the partition that did not reach the sink may lie between).
type OffsetRange struct {
	Topic       string
	Partition   int32
	First, Last int64
}

// BatchError is a batch that the function of a [KStream.ForeachBatch] sink did not accept
// after every attempt (or that it panicked on). The processing error handler sees it as the
// Err of each record of the batch; when the handler fails the application, [App.Run] returns
// a [*RecordError] that wraps it. Unwrap returns the function's last error.
type BatchError struct {
	// Operator is the sink's name.
	Operator string
	// Records is the size of the batch; Ranges its input records, by partition in the
	// order they first appear in the batch (records forwarded by punctuators have none).
	Records int
	Ranges  []OffsetRange
	// Attempts is how many times the batch was handed over.
	Attempts int
	Err      error
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch sink %s: a batch of %d records (", e.Operator, e.Records)
	for i, r := range e.Ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "topic %q partition %d offsets %d-%d", r.Topic, r.Partition, r.First, r.Last)
	}
	if len(e.Ranges) == 0 {
		b.WriteString("no input records")
	}
	fmt.Fprintf(&b, ") failed after %d attempt", e.Attempts)
	if e.Attempts != 1 {
		b.WriteString("s")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the function's last error.
func (e *BatchError) Unwrap() error { return e.Err }

// ForeachBatch ends the stream in a sink that hands its records to fn in batches, for bulk
// writes to a database or an HTTP API: up to cfg.MaxRecords records of one task at once, in
// the order the task processed them, and a partial batch once its first record has waited
// cfg.MaxWait. fn runs on the task's goroutine, one batch at a time per task (batches of
// different tasks run in parallel). The batch slice is fn's to keep; when fn fails, the
// same slice is handed over again, so fn must not change it.
//
// Delivery is at-least-once and tied to commits: before the task's input offsets are
// committed, its pending partial batch is handed over and must be accepted (fn returned
// nil), so a committed offset never covers a record whose batch was not accepted. A commit
// therefore also flushes: at every [Config.CommitInterval], when the task's partitions are
// revoked in a rebalance (before they move to another instance), and at shutdown. Records
// of a task that is lost without a commit (a crash, a partition lost from the group) were
// not committed and are processed again, so a batch may be handed over again after a
// restart: fn should be idempotent (an upsert keyed by topic, partition and offset, say).
//
// ctx of fn is done when the application shuts down or, for the batch flushed by a commit,
// when the commit's time ([Config.CloseTimeout]) is up; a batch cut short that way is not a
// failure: it stays pending, and the commit waits for it (or, if the commit's time is up,
// does not happen, and the records are processed again).
//
// When fn returns an error (or panics), the batch is handed over again after a backoff
// (cfg.Retry, waits ended early by ctx), up to cfg.Retry.MaxAttempts times. If it still
// fails, [Config.ProcessingErrorHandler] decides for each record of the batch, with a
// [*BatchError] as the error: [Fail] stops the application ([App.Run] returns a
// [*RecordError] wrapping the BatchError, which names the operator and the topic,
// partition and offset range of the batch, and the batch's offsets are not committed);
// [Continue] skips the record; [DeadLetter] writes it to the dead-letter topic.
//
// Under exactly-once ([ExactlyOnce]) fn's writes are outside Kafka's transaction, so they
// are at-least-once: a batch is handed over before the transaction commits, and a
// transaction that aborts has its records processed again, which hands them over again.
//
// Kafka Streams has no batch sink (a Java application writes batches from a processor with
// a punctuator, with no tie to commits); this is the replaced library's micro-batch mode,
// done the kstream way. Options: [Named].
func (s KStream[K, V]) ForeachBatch(fn func(ctx context.Context, batch []BatchRecord[K, V]) error, cfg BatchConfig, opts ...Option) {
	c := s.b.options("ForeachBatch", opts)
	n := &node{kind: kindProcessor}
	s.b.addNode(n, "FOREACHBATCH", c.name, s.n)
	if fn == nil {
		s.b.errorf("ForeachBatch (operator %s): the function is nil", n.name)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		s.b.errorf("ForeachBatch (operator %s): %w", n.name, err)
	}
	n.instantiate = func(t *task) (any, error) {
		b := &batchSink[K, V]{t: t, n: n, fn: fn, cfg: cfg}
		t.flushers = append(t.flushers, b)
		t.txnHooks = append(t.txnHooks, b)
		t.closers = append(t.closers, namedCloser{n.name, b})
		return b.add, nil
	}
}

// flusher is an operator that holds work which the task's commit must cover: the task
// finishes it in PreCommit, and when its wall-clock time is due (NextPunctuation,
// Punctuate).
type flusher interface {
	// flush finishes the work; an error is ctx's (the work stays pending). A failure the
	// error handler makes fatal is in t.fatal.
	flush(ctx context.Context) error
	// due is when the work must be done by wall-clock time; zero if there is none.
	due() time.Time
}

// storeWriter is an operator that keeps its state in memory and writes to its stores, at
// each commit's cut, what changed since the last one (a suppression's buffer): the task
// has it do so last in PreCommit, once nothing the commit covers can change that state,
// and before the runtime logs and writes the stores.
type storeWriter interface {
	// writeStore writes the changed state to the operator's stores; an error stops the
	// application.
	writeStore() error
}

// PreCommit implements runtime.Task: each record cache forwards what it holds, each async
// operator waits for its calls and forwards their outputs, each batch sink hands over its
// pending batch, and then each operator that keeps its state in memory writes it to its
// stores (storeWriter).
func (t *task) PreCommit(ctx context.Context) error {
	t.fatal = nil
	// The record caches first: what they forward may reach a batch sink. Async operators
	// with them: every call of a record the commit covers must have finished, and its
	// outputs been forwarded; a periodic at-least-once commit holds its offsets back below
	// the calls still running instead (async.go).
	if err := t.drainAsync(ctx, !runtime.PeriodicCommit(ctx)); err != nil {
		return fmt.Errorf("kstream: task %s: %w", t.id, err)
	}
	if t.fatal != nil {
		return t.fatal
	}
	for _, f := range t.flushers {
		if err := f.flush(ctx); err != nil {
			return fmt.Errorf("kstream: task %s: %w", t.id, err)
		}
		if t.fatal != nil {
			return t.fatal
		}
	}
	for _, w := range t.storeWriters {
		if err := w.writeStore(); err != nil {
			return fmt.Errorf("kstream: task %s: %w", t.id, err)
		}
	}
	return nil
}

// nextFlush is the earliest time a batch sink of t must hand over its batch; zero if none
// holds one.
func (t *task) nextFlush() time.Time {
	var next time.Time
	for _, f := range t.flushers {
		if at := f.due(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// flushDue hands over the batches whose longest wait is over at now.
func (t *task) flushDue(now time.Time) {
	for _, f := range t.flushers {
		if t.fatal != nil {
			return
		}
		if at := f.due(); !at.IsZero() && !at.After(now) {
			// Cut short by the shutdown, the batch stays pending for the final commit.
			_ = f.flush(t.env.Context())
		}
	}
}

// batchSink is the per-task state of a ForeachBatch sink.
type batchSink[K, V any] struct {
	t   *task
	n   *node
	fn  func(context.Context, []BatchRecord[K, V]) error
	cfg BatchConfig

	// pending are the records not yet accepted, in order; raws their input records (nil for
	// a punctuator's), for the error handler. pending may hold more than MaxRecords only
	// after a flush was cut short by a shutdown; it is then handed over in slices.
	pending []BatchRecord[K, V]
	raws    []*kgo.Record
	// since is the wall-clock time the oldest pending record arrived (zero when none).
	since time.Time
}

// add is the sink's input: r joins the pending batch, which is handed over once full.
func (b *batchSink[K, V]) add(r Record[K, V]) {
	t := b.t
	br := BatchRecord[K, V]{Record: r, Partition: -1, Offset: -1}
	if cur := t.cur; cur != nil {
		br.Topic, br.Partition, br.Offset = cur.Topic, cur.Partition, cur.Offset
	}
	if b.pending == nil {
		b.pending = make([]BatchRecord[K, V], 0, min(b.cfg.MaxRecords, 4096))
	}
	if len(b.pending) == 0 {
		b.since = t.env.Now()
	}
	b.pending = append(b.pending, br)
	b.raws = append(b.raws, t.cur)
	if len(b.pending) >= b.cfg.MaxRecords {
		ctx := t.env.Context()
		if ctx.Err() == nil {
			_ = b.flush(ctx) // cut short by the shutdown: the final commit hands it over
		}
	}
}

// due implements flusher.
func (b *batchSink[K, V]) due() time.Time {
	if len(b.pending) == 0 {
		return time.Time{}
	}
	return b.since.Add(b.cfg.MaxWait)
}

// flush implements flusher: it hands over the pending records, MaxRecords at a time.
func (b *batchSink[K, V]) flush(ctx context.Context) error {
	for len(b.pending) > 0 && b.t.fatal == nil {
		n := min(len(b.pending), b.cfg.MaxRecords)
		batch := b.pending[:n:n]
		attempts, err := b.deliver(ctx, batch)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("operator %s: %d records not handed over: %w", b.n.name, len(b.pending), ctx.Err())
		}
		if err != nil {
			b.failed(batch, b.raws[:n], attempts, err)
		}
		b.take(n)
	}
	return nil
}

// take drops the first n pending records (handed over, or decided by the error handler).
// The batch handed over belongs to the function now, so the rest moves to a new slice.
func (b *batchSink[K, V]) take(n int) {
	rest := len(b.pending) - n
	if rest == 0 {
		b.pending = nil
		clear(b.raws)
		b.raws = b.raws[:0]
		b.since = time.Time{}
		return
	}
	next := make([]BatchRecord[K, V], rest, max(rest, min(b.cfg.MaxRecords, 4096)))
	copy(next, b.pending[n:])
	b.pending = next
	copy(b.raws, b.raws[n:])
	clear(b.raws[rest:])
	b.raws = b.raws[:rest]
	// The rest keeps the arrival time of the oldest record handed over, so it is not
	// held longer than MaxWait either.
}

// deliver hands batch to the function until it accepts it or the attempts run out, waiting
// the backoff between attempts. It returns the number of attempts and the last error (nil
// once accepted); with ctx done it stops at once.
func (b *batchSink[K, V]) deliver(ctx context.Context, batch []BatchRecord[K, V]) (int, error) {
	backoff := b.cfg.Retry.InitialBackoff
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return attempt - 1, err
		}
		err := b.call(ctx, batch)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil || attempt >= b.cfg.Retry.MaxAttempts {
			return attempt, err
		}
		b.t.log.Warn("kstream: batch sink: the function failed; retrying", "operator", b.n.name, "task", b.t.id.String(),
			"records", len(batch), "attempt", attempt, "max_attempts", b.cfg.Retry.MaxAttempts, "backoff", backoff, "err", err)
		if timer == nil {
			timer = time.NewTimer(backoff)
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return attempt, err
		case <-timer.C:
		}
		backoff = min(2*backoff, b.cfg.Retry.MaxBackoff)
	}
}

// call calls the function, turning a panic into an error.
func (b *batchSink[K, V]) call(ctx context.Context, batch []BatchRecord[K, V]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("in the batch function: %w", &panicError{p, debug.Stack()})
		}
	}()
	return b.fn(ctx, batch)
}

// failed lets the processing error handler decide for each record of a batch that the
// function did not accept: fail (t.fatal is set, naming the batch), skip or dead-letter.
func (b *batchSink[K, V]) failed(batch []BatchRecord[K, V], raws []*kgo.Record, attempts int, cause error) {
	t := b.t
	berr := &BatchError{Operator: b.n.name, Records: len(batch), Ranges: offsetRanges(batch), Attempts: attempts, Err: cause}
	cur, curTS, hasTS := t.cur, t.curTS, t.hasTS
	defer func() { t.cur, t.curTS, t.hasTS = cur, curTS, hasTS }()
	for i, r := range batch {
		if t.fatal != nil {
			return
		}
		ec := ErrorContext{Kind: ProcessingError, Operator: b.n.name, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Headers: r.Headers, Timestamp: r.Timestamp, Err: berr}
		if raw := raws[i]; raw != nil {
			ec.Key, ec.Value, ec.Headers = raw.Key, raw.Value, fromKgoHeaders(raw.Headers)
		}
		// A dead-letter record's source is the failed record (see task.handle).
		t.cur, t.hasTS = raws[i], false
		t.handle(b.n, t.h.proc, ec)
	}
}

// offsetRanges returns the input records of batch as offset ranges per partition, in the
// order the partitions first appear.
func offsetRanges[K, V any](batch []BatchRecord[K, V]) []OffsetRange {
	var out []OffsetRange
	for _, r := range batch {
		if r.Offset < 0 {
			continue
		}
		i := 0
		for i < len(out) && (out[i].Topic != r.Topic || out[i].Partition != r.Partition) {
			i++
		}
		if i == len(out) {
			out = append(out, OffsetRange{Topic: r.Topic, Partition: r.Partition, First: r.Offset, Last: r.Offset})
			continue
		}
		out[i].First, out[i].Last = min(out[i].First, r.Offset), max(out[i].Last, r.Offset)
	}
	return out
}

// discard forgets the pending records: their offsets are not committed, so they are
// processed (and handed over) again.
func (b *batchSink[K, V]) discard(why string) {
	if len(b.pending) > 0 {
		b.t.log.Info("kstream: batch sink: dropping the pending batch; its records are processed again from the last commit",
			"operator", b.n.name, "task", b.t.id.String(), "records", len(b.pending), "why", why)
	}
	b.pending = nil
	clear(b.raws)
	b.raws = b.raws[:0]
	b.since = time.Time{}
}

// cut implements txnHook: a commit hands over the pending batch first (PreCommit),
// so there is nothing to do.
func (b *batchSink[K, V]) cut() func() { return nil }

// aborted implements txnHook: the aborted transaction's records are processed again, so a
// batch still pending would hand them over twice.
func (b *batchSink[K, V]) aborted() { b.discard("transaction aborted") }

// Close implements closer. A task is closed after its final commit, which handed the batch
// over; a batch still pending was not committed (the task was lost, or the commit failed).
func (b *batchSink[K, V]) Close() error {
	b.discard("task closed without a commit")
	return nil
}
