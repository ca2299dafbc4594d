package kstream

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// FixedKeyProcessor is the Processor API step that cannot change keys: it receives
// FixedKeyRecord[K, VIn] and forwards any number of FixedKeyRecord[K, VOut], each with the
// key of the record it was derived from. Run it with [ProcessValues]. It corresponds to
// Kafka Streams' FixedKeyProcessor.
//
// As with [Processor], only Process is required; a processor may also implement
// Init(FixedKeyProcessorContext[K, VOut]) error and Close() error. An error returned from
// Process, or a panic, goes to [Config.ProcessingErrorHandler].
type FixedKeyProcessor[K, VIn, VOut any] interface {
	Process(ctx FixedKeyProcessorContext[K, VOut], r FixedKeyRecord[K, VIn]) error
}

// FixedKeyProcessorFunc adapts a function to the [FixedKeyProcessor] interface.
type FixedKeyProcessorFunc[K, VIn, VOut any] func(ctx FixedKeyProcessorContext[K, VOut], r FixedKeyRecord[K, VIn]) error

// Process calls f.
func (f FixedKeyProcessorFunc[K, VIn, VOut]) Process(ctx FixedKeyProcessorContext[K, VOut], r FixedKeyRecord[K, VIn]) error {
	return f(ctx, r)
}

// FixedKeyRecord is a record whose key a processor cannot change (Kafka Streams'
// FixedKeyRecord). A [FixedKeyProcessor] gets one per input record and forwards records
// derived from it: the same record with another Value, Timestamp or Headers, or one of
// another value type made with [WithValue]. A FixedKeyRecord built anew (the zero value)
// has no key to keep, and forwarding it is a processing error.
//
// It keeps the marks of a Kafka null key and, as long as Value is untouched, of a Kafka
// null value (see [Record.HasNullKey], [Record.IsTombstone]).
type FixedKeyRecord[K, V any] struct {
	key       K
	Value     V
	Timestamp time.Time
	Headers   []Header

	null, nullKey bool
	derived       bool // made from an input record
}

// Key is the record's key, that of the input record it derives from.
func (r FixedKeyRecord[K, V]) Key() K { return r.key }

// HasNullKey reports whether the key is a Kafka null (see [Record.HasNullKey]).
func (r FixedKeyRecord[K, V]) HasNullKey() bool { return (r.nullKey && isZero(r.key)) || isNil(r.key) }

// IsTombstone reports whether the value is a Kafka null (see [Record.IsTombstone]).
func (r FixedKeyRecord[K, V]) IsTombstone() bool { return r.null && isZero(r.Value) }

// WithHeader returns a copy of r with one more header; r's headers are not modified.
func (r FixedKeyRecord[K, V]) WithHeader(key string, value []byte) FixedKeyRecord[K, V] {
	h := make([]Header, len(r.Headers), len(r.Headers)+1)
	copy(h, r.Headers)
	r.Headers = append(h, Header{Key: key, Value: value})
	return r
}

// WithValue returns r with value v, of any type: the key, timestamp and headers are r's
// (Kafka Streams' FixedKeyRecord.withValue).
func WithValue[K, V, VR any](r FixedKeyRecord[K, V], v VR) FixedKeyRecord[K, VR] {
	return FixedKeyRecord[K, VR]{key: r.key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey, derived: r.derived}
}

// FixedKeyProcessorContext is the [ProcessorContext] of a [FixedKeyProcessor]: its Forward
// and ForwardTo take records that keep their input's key (Kafka Streams'
// FixedKeyProcessorContext).
type FixedKeyProcessorContext[K, V any] interface {
	// Forward sends r to every child operator; see [ProcessorContext].Forward. r must be
	// derived from an input record (see [FixedKeyRecord]).
	Forward(r FixedKeyRecord[K, V])
	// ForwardTo sends r to the child operator named child only.
	ForwardTo(child string, r FixedKeyRecord[K, V])
	// RecordMetadata, TaskID, Name, Logger, Store and Schedule are as [ProcessorContext]'s.
	RecordMetadata() (md RecordMetadata, ok bool)
	TaskID() TaskID
	Name() string
	Logger() *slog.Logger
	Store(name string) (any, error)
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error)
}

