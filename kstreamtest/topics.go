package kstreamtest

import (
	"fmt"
	"reflect"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// InputTopic writes typed records into one topic of a [Driver].
type InputTopic[K, V any] struct {
	d       *Driver
	topic   string
	ks      serde.Serde[K]
	vs      serde.Serde[V]
	now     time.Time
	advance time.Duration
}

// InputOption configures an [InputTopic].
type InputOption func(*inputOptions)

type inputOptions struct {
	start   time.Time
	advance time.Duration
}

// StartTime sets the timestamp of the first record piped without one, overriding the
// default of the driver's wall-clock time when the topic was created.
func StartTime(t time.Time) InputOption { return func(o *inputOptions) { o.start = t } }

// AutoAdvance makes the timestamp of records piped without one advance by d after each
// record (TestInputTopic's autoAdvance). The default is 0: they all share the start time.
func AutoAdvance(d time.Duration) InputOption { return func(o *inputOptions) { o.advance = d } }

// CreateInputTopic returns a typed writer for topic, which the topology must read.
func CreateInputTopic[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V], opts ...InputOption) *InputTopic[K, V] {
	o := inputOptions{start: d.wall}
	for _, opt := range opts {
		opt(&o)
	}
	// Serdes that depend on the topic (serde.TopicBound: the Schema Registry serdes) are
	// bound to it, as a producer's are.
	ks, vs = serde.ForTopic(ks, topic, true), serde.ForTopic(vs, topic, false)
	return &InputTopic[K, V]{d: d, topic: topic, ks: ks, vs: vs, now: o.start, advance: o.advance}
}

// Pipe writes a record with the topic's current time and processes it to completion. It
// returns a fatal error that stopped the topology (a failure the error handlers did not
// absorb), or a serialization error of the input itself.
func (in *InputTopic[K, V]) Pipe(key K, value V) error {
	return in.PipeRecord(kstream.Record[K, V]{Key: key, Value: value})
}

// PipeAt writes a record with timestamp ts. It does not move the topic's time.
func (in *InputTopic[K, V]) PipeAt(key K, value V, ts time.Time) error {
	return in.PipeRecord(kstream.Record[K, V]{Key: key, Value: value, Timestamp: ts})
}

// PipeRecord writes r with its headers. A zero Timestamp means the topic's current time
// (which then auto-advances). A record made with [kstream.Record.AsNullKey] is written with
// a null key, and one made with [kstream.Record.AsTombstone] with a null value, whatever the
// serdes:
//
//	in.PipeRecord(kstream.Record[string, string]{Value: "v"}.AsNullKey()) // null key
//	in.PipeRecord(kstream.Record[string, string]{Key: "k"}.AsTombstone()) // null value
func (in *InputTopic[K, V]) PipeRecord(r kstream.Record[K, V]) error {
	var kb, vb []byte
	var err error
	if !r.HasNullKey() {
		if kb, err = in.ks.Serialize(r.Key); err != nil {
			return fmt.Errorf("kstreamtest: serializing the key for topic %q: %w", in.topic, err)
		}
	}
	if !r.IsTombstone() {
		if vb, err = in.vs.Serialize(r.Value); err != nil {
			return fmt.Errorf("kstreamtest: serializing the value for topic %q: %w", in.topic, err)
		}
	}
	return in.PipeRaw(kb, vb, r.Timestamp, r.Headers...)
}

