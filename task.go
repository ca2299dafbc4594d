package kstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rawRecord is a record as it came from Kafka.
type rawRecord = kgo.Record

// handlers are the application's error handlers, and its default timestamp extractor.
type handlers struct {
	deser, proc, prod ErrorHandler
	ts                TimestampExtractor
	// eos is set under exactly-once: a task's stores then hold exactly its committed state.
	eos bool
	// profileOps is Config.ProfileOperators: operators run under an operator pprof label.
	profileOps bool
	// counts are what the operators dropped or lost (losses.go), shared with the runtime's
	// metrics; lossLog limits their log lines.
	counts  *runtime.OperatorCounts
	lossLog lossLog
	// align is Config.EventTimeAlignment (align.go); 0 without.
	align time.Duration
	// cache is the record caches' budget (Config.CacheMaxBytes); nil without caches.
	cache *cacheBudget
	// async is what the async operators of the instance share (async_metrics.go).
	async *asyncShared
	// txnTimeout is Config.TransactionTimeout (its default when zero), which bounds an
	// exactly-once commit's wait for async calls.
	txnTimeout time.Duration
}

// task is the typed processing state of one task: the instantiated operators of its
// sub-topology. It is used by one goroutine at a time.
type task struct {
	// patterns are the sources of StreamPattern; a topic they match is added to sources
	// (and its extractor to extractors) when its first record comes.
	patterns []patternSource
	id       runtime.TaskID
	appID    string
	env      runtime.TaskEnv
	log      *slog.Logger
	h        *handlers
	sources  map[string]sourceFn
	// extractors are the timestamp extractors of the sources that have their own, by topic.
	extractors map[string]TimestampExtractor
	inst       map[*node]any
	stores     map[string]any // typed stores by name
	closers    []namedCloser

	cur   *rawRecord // input record being processed
	fatal error      // set when a record failure must stop the application
	// curTS is the timestamp (ms) of the record being processed, or the time of the
	// punctuation being run (then punctuating is set); hasTS says there is one. Records
	// forwarded by processors without a timestamp get it.
	curTS       int64
	hasTS       bool
	punctuating bool
	// idleEmitted is set when an aggregation emitted on idleness (CloseWhenIdle) in a
	// wall-clock turn: Punctuate reports it, so that the outputs are committed.
	idleEmitted bool
	// streamTime is the largest timestamp processed (ms), runtime.UnknownTime before the
	// first record; savedStreamTime is its value at the last commit.
	streamTime, savedStreamTime int64
	// cut is the state taken by the last Cut, saved by Committed.
	cut          taskCut
	scheds       []*schedule   // punctuation schedules (punctuate.go)
	txnHooks     []txnHook     // operators' state that follows commits and aborts
	flushers     []flusher     // operators that hold work a commit must cover (batch_sink.go)
	caches       []recordCache // record caches of the task's stores, in topological order (recordcache.go)
	storeWriters []storeWriter // operators that write their in-memory state to their stores at commits (suppress.go)
	asyncs       []asyncRunner // async operators (async.go)
	schedSeq     int
	met          *runtime.TaskMetrics    // Config.Metrics (metrics.go); nil without
	losses       map[lossKey]lossCounter // the operators' loss counters (losses.go)
	// align is the task's event-time alignment (align.go); nil without. repartitions are
	// the repartition topics it reads, whose control records of alignment it never
	// processes.
	align        *alignment
	repartitions map[string]bool
	// labels is the context of the task's pprof labels and labelCur that of the operator
	// running, when Config.ProfileOperators is set (profile.go); nil otherwise.
	labels, labelCur context.Context
}