// fixedKeyContext is the FixedKeyProcessorContext of one operator in one task.
type fixedKeyContext[K, V any] struct {
	*procContext[K, V]
}

var errNotDerived = errors.New("the forwarded FixedKeyRecord was not derived from an input record, so it has no key to keep; derive it from the record Process got (with WithValue for another value type)")

func (c fixedKeyContext[K, V]) record(r FixedKeyRecord[K, V]) (Record[K, V], bool) {
	if !r.derived {
		c.t.processingError(c.n, errNotDerived)
		return Record[K, V]{}, false
	}
	return Record[K, V]{Key: r.key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, null: r.null, nullKey: r.nullKey}, true
}

func (c fixedKeyContext[K, V]) Forward(r FixedKeyRecord[K, V]) {
	if rec, ok := c.record(r); ok {
		c.procContext.Forward(rec)
	}
}

func (c fixedKeyContext[K, V]) ForwardTo(child string, r FixedKeyRecord[K, V]) {
	if rec, ok := c.record(r); ok {
		c.procContext.ForwardTo(child, rec)
	}
}

// ProcessValues runs a [FixedKeyProcessor] on every record: Kafka Streams'
// KStream.processValues. newProcessor is called once per task. Because the processor cannot
// change keys, the stream is as partitioned as its input: a key-dependent operator
// downstream repartitions only if one upstream had to (unlike [Process]). Like [MapValues],
// it changes values, so a repartition that a key-changing operator above it makes
// necessary goes below it and is not shared with other operators (Kafka Streams'
// optimizer does the same). Options: [Named], [WithStores]. Its operator is named
// KSTREAM-PROCESSVALUES-<n> unless [Named].
func ProcessValues[K, VIn, VOut any](s KStream[K, VIn], newProcessor func() FixedKeyProcessor[K, VIn, VOut], opts ...Option) KStream[K, VOut] {
	c := s.b.options("ProcessValues", opts, "WithStores")
	prefix := "PROCESSVALUES"
	if c.name != "" {
		prefix = "" // KStreamImpl.processValues takes no generated name when it is given one
	}
	n := &node{kind: kindProcessor}
	s.b.addNode(n, prefix, c.name, s.n)
	n.instantiate = func(t *task) (any, error) { return fixedKeyInstance(t, n, newProcessor()) }
	for _, d := range c.stores {
		s.b.addStore(d, n)
	}
	n.valueChanging = true
	return KStream[K, VOut]{b: s.b, n: n, ks: s.ks, vs: carry[VIn, VOut](s.vs), keyChanged: s.keyChanged}
}

// fixedKeyInstance wires a fixed-key processor into task t, as processorInstance does a
// processor.
func fixedKeyInstance[K, VIn, VOut any](t *task, n *node, p FixedKeyProcessor[K, VIn, VOut]) (any, error) {
	pc, err := childInputs[K, VOut](t, n)
	if err != nil {
		return nil, err
	}
	ctx := fixedKeyContext[K, VOut]{pc}
	if in, ok := p.(interface {
		Init(FixedKeyProcessorContext[K, VOut]) error
	}); ok {
		if err := in.Init(ctx); err != nil {
			return nil, fmt.Errorf("kstream: init of operator %s: %w", n.name, err)
		}
	}
	if c, ok := p.(closer); ok {
		t.closers = append(t.closers, namedCloser{n.name, c})
	}
	return func(r Record[K, VIn]) {
		defer t.recoverIn(n)
		in := FixedKeyRecord[K, VIn]{key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, null: r.null, nullKey: r.nullKey, derived: true}
		if err := p.Process(ctx, in); err != nil {
			t.processingError(n, err)
		}
	}, nil
}
