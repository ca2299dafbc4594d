// Package kstream is Kafka Streams for Go: a typed DSL and Processor API for stream
// processing on Apache Kafka, with the semantics of Apache Kafka Streams.
//
// A program builds a topology with a [Builder], then runs it with [New] and [App.Run]:
//
//	b := kstream.NewBuilder()
//	orders := kstream.Stream(b, "orders", serde.String(), serde.JSON[Order]())
//	big := orders.Filter(func(_ string, o Order) bool { return o.Total > 100 })
//	kstream.MapValues(big, func(o Order) string { return o.ID }).To("big-orders", serde.String(), serde.String())
//
//	app, err := kstream.New(b, kstream.Config{ApplicationID: "orders", Brokers: brokers})
//	err = app.Run(ctx) // blocks until ctx is done or a fatal error
//
// Go has no method type parameters, so operations that change the key or value type are
// package functions ([Map], [MapValues], [FlatMap], [SelectKey], [Process], ...) and
// type-preserving ones are methods ([KStream.Filter], [KStream.Peek], [KStream.Merge],
// [KStream.To], [KStream.Split], ...).
//
// # Tables
//
// A [KTable] holds the latest value of each key. Table operators pass each other changes, a
// row's new value with the value it replaced, so that filters can retract rows, regrouping
// can subtract a row from its old group, and joins can tell a delete from nothing, with the
// semantics of Kafka Streams' KTable operators. A table kept in a store forwards a key's
// latest update once per commit (Kafka Streams' record cache, on by default in both:
// Config.CacheMaxBytes, docs/caching.md); without the cache, every update is emitted.
// Table stores keep a timestamp with each value, as Kafka Streams' timestamped stores do, so
// that joins and aggregations give their results Java's timestamps. [KTable.ToStream] turns
// updates into records; a delete becomes a tombstone ([Record.IsTombstone]), which a sink
// writes as a null value.
//
// # Null keys and values
//
// A Kafka record may have a null key or a null value (no bytes at all). Kafka Streams
// decides "null" on the deserialized object, which a Go string or int64 cannot be, so
// kstream decides on the wire: a record read with nil key or value bytes carries the mark
// ([Record.HasNullKey], [Record.IsTombstone]) through the operators that keep its key or
// value, and sinks write it back as nil bytes, whatever the serdes. Each operator applies
// Kafka Streams' rule for nulls: stateless operators keep such records (their functions get
// the zero value), aggregations and the stream-table inner join drop them, a left join keeps
// a null key, a table source deletes on a null value and drops a null key. A dropped record
// is logged at warn and counted in [Stats].DroppedRecords, as Kafka Streams counts it in
// its dropped-records metric. The rule of every operator is in docs/semantics.md.
//
// # Event time
//
// Every input record gets a timestamp from its source's [TimestampExtractor] (by default
// the one Kafka stored with it). A task reading several partitions processes their records
// in the order of their timestamps, across polls, waiting for an empty partition as
// [Config.MaxTaskIdle] says; its stream time, the largest timestamp it processed, drives
// [StreamTime] punctuators, and the instance's clock [WallClockTime] ones
// ([ProcessorContext].Schedule). Outputs keep their input's timestamp. docs/eventtime.md has
// the rules.
//
// # Runtime model
//
// The topology is cut at repartition topics into sub-topologies; a task is one sub-topology
// over one partition number of its sources. Each application instance is one member of the
// consumer group named by the application id; the group assigns whole tasks, and an
// instance processes its tasks in parallel on goroutines. Scaling out means starting more
// instances with the same application id.
//
// Processing is at-least-once: an input offset is committed only after every output record
// it produced is acknowledged by Kafka.
package kstream

import (
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a typed record flowing through a topology.
//
// Records are values: a processor that forwards a changed record changes its own copy.
// Headers is shared with the input record and with sibling operators; treat it as read-only
// and use [Record.WithHeader] to add one.
//
// A record may be a tombstone: its value is a Kafka null (see [Record.IsTombstone]); and
// its key may be a Kafka null (see [Record.HasNullKey]). A processor that forwards its
// input record, or a copy of it with other fields changed, keeps those marks; a Record built
// anew has neither, unless made with [Record.AsNullKey] or [Record.AsTombstone].
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []Header

	// null marks a Kafka null value: the record was read with one, or is a table delete.
	null bool
	// nullKey marks a Kafka null key: the record was read with one (nil key bytes), whatever
	// the key serde made of it.
	nullKey bool
}