func newTask(appID string, h *handlers, sub []*node, env runtime.TaskEnv, id runtime.TaskID, backends map[string]store.Backend) (*task, error) {
	t := &task{id: id, appID: appID, env: env, log: env.Logger(), h: h, sources: map[string]sourceFn{}, extractors: map[string]TimestampExtractor{},
		inst: map[*node]any{}, stores: map[string]any{}, streamTime: runtime.UnknownTime, savedStreamTime: runtime.UnknownTime}
	t.met = taskMetrics(env, id)
	if h.profileOps {
		t.labels = runtime.TaskLabels(context.Background(), id)
		t.labelCur = t.labels
	}
	for _, n := range sub {
		for _, d := range n.stores {
			if _, done := t.stores[d.name]; done {
				continue
			}
			b, ok := backends[d.name]
			if !ok {
				return nil, fmt.Errorf("kstream: task %s: the runtime did not open store %q", id, d.name)
			}
			t.stores[d.name] = d.typed(b)
		}
		for _, d := range n.globals {
			if _, done := t.stores[d.name]; done {
				continue
			}
			b, err := env.GlobalStore(d.name)
			if err != nil {
				return nil, fmt.Errorf("kstream: task %s: %w", id, err)
			}
			t.stores[d.name] = d.typed(b)
		}
	}
	// Before the operators exist: they register with it, and its stores keep their windows
	// longer.
	if err := t.setUpAlignment(sub); err != nil {
		return nil, err
	}
	for _, n := range sub {
		if n.kind != kindSource {
			continue
		}
		in, err := t.instance(n)
		if err != nil {
			return nil, err
		}
		if n.pattern != nil {
			t.patterns = append(t.patterns, patternSource{re: runtime.AnchoredPattern(n.pattern), src: labeledSource(t, n, in.(sourceFn)), extractor: n.extractor})
		}
		for _, short := range n.topics {
			topic := short
			if n.internal {
				topic = internalTopic(appID, short)
			}
			t.sources[topic] = labeledSource(t, n, in.(sourceFn))
			if n.internal && isRepartition(short) {
				if t.repartitions == nil {
					t.repartitions = map[string]bool{}
				}
				t.repartitions[topic] = true
			}
			if n.extractor != nil {
				t.extractors[topic] = n.extractor
			}
		}
	}
	return t, nil
}

// instance returns n's per-task input, creating it on first use.
func (t *task) instance(n *node) (any, error) {
	if in, ok := t.inst[n]; ok {
		return in, nil
	}
	in, err := n.instantiate(t)
	if err != nil {
		return nil, err
	}
	t.inst[n] = in
	return in, nil
}

// Process implements runtime.Task: the record, whose timestamp is ts, then the stream-time
// punctuators it made due.
func (t *task) Process(r *kgo.Record, ts int64) error {
	src, ok := t.sources[r.Topic]
	if !ok {
		src, ok = t.patternSource(r.Topic)
	}
	if !ok {
		return fmt.Errorf("kstream: task %s got a record of topic %q that it does not read", t.id, r.Topic)
	}
	if len(r.Headers) > 0 && t.repartitions[r.Topic] {
		// A control record of event-time alignment: an upstream task's progress, for the
		// task's clock, not a record to process (align.go). A task that does not align
		// skips it (the topic may hold some from a run that aligned).
		if id, m, ok, err := watermark(r); ok {
			t.fatal = nil
			if err != nil || !t.aligned() {
				return err
			}
			return t.noteWatermark(id, m)
		}
	}
	t.cur, t.curTS, t.hasTS, t.fatal = r, ts, true, nil
	t.streamTime = max(t.streamTime, ts)
	src(r)
	t.cur, t.hasTS = nil, false
	if t.fatal == nil && len(t.scheds) > 0 {
		t.punctuate(StreamTime, t.streamTime)
	}
	return t.fatal
}

// Close implements runtime.Task.
func (t *task) Close() error {
	t.scheds = nil
	var errs []error
	for i := len(t.closers) - 1; i >= 0; i-- {
		if err := t.closers[i].c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kstream: closing operator %s of task %s: %w", t.closers[i].name, t.id, err))
		}
	}
	return errors.Join(errs...)
}

// recoverIn turns a panic in operator n into a processing error. It must be deferred
// directly.
func (t *task) recoverIn(n *node) {
	if v := recover(); v != nil {
		t.processingError(n, &panicError{v, debug.Stack()})
	}
}

