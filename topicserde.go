package kstream

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// topicSerdes binds a serde to each topic it is used with ([serde.TopicBound]: the Schema
// Registry serdes name their subjects after the topic), once per topic, on first use. One
// belongs to one task's source or sink instance, which only that task's goroutine uses. A
// serde that is not TopicBound is used as it is.
type topicSerdes[T any] struct {
	base  serde.Serde[T]
	isKey bool
	bind  bool // base implements serde.TopicBound
	// ctx is done when the instance shuts down; a bound serde that may wait on a service
	// (serde.ContextBound) is given it.
	ctx context.Context
	// last is the topic of the last lookup and its serde: a source or sink reads or
	// writes one topic most of the time.
	last      string
	lastSerde serde.Serde[T]
	bound     map[string]serde.Serde[T]
}

func newTopicSerdes[T any](ctx context.Context, s serde.Serde[T], isKey bool) *topicSerdes[T] {
	_, bind := s.(serde.TopicBound[T])
	if _, ok := s.(serde.ContextBound[T]); ok && !bind {
		s = serde.WithContext(s, ctx)
	}
	return &topicSerdes[T]{base: s, isKey: isKey, bind: bind, ctx: ctx}
}

// forTopic returns the serde to use with topic.
func (b *topicSerdes[T]) forTopic(topic string) serde.Serde[T] {
	if !b.bind {
		return b.base
	}
	if b.lastSerde != nil && topic == b.last {
		return b.lastSerde
	}
	s, ok := b.bound[topic]
	if !ok {
		if b.bound == nil {
			b.bound = map[string]serde.Serde[T]{}
		}
		s = serde.WithContext(serde.ForTopic(b.base, topic, b.isKey), b.ctx)
		b.bound[topic] = s
	}
	b.last, b.lastSerde = topic, s
	return s
}

// storeSerde returns s bound to the changelog topic of store d (the Schema Registry serdes
// then register "<application.id>-<store>-changelog-key" and "-value", as Kafka Streams'
// Confluent serdes in a store do), if s is [serde.TopicBound]; else s itself. The topic is
// known once the application is built (it holds the application id): until then the serde
// is s unbound. A store without a changelog binds to "<application.id>-<store>-changelog"
// all the same, as Kafka Streams does; a table read from a topic binds to that topic.
func storeSerde[T any](d *storeDef, s serde.Serde[T], isKey bool) serde.Serde[T] {
	if _, ok := s.(serde.TopicBound[T]); !ok || s == nil {
		return s
	}
	lb := &lateBound[T]{base: s}
	var topic string
	d.binds = append(d.binds, func(t string) {
		b := serde.ForTopic(s, t, isKey)
		lb.bound.Store(&b)
		topic = t
	})
	d.checks = append(d.checks, func(ctx context.Context, _ string) error {
		// The store's serde ends its waits on a service when the application stops.
		if b := lb.get(); b != nil {
			b = serde.WithContext(b, ctx)
			lb.bound.Store(&b)
		}
		return checkSerde(ctx, lb.get(), topic, isKey)
	})
	return lb
}

// lateBound is a serde bound to its topic when the application is built (storeSerde).
type lateBound[T any] struct {
	base  serde.Serde[T]
	bound atomic.Pointer[serde.Serde[T]]
}

func (l *lateBound[T]) get() serde.Serde[T] {
	if p := l.bound.Load(); p != nil {
		return *p
	}
	return l.base
}

// Serialize implements serde.Serde.
func (l *lateBound[T]) Serialize(v T) ([]byte, error) { return l.get().Serialize(v) }

// Deserialize implements serde.Serde.
func (l *lateBound[T]) Deserialize(b []byte) (T, error) { return l.get().Deserialize(b) }

// AppendSerialize implements store.AppendSerializer, through the bound serde's if it has one.
func (l *lateBound[T]) AppendSerialize(dst []byte, v T) ([]byte, bool, error) {
	s := l.get()
	if app, ok := s.(store.AppendSerializer[T]); ok {
		return app.AppendSerialize(dst, v)
	}
	b, err := s.Serialize(v)
	if err != nil || b == nil {
		return dst, b == nil && err == nil, err
	}
	return append(dst, b...), false, nil
}

// storeKeySerde returns store d's key serde as its typed view uses it (bound to its
// changelog), for a processor that serializes keys itself to read and write the store; s if
// d holds none of type K.
func storeKeySerde[K any](d *storeDef, s serde.Serde[K]) serde.Serde[K] {
	if k, ok := d.key.(serde.Serde[K]); ok {
		return k
	}
	return s
}

// taskBound returns s bound to the application-owned topic "<application.id>-<name>" of task
// t (an internal topic, or a pseudo topic that only names subjects, as Kafka Streams' FK join
// names "<registration topic>-pk"), if s is [serde.TopicBound]; else s itself.
func taskBound[T any](t *task, s serde.Serde[T], name string, isKey bool) serde.Serde[T] {
	if _, ok := s.(serde.TopicBound[T]); !ok {
		return s
	}
	return serde.ForTopic(s, internalTopic(t.appID, name), isKey)
}

// serdeChecker is a serde that prepares to write at start: the Schema Registry serdes'
// Check registers (or looks up, or fetches) the schema they write with, and fails on a
// schema the registry refuses as incompatible.
type serdeChecker interface {
	Check(ctx context.Context) error
}

// startCheck is run by [App.Run] before the application joins its group, with the
// application id (which names internal topics).
type startCheck func(ctx context.Context, appID string) error

// checkTopicSerde returns the start check of s, the key (isKey) or value serde of a sink
// that writes topic (an internal topic's short name if internal).
func checkTopicSerde[T any](s serde.Serde[T], topic string, internal, isKey bool) startCheck {
	return func(ctx context.Context, appID string) error {
		if _, ok := s.(serde.TopicBound[T]); !ok {
			if _, ok := s.(serdeChecker); !ok {
				return nil
			}
		}
		if internal {
			topic = internalTopic(appID, topic)
		}
		return checkSerde(ctx, serde.ForTopic(s, topic, isKey), topic, isKey)
	}
}

// checkSerde checks s, bound to topic, if it is a serdeChecker.
func checkSerde[T any](ctx context.Context, s serde.Serde[T], topic string, isKey bool) error {
	c, ok := s.(serdeChecker)
	if !ok {
		return nil
	}
	if err := c.Check(ctx); err != nil {
		what := "value"
		if isKey {
			what = "key"
		}
		return fmt.Errorf("the %s serde of topic %q: %w", what, topic, err)
	}
	return nil
}

// startChecks runs the start checks of t's sinks and stores: every Schema Registry serde
// that the application writes with registers or finds its schema before the first record,
// so that a schema the registry refuses is an error at start that names the operator or
// store, the subject and the registry's message, not a failure of the first record.
func (t *Topology) startChecks(ctx context.Context, appID string) error {
	for _, n := range t.nodes {
		for _, check := range n.checks {
			if err := check(ctx, appID); err != nil {
				return fmt.Errorf("kstream: operator %s: %w", n.name, err)
			}
		}
	}
	for _, d := range t.stores {
		for _, check := range d.checks {
			if err := check(ctx, appID); err != nil {
				return fmt.Errorf("kstream: store %q: %w", d.name, err)
			}
		}
	}
	return nil
}
