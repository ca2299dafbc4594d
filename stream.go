package kstream

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KStream is a typed stream of records: every record is an independent event. Create one
// with [Stream] or [StreamTopics] and derive others with its methods and the package
// functions. KStream values are cheap handles into their [Builder]; the zero KStream is not
// usable.
//
// A KStream may carry serdes for its key and value: a source's serdes travel through
// operators that keep the key or value type (also MapValues from string to string, say), and
// are used where the stream must be written to a topic ([KStream.Repartition], grouping, and
// [KStream.To] when given nil serdes). [KStream.WithSerdes] sets them.
type KStream[K, V any] struct {
	b          *Builder
	n          *node
	ks         serde.Serde[K]
	vs         serde.Serde[V]
	keyChanged bool // a key-changing operator ran since the last repartition
}

// KeyValue is a key and a value, as returned by [FlatMap].
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// KV returns a KeyValue.
func KV[K, V any](k K, v V) KeyValue[K, V] { return KeyValue[K, V]{Key: k, Value: v} }

// OffsetReset says where a source starts reading when the application has no committed
// offset for a partition. It corresponds to Kafka Streams' AutoOffsetReset
// (Consumed.withOffsetResetPolicy): [ResetDefault], [ResetEarliest], [ResetLatest] or
// [ResetByDuration]. The zero value is ResetDefault. OffsetReset values are comparable.
type OffsetReset struct {
	policy resetPolicy
	d      time.Duration // ResetByDuration's
}

// resetPolicy is the kind of an OffsetReset; its values are the runtime's (runtime.Reset).
type resetPolicy uint8

const (
	resetDefault resetPolicy = iota
	resetEarliest
	resetLatest
	resetByDuration
)

var (
	// ResetDefault uses [Config.OffsetReset] (earliest unless set).
	ResetDefault OffsetReset = OffsetReset{}
	// ResetEarliest starts at the oldest record still in the partition.
	ResetEarliest OffsetReset = OffsetReset{policy: resetEarliest}
	// ResetLatest starts after the newest record at the time the partition is assigned.
	ResetLatest OffsetReset = OffsetReset{policy: resetLatest}
)

// ResetByDuration starts at the first record whose timestamp is at or after the time the
// partition is assigned minus d, or after the newest record if there is none: a new
// application processes only the last d of its input. The broker finds the record
// (ListOffsets by timestamp), so the timestamps are those stored in Kafka, whatever the
// source's [TimestampExtractor]. It is Kafka Streams' AutoOffsetReset.byDuration
// (KIP-1106). d must not be negative. Repartition topics, which the application writes
// itself, start at their earliest record under a by-duration [Config.OffsetReset].
func ResetByDuration(d time.Duration) OffsetReset {
	return OffsetReset{policy: resetByDuration, d: d}
}

// Duration returns the duration of a [ResetByDuration] policy, and whether r is one.
func (r OffsetReset) Duration() (time.Duration, bool) { return r.d, r.policy == resetByDuration }

// String returns "default", "earliest", "latest" or "by_duration:<d>", as Kafka's
// auto.offset.reset spells them.
func (r OffsetReset) String() string {
	switch r.policy {
	case resetDefault:
		return "default"
	case resetEarliest:
		return "earliest"
	case resetLatest:
		return "latest"
	case resetByDuration:
		return "by_duration:" + r.d.String()
	}
	return fmt.Sprintf("OffsetReset(%d)", r.policy)
}

// check returns an error if r is not a valid policy.
func (r OffsetReset) check() error {
	if r.policy > resetByDuration {
		return fmt.Errorf("%v is not a policy: use ResetDefault, ResetEarliest, ResetLatest or ResetByDuration", r)
	}
	if r.policy == resetByDuration && r.d < 0 {
		return fmt.Errorf("ResetByDuration(%v): the duration must not be negative", r.d)
	}
	return nil
}

// runtime returns r as the runtime's policy and duration.
func (r OffsetReset) runtime() (runtime.Reset, time.Duration) { return runtime.Reset(r.policy), r.d }

// Option configures a source or an operator. Not every option applies to every operation;
// each option's doc says where it applies, and a misplaced option is a build error.
type Option interface{ apply(*opConfig) }

type opConfig struct {
	stores     []*storeDef
	extractor  TimestampExtractor
	mat        *matConfig
	name       string
	reset      OffsetReset
	partitions int32
	// partitioner and otherPartitioner are a Partitioner[K, V] of WithPartitioner and
	// WithOtherPartitioner, typed by the operation.
	partitioner, otherPartitioner any
	sj                            streamJoinOpts // stream-stream join options (stream_join.go)
	used                          []string       // option names, for misplaced-option errors
	joinGrace                     *time.Duration // JoinGrace
	// serdeOnly says that the operation takes a Materialized without a store name (a
	// serde only), as Filter and TableMapValues do.
	serdeOnly bool
	async     asyncOpts // the async operators' options (async.go)
}

type optFunc struct {
	name string
	f    func(*opConfig)
}

func (o optFunc) apply(c *opConfig) { o.f(c); c.used = append(c.used, o.name) }