// IsTombstone reports whether r's value is a Kafka null: r was read with a null value, or
// is a delete forwarded by [KTable.ToStream] (or made with [Record.AsTombstone]), and its
// Value is still the zero value. Operators that keep the value ([KStream.Filter],
// [KStream.Peek], [SelectKey], [KStream.Merge], branches, repartitioning) keep tombstones;
// an operator that computes a new value ([MapValues], [Map], ...) makes a record that is
// not one. A sink writes a tombstone with a null value, whatever the value serde, so a
// table's deletes reach Kafka as deletes even when V is a type without nil (string,
// int64). Setting Value to anything but the zero value makes r an ordinary record.
func (r Record[K, V]) IsTombstone() bool { return r.null && isZero(r.Value) }

// HasNullKey reports whether r's key is a Kafka null: r was read with a null key (nil key
// bytes) or made with [Record.AsNullKey], and its Key is still the zero value; or Key is a
// nil pointer, map, slice or interface. Kafka Streams decides "null key" on the
// deserialized object; a Go string or int64 cannot be nil, so kstream decides on the wire
// and carries the mark with the record. Operators that keep the key ([KStream.Filter],
// [MapValues], [KStream.Merge], branches, [LeftJoin], ...) keep the mark; an operator that
// computes a key ([SelectKey], [Map], [GroupBy], ...) makes a record whose key is null only
// if the new key is nil. The operators that drop null-key records in Kafka Streams drop
// these: aggregations, the stream-table inner [Join], table sources, and repartitions
// (unless a left join downstream keeps them); docs/semantics.md has every rule.
func (r Record[K, V]) HasNullKey() bool { return (r.nullKey && isZero(r.Key)) || isNil(r.Key) }

// AsNullKey returns a copy of r whose key is a Kafka null (the zero K as seen by
// operators), for processors that forward records without a key: a sink writes it with a
// null key, whatever the key serde, and the operators that drop null keys drop it.
func (r Record[K, V]) AsNullKey() Record[K, V] {
	var zero K
	r.Key, r.nullKey = zero, true
	return r
}

// AsTombstone returns a copy of r whose value is a Kafka null (the zero V as seen by
// operators), for processors that write deletes to a compacted topic.
func (r Record[K, V]) AsTombstone() Record[K, V] {
	var zero V
	r.Value, r.null = zero, true
	return r
}

// WithHeader returns a copy of r with one more header; r's headers are not modified.
func (r Record[K, V]) WithHeader(key string, value []byte) Record[K, V] {
	h := make([]Header, len(r.Headers), len(r.Headers)+1)
	copy(h, r.Headers)
	r.Headers = append(h, Header{Key: key, Value: value})
	return r
}

// Header returns the value of the last header named key, and whether there is one.
func (r Record[K, V]) Header(key string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// RecordMetadata is where the input record being processed came from.
type RecordMetadata struct {
	Topic     string
	Partition int32
	Offset    int64
}

// TaskID names a task: one sub-topology over one partition number of its sources.
// It prints as Kafka Streams prints task ids, "<sub-topology>_<partition>".
type TaskID struct {
	// SubTopology is the sub-topology's number, as Topology.Describe prints it.
	SubTopology int
	// Partition is the partition number of the task's source topics.
	Partition int32
}

// String returns the id as Kafka Streams prints it: "<sub-topology>_<partition>".
func (id TaskID) String() string { return runtime.TaskID(id).String() }

// taskIDs converts the runtime's task ids.
func taskIDs(ids []runtime.TaskID) []TaskID {
	if ids == nil {
		return nil
	}
	out := make([]TaskID, len(ids))
	for i, id := range ids {
		out[i] = TaskID(id)
	}
	return out
}
