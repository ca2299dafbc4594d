package kstream

import (
	"fmt"
	"slices"

	"github.com/kstream-go/kstream/internal/runtime"
)

// Partitioner chooses the partitions of a topic, which has n partitions, that a record
// with key and value is written to: Kafka Streams' StreamPartitioner, with the
// partitions method of KIP-837. It answers [DefaultPartition] (the producer's default:
// the murmur2 hash of the serialized key, or a sticky partition for a null key), one
// partition ([ToPartitions](p)), several ([ToPartitions](p1, p2, ...): the record is
// written once to each, as Java's multicast), or none ([ToPartitions]() with no
// partition: the record is dropped and counted in [Stats].DroppedRecords, as Java does).
//
// A record with a null key ([Record.HasNullKey]) is passed with the zero key, and a
// tombstone with the zero value (Java passes null). A partition outside [0, n) is a
// production error, handled by [Config.ProductionErrorHandler] (Java's producer refuses
// it likewise). It runs on the task's goroutine and must not block. Give it to [KStream.To],
// [KStream.ToTopicFunc] or [KStream.Repartition] with [WithPartitioner], to the
// foreign-key joins with [WithPartitioner] and [WithOtherPartitioner], and to
// [KeyMetadataWith] to locate a key written so.
type Partitioner[K, V any] func(topic string, key K, value V, n int32) Partitions

// Partitions is the answer of a [Partitioner]: see [DefaultPartition] and [ToPartitions].
type Partitions struct {
	parts  []int32
	chosen bool
}

// DefaultPartition is the [Partitioner] answer that leaves the choice to the producer's
// default partitioner (Java's Optional.empty()).
func DefaultPartition() Partitions { return Partitions{} }

// ToPartitions is the [Partitioner] answer that writes the record to each of the given
// partitions once (a partition given twice counts once, as in Java's Set), or drops it when
// none is given (Java's Optional.of(Set.of())).
func ToPartitions(p ...int32) Partitions {
	return Partitions{parts: slices.Clone(p), chosen: true}
}

// IsDefault reports whether p leaves the partition to the default partitioner.
func (p Partitions) IsDefault() bool { return !p.chosen }

// List returns the partitions chosen, sorted and without duplicates; nil for
// [DefaultPartition] and for a dropped record.
func (p Partitions) List() []int32 {
	if len(p.parts) == 0 {
		return nil
	}
	l := slices.Clone(p.parts)
	slices.Sort(l)
	return slices.Compact(l)
}

// WithPartitioner gives an operator that writes a topic a [Partitioner], as Kafka Streams'
// Produced.streamPartitioner, Repartitioned.streamPartitioner and
// TableJoined.withPartitioner do. Applies to [KStream.To], [KStream.ToTopicFunc] and
// [KStream.Repartition], whose Partitioner has the stream's key and value types, and to
// [TableJoinOn] and [TableLeftJoinOn], where it partitions the left table's keys (the
// response topic: Java's TableJoined.withPartitioner; it is called with the zero value
// and must choose one partition, else the record is a processing error). A partitioner of
// other types is a Build error.
func WithPartitioner[K, V any](p Partitioner[K, V]) Option {
	return optFunc{"WithPartitioner", func(c *opConfig) { c.partitioner = p }}
}

// WithOtherPartitioner gives a foreign-key join ([TableJoinOn], [TableLeftJoinOn]) the
// [Partitioner] of the right table's keys, the foreign keys (the subscription topic), as
// Kafka Streams' TableJoined.withOtherPartitioner does: use it when the right table's
// topic is written with that partitioner. It is called with the zero value and must choose
// one partition, else the record is a processing error.
func WithOtherPartitioner[KO, VO any](p Partitioner[KO, VO]) Option {
	return optFunc{"WithOtherPartitioner", func(c *opConfig) { c.otherPartitioner = p }}
}

// partitionerOf returns the Partitioner[K, V] that opt holds (nil if none), or reports a
// Build error naming op if it has other types.
func partitionerOf[K, V any](b *Builder, op string, opt any) Partitioner[K, V] {
	if opt == nil {
		return nil
	}
	p, ok := opt.(Partitioner[K, V])
	if !ok {
		var want Partitioner[K, V]
		b.errorf("%s: the partitioner is a %T; this operation needs a %T", op, opt, want)
		return nil
	}
	return p
}

// producePartitioned produces o to the partitions that part chooses for r among those of
// o's topic: o as it is for the default, one copy per partition chosen, nothing (the
// record counted as dropped) for none. It runs in sink n of task t.
func producePartitioned[K, V any](t *task, n *node, part Partitioner[K, V], r Record[K, V], o *runtime.OutRecord) {
	topic := o.Record.Topic
	count, err := t.env.PartitionCount(t.env.Context(), topic)
	if err != nil {
		t.partitionError(n, topic, err)
		return
	}
	var key K
	var value V
	if !r.HasNullKey() {
		key = r.Key
	}
	if !r.IsTombstone() {
		value = r.Value
	}
	ps := part(topic, key, value, count)
	if ps.IsDefault() {
		t.env.Produce(o)
		return
	}
	list := ps.List()
	if len(list) == 0 {
		t.dropRecord(n, "partitioner")
		return
	}
	for i, p := range list {
		if p < 0 || p >= count {
			t.partitionError(n, topic, fmt.Errorf("the partitioner chose partition %d, not in [0, %d)", p, count))
			continue
		}
		out := o
		if i < len(list)-1 {
			out = &runtime.OutRecord{Record: o.Record, Operator: o.Operator, Source: o.Source}
			out.Record.Headers = slices.Clone(o.Record.Headers)
		}
		out.Record.Partition, out.Partitioned = p, true
		t.env.Produce(out)
	}
}

// partitionError hands an error in choosing the partition of a record for sinkTopic, in
// sink n, to the production error handler, as Java's record collector does.
func (t *task) partitionError(n *node, sinkTopic string, err error) {
	ec := t.errorContext(ProductionError, n, fmt.Errorf("choosing the partition for topic %q: %w", sinkTopic, err))
	ec.SinkTopic = sinkTopic
	t.handle(n, t.h.prod, ec)
}
