package kstream

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Asynchronous operators (docs/async.md): MapValuesAsync and FlatMapValuesAsync call a
// function that may block (an HTTP service, a database, a model) on goroutines of their own,
// up to WithConcurrency calls per task, while the task goes on taking records. Records of
// one key are called one after the other, in input order; records of different keys
// concurrently. Results come back to the task (runtime.Async): the task forwards them in a
// turn of its own, never from the call's goroutine, so everything downstream runs on the
// task's goroutine as usual.
//
// Commits: a committed offset never passes an unfinished call. Under exactly-once (and at
// a revocation or shutdown) the task waits in PreCommit for every call its processed
// records started and forwards their outputs, so that a transaction holds exactly the
// outputs of the records whose offsets it commits; a periodic at-least-once commit does
// not wait, and commits each partition's offset of its first record still in hand
// (runtime.Async.HeldOffsets). docs/async.md says why exactly-once cannot do the latter.

// Defaults of the async operators' options.
const (
	defaultAsyncConcurrency = 64
	defaultAsyncAttempts    = 3
	defaultAsyncBackoff     = 100 * time.Millisecond
	defaultAsyncMaxBackoff  = 5 * time.Second
	// asyncBatchWait is how long finished calls wait to be taken back by their task, so
	// that the task takes them back in batches (asyncOp.due).
	asyncBatchWait = time.Millisecond
	// asyncCloseWait bounds how long closing a task waits for calls it cancelled.
	asyncCloseWait = 2 * time.Second
	// asyncIdleWorker is how long an operator's call goroutine waits for another call
	// before it ends (asyncOp.worker).
	asyncIdleWorker = time.Second
)

// AsyncOrder says in which order an async operator's outputs leave it.
type AsyncOrder uint8

const (
	// PerKeyOrder (the default): the outputs of one key leave in the order of its input
	// records, each as soon as its call is done; outputs of different keys interleave in
	// the order their calls finish.
	PerKeyOrder AsyncOrder = iota
	// PartitionOrder: every output leaves in the order the task processed the input records
	// (for a task reading one partition, the partition's order), as a synchronous operator's
	// would. Calls still run concurrently; a finished call's outputs wait for those of the
	// records before it.
	PartitionOrder
)

// String returns "per-key" or "partition".
func (o AsyncOrder) String() string {
	switch o {
	case PerKeyOrder:
		return "per-key"
	case PartitionOrder:
		return "partition"
	}
	return fmt.Sprintf("AsyncOrder(%d)", uint8(o))
}

// AsyncRetry is the retry policy of an async operator: a call that fails with an error
// marked [Retriable] (or that outlives [WithCallTimeout]) is made again after a backoff,
// from InitialBackoff, doubling up to MaxBackoff, for MaxAttempts calls in all.
type AsyncRetry struct {
	// MaxAttempts is how many calls a record gets, the first included (default 3; 1 never
	// retries).
	MaxAttempts int
	// InitialBackoff is the wait after the first failed call (default 100ms).
	InitialBackoff time.Duration
	// MaxBackoff bounds every wait (default 5s).
	MaxBackoff time.Duration
}

// asyncConfig is an async operator's configuration, from its options.
type asyncConfig struct {
	concurrency int
	timeout     time.Duration
	retry       AsyncRetry
	order       AsyncOrder
}

// WithConcurrency sets how many records an async operator holds per task at most: records
// whose call runs, waits behind an earlier record of its key, or is finished and waits for
// its outputs to leave (default 64). At most that many calls run at once per task. A task
// whose operator holds that many takes no more input until a call finishes: its records
// stay buffered, and its partitions pause once the buffer is full, while the other tasks go
// on. [Config.AsyncMaxInFlight] bounds the calls of the whole instance. Applies to
// [MapValuesAsync], [FlatMapValuesAsync] and [ProcessAsync].
func WithConcurrency(n int) Option {
	return optFunc{"WithConcurrency", func(c *opConfig) { c.async.concurrency = n }}
}

// WithCallTimeout bounds each call of an async operator: its context is done after d. A
// call that outlives it failed with [context.DeadlineExceeded], which is retried as a
// [Retriable] error. 0 (the default) sets no bound. Applies to [MapValuesAsync],
// [FlatMapValuesAsync] and [ProcessAsync].
func WithCallTimeout(d time.Duration) Option {
	return optFunc{"WithCallTimeout", func(c *opConfig) { c.async.timeout = d }}
}

// WithAsyncRetry sets the retry policy of an async operator (see [AsyncRetry]; zero fields
// take the defaults). Applies to [MapValuesAsync], [FlatMapValuesAsync] and [ProcessAsync].
func WithAsyncRetry(r AsyncRetry) Option {
	return optFunc{"WithAsyncRetry", func(c *opConfig) { c.async.retry = r }}
}