// Named gives an operator (or, for [KStream.Split], the prefix of its branches) an explicit
// name instead of a generated one, as Kafka Streams' Named.as does. Names appear in
// Describe, logs and error messages. Applies to every operation: it is an [Option] of the
// operations that take those, and a [StoreOption] of those that take store options, the
// aggregations ([Count], [Reduce], [Aggregate], their windowed, session and table forms,
// the cogroup aggregations) and [KStream.ToTable], where it names the operator and not the
// store. A table aggregation named n also names its repartition sink and source n-sink and
// n-source, as Java's does. Named on a store of its own ([KeyValueStore], [Table],
// [Materialized]...) is a Build error.
func Named(name string) NamedOption { return namedOpt(name) }

// NamedOption is the option [Named] returns: both an [Option] and a [StoreOption].
type NamedOption interface {
	Option
	StoreOption
}

type namedOpt string

func (o namedOpt) apply(c *opConfig) { c.name = string(o); c.used = append(c.used, "Named") }

func (o namedOpt) applyStore(d *storeDef) { d.opName = string(o); d.used = append(d.used, "Named") }

// opNameOf returns the operator name that a [Named] among opts gives, or "".
func opNameOf(opts []StoreOption) string {
	var d storeDef
	applyStoreOpts(&d, opts)
	return d.opName
}

// aggName returns the name of an aggregation's operator: the one [Named] gives among opts,
// or a generated one of kind prefix. Either way it takes a name from the counter, as Kafka
// Streams' NamedInternal.orElseGenerateWithPrefix does.
func (b *Builder) aggName(prefix string, opts []StoreOption) string {
	gen := b.newName(prefix)
	if n := opNameOf(opts); n != "" {
		return n
	}
	return gen
}

// WithOffsetReset sets a source's reset policy ([ResetEarliest], [ResetLatest],
// [ResetByDuration]), overriding [Config.OffsetReset]. Applies to [Stream] and
// [StreamTopics].
func WithOffsetReset(r OffsetReset) Option {
	return optFunc{"WithOffsetReset", func(c *opConfig) { c.reset = r }}
}

// NumPartitions sets the partition count of a repartition topic (default: that of the
// largest input topic upstream). Applies to [KStream.Repartition].
func NumPartitions(n int32) Option {
	return optFunc{"NumPartitions", func(c *opConfig) { c.partitions = n }}
}

// options applies opts, reporting options that op does not accept.
func (b *Builder) options(op string, opts []Option, allowed ...string) opConfig {
	var c opConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		o.apply(&c)
	}
	for _, u := range c.used {
		ok := u == "Named"
		for _, a := range allowed {
			ok = ok || a == u
		}
		if !ok {
			b.errorf("option %s does not apply to %s", u, op)
		}
	}
	return c
}

// Stream reads topic as a stream with the given key and value serdes.
// It corresponds to Kafka Streams' StreamsBuilder.stream. Options: [Named], [WithOffsetReset],
// [WithTimestampExtractor].
func Stream[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], opts ...Option) KStream[K, V] {
	return StreamTopics(b, []string{topic}, ks, vs, opts...)
}

// StreamTopics reads several topics as one stream with the same serdes. Records of one
// partition keep their order; the records of a task's partitions of different topics are
// processed in the order of their timestamps (see [TimestampExtractor] and
// [Config.MaxTaskIdle]). Options: as [Stream].
func StreamTopics[K, V any](b *Builder, topics []string, ks serde.Serde[K], vs serde.Serde[V], opts ...Option) KStream[K, V] {
	c := b.options("Stream", opts, "WithOffsetReset", "WithTimestampExtractor")
	if len(topics) == 0 {
		b.errorf("Stream: no topic given")
	}
	if ks == nil || vs == nil {
		b.errorf("Stream(%v): key and value serdes are required: %w", topics, ErrNoSerde)
	}
	if err := c.reset.check(); err != nil {
		b.errorf("%s: WithOffsetReset: %w", "Stream("+strings.Join(topics, ",")+")", err)
	}
	n := &node{kind: kindSource, topics: append([]string(nil), topics...), reset: c.reset, extractor: c.extractor}
	b.addNode(n, "SOURCE", c.name)
	n.instantiate = sourceInstance(n, ks, vs)
	return KStream[K, V]{b: b, n: n, ks: ks, vs: vs}
}

