package kstream

import (
	"fmt"
	"log/slog"
	"time"
)

// Processor is the Processor API: a user-written operator that receives records of type
// Record[KIn, VIn] and forwards any number of Record[KOut, VOut] downstream.
//
// Only Process is required. A processor may also implement Init(ProcessorContext[KOut, VOut])
// error, called once per task before the first record, and Close() error, called when the
// task is closed. A processor instance serves one task and is called from one goroutine at a
// time, so it needs no locking for its own fields.
//
// An error returned from Process goes to the processing error handler
// ([Config.ProcessingErrorHandler]); a panic is recovered and treated the same way.
type Processor[KIn, VIn, KOut, VOut any] interface {
	Process(ctx ProcessorContext[KOut, VOut], r Record[KIn, VIn]) error
}

// ProcessorFunc adapts a function to the [Processor] interface.
type ProcessorFunc[KIn, VIn, KOut, VOut any] func(ctx ProcessorContext[KOut, VOut], r Record[KIn, VIn]) error

// Process calls f.
func (f ProcessorFunc[KIn, VIn, KOut, VOut]) Process(ctx ProcessorContext[KOut, VOut], r Record[KIn, VIn]) error {
	return f(ctx, r)
}

// ProcessorContext is what a processor may do besides returning: forward records, read the
// metadata of the input record, schedule punctuators, and log. It is valid for the life of
// the task.
type ProcessorContext[K, V any] interface {
	// Forward sends r to every child operator, in the order they were added. A child that
	// drops r (a filter, a branch that does not match) drops it for its own subtree only.
	// A record whose Timestamp is the zero time gets the timestamp of the record being
	// processed, or in a punctuator the punctuation time, as Kafka Streams' forward does
	// with the record context's timestamp.
	Forward(r Record[K, V])
	// ForwardTo sends r to the child operator named child only. Naming a child that does
	// not exist is a processing error.
	ForwardTo(child string, r Record[K, V])
	// RecordMetadata returns the topic, partition and offset of the input record being
	// processed; ok is false when there is none.
	RecordMetadata() (md RecordMetadata, ok bool)
	// TaskID is the task this processor instance belongs to.
	TaskID() TaskID
	// Name is the operator's name in the topology.
	Name() string
	// Logger is the application's logger.
	Logger() *slog.Logger
	// Store returns the state store named name, connected to this operator with
	// [WithStores] (or created by it, for DSL aggregations). Use [GetKeyValueStore] for a
	// typed handle.
	Store(name string) (any, error)
	// Schedule calls fn every interval of stream time or of wall-clock time (see
	// [PunctuationType]) until the schedule is cancelled or the task closes; interval must
	// be at least 1ms. Call it from Init, or from Process or a punctuator. fn runs on the
	// task's goroutine, between records, with no input record in hand (RecordMetadata
	// reports none); it may forward records and write stores, which, under exactly-once,
	// are part of the open transaction like the records' own. It corresponds to Kafka
	// Streams' ProcessorContext.schedule.
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error)
}

type initializer[K, V any] interface {
	Init(ctx ProcessorContext[K, V]) error
}

type closer interface{ Close() error }

// procContext is the ProcessorContext of one operator in one task.
type procContext[K, V any] struct {
	t        *task
	n        *node
	children []func(Record[K, V])
	names    []string
}

func (c *procContext[K, V]) Forward(r Record[K, V]) {
	if r.Timestamp.IsZero() && c.t.hasTS {
		r.Timestamp = time.UnixMilli(c.t.curTS)
	}
	for _, child := range c.children {
		if c.t.fatal != nil {
			return
		}
		child(r)
	}
}

func (c *procContext[K, V]) ForwardTo(name string, r Record[K, V]) {
	if r.Timestamp.IsZero() && c.t.hasTS {
		r.Timestamp = time.UnixMilli(c.t.curTS)
	}
	for i, n := range c.names {
		if n == name {
			c.children[i](r)
			return
		}
	}
	c.t.processingError(c.n, fmt.Errorf("ForwardTo: operator %s has no child named %q (children: %v)", c.n.name, name, c.names))
}

func (c *procContext[K, V]) RecordMetadata() (RecordMetadata, bool) {
	if c.t.cur == nil {
		return RecordMetadata{}, false
	}
	return RecordMetadata{Topic: c.t.cur.Topic, Partition: c.t.cur.Partition, Offset: c.t.cur.Offset}, true
}

func (c *procContext[K, V]) TaskID() TaskID       { return TaskID(c.t.id) }
func (c *procContext[K, V]) Name() string         { return c.n.name }
func (c *procContext[K, V]) Logger() *slog.Logger { return c.t.log }

func (c *procContext[K, V]) Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error) {
	return c.t.schedule(c.n, interval, typ, fn)
}

func (c *procContext[K, V]) Store(name string) (any, error) {
	for _, d := range c.n.stores {
		if d.name == name {
			return c.t.stores[name], nil
		}
	}
	return nil, fmt.Errorf("kstream: operator %s has no store named %q; connect it with WithStores", c.n.name, name)
}

// childInputs instantiates the children of n for task t, all of which take Record[K, V].
func childInputs[K, V any](t *task, n *node) (*procContext[K, V], error) {
	c := &procContext[K, V]{t: t, n: n}
	for _, ch := range n.children {
		in, err := t.instance(ch)
		if err != nil {
			return nil, err
		}
		f, ok := in.(func(Record[K, V]))
		if !ok {
			return nil, fmt.Errorf("kstream: internal error: operator %s cannot take the output of %s", ch.name, n.name)
		}
		c.children = append(c.children, labeled(t, ch, f))
		c.names = append(c.names, ch.name)
	}
	return c, nil
}

// processorInstance wires a processor into task t: it returns the input function that the
// parents call, which runs the processor with panic isolation and error handling.
func processorInstance[KIn, VIn, KOut, VOut any](t *task, n *node, p Processor[KIn, VIn, KOut, VOut]) (any, error) {
	ctx, err := childInputs[KOut, VOut](t, n)
	if err != nil {
		return nil, err
	}
	if in, ok := p.(initializer[KOut, VOut]); ok {
		if err := in.Init(ctx); err != nil {
			return nil, fmt.Errorf("kstream: init of operator %s: %w", n.name, err)
		}
	}
	if c, ok := p.(closer); ok {
		t.closers = append(t.closers, namedCloser{n.name, c})
	}
	return func(r Record[KIn, VIn]) {
		defer t.recoverIn(n)
		if err := p.Process(ctx, r); err != nil {
			t.processingError(n, err)
		}
	}, nil
}

type namedCloser struct {
	name string
	c    closer
}