// WithOutputOrder sets the order in which an async operator's outputs leave it
// ([PerKeyOrder], the default, or [PartitionOrder]). Applies to [MapValuesAsync],
// [FlatMapValuesAsync] and [ProcessAsync].
func WithOutputOrder(o AsyncOrder) Option {
	return optFunc{"WithOutputOrder", func(c *opConfig) { c.async.order = o }}
}

// asyncOpts are the async options gathered by opConfig, before their defaults.
type asyncOpts struct{ asyncConfig }

// config returns the options with their defaults, or an error naming the one out of range.
func (o asyncOpts) config() (asyncConfig, error) {
	c := o.asyncConfig
	switch {
	case c.concurrency < 0:
		return c, fmt.Errorf("WithConcurrency(%d): must be at least 1 (0: the default %d)", c.concurrency, defaultAsyncConcurrency)
	case c.timeout < 0:
		return c, fmt.Errorf("WithCallTimeout(%s): must not be negative", c.timeout)
	case c.retry.MaxAttempts < 0:
		return c, fmt.Errorf("AsyncRetry.MaxAttempts is %d; it must not be negative (0: the default %d)", c.retry.MaxAttempts, defaultAsyncAttempts)
	case c.retry.InitialBackoff < 0 || c.retry.MaxBackoff < 0:
		return c, fmt.Errorf("AsyncRetry backoffs (%s, %s) must not be negative", c.retry.InitialBackoff, c.retry.MaxBackoff)
	case c.order > PartitionOrder:
		return c, fmt.Errorf("WithOutputOrder(%v): use PerKeyOrder or PartitionOrder", c.order)
	}
	if c.concurrency == 0 {
		c.concurrency = defaultAsyncConcurrency
	}
	if c.retry.MaxAttempts == 0 {
		c.retry.MaxAttempts = defaultAsyncAttempts
	}
	if c.retry.InitialBackoff == 0 {
		c.retry.InitialBackoff = defaultAsyncBackoff
	}
	if c.retry.MaxBackoff == 0 {
		c.retry.MaxBackoff = max(defaultAsyncMaxBackoff, c.retry.InitialBackoff)
	}
	if c.retry.MaxBackoff < c.retry.InitialBackoff {
		return c, fmt.Errorf("AsyncRetry.MaxBackoff (%s) is less than InitialBackoff (%s)", c.retry.MaxBackoff, c.retry.InitialBackoff)
	}
	return c, nil
}

// Retriable marks err as worth another call: an async operator's function returns
// Retriable(err) for a failure that may heal (a timeout, a 503), and the call is made again
// after a backoff ([AsyncRetry]). Any other error goes to the processing error handler at
// once. Retriable(nil) is nil.
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return &retriableError{err}
}

// IsRetriable reports whether err, or an error it wraps, was marked with [Retriable].
func IsRetriable(err error) bool {
	var r *retriableError
	return errors.As(err, &r)
}

type retriableError struct{ err error }

func (e *retriableError) Error() string { return e.err.Error() }
func (e *retriableError) Unwrap() error { return e.err }

// AsyncError is a record whose async call failed for good: a non-retriable error, a panic,
// or a retriable one after every attempt. The processing error handler sees it as the
// record's Err; when the handler fails the application, [App.Run] returns a [*RecordError]
// that wraps it. Unwrap returns the function's last error.
type AsyncError struct {
	// Operator is the async operator's name.
	Operator string
	// Attempts is how many calls were made.
	Attempts int
	Err      error
}

// Error names the operator, the attempts and the last error.
func (e *AsyncError) Error() string {
	s := "s"
	if e.Attempts == 1 {
		s = ""
	}
	return fmt.Sprintf("async operator %s: the call failed after %d attempt%s: %v", e.Operator, e.Attempts, s, e.Err)
}

// Unwrap returns the function's last error.
func (e *AsyncError) Unwrap() error { return e.Err }

