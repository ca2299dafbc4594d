package serde

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
