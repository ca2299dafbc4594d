package kstream

import "github.com/kstream-go/kstream/serde"

// topicSerdes binds a serde to each topic it is used with ([serde.TopicBound]: the Schema
// Registry serdes name their subjects after the topic), once per topic, on first use. One
// belongs to one task's source or sink instance, which only that task's goroutine uses. A
// serde that is not TopicBound is used as it is.
type topicSerdes[T any] struct {
	base  serde.Serde[T]
	isKey bool
	bind  bool // base implements serde.TopicBound
	// last is the topic of the last lookup and its serde: a source or sink reads or
	// writes one topic most of the time.
	last      string
	lastSerde serde.Serde[T]
	bound     map[string]serde.Serde[T]
}

func newTopicSerdes[T any](s serde.Serde[T], isKey bool) *topicSerdes[T] {
	_, bind := s.(serde.TopicBound[T])
	return &topicSerdes[T]{base: s, isKey: isKey, bind: bind}
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
		s = serde.ForTopic(b.base, topic, b.isKey)
		b.bound[topic] = s
	}
	b.last, b.lastSerde = topic, s
	return s
}