// MapValuesAsync replaces each record's value with what fn returns, calling fn on goroutines
// of its own so that a task has up to [WithConcurrency] calls running at once: the way to
// call an HTTP service, a database or a model from a topology at full speed. The key is
// unchanged, so no repartition follows.
//
// Order: the records of one key are called one after the other, in input order, and their
// outputs leave in input order; records of different keys are called concurrently, and by
// default ([PerKeyOrder]) their outputs leave as their calls finish. [WithOutputOrder]
// ([PartitionOrder]) keeps the task's input order for every output. Keys are told apart by
// their value when K is comparable (a []byte key by its bytes), else by their bytes under
// the stream's key serde (a build error if it has none).
//
// fn's ctx is done when the call's time ([WithCallTimeout]) is up, or when the task stops
// wanting the result (its partitions were revoked or lost, an exactly-once transaction
// aborted, the application shut down): a call cut short that way is not a failure, its
// record is processed again from the last commit. fn returns [Retriable](err) for a failure
// worth another call ([WithAsyncRetry]); any other error, a panic, or the last retriable
// failure goes to [Config.ProcessingErrorHandler] with an [*AsyncError] ([Fail] stops the
// application, [Continue] skips the record, [DeadLetter] writes it to the dead-letter
// topic).
//
// Commits: a committed offset never passes a record whose call has not finished and whose
// outputs have not been forwarded (and acknowledged). Under at-least-once a periodic commit
// does not wait for the calls: each partition's offset stays at its first record still in
// hand. Under exactly-once, and at a revocation or shutdown, the commit waits for the
// calls in flight, so that a transaction holds exactly the outputs of the records whose
// offsets it commits; it so waits for the slowest call at most (three quarters of
// [Config.CloseTimeout], and under exactly-once half of [Config.TransactionTimeout]: keep
// calls well below it, with [WithCallTimeout]).
//
// State: fn runs off the task's goroutine and must not touch the task's state stores, nor
// anything else of the topology; it gets the key and value only. Put what it needs in the
// value before (a join), and what it computes in a store after (an aggregation downstream).
//
// Options: [Named], [WithConcurrency], [WithCallTimeout], [WithAsyncRetry],
// [WithOutputOrder].
func MapValuesAsync[K, V, VR any](s KStream[K, V], fn func(ctx context.Context, k K, v V) (VR, error), opts ...Option) KStream[K, VR] {
	var one func(context.Context, Record[K, V]) (VR, error)
	if fn != nil {
		one = func(ctx context.Context, r Record[K, V]) (VR, error) { return fn(ctx, r.Key, r.Value) }
	}
	out := addAsync(s, "MAPVALUESASYNC", "MapValuesAsync", nil, one, sameKey[K, V, VR], opts)
	out.ks, out.vs, out.keyChanged = s.ks, carry[V, VR](s.vs), s.keyChanged
	out.n.valueChanging = true
	return out
}

// FlatMapValuesAsync is [MapValuesAsync] for a function that turns each record into zero
// or more values, which leave in the order fn returns them (all of one record together).
func FlatMapValuesAsync[K, V, VR any](s KStream[K, V], fn func(ctx context.Context, k K, v V) ([]VR, error), opts ...Option) KStream[K, VR] {
	var call func(context.Context, Record[K, V]) ([]VR, error)
	if fn != nil {
		call = func(ctx context.Context, r Record[K, V]) ([]VR, error) { return fn(ctx, r.Key, r.Value) }
	}
	out := addAsync(s, "FLATMAPVALUESASYNC", "FlatMapValuesAsync", call, nil, sameKey[K, V, VR], opts)
	out.ks, out.vs, out.keyChanged = s.ks, carry[V, VR](s.vs), s.keyChanged
	out.n.valueChanging = true
	return out
}

// ProcessAsync is the Processor API's async operator: fn gets the whole input record (key,
// value, timestamp, headers) and returns the records to forward, which may have other keys,
// values, timestamps and headers (a zero Timestamp takes the input's). It is otherwise
// [MapValuesAsync]: calls on goroutines of their own, up to [WithConcurrency] records per
// task, one call per input key at a time, the outputs of one input key in input order,
// commits that wait for the calls, retries, the processing error handler; and fn must not
// touch the task's stores. Since the key may change, a key-dependent operator downstream
// repartitions, as after [Process]. Options: as [MapValuesAsync].
func ProcessAsync[KIn, VIn, KOut, VOut any](s KStream[KIn, VIn], fn func(ctx context.Context, r Record[KIn, VIn]) ([]Record[KOut, VOut], error), opts ...Option) KStream[KOut, VOut] {
	out := addAsync(s, "PROCESSASYNC", "ProcessAsync", fn, nil, func(_ Record[KIn, VIn], o Record[KOut, VOut]) Record[KOut, VOut] { return o }, opts)
	out.ks, out.vs, out.keyChanged = carry[KIn, KOut](s.ks), carry[VIn, VOut](s.vs), true
	out.n.keyChanging = true
	return out
}

// sameKey makes the output record of value v of input in: in's key, timestamp and headers.
func sameKey[K, V, VR any](in Record[K, V], v VR) Record[K, VR] {
	return Record[K, VR]{Key: in.Key, Value: v, Timestamp: in.Timestamp, Headers: in.Headers, nullKey: in.nullKey}
}

// asyncAllowed are the options of the async operators.
var asyncAllowed = []string{"WithConcurrency", "WithCallTimeout", "WithAsyncRetry", "WithOutputOrder"}