func (t *task) errorContext(kind ErrorKind, n *node, err error) ErrorContext {
	ec := ErrorContext{Kind: kind, Operator: n.name, Offset: -1, Err: err}
	if r := t.cur; r != nil {
		ec.Topic, ec.Partition, ec.Offset = r.Topic, r.Partition, r.Offset
		ec.Key, ec.Value, ec.Headers, ec.Timestamp = r.Key, r.Value, fromKgoHeaders(r.Headers), r.Timestamp
		if t.hasTS {
			ec.Timestamp = time.UnixMilli(t.curTS) // the extracted timestamp, as in Kafka Streams
		}
	} else if t.punctuating {
		ec.Partition, ec.Timestamp = -1, time.UnixMilli(t.curTS)
	}
	return ec
}

// dropRecord notes that operator n skipped the record in hand because of its null key or
// value, as Kafka Streams' processors do: a warning with the record's coordinates, and one
// more in the dropped-records count ([Stats].DroppedRecords).
func (t *task) dropRecord(n *node, why string) {
	t.env.RecordDropped()
	if t.met != nil {
		t.met.Dropped(dropReason(why))
	}
	t.lossFor(n, false, dropReason(why)).n.Add(1)
	attrs := []any{"operator", n.name, "task", t.id.String()}
	if r := t.cur; r != nil {
		attrs = append(attrs, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	}
	t.log.Warn("kstream: skipping a record with a null "+why, attrs...)
}

func (t *task) deserializationError(n *node, err error) {
	t.handle(n, t.h.deser, t.errorContext(DeserializationError, n, err))
}

func (t *task) processingError(n *node, err error) {
	t.handle(n, t.h.proc, t.errorContext(ProcessingError, n, err))
}

func (t *task) serializationError(n *node, sinkTopic string, err error) {
	ec := t.errorContext(ProductionError, n, fmt.Errorf("serializing for topic %q: %w", sinkTopic, err))
	ec.SinkTopic = sinkTopic
	t.handle(n, t.h.prod, ec)
}

// handle applies handler h to a failure of operator n found while processing (not in a
// produce callback).
func (t *task) handle(n *node, h ErrorHandler, ec ErrorContext) {
	if t.fatal != nil {
		return
	}
	if errors.Is(ec.Err, serde.ErrUnavailable) {
		// Weather (a schema registry that stayed unreachable): not the record's fault, so
		// no handler may skip it or dead-letter it. The task fails without committing it.
		t.log.Error("kstream: "+ec.Kind.String()+" error: a service the serde needs is unavailable; stopping without committing the record", ec.logAttrs()...)
		t.fatal = &RecordError{Kind: ec.Kind, Topic: ec.Topic, Partition: ec.Partition, Offset: ec.Offset, Operator: ec.Operator, Err: ec.Err}
		return
	}
	resp := h.HandleError(ec)
	switch resp.action {
	case 1:
		t.log.Warn("kstream: "+ec.Kind.String()+" error; skipping", ec.logAttrs()...)
		t.skipped(n, ec.Kind, false)
	case 2:
		t.skipped(n, ec.Kind, true)
		t.log.Warn("kstream: "+ec.Kind.String()+" error; writing the record to the dead-letter topic", append(ec.logAttrs(), "dead_letter_topic", resp.deadLetter)...)
		t.env.Produce(&runtime.OutRecord{Record: deadLetterRecord(resp.deadLetter, ec), Operator: deadLetterOperator, Source: t.cur, DeadLetter: true})
	default:
		re := &RecordError{Kind: ec.Kind, Topic: ec.Topic, Partition: ec.Partition, Offset: ec.Offset, Operator: ec.Operator, Err: ec.Err}
		if _, ok := h.(logAndFail); ok {
			re.hint = handlerHint(ec.Kind)
		}
		t.fatal = re
		if ec.SinkTopic != "" {
			t.fatal = fmt.Errorf("%w (sink topic %q)", t.fatal, ec.SinkTopic)
		}
	}
}

func deadLetterRecord(topic string, ec ErrorContext) kgo.Record {
	return kgo.Record{Topic: topic, Key: ec.Key, Value: ec.Value, Timestamp: ec.Timestamp, Headers: toKgoHeaders(deadLetterHeaders(ec))}
}

func fromKgoHeaders(hs []kgo.RecordHeader) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header(h)
	}
	return out
}

func toKgoHeaders(hs []Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader(h)
	}
	return out
}