// StreamPattern reads every topic whose whole name matches pattern (Java's
// Pattern.matcher(topic).matches(); write pattern without ^ and $) as one stream with the
// given serdes: Kafka Streams' StreamsBuilder.stream(Pattern). Describe prints the
// pattern as Java does ("(topics: <pattern>)"). As in Java, task p reads partition p of
// every matching topic, so the sub-topology has as many tasks as the largest matching
// topic has partitions, and a pattern source joined with another stream or table requires
// every matching topic to have the partition count of the other side (co-partitioning,
// checked at start). The application's own internal topics never match.
//
// At least one matching topic must exist when the instance starts (else Run fails). A
// matching topic created later is read, as in Java: each instance finds it within seconds,
// subscribes to it, and the group rebalances; partition p of it joins task <sub>_p. A new
// topic that must be co-partitioned (the pattern source is joined) and has another
// partition count, or that has more partitions than a stateful sub-topology has tasks (its
// changelogs cannot grow), stops the instance with an error naming it; a key of a new topic
// with fewer partitions goes to the task of its own partition, which may not be the one
// holding its state from the other topics (a warning says so). Under the streams protocol
// (Config.GroupProtocol) the broker holds the topology, which cannot change: a new topic is
// only logged, and read after a restart. Options: as [Stream].
func StreamPattern[K, V any](b *Builder, pattern *regexp.Regexp, ks serde.Serde[K], vs serde.Serde[V], opts ...Option) KStream[K, V] {
	c := b.options("StreamPattern", opts, "WithOffsetReset", "WithTimestampExtractor")
	if pattern == nil {
		b.errorf("StreamPattern: no pattern given")
		pattern = regexp.MustCompile("$^")
	}
	if ks == nil || vs == nil {
		b.errorf("StreamPattern(%s): key and value serdes are required: %w", pattern, ErrNoSerde)
	}
	if err := c.reset.check(); err != nil {
		b.errorf("StreamPattern(%s): WithOffsetReset: %w", pattern, err)
	}
	n := &node{kind: kindSource, pattern: pattern, reset: c.reset, extractor: c.extractor}
	b.addNode(n, "SOURCE", c.name)
	n.instantiate = sourceInstance(n, ks, vs)
	return KStream[K, V]{b: b, n: n, ks: ks, vs: vs}
}

func sourceInstance[K, V any](n *node, ks serde.Serde[K], vs serde.Serde[V]) func(t *task) (any, error) {
	return func(t *task) (any, error) {
		ctx, err := childInputs[K, V](t, n)
		if err != nil {
			return nil, err
		}
		kt, vt := newTopicSerdes(t.env.Context(), ks, true), newTopicSerdes(t.env.Context(), vs, false)
		return sourceFn(func(raw *rawRecord) {
			k, err := deserialize(kt.forTopic(raw.Topic), raw.Key)
			if err != nil {
				t.deserializationError(n, fmt.Errorf("key: %w", err))
				return
			}
			v, err := deserialize(vt.forTopic(raw.Topic), raw.Value)
			if err != nil {
				t.deserializationError(n, fmt.Errorf("value: %w", err))
				return
			}
			// The record's timestamp is the one its timestamp extractor gave it.
			ctx.Forward(Record[K, V]{Key: k, Value: v, Timestamp: time.UnixMilli(t.curTS), Headers: fromKgoHeaders(raw.Headers), null: raw.Value == nil, nullKey: raw.Key == nil})
		}), nil
	}
}

// deserialize calls s, turning a panic into an error.
func deserialize[T any](s serde.Serde[T], b []byte) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("in deserializer: %w", &panicError{p, debug.Stack()})
		}
	}()
	return s.Deserialize(b)
}

func serialize[T any](s serde.Serde[T], v T) (b []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("in serializer: %w", &panicError{p, debug.Stack()})
		}
	}()
	return s.Serialize(v)
}

// addProcessor adds a processor node under s.
func addProcessor[KIn, VIn, KOut, VOut any](s KStream[KIn, VIn], prefix string, c opConfig, mk func() Processor[KIn, VIn, KOut, VOut]) KStream[KOut, VOut] {
	n := &node{kind: kindProcessor}
	s.b.addNode(n, prefix, c.name, s.n)
	n.instantiate = func(t *task) (any, error) { return processorInstance(t, n, mk()) }
	return KStream[KOut, VOut]{b: s.b, n: n}
}

// same returns out with s's serdes and key state, for type-preserving operators.
func (s KStream[K, V]) same(out KStream[K, V]) KStream[K, V] {
	out.ks, out.vs, out.keyChanged = s.ks, s.vs, s.keyChanged
	return out
}

// Filter keeps the records for which pred is true. Dropped records are dropped for this
// branch only: other children of s still see them.
func (s KStream[K, V]) Filter(pred func(K, V) bool, opts ...Option) KStream[K, V] {
	return s.same(addProcessor(s, "FILTER", s.b.options("Filter", opts), func() Processor[K, V, K, V] {
		return ProcessorFunc[K, V, K, V](func(ctx ProcessorContext[K, V], r Record[K, V]) error {
			if pred(r.Key, r.Value) {
				ctx.Forward(r)
			}
			return nil
		})
	}))
}

// FilterNot keeps the records for which pred is false.
func (s KStream[K, V]) FilterNot(pred func(K, V) bool, opts ...Option) KStream[K, V] {
	return s.Filter(func(k K, v V) bool { return !pred(k, v) }, opts...)
}

// Peek calls fn for every record and forwards the record unchanged.
func (s KStream[K, V]) Peek(fn func(K, V), opts ...Option) KStream[K, V] {
	return s.same(addProcessor(s, "PEEK", s.b.options("Peek", opts), func() Processor[K, V, K, V] {
		return ProcessorFunc[K, V, K, V](func(ctx ProcessorContext[K, V], r Record[K, V]) error {
			fn(r.Key, r.Value)
			ctx.Forward(r)
			return nil
		})
	}))
}