// addAsync adds an async operator under s: call makes an input record's outputs, of type O,
// or one (set instead of call) its only output; out turns each into the record forwarded.
func addAsync[K, V, O, KOut, VOut any](s KStream[K, V], prefix, op string, call func(context.Context, Record[K, V]) ([]O, error),
	one func(context.Context, Record[K, V]) (O, error), out func(Record[K, V], O) Record[KOut, VOut], opts []Option) KStream[KOut, VOut] {
	c := s.b.options(op, opts, asyncAllowed...)
	n := &node{kind: kindProcessor}
	s.b.addNode(n, prefix, c.name, s.n)
	if call == nil && one == nil {
		s.b.errorf("%s (operator %s): the function is nil", op, n.name)
	}
	cfg, err := c.async.config()
	if err != nil {
		s.b.errorf("%s (operator %s): %w", op, n.name, err)
	}
	keyOf, err := asyncKeyOf(s.ks)
	if err != nil {
		s.b.errorf("%s (operator %s): %w", op, n.name, err)
	}
	n.instantiate = func(t *task) (any, error) {
		fwd, err := childInputs[KOut, VOut](t, n)
		if err != nil {
			return nil, err
		}
		a := newAsyncOp(t, n, cfg, call, keyOf, func(in Record[K, V], o O) { fwd.Forward(out(in, o)) })
		a.one = one
		t.asyncs = append(t.asyncs, a)
		t.txnHooks = append(t.txnHooks, a)
		t.closers = append(t.closers, namedCloser{n.name, a})
		return labeled(t, n, a.admit), nil
	}
	return KStream[KOut, VOut]{b: s.b, n: n}
}

// nullKeyID is the identity of the records with a null key, one key of their own.
type nullKeyID struct{}

// asyncKeyOf returns how an async operator tells keys apart: by value when K is comparable
// (and not an interface, whose dynamic values may not be), a []byte by its bytes, otherwise
// by its bytes under ks.
func asyncKeyOf[K any](ks serde.Serde[K]) (func(K) (any, error), error) {
	tk := reflect.TypeFor[K]()
	switch {
	case tk == reflect.TypeFor[[]byte]():
		return func(k K) (any, error) { return string(any(k).([]byte)), nil }, nil
	case tk.Kind() == reflect.Slice && tk.Elem().Kind() == reflect.Uint8:
		return func(k K) (any, error) { return string(reflect.ValueOf(k).Bytes()), nil }, nil
	case tk.Kind() != reflect.Interface && tk.Comparable() && !holdsInterface(tk):
		return func(k K) (any, error) { return k, nil }, nil
	case ks != nil:
		return func(k K) (any, error) {
			b, err := serialize(ks, k)
			if err != nil {
				return nil, fmt.Errorf("serializing the key to tell keys apart: %w", err)
			}
			return string(b), nil
		}, nil
	case tk.Comparable():
		// Comparable by type, but a dynamic value inside may not be: checked per record.
		return func(k K) (any, error) {
			if err := comparableKey(k); err != nil {
				return nil, err
			}
			return k, nil
		}, nil
	}
	return nil, fmt.Errorf("the key type %s is not comparable and the stream has no key serde to tell keys apart: set one with WithSerdes: %w", tk, ErrNoSerde)
}