// PipeRaw writes a record given as bytes, for example one that the topology's serdes cannot
// decode, or one with a null key or value: a nil key or value is a Kafka null.
func (in *InputTopic[K, V]) PipeRaw(key, value []byte, ts time.Time, headers ...kstream.Header) error {
	if ts.IsZero() {
		ts = in.now
		in.now = in.now.Add(in.advance)
	}
	raw := &kgo.Record{Topic: in.topic, Key: key, Value: value, Timestamp: ts}
	for _, h := range headers {
		raw.Headers = append(raw.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return in.d.pipe(raw)
}

// PipeKeyValues writes each pair in turn with [InputTopic.Pipe], stopping at the first error.
func (in *InputTopic[K, V]) PipeKeyValues(kvs ...kstream.KeyValue[K, V]) error {
	for _, kv := range kvs {
		if err := in.Pipe(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceTime moves the topic's time for records piped without a timestamp.
func (in *InputTopic[K, V]) AdvanceTime(by time.Duration) { in.now = in.now.Add(by) }

// OutputRecord is a record read from an output topic, with where it was written.
type OutputRecord[K, V any] struct {
	kstream.Record[K, V]
	Topic     string
	Partition int32
	Offset    int64
}

// OutputTopic reads typed records from one topic of a [Driver], in the order they were
// written (across partitions). Reading consumes them.
type OutputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	pos   int
}

// CreateOutputTopic returns a typed reader of topic, from its first record.
func CreateOutputTopic[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *OutputTopic[K, V] {
	ks, vs = serde.ForTopic(ks, topic, true), serde.ForTopic(vs, topic, false)
	return &OutputTopic[K, V]{d: d, topic: topic, ks: ks, vs: vs}
}

// QueueSize returns the number of records not read yet.
func (o *OutputTopic[K, V]) QueueSize() int { return len(o.d.topics[o.topic]) - o.pos }

// IsEmpty reports whether every record has been read.
func (o *OutputTopic[K, V]) IsEmpty() bool { return o.QueueSize() == 0 }

// ReadRecord reads the next record; it returns [ErrNoRecord] when there is none. A record
// written with a null key or value says so ([kstream.Record.HasNullKey],
// [kstream.Record.IsTombstone]), whatever the serdes made of the nil bytes.
func (o *OutputTopic[K, V]) ReadRecord() (OutputRecord[K, V], error) {
	recs := o.d.topics[o.topic]
	if o.pos >= len(recs) {
		return OutputRecord[K, V]{}, ErrNoRecord
	}
	raw := recs[o.pos]
	o.pos++
	k, err := o.ks.Deserialize(raw.Key)
	if err != nil {
		return OutputRecord[K, V]{}, fmt.Errorf("kstreamtest: topic %q partition %d offset %d: key: %w", raw.Topic, raw.Partition, raw.Offset, err)
	}
	v, err := o.vs.Deserialize(raw.Value)
	if err != nil {
		return OutputRecord[K, V]{}, fmt.Errorf("kstreamtest: topic %q partition %d offset %d: value: %w", raw.Topic, raw.Partition, raw.Offset, err)
	}
	rec := kstream.Record[K, V]{Key: k, Value: v, Timestamp: raw.Timestamp}
	// The marks hold only while the key or value is the zero value (what every serde of
	// package serde makes of nil bytes); a serde that decodes nil to something else keeps it.
	if raw.Key == nil && reflect.ValueOf(&rec.Key).Elem().IsZero() {
		rec = rec.AsNullKey()
	}
	if raw.Value == nil && reflect.ValueOf(&rec.Value).Elem().IsZero() {
		rec = rec.AsTombstone()
	}
	out := OutputRecord[K, V]{Record: rec, Topic: raw.Topic, Partition: raw.Partition, Offset: raw.Offset}
	for _, h := range raw.Headers {
		out.Headers = append(out.Headers, kstream.Header{Key: h.Key, Value: h.Value})
	}
	return out, nil
}

// ReadKeyValue reads the next record's key and value.
func (o *OutputTopic[K, V]) ReadKeyValue() (kstream.KeyValue[K, V], error) {
	r, err := o.ReadRecord()
	return kstream.KeyValue[K, V]{Key: r.Key, Value: r.Value}, err
}

// ReadValue reads the next record's value.
func (o *OutputTopic[K, V]) ReadValue() (V, error) {
	r, err := o.ReadRecord()
	return r.Value, err
}

// ReadRecords reads every remaining record.
func (o *OutputTopic[K, V]) ReadRecords() ([]OutputRecord[K, V], error) {
	var out []OutputRecord[K, V]
	for !o.IsEmpty() {
		r, err := o.ReadRecord()
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ReadKeyValues reads every remaining record's key and value.
func (o *OutputTopic[K, V]) ReadKeyValues() ([]kstream.KeyValue[K, V], error) {
	recs, err := o.ReadRecords()
	out := make([]kstream.KeyValue[K, V], len(recs))
	for i, r := range recs {
		out[i] = kstream.KeyValue[K, V]{Key: r.Key, Value: r.Value}
	}
	return out, err
}

// ReadValues reads every remaining record's value.
func (o *OutputTopic[K, V]) ReadValues() ([]V, error) {
	recs, err := o.ReadRecords()
	out := make([]V, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out, err
}