// Foreach calls fn for every record. It ends the stream.
func (s KStream[K, V]) Foreach(fn func(K, V), opts ...Option) {
	addProcessor(s, "FOREACH", s.b.options("Foreach", opts), func() Processor[K, V, K, V] {
		return ProcessorFunc[K, V, K, V](func(_ ProcessorContext[K, V], r Record[K, V]) error {
			fn(r.Key, r.Value)
			return nil
		})
	})
}

// Map replaces each record's key and value. Because the key may change, a key-dependent
// operator downstream (grouping, joins) first repartitions the stream.
func Map[K, V, KR, VR any](s KStream[K, V], fn func(K, V) (KR, VR), opts ...Option) KStream[KR, VR] {
	out := addProcessor(s, "MAP", s.b.options("Map", opts), func() Processor[K, V, KR, VR] {
		return ProcessorFunc[K, V, KR, VR](func(ctx ProcessorContext[KR, VR], r Record[K, V]) error {
			k, v := fn(r.Key, r.Value)
			ctx.Forward(Record[KR, VR]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		})
	})
	out.ks, out.vs, out.keyChanged = carry[K, KR](s.ks), carry[V, VR](s.vs), true
	out.n.keyChanging = true
	return out
}

// MapValues replaces each record's value; the key is unchanged, so no repartition follows.
func MapValues[K, V, VR any](s KStream[K, V], fn func(V) VR, opts ...Option) KStream[K, VR] {
	return MapValuesWithKey(s, func(_ K, v V) VR { return fn(v) }, opts...)
}

// MapValuesWithKey is [MapValues] with read-only access to the key.
func MapValuesWithKey[K, V, VR any](s KStream[K, V], fn func(K, V) VR, opts ...Option) KStream[K, VR] {
	out := addProcessor(s, "MAPVALUES", s.b.options("MapValues", opts), func() Processor[K, V, K, VR] {
		return ProcessorFunc[K, V, K, VR](func(ctx ProcessorContext[K, VR], r Record[K, V]) error {
			ctx.Forward(Record[K, VR]{Key: r.Key, Value: fn(r.Key, r.Value), Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey})
			return nil
		})
	})
	out.ks, out.vs, out.keyChanged = s.ks, carry[V, VR](s.vs), s.keyChanged
	out.n.valueChanging = true
	return out
}

// carry returns s as the serde of the new type U when U is T (the operator kept the type),
// and nil otherwise, so type-changing operators drop serdes that could not apply.
func carry[T, U any](s serde.Serde[T]) serde.Serde[U] {
	if u, ok := any(s).(serde.Serde[U]); ok {
		return u
	}
	return nil
}

// FlatMap turns each record into zero or more records, which keep the input's timestamp and
// headers. The key may change (see [Map]).
func FlatMap[K, V, KR, VR any](s KStream[K, V], fn func(K, V) []KeyValue[KR, VR], opts ...Option) KStream[KR, VR] {
	out := addProcessor(s, "FLATMAP", s.b.options("FlatMap", opts), func() Processor[K, V, KR, VR] {
		return ProcessorFunc[K, V, KR, VR](func(ctx ProcessorContext[KR, VR], r Record[K, V]) error {
			for _, kv := range fn(r.Key, r.Value) {
				ctx.Forward(Record[KR, VR]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			return nil
		})
	})
	out.ks, out.vs, out.keyChanged = carry[K, KR](s.ks), carry[V, VR](s.vs), true
	out.n.keyChanging = true
	return out
}

// FlatMapValues turns each record into zero or more records with the same key.
func FlatMapValues[K, V, VR any](s KStream[K, V], fn func(V) []VR, opts ...Option) KStream[K, VR] {
	return FlatMapValuesWithKey(s, func(_ K, v V) []VR { return fn(v) }, opts...)
}

// FlatMapValuesWithKey is [FlatMapValues] with read-only access to the key.
func FlatMapValuesWithKey[K, V, VR any](s KStream[K, V], fn func(K, V) []VR, opts ...Option) KStream[K, VR] {
	out := addProcessor(s, "FLATMAPVALUES", s.b.options("FlatMapValues", opts), func() Processor[K, V, K, VR] {
		return ProcessorFunc[K, V, K, VR](func(ctx ProcessorContext[K, VR], r Record[K, V]) error {
			for _, v := range fn(r.Key, r.Value) {
				ctx.Forward(Record[K, VR]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey})
			}
			return nil
		})
	})
	out.ks, out.vs, out.keyChanged = s.ks, carry[V, VR](s.vs), s.keyChanged
	out.n.valueChanging = true
	return out
}

// SelectKey replaces each record's key with fn(key, value). The value keeps its serde.
func SelectKey[K, V, KR any](s KStream[K, V], fn func(K, V) KR, opts ...Option) KStream[KR, V] {
	out := addProcessor(s, "KEY-SELECT", s.b.options("SelectKey", opts), func() Processor[K, V, KR, V] {
		return ProcessorFunc[K, V, KR, V](func(ctx ProcessorContext[KR, V], r Record[K, V]) error {
			ctx.Forward(Record[KR, V]{Key: fn(r.Key, r.Value), Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, null: r.null})
			return nil
		})
	})
	out.ks, out.vs, out.keyChanged = carry[K, KR](s.ks), s.vs, true
	out.n.keyChanging = true
	return out
}

// Process runs a [Processor] on every record. newProcessor is called once per task, so each
// task gets its own instance. Because the processor may change keys, a key-dependent
// operator downstream repartitions first; [ProcessValues] does not change keys and avoids
// that.
func Process[KIn, VIn, KOut, VOut any](s KStream[KIn, VIn], newProcessor func() Processor[KIn, VIn, KOut, VOut], opts ...Option) KStream[KOut, VOut] {
	c := s.b.options("Process", opts, "WithStores")
	prefix := "PROCESSOR"
	if c.name != "" {
		prefix = "" // KStreamImpl.process takes no generated name when it is given one
	}
	out := addProcessor(s, prefix, c, newProcessor)
	for _, d := range c.stores {
		s.b.addStore(d, out.n)
	}
	out.ks, out.vs, out.keyChanged = carry[KIn, KOut](s.ks), carry[VIn, VOut](s.vs), true
	// As Kafka Streams does with the fix of KAFKA-19668 (__enable.process.processValue.fix__):
	// a repartition needed downstream goes after the processor, never before it.
	out.n.keyChanging, out.n.valueChanging = true, true
	return out
}

// Merge returns a stream with the records of s and other. There is no ordering guarantee
// between the two inputs. Merging a stream with itself gives each record once, as in Kafka
// Streams (the merge node has the stream as its parent once); merging it with a stream
// derived from it (a filter of it, say) gives a record once for each side that has it.
func (s KStream[K, V]) Merge(other KStream[K, V], opts ...Option) KStream[K, V] {
	c := s.b.options("Merge", opts)
	if other.b != s.b {
		s.b.errorf("Merge: the streams come from different builders")
		return s
	}
	parents := []*node{s.n, other.n}
	if other.n == s.n {
		parents = parents[:1] // Kafka Streams forwards each record once
	}
	n := &node{kind: kindProcessor, merge: true}
	s.b.addNode(n, "MERGE", c.name, parents...)
	n.instantiate = func(t *task) (any, error) {
		ctx, err := childInputs[K, V](t, n)
		if err != nil {
			return nil, err
		}
		return func(r Record[K, V]) { ctx.Forward(r) }, nil
	}
	out := KStream[K, V]{b: s.b, n: n, ks: s.ks, vs: s.vs, keyChanged: s.keyChanged || other.keyChanged}
	if out.ks == nil {
		out.ks = other.ks
	}
	if out.vs == nil {
		out.vs = other.vs
	}
	return out
}

// WithSerdes returns s carrying the given serdes, for operators that write the stream to
// a topic. A nil serde leaves the current one.
func (s KStream[K, V]) WithSerdes(ks serde.Serde[K], vs serde.Serde[V]) KStream[K, V] {
	if ks != nil {
		s.ks = ks
	}
	if vs != nil {
		s.vs = vs
	}
	return s
}

// To writes every record to topic. Nil serdes mean the stream's own (see [KStream]).
// Records are partitioned by the murmur2 hash of the serialized key, as Java producers do;
// records with a nil key are spread over partitions. A record with a null key
// ([Record.HasNullKey]) is written with a null key and a tombstone with a null value,
// whatever the serdes. The topic must exist when the application starts. Options: [Named],
// [WithPartitioner] (Kafka Streams' Produced.streamPartitioner).
func (s KStream[K, V]) To(topic string, ks serde.Serde[K], vs serde.Serde[V], opts ...Option) {
	c := s.b.options("To", opts, "WithPartitioner")
	if topic == "" {
		s.b.errorf("To: empty topic name")
	}
	n := &node{kind: kindSink, sinkTopic: topic}
	s.b.addNode(n, "SINK", c.name, s.n)
	part := partitionerOf[K, V](s.b, "To("+topic+"): WithPartitioner", c.partitioner)
	s.sink(n, "To("+topic+")", ks, vs, func(Record[K, V]) string { return topic }, part)
}

// ToTopicFunc writes every record to the topic that topicOf returns for it (Kafka Streams'
// TopicNameExtractor). Writing to a topic that does not exist is a production error.
// Options: [Named], [WithPartitioner].
func (s KStream[K, V]) ToTopicFunc(topicOf func(Record[K, V]) string, ks serde.Serde[K], vs serde.Serde[V], opts ...Option) {
	c := s.b.options("ToTopicFunc", opts, "WithPartitioner")
	// Java prints the extractor's toString (its class); the Go equivalent is the function.
	n := &node{kind: kindSink, describe: funcName(topicOf)}
	s.b.addNode(n, "SINK", c.name, s.n)
	s.sink(n, "ToTopicFunc", ks, vs, topicOf, partitionerOf[K, V](s.b, "ToTopicFunc: WithPartitioner", c.partitioner))
}

func (s KStream[K, V]) sink(n *node, op string, ks serde.Serde[K], vs serde.Serde[V], topicOf func(Record[K, V]) string, part Partitioner[K, V]) {
	if ks == nil {
		ks = s.ks
	}
	if vs == nil {
		vs = s.vs
	}
	if ks == nil || vs == nil {
		s.b.errorf("%s (operator %s): the stream carries no key or value serde; pass them or use WithSerdes: %w", op, n.name, ErrNoSerde)
	}
	n.instantiate = sinkInstance(n, func() (serde.Serde[K], serde.Serde[V]) { return ks, vs }, topicOf, func() Partitioner[K, V] { return part })
	if n.sinkTopic != "" {
		n.checks = append(n.checks, checkTopicSerde(ks, n.sinkTopic, false, true), checkTopicSerde(vs, n.sinkTopic, false, false))
	}
}

// sinkInstance makes the per-task input of sink n; serdes and part (which may be nil, or
// return nil: the default partitioning) are read when a task is created.
func sinkInstance[K, V any](n *node, serdes func() (serde.Serde[K], serde.Serde[V]), topicOf func(Record[K, V]) string, part func() Partitioner[K, V]) func(t *task) (any, error) {
	return func(t *task) (any, error) {
		ks, vs := serdes()
		var p Partitioner[K, V]
		if part != nil {
			p = part()
		}
		kt, vt := newTopicSerdes(t.env.Context(), ks, true), newTopicSerdes(t.env.Context(), vs, false)
		return func(r Record[K, V]) {
			defer t.recoverIn(n)
			topic := topicOf(r)
			if n.internal {
				topic = internalTopic(t.appID, topic)
			}
			if topic == "" {
				t.processingError(n, fmt.Errorf("topic function returned an empty topic name"))
				return
			}
			var kb []byte // a null key is written as a null key
			var err error
			if !r.HasNullKey() {
				if kb, err = serialize(kt.forTopic(topic), r.Key); err != nil {
					t.serializationError(n, topic, fmt.Errorf("key: %w", err))
					return
				}
			}
			var vb []byte // a tombstone is written as a null value
			if !r.IsTombstone() {
				if vb, err = serialize(vt.forTopic(topic), r.Value); err != nil {
					t.serializationError(n, topic, fmt.Errorf("value: %w", err))
					return
				}
			}
			o := &runtime.OutRecord{
				Record:   kgo.Record{Topic: topic, Key: kb, Value: vb, Timestamp: r.Timestamp, Headers: toKgoHeaders(r.Headers)},
				Operator: n.name,
				Source:   t.cur,
			}
			if p != nil {
				producePartitioned(t, n, p, r, o)
				return
			}
			t.env.Produce(o)
		}, nil
	}
}

// Repartition writes the stream to an internal topic "<application.id>-<name>-repartition"
// and reads it back, so that records are partitioned by their current key. It uses the
// stream's serdes (see [KStream.WithSerdes]). As in Kafka Streams, records with a null key
// ([Record.HasNullKey]) are dropped before the topic, silently, unless a join that keeps
// them ([LeftJoin], [LeftJoinGlobal]) is downstream; the same holds for the repartitions
// that grouping, joins and [KStream.ToTable] insert. The operators are a filter "<name>-repartition-filter",
// a sink "<name>-repartition-sink" and a source "<name>-repartition-source". It corresponds
// to Kafka Streams' KStream.repartition(Repartitioned.as(name)); unlike the repartitions
// that aggregations and joins make, it is never shared. Options: [Named] is not needed (name
// names it), [NumPartitions], [WithPartitioner] (Kafka Streams'
// Repartitioned.streamPartitioner).
func (s KStream[K, V]) Repartition(name string, opts ...Option) KStream[K, V] {
	c := s.b.options("Repartition", opts, "NumPartitions", "WithPartitioner")
	if name == "" {
		s.b.errorf("Repartition: a name is required (it names the internal topic)")
		name = genName("KSTREAM-REPARTITION", s.b.index)
	}
	gen := s.b.repartitionNames()
	rp := newRepartition(s.b, s.n, name, gen, s.ks, s.vs, c.partitions, false)
	rp.part = partitionerOf[K, V](s.b, "Repartition("+name+"): WithPartitioner", c.partitioner)
	if s.ks == nil || s.vs == nil {
		s.b.errorf("Repartition(%s) (operator %s): the stream carries no key or value serde; use WithSerdes: %w", name, rp.sink.name, ErrNoSerde)
	}
	return KStream[K, V]{b: s.b, n: rp.source, ks: s.ks, vs: s.vs}
}

// repartition is a repartition topic: a filter that drops null keys, a sink that writes the
// topic and a source that reads it back, as Kafka Streams' repartition nodes are. Its serdes
// may be filled in by a later operator that shares it.
type repartition[K, V any] struct {
	ks                   serde.Serde[K]
	vs                   serde.Serde[V]
	topic                string
	filter, sink, source *node
	part                 Partitioner[K, V] // WithPartitioner's, or nil
}

// repartitionKeeps is the predicate of the filter before a repartition sink (Kafka Streams'
// "-repartition-filter" node): a record with a null key cannot be partitioned by key and is
// dropped, unless a left join downstream takes null keys (KIP-962; Java's
// rewriteRepartitionNodes), in which case keepNullKeys is true.
func repartitionKeeps[K, V any](r Record[K, V], keepNullKeys bool) bool {
	return keepNullKeys || !r.HasNullKey()
}

// repartitionNames takes the three names that Kafka Streams generates for every repartition
// it is asked for (sink, filter, source; KStreamImpl.createRepartitionedSource), whether they
// are used or not, so that later generated names match Java's.
func (b *Builder) repartitionNames() [3]string {
	return [3]string{b.newName("KSTREAM-SINK"), b.newName("KSTREAM-FILTER"), b.newName("KSTREAM-SOURCE")}
}

// generatedName matches the names Kafka Streams generates ("KSTREAM.*-[0-9]{10}"): a
// repartition named after one has generated operator names too.
func generatedName(name string) bool {
	if !strings.HasPrefix(name, "KSTREAM") || len(name) < 11 || name[len(name)-11] != '-' {
		return false
	}
	for _, c := range name[len(name)-10:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// repartitionTopic is the topic of a repartition named after prefix: "<prefix>-repartition",
// or prefix if it already ends so.
func repartitionTopic(prefix string) string {
	if strings.HasSuffix(prefix, "-repartition") {
		return prefix
	}
	return prefix + "-repartition"
}

// newRepartition adds a repartition of the stream out of parent, named as Kafka Streams
// names it after prefix: the topic "<prefix>-repartition" (or prefix, if it already ends so)
// and its operators "<topic>-filter", "<topic>-sink" and "<topic>-source", or the generated
// names gen when prefix is itself a generated name. first puts the filter before parent's
// other children and the nodes right after parent in the builder's order, where Java's
// optimizer writes a merged repartition.
func newRepartition[K, V any](b *Builder, parent *node, prefix string, gen [3]string, ks serde.Serde[K], vs serde.Serde[V], partitions int32, first bool) *repartition[K, V] {
	topic := repartitionTopic(prefix)
	sinkName, filterName, sourceName := topic+"-sink", topic+"-filter", topic+"-source"
	if generatedName(prefix) {
		sinkName, filterName, sourceName = gen[0], gen[1], gen[2]
	}
	b.internal = append(b.internal, runtime.InternalTopic{
		Name:       topic,
		Partitions: partitions,
		// As in Kafka Streams: kept until consumed, then purged by the application.
		Configs: map[string]*string{"cleanup.policy": ptr("delete"), "retention.ms": ptr("-1")},
	})
	rp := &repartition[K, V]{ks: ks, vs: vs, topic: topic}
	rp.filter = &node{kind: kindProcessor}
	rp.sink = &node{kind: kindSink, sinkTopic: topic, internal: true}
	rp.source = &node{kind: kindSource, topics: []string{topic}, internal: true}
	rp.filter.repSource = rp.source
	rp.sink.serdeIDs = func() (string, string) { return serdeID(rp.ks), serdeID(rp.vs) }
	at := len(b.nodes)
	b.addNode(rp.filter, "", filterName, parent)
	b.addNode(rp.sink, "", sinkName, rp.filter)
	b.addNode(rp.source, "", sourceName)
	if first {
		// Move the filter to the front of parent's children, and the three nodes after
		// parent in the builder's order.
		parent.children = append([]*node{rp.filter}, parent.children[:len(parent.children)-1]...)
		added := slices.Clone(b.nodes[at:])
		b.nodes = slices.Delete(b.nodes, at, len(b.nodes))
		b.nodes = slices.Insert(b.nodes, slices.Index(b.nodes, parent)+1, added...)
	}
	filter := rp.filter
	filter.instantiate = func(t *task) (any, error) {
		ctx, err := childInputs[K, V](t, filter)
		if err != nil {
			return nil, err
		}
		keep := filter.keepNullKeys
		return func(r Record[K, V]) {
			if repartitionKeeps(r, keep) {
				ctx.Forward(r)
			}
		}, nil
	}
	rp.sink.instantiate = sinkInstance(rp.sink, func() (serde.Serde[K], serde.Serde[V]) { return rp.ks, rp.vs },
		func(Record[K, V]) string { return topic }, func() Partitioner[K, V] { return rp.part })
	rp.source.instantiate = func(t *task) (any, error) { return sourceInstance(rp.source, rp.ks, rp.vs)(t) }
	rp.sink.checks = append(rp.sink.checks, func(ctx context.Context, appID string) error {
		// The serdes are read at start: an operator downstream may have set them since.
		if err := checkTopicSerde(rp.ks, topic, true, true)(ctx, appID); err != nil {
			return err
		}
		return checkTopicSerde(rp.vs, topic, true, false)(ctx, appID)
	})
	return rp
}

// repartitionForKey is called by the operators that need their input partitioned by key
// (aggregations, stream-table joins, ToTable) when a key-changing operator ran before. It
// returns s read back from a repartition topic named after prefix, as Kafka Streams with
// topology.optimization=all does:
//
//   - A repartition requested below a key-changing operator (or a merge of re-keyed
//     streams) with only filters, peeks, branches and merges in between is shared: the first
//     request creates it, right after that operator, named after the first request's prefix,
//     and moves the path from the operator to the request below the repartition's source
//     (Java's mergeRepartitionTopics); every later request below the same operator reuses it.
//     So two joins and a count of one re-keyed stream use one topic.
//   - Below a value-changing operator (MapValues, FlatMapValues) Java cannot share, and
//     neither does kstream: each request has its own topic, except that unnamed
//     stream-table joins of one stream share theirs (joinShare; Java's repartitionForJoin).
//
// op names the operator in error messages.
func repartitionForKey[K, V any](s KStream[K, V], prefix string, joinShare bool, op string) KStream[K, V] {
	b := s.b
	gen := b.repartitionNames()
	anchor, done := repartitionAnchor(s.n)
	if done {
		// An earlier request moved s below a shared repartition: s is partitioned by key.
		return KStream[K, V]{b: b, n: s.n, ks: s.ks, vs: s.vs}
	}
	if anchor != nil {
		rp, ok := anchor.shared.(*repartition[K, V])
		if anchor.shared == nil {
			// Java's optimizer makes the merged repartition with the first request's
			// topic as its prefix, so its operators are "<topic>-filter" and so on.
			rp, ok = newRepartition(b, anchor, repartitionTopic(prefix), gen, s.ks, s.vs, 0, true), true
			b.internalOps[rp.topic] = op
			anchor.shared = rp
			b.sharedChecks = append(b.sharedChecks, func() error {
				if rp.ks == nil || rp.vs == nil {
					return fmt.Errorf("kstream: %s (operator %s): the stream must be repartitioned, but carries no key or value serde; use WithSerdes: %w", op, rp.sink.name, ErrNoSerde)
				}
				return nil
			})
			rp.source.sharedOf = anchor
		}
		if ok {
			if rp.ks == nil {
				rp.ks = s.ks
			}
			if rp.vs == nil {
				rp.vs = s.vs
			}
			if s.n == anchor {
				return KStream[K, V]{b: b, n: rp.source, ks: s.ks, vs: s.vs}
			}
			// Move the anchor's child on the path to s below the repartition's source.
			c := s.n
			for c.parents[0] != anchor {
				c = c.parents[0]
			}
			anchor.children = slices.DeleteFunc(anchor.children, func(x *node) bool { return x == c })
			c.parents[0] = rp.source
			rp.source.children = append(rp.source.children, c)
			return KStream[K, V]{b: b, n: s.n, ks: s.ks, vs: s.vs}
		}
		// A shared repartition of other types: cannot happen with the DSL; repartition alone.
	}
	if joinShare {
		if prev, ok := b.joinRepartitions[s.n].(KStream[K, V]); ok {
			return prev
		}
	}
	if s.ks == nil || s.vs == nil {
		b.errorf("%s: the stream must be repartitioned through %q, but carries no key or value serde; use WithSerdes: %w", op, prefix+"-repartition", ErrNoSerde)
	}
	rp := newRepartition(b, s.n, prefix, gen, s.ks, s.vs, 0, false)
	b.internalOps[rp.topic] = op
	out := KStream[K, V]{b: b, n: rp.source, ks: s.ks, vs: s.vs}
	if joinShare {
		b.joinRepartitions[s.n] = out
	}
	return out
}

// repartitionAnchor finds where a repartition requested on the stream out of n goes when it
// is shared: the key-changing operator above n, found as Kafka Streams' optimizer finds it
// (the nearest operator above that changes keys or values must be one that changes keys),
// or a merge of streams on the way (whose inputs were re-keyed). It returns nil when the
// repartition cannot be shared, and done when n is already below a shared repartition.
func repartitionAnchor(n *node) (anchor *node, done bool) {
	for x := n; ; x = x.parents[0] {
		switch {
		case x.sharedOf != nil:
			return nil, true
		case x.keyChanging:
			return x, false
		case x.valueChanging:
			return nil, false
		case x.merge:
			// Java's getKeyChangingParentNode through a merge, then its merge-node rule
			// (maybeUpdateKeyChangingRepartitionNodeMap): the repartition follows the merge.
			kv := findAbove(x, func(y *node) bool { return y.keyChanging || y.valueChanging })
			if kv != nil && kv == findAbove(x, func(y *node) bool { return y.keyChanging }) {
				return x, false
			}
			return nil, false
		case len(x.parents) == 0:
			return nil, false
		}
	}
}

// findAbove is Kafka Streams' findParentNodeMatching started at n's parents: a parent that
// matches, else (for the last parent searched) a match above it.
func findAbove(n *node, match func(*node) bool) *node {
	var found *node
	for _, p := range n.parents {
		if match(p) {
			return p
		}
		found = findAbove(p, match)
	}
	return found
}

// funcName is the name of function f, for Describe.
func funcName(f any) string {
	if fn := goruntime.FuncForPC(reflect.ValueOf(f).Pointer()); fn != nil {
		return fn.Name()
	}
	return fmt.Sprintf("%T", f)
}

func ptr[T any](v T) *T { return &v }