// holdsInterface reports whether a value of t may hold an interface value (whose dynamic
// type may not be comparable).
func holdsInterface(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Array:
		return holdsInterface(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsInterface(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// comparableKey returns an error if k cannot be a map key (a dynamic value inside it is not
// comparable).
func comparableKey(k any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the key %v cannot be told apart from others (not comparable): %v; give the stream a key serde with WithSerdes", k, p)
		}
	}()
	_ = map[any]bool{k: true}
	return nil
}

// asyncRunner is what the task sees of an async operator.
type asyncRunner interface {
	completed() bool
	due() bool
	resume()
	saturated() bool
	// drain waits for the records the operator holds (all, or only those without an input
	// record) and forwards their outputs; an error is ctx's.
	drain(ctx context.Context, all bool) error
	// holding reports whether the operator holds records (all, or only those without an
	// input record).
	holding(all bool) bool
	// heldOffsets calls fn with the input offset of each record held.
	heldOffsets(fn func(topic string, partition int32, offset int64))
}

// asyncEntry is one record admitted to an async operator.
type asyncEntry[K, V, O any] struct {
	rec   Record[K, V]
	raw   *kgo.Record // the input record, for the error handler and dead letters
	ts    int64
	hasTS bool
	key   any
	gen   uint64 // the operator's generation when admitted (see asyncOp.reset)

	admitted time.Time
	// Set by the call's goroutine before it hands the entry back.
	outs     []O
	out1     [1]O // outs' array for an operator with one output per record (asyncOp.one)
	err      error
	attempts int
	finished bool // handed back (task goroutine)
}

// asyncOp is the per-task state of an async operator. Its fields are the task's (touched on
// the task's goroutine only) unless said otherwise.
type asyncOp[K, V, O any] struct {
	t     *task
	n     *node
	cfg   asyncConfig
	call  func(context.Context, Record[K, V]) ([]O, error)
	one   func(context.Context, Record[K, V]) (O, error) // instead of call: one output per record
	keyOf func(K) (any, error)
	fwd   func(in Record[K, V], o O) // forwards output o of input in
	sem   chan struct{}              // Config.AsyncMaxInFlight's tokens; nil without a cap
	stats *asyncStats                // nil without Config.Metrics

	// keys are the records of each key not handed back yet, oldest first: the first one's
	// call runs (or has finished).
	keys map[any][]*asyncEntry[K, V, O]
	// order are the records not forwarded yet in input order (PartitionOrder only).
	order []*asyncEntry[K, V, O]
	// held counts the records admitted and not forwarded yet; read by Saturated from the
	// loop while the task is at rest. unanchored counts those of them without an input
	// record (forwarded by a punctuator or a record cache's flush), whose offsets no commit
	// can hold back: every commit waits for them.
	held       atomic.Int64
	unanchored int

	// Shared with the calls' goroutines, under mu: done are the finished calls to hand
	// back, ctx the generation's context (cancelled by reset and Close).
	mu     sync.Mutex
	done   []*asyncEntry[K, V, O]
	gen    uint64
	ctx    context.Context
	cancel context.CancelFunc
	// hasDone mirrors len(done) > 0, read from any goroutine; doneAt is when done got its
	// first entry (ns since asyncEpoch); waker is the instance's, which wakes the tasks
	// asyncBatchWait after that (see due).
	hasDone atomic.Bool
	doneAt  atomic.Int64
	waker   *asyncWaker
	// signal gets a token whenever a call finishes (drain waits on it).
	signal chan struct{}
	calls  sync.WaitGroup
	// work hands a call to an idle worker goroutine (asyncOp.worker); closing it ends them
	// all, when the operator closes (closed).
	work   chan asyncJob[K, V, O]
	closed bool
}

// asyncJob is a call for a worker: entry e, in the generation whose context is ctx.
type asyncJob[K, V, O any] struct {
	ctx context.Context
	e   *asyncEntry[K, V, O]
}

func newAsyncOp[K, V, O any](t *task, n *node, cfg asyncConfig, call func(context.Context, Record[K, V]) ([]O, error), keyOf func(K) (any, error), fwd func(Record[K, V], O)) *asyncOp[K, V, O] {
	a := &asyncOp[K, V, O]{t: t, n: n, cfg: cfg, call: call, keyOf: keyOf, fwd: fwd, keys: map[any][]*asyncEntry[K, V, O]{},
		signal: make(chan struct{}, 1), work: make(chan asyncJob[K, V, O])}
	if t.h.async != nil {
		a.sem = t.h.async.sem
		a.stats = t.h.async.operator(n.name)
		a.waker = t.h.async.wakerFor(t.env)
	} else {
		a.waker = newAsyncWaker(t.env.Wake)
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a
}

// admit is the operator's input: r joins its key's queue, and its call starts unless an
// earlier record of the key is still in hand.
func (a *asyncOp[K, V, O]) admit(r Record[K, V]) {
	t := a.t
	var id any = nullKeyID{}
	if !r.nullKey {
		var err error
		if id, err = a.keyOf(r.Key); err != nil {
			t.processingError(a.n, err)
			return
		}
	}
	e := &asyncEntry[K, V, O]{rec: r, raw: t.cur, ts: t.curTS, hasTS: t.hasTS, key: id}
	if a.stats != nil {
		e.admitted = time.Now() // for the queue wait
	}
	a.mu.Lock()
	e.gen = a.gen
	a.mu.Unlock()
	q := a.keys[id]
	a.keys[id] = append(q, e)
	if a.cfg.order == PartitionOrder {
		a.order = append(a.order, e)
	}
	a.held.Add(1)
	if e.raw == nil {
		a.unanchored++
	}
	if a.stats != nil {
		a.stats.held.Add(1)
	}
	if len(q) == 0 {
		a.start(e)
	}
}

// start runs e's call on a worker goroutine: an idle one, or a new one.
func (a *asyncOp[K, V, O]) start(e *asyncEntry[K, V, O]) {
	a.mu.Lock()
	ctx, gen := a.ctx, a.gen
	a.mu.Unlock()
	if e.gen != gen || a.closed {
		return // admitted before a reset: dropped
	}
	a.calls.Add(1)
	job := asyncJob[K, V, O]{ctx, e}
	select {
	case a.work <- job:
	default:
		go a.worker(job)
	}
}

// worker makes the call of job, then of every job handed to it while it waits, until it
// has waited asyncIdleWorker for one or the operator closes. The operator's goroutines so
// outlive their calls: a call costs no goroutine start, and its stack, grown by the
// function once, stays grown. There are about as many workers as calls at once (a worker
// that has just finished a call is not idle yet, so a call started then starts another).
func (a *asyncOp[K, V, O]) worker(job asyncJob[K, V, O]) {
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		a.run(job.ctx, job.e)
		job = asyncJob[K, V, O]{}
		var ok bool
		if idle == nil {
			idle = time.NewTimer(asyncIdleWorker)
		} else {
			idle.Reset(asyncIdleWorker)
		}
		select {
		case job, ok = <-a.work:
			if !ok {
				return
			}
		case <-idle.C:
			return
		}
	}
}

// run makes e's calls (with retries), then hands e back to the task. It runs on a
// worker goroutine (asyncOp.worker) and touches only e and the shared fields.
func (a *asyncOp[K, V, O]) run(ctx context.Context, e *asyncEntry[K, V, O]) {
	defer a.calls.Done()
	if a.sem != nil {
		select {
		case a.sem <- struct{}{}:
			defer func() { <-a.sem }()
		case <-ctx.Done():
			a.finish(e, ctx)
			return
		}
	}
	st := a.stats
	var callBegan time.Time
	if st != nil {
		callBegan = time.Now()
		st.queueWait.observe(callBegan.Sub(e.admitted))
		st.inFlight.Add(1)
		defer st.inFlight.Add(-1)
	}
	backoff := a.cfg.retry.InitialBackoff
	var timer *time.Timer
	for e.attempts = 1; ; e.attempts++ {
		if st != nil && e.attempts > 1 {
			callBegan = time.Now()
		}
		e.outs, e.err = a.callOnce(ctx, e)
		if st != nil {
			st.calls.Add(1)
			st.callLatency.observe(time.Since(callBegan))
		}
		if e.err == nil || ctx.Err() != nil || e.attempts >= a.cfg.retry.MaxAttempts || !a.retriable(e.err) {
			break
		}
		if st != nil {
			st.retries.Add(1)
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		if ctx.Err() != nil {
			break
		}
		backoff = min(2*backoff, a.cfg.retry.MaxBackoff)
	}
	if timer != nil {
		timer.Stop()
	}
	if st != nil && e.err != nil && ctx.Err() == nil {
		st.failures.Add(1)
	}
	a.finish(e, ctx)
}

// retriable reports whether err deserves another call: marked Retriable, or the call's
// own timeout.
func (a *asyncOp[K, V, O]) retriable(err error) bool {
	return IsRetriable(err) || (a.cfg.timeout > 0 && errors.Is(err, context.DeadlineExceeded))
}

// callOnce makes one call, bounded by the call timeout, turning a panic into an error.
func (a *asyncOp[K, V, O]) callOnce(ctx context.Context, e *asyncEntry[K, V, O]) (outs []O, err error) {
	if a.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, fmt.Errorf("in the async function: %w", &panicError{p, debug.Stack()})
		}
	}()
	if a.one != nil {
		o, err := a.one(ctx, e.rec)
		if err != nil {
			return nil, err
		}
		e.out1[0] = o
		return e.out1[:], nil
	}
	return a.call(ctx, e.rec)
}

