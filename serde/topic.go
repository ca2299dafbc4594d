package serde

import "context"

// TopicBound is implemented by serdes whose bytes depend on the topic they are written to or
// read from, and on whether they encode a record's key or its value. The serdes of the
// Confluent Schema Registry (packages serde/avro, serde/protobuf and serde/jsonschema) are
// such serdes: the subject under which they register and look up their schema is named
// after the topic, "<topic>-key" or "<topic>-value" by default.
//
// kstream calls ForTopic once per topic the serde is used with (source topics, sink topics,
// repartition topics and the changelog topics of stores) and uses the returned serde for
// that topic's keys (isKey true) or values (isKey false). Kafka Streams' Confluent serdes
// learn the same through Serializer.configure(configs, isKey) and the topic argument of
// serialize(topic, data).
//
// A serde that does not implement TopicBound is used as it is for every topic. The wrappers
// of this package ([Nullable], [TimeWindowed], [SessionWindowed]) implement it by binding
// the serde they wrap.
type TopicBound[T any] interface {
	// ForTopic returns the serde to use for the keys (isKey true) or the values of topic.
	// It must not block or fail: a serde that needs to talk to a service for that topic
	// does so on first use, or in a method of its own that the application calls at start.
	ForTopic(topic string, isKey bool) Serde[T]
}

// ForTopic returns s bound to topic, for keys if isKey is true and for values otherwise:
// s.ForTopic(topic, isKey) if s implements [TopicBound], or s itself.
func ForTopic[T any](s Serde[T], topic string, isKey bool) Serde[T] {
	if tb, ok := s.(TopicBound[T]); ok {
		return tb.ForTopic(topic, isKey)
	}
	return s
}

// ForTopic binds the wrapped serde to topic.
func (n nullable[T]) ForTopic(topic string, isKey bool) Serde[*T] {
	return nullable[T]{ForTopic(n.inner, topic, isKey)}
}

// ForTopic binds the inner key serde to topic.
func (s timeWindowed[K]) ForTopic(topic string, isKey bool) Serde[Windowed[K]] {
	return timeWindowed[K]{inner: ForTopic(s.inner, topic, isKey), size: s.size}
}

// ForTopic binds the inner key serde to topic.
func (s sessionWindowed[K]) ForTopic(topic string, isKey bool) Serde[Windowed[K]] {
	return sessionWindowed[K]{inner: ForTopic(s.inner, topic, isKey)}
}

// ContextBound is implemented by serdes whose calls may wait on a service: the Schema
// Registry serdes wait out a registry outage, retrying. kstream calls WithContext with a
// context that is done when the application shuts down, and uses the serde it returns, so
// that a shutdown does not wait for the service: a call cut short returns an error that
// wraps [ErrUnavailable] (the record is then neither skipped nor committed).
type ContextBound[T any] interface {
	// WithContext returns the serde whose calls end when ctx is done. It must not block.
	WithContext(ctx context.Context) Serde[T]
}

// WithContext returns s.WithContext(ctx) if s implements [ContextBound], or s itself.
func WithContext[T any](s Serde[T], ctx context.Context) Serde[T] {
	if cb, ok := s.(ContextBound[T]); ok {
		return cb.WithContext(ctx)
	}
	return s
}

// WithContext passes ctx to the wrapped serde.
func (n nullable[T]) WithContext(ctx context.Context) Serde[*T] {
	return nullable[T]{WithContext(n.inner, ctx)}
}

// WithContext passes ctx to the inner key serde.
func (s timeWindowed[K]) WithContext(ctx context.Context) Serde[Windowed[K]] {
	return timeWindowed[K]{inner: WithContext(s.inner, ctx), size: s.size}
}

// WithContext passes ctx to the inner key serde.
func (s sessionWindowed[K]) WithContext(ctx context.Context) Serde[Windowed[K]] {
	return sessionWindowed[K]{inner: WithContext(s.inner, ctx)}
}
