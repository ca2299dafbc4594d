package kstream

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// TimestampExtractor gives each input record its timestamp, the event time that orders the
// records of a task's partitions, drives stream time and stream-time punctuation, and that
// the record carries through the topology ([Record].Timestamp) and into its outputs. It
// corresponds to Kafka Streams' TimestampExtractor; the default, [FailOnInvalidTimestamp],
// takes the timestamp Kafka stored with the record.
//
// Extract returns the timestamp in milliseconds since the Unix epoch. partitionTime is the
// largest timestamp extracted so far from the record's partition by this task, or -1 when
// none is known yet. A negative result drops the record: it is logged at warn and counted
// in [Stats].DroppedRecords, and its offset is committed as processed. A non-nil error
// stops the application (Kafka Streams' StreamsException), with an error naming the record's
// topic, partition and offset. A panic is such an error too.
//
// Extractors are called from the goroutines of the tasks, so one shared by several sources
// must be safe for concurrent use. They see the record's raw bytes, before the source
// decodes them.
type TimestampExtractor interface {
	Extract(r ConsumedRecord, partitionTime int64) (int64, error)
}

// TimestampExtractorFunc adapts a function to [TimestampExtractor].
type TimestampExtractorFunc func(r ConsumedRecord, partitionTime int64) (int64, error)

// Extract calls f.
func (f TimestampExtractorFunc) Extract(r ConsumedRecord, partitionTime int64) (int64, error) {
	return f(r, partitionTime)
}

// ConsumedRecord is an input record as a [TimestampExtractor] sees it: as it was read from
// Kafka.
type ConsumedRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are the raw bytes; nil is a Kafka null.
	Key, Value []byte
	Headers    []Header
	// Timestamp is the timestamp stored with the record in Kafka (its create time, or its
	// log-append time if the topic says so), in milliseconds since the Unix epoch; negative
	// when the record has none.
	Timestamp int64
}

// ErrInvalidTimestamp is the error of [FailOnInvalidTimestamp] and
// [UsePartitionTimeOnInvalidTimestamp] for a record they cannot give a timestamp.
var ErrInvalidTimestamp = errors.New("invalid (negative) record timestamp")

// FailOnInvalidTimestamp takes the timestamp stored with the record and stops the
// application on a record whose timestamp is negative (an error wrapping
// [ErrInvalidTimestamp], naming the record's topic, partition and offset). It is the
// default, as in Kafka Streams (FailOnInvalidTimestamp).
type FailOnInvalidTimestamp struct{}

// Extract implements [TimestampExtractor].
func (FailOnInvalidTimestamp) Extract(r ConsumedRecord, _ int64) (int64, error) {
	if r.Timestamp < 0 {
		return 0, fmt.Errorf("%w %d: possibly written by a producer that does not set timestamps; use another TimestampExtractor to process this data", ErrInvalidTimestamp, r.Timestamp)
	}
	return r.Timestamp, nil
}

// LogAndSkipOnInvalidTimestamp takes the timestamp stored with the record and drops a
// record whose timestamp is negative: it is logged at warn and counted in
// [Stats].DroppedRecords, and processing goes on (Kafka Streams'
// LogAndSkipOnInvalidTimestamp).
type LogAndSkipOnInvalidTimestamp struct{}

// Extract implements [TimestampExtractor].
func (LogAndSkipOnInvalidTimestamp) Extract(r ConsumedRecord, _ int64) (int64, error) {
	return r.Timestamp, nil
}

// UsePartitionTimeOnInvalidTimestamp takes the timestamp stored with the record, and gives
// a record whose timestamp is negative the partition time instead: the largest timestamp
// taken from its partition so far. When that is not known yet (the partition's first
// records), it stops the application with an error wrapping [ErrInvalidTimestamp] (Kafka
// Streams' UsePartitionTimeOnInvalidTimestamp).
type UsePartitionTimeOnInvalidTimestamp struct{}

// Extract implements [TimestampExtractor].
func (UsePartitionTimeOnInvalidTimestamp) Extract(r ConsumedRecord, partitionTime int64) (int64, error) {
	if r.Timestamp >= 0 {
		return r.Timestamp, nil
	}
	if partitionTime < 0 {
		return 0, fmt.Errorf("%w %d: cannot use the partition time instead, because it is not known yet", ErrInvalidTimestamp, r.Timestamp)
	}
	return partitionTime, nil
}

// WallclockTimestampExtractor gives every record the current wall-clock time of the
// instance when it is fetched (processing time), whatever its stored timestamp (Kafka
// Streams' WallclockTimestampExtractor). The test driver's records get its real clock, not
// its mock one, as in Kafka Streams' TopologyTestDriver.
type WallclockTimestampExtractor struct{}

// Extract implements [TimestampExtractor].
func (WallclockTimestampExtractor) Extract(ConsumedRecord, int64) (int64, error) {
	return time.Now().UnixMilli(), nil
}

// WithTimestampExtractor sets the [TimestampExtractor] of a source, overriding
// [Config.DefaultTimestampExtractor]. It corresponds to Kafka Streams'
// Consumed.withTimestampExtractor. Applies to [Stream] and [StreamTopics]; for [Table], see
// [TableTimestampExtractor].
func WithTimestampExtractor(te TimestampExtractor) Option {
	return optFunc{"WithTimestampExtractor", func(c *opConfig) { c.extractor = te }}
}

// TableTimestampExtractor sets the [TimestampExtractor] of the topic that a [Table] reads,
// overriding [Config.DefaultTimestampExtractor]; the table's rows keep the extracted
// timestamps. It is a [StoreOption] because Table takes those; it applies to [Table] only.
func TableTimestampExtractor(te TimestampExtractor) StoreOption {
	return storeOpt{"TableTimestampExtractor", func(d *storeDef) { d.extractor, d.extractorSet = te, true }}
}

// extract runs the timestamp extractor of raw's source, turning a panic into an error.
func (t *task) extract(raw *rawRecord, partitionTime int64) (ts int64, err error) {
	te := t.extractors[raw.Topic]
	if te == nil && len(t.patterns) > 0 {
		t.patternSource(raw.Topic)
		te = t.extractors[raw.Topic]
	}
	if te == nil {
		te = t.h.ts
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("in the timestamp extractor: %w", &panicError{p, debug.Stack()})
		}
	}()
	rec := ConsumedRecord{
		Topic: raw.Topic, Partition: raw.Partition, Offset: raw.Offset,
		Key: raw.Key, Value: raw.Value, Headers: fromKgoHeaders(raw.Headers),
		Timestamp: raw.Timestamp.UnixMilli(),
	}
	return te.Extract(rec, partitionTime)
}

// Timestamp implements runtime.Task.
func (t *task) Timestamp(raw *rawRecord, partitionTime int64) (int64, error) {
	return t.extract(raw, partitionTime)
}