// finish hands e back to the task, unless its generation is over (the task no longer wants
// it: ctx is that generation's), and wakes the task.
func (a *asyncOp[K, V, O]) finish(e *asyncEntry[K, V, O], ctx context.Context) {
	a.mu.Lock()
	if ctx.Err() != nil || e.gen != a.gen {
		a.mu.Unlock()
		return
	}
	a.done = append(a.done, e)
	first := !a.hasDone.Swap(true)
	if first {
		// The first finished call since the task last took them back: the instance's
		// waker wakes the tasks within asyncBatchWait, with what finished by then (see due).
		a.doneAt.Store(int64(time.Since(asyncEpoch)))
	}
	a.mu.Unlock()
	if first {
		a.waker.arm()
	}
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// completed implements asyncRunner: finished calls wait to be handed back.
func (a *asyncOp[K, V, O]) completed() bool { return a.hasDone.Load() }

// due implements asyncRunner: finished calls wait to be handed back, and the instance's
// waker fired since the first of them finished. Waking the task for each finished call
// would cost a turn of the poll loop per call when calls finish thousands of times a
// second; the waker fires asyncBatchWait after the first call of the instance that finished
// since its last firing, and the tasks then take their calls back in batches, all in one
// turn of the loop, for at most that much more latency.
func (a *asyncOp[K, V, O]) due() bool {
	return a.hasDone.Load() && a.doneAt.Load() <= a.waker.fired.Load()
}

// asyncWaker wakes the tasks of an instance whose async calls finished, at most once per
// asyncBatchWait (see asyncOp.due).
type asyncWaker struct {
	mu    sync.Mutex
	timer *time.Timer
	armed bool
	wake  func() // the runtime's TaskEnv.Wake
	// fired is when the waker last fired (ns since asyncEpoch).
	fired atomic.Int64
}

func newAsyncWaker(wake func()) *asyncWaker {
	w := &asyncWaker{wake: wake}
	w.fired.Store(-1)
	return w
}

// arm makes the waker fire asyncBatchWait from now, unless it is to fire sooner.
func (w *asyncWaker) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed {
		return
	}
	w.armed = true
	if w.timer == nil {
		w.timer = time.AfterFunc(asyncBatchWait, w.fire)
	} else {
		w.timer.Reset(asyncBatchWait)
	}
}

func (w *asyncWaker) fire() {
	w.mu.Lock()
	w.armed = false
	w.fired.Store(int64(time.Since(asyncEpoch)))
	w.mu.Unlock()
	w.wake()
}

// asyncEpoch is the origin of asyncOp.doneAt, so that it is read on the monotonic clock.
var asyncEpoch = time.Now()

// saturated implements asyncRunner.
func (a *asyncOp[K, V, O]) saturated() bool { return a.held.Load() >= int64(a.cfg.concurrency) }

// holding implements asyncRunner: records are in hand.
func (a *asyncOp[K, V, O]) holding(all bool) bool {
	if all {
		return a.held.Load() > 0
	}
	return a.unanchored > 0
}

// heldOffsets implements asyncRunner.
func (a *asyncOp[K, V, O]) heldOffsets(fn func(topic string, partition int32, offset int64)) {
	each := func(e *asyncEntry[K, V, O]) {
		if e.raw != nil {
			fn(e.raw.Topic, e.raw.Partition, e.raw.Offset)
		}
	}
	if a.cfg.order == PartitionOrder {
		for _, e := range a.order { // every record not forwarded yet
			each(e)
		}
		return
	}
	for _, q := range a.keys {
		for _, e := range q {
			each(e)
		}
	}
}

// resume implements asyncRunner: the finished calls are taken back, the next record of each
// of their keys is called, and the outputs that may leave are forwarded.
func (a *asyncOp[K, V, O]) resume() {
	a.mu.Lock()
	done := a.done
	a.done = nil
	a.hasDone.Store(false)
	gen := a.gen
	a.mu.Unlock()
	for _, e := range done {
		if e.gen != gen {
			continue
		}
		e.finished = true
		q := a.keys[e.key]
		// e is the first of its key's queue: the only one of the key called.
		if len(q) <= 1 {
			delete(a.keys, e.key)
		} else {
			q[0] = nil
			q = q[1:]
			a.keys[e.key] = q
			a.start(q[0])
		}
		if a.cfg.order == PerKeyOrder {
			a.emit(e)
		}
	}
	if a.cfg.order == PartitionOrder {
		i := 0
		for i < len(a.order) && a.order[i].finished {
			a.emit(a.order[i])
			a.order[i] = nil
			i++
		}
		a.order = a.order[i:]
	}
}

// emit forwards e's outputs, or lets the processing error handler decide on its failure,
// with e's input record in hand.
func (a *asyncOp[K, V, O]) emit(e *asyncEntry[K, V, O]) {
	t := a.t
	a.held.Add(-1)
	if e.raw == nil {
		a.unanchored--
	}
	if a.stats != nil {
		a.stats.held.Add(-1)
	}
	cur, curTS, hasTS := t.cur, t.curTS, t.hasTS
	t.cur, t.curTS, t.hasTS = e.raw, e.ts, e.hasTS
	defer func() { t.cur, t.curTS, t.hasTS = cur, curTS, hasTS }()
	if e.err != nil {
		t.processingError(a.n, &AsyncError{Operator: a.n.name, Attempts: e.attempts, Err: e.err})
		return
	}
	for _, v := range e.outs {
		if t.fatal != nil {
			return
		}
		a.fwd(e.rec, v)
	}
}

// drain implements asyncRunner: it waits for every call and forwards every output, for a
// commit. Cut short by ctx, the records stay in hand.
func (a *asyncOp[K, V, O]) drain(ctx context.Context, all bool) error {
	for a.holding(all) && a.t.fatal == nil {
		if a.completed() {
			a.resume()
			continue
		}
		select {
		case <-a.signal:
		case <-ctx.Done():
			return fmt.Errorf("operator %s: %d records whose async calls did not finish: %w (%w)", a.n.name, a.held.Load(), runtime.ErrUnfinished, ctx.Err())
		}
	}
	return nil
}

// reset forgets every record in hand and cancels their calls: they will be processed
// again (an aborted transaction, a closed task). Calls of the old generation hand nothing
// back.
func (a *asyncOp[K, V, O]) reset(why string) {
	if n := a.held.Load(); n > 0 {
		a.t.log.Info("kstream: async operator: cancelling its calls; their records are processed again from the last commit",
			"operator", a.n.name, "task", a.t.id.String(), "records", n, "why", why)
		if a.stats != nil {
			a.stats.held.Add(-n)
		}
	}
	a.mu.Lock()
	a.cancel()
	a.gen++
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.done = nil
	a.hasDone.Store(false)
	a.mu.Unlock()
	clear(a.keys)
	a.order = nil
	a.held.Store(0)
	a.unanchored = 0
}

// cut implements txnHook: a commit drained the operator first (PreCommit).
func (a *asyncOp[K, V, O]) cut() func() { return nil }

// aborted implements txnHook: the aborted transaction's records are processed again, so
// their calls are not wanted any more.
func (a *asyncOp[K, V, O]) aborted() { a.reset("transaction aborted") }

// Close implements closer: the calls still running (the task is closed without a commit
// that drained them) are cancelled, and waited for up to asyncCloseWait.
func (a *asyncOp[K, V, O]) Close() error {
	a.reset("task closed")
	a.mu.Lock()
	a.cancel()
	a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.work) // the idle workers end
	}
	stopped := make(chan struct{})
	go func() { a.calls.Wait(); close(stopped) }()
	timer := time.NewTimer(asyncCloseWait)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		a.t.log.Warn("kstream: async operator: calls still running after their context was cancelled; not waiting for them",
			"operator", a.n.name, "task", a.t.id.String(), "waited", asyncCloseWait)
	}
	return nil
}

// Completed implements runtime.Async: finished calls are due to be taken back (see
// asyncOp.due).
func (t *task) Completed() bool {
	for _, a := range t.asyncs {
		if a.due() {
			return true
		}
	}
	return false
}

// Resume implements runtime.Async.
func (t *task) Resume() error {
	t.fatal = nil
	for _, a := range t.asyncs {
		if t.fatal != nil {
			break
		}
		if a.completed() {
			a.resume()
		}
	}
	return t.fatal
}

// Saturated implements runtime.Async.
func (t *task) Saturated() bool {
	for _, a := range t.asyncs {
		if a.saturated() {
			return true
		}
	}
	return false
}

// drainAsync waits for every async call of the task and forwards the outputs, flushing the
// record caches between (a cache may feed an async operator, and one may feed a cache),
// until neither holds anything. It runs in PreCommit. With all false (a periodic
// at-least-once commit, runtime.PeriodicCommit) it waits only for the records without an
// input record: the commit holds the offsets back below the others (HeldOffsets).
//
// The wait takes three quarters of ctx's time at most, leaving the rest to the commit
// itself and, at shutdown, to leaving the group (a shutdown's whole bound is
// Config.CloseTimeout), and under exactly-once half the transaction timeout at most: calls
// that do not finish in time are cancelled when the task closes (or the transaction
// aborts), and their records processed again from the last commit.
func (t *task) drainAsync(ctx context.Context, all bool) error {
	if dl, ok := ctx.Deadline(); ok && t.holdsAsync(all) {
		wait := time.Until(dl) * 3 / 4
		if t.h.eos && t.h.txnTimeout > 0 {
			// The transaction must end before the broker aborts it.
			wait = min(wait, t.h.txnTimeout/2)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	for {
		if t.flushCaches(); t.fatal != nil {
			return nil
		}
		more := false
		for _, a := range t.asyncs {
			if !a.holding(all) {
				continue
			}
			more = true
			if err := a.drain(ctx, all); err != nil {
				return err
			}
			if t.fatal != nil {
				return nil
			}
		}
		if !more {
			return nil
		}
	}
}

// holdsAsync reports whether an async operator of t holds records (all, or only those
// without an input record).
func (t *task) holdsAsync(all bool) bool {
	for _, a := range t.asyncs {
		if a.holding(all) {
			return true
		}
	}
	return false
}

// HeldOffsets implements runtime.Async.
func (t *task) HeldOffsets(fn func(topic string, partition int32, offset int64)) {
	for _, a := range t.asyncs {
		a.heldOffsets(fn)
	}
}

var _ runtime.Async = (*task)(nil)
