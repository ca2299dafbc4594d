// Package kstreamtest runs a kstream topology without a broker, record by record, the way
// Kafka Streams' TopologyTestDriver does: a test pipes typed records into input topics and
// reads typed records from output topics.
//
// The driver runs the same compiled topology and the same per-task code as [kstream.App];
// only Kafka is replaced. Like TopologyTestDriver, it processes each piped record to
// completion before Pipe returns, including records that the topology writes to topics it
// reads itself (repartition topics), in the order they were written; a task that reads
// several partitions takes its buffered records in the order of their timestamps, as on a
// broker (see docs/eventtime.md), and with [kstream.Config.MaxTaskIdle] may hold a record
// back until its other partitions have one or the driver's clock passes the idle time.
// Output is kept in the order it was produced. The record caches (kstream.Config.CacheMaxBytes,
// on by default as in TopologyTestDriver) are flushed after every input record, as
// TopologyTestDriver commits after each, so every input's effect is visible; set
// CacheMaxBytes to -1 to see every single update (docs/caching.md, "The test driver").
//
// Every task exists from the start, as in TopologyTestDriver. Stream-time punctuators run
// as records are processed; wall-clock ones when [Driver.AdvanceWallClockTime] moves the
// driver's clock past their schedule.
//
// The driver commits when told to: [Driver.Commit], and [Driver.Close] before it closes the
// tasks. What a commit must cover is done then: a [kstream.KStream.ForeachBatch] sink hands
// over its pending batch (it also does so when a batch is full, and when the driver's clock
// passes the batch's MaxWait).
//
// A record written to the topic of a global table (piped, or produced by the topology)
// updates the global store at once, as TopologyTestDriver does; a record with a null value
// deletes its key. [KeyValueStore] reads global stores too.
//
// A record with a null key or a null value is piped with [InputTopic.PipeRaw] and nil bytes,
// or with [InputTopic.PipeRecord] and a record made by [kstream.Record.AsNullKey] or
// [kstream.Record.AsTombstone]; [OutputTopic.ReadRecord] reports nil bytes the same way.
// [Driver.DroppedRecords] counts the records that operators dropped for a null key or value.
//
// By default every topic has one partition, so the order of output equals the order of
// processing. [Partitions] and [TopicPartitions] give topics more partitions: records are
// then placed by the murmur2 hash of their serialized key, as the Java producer does (a
// record with a null key, nil key bytes, goes to partition 0), and each (sub-topology,
// partition) pair is a separate task, as on a broker.
//
// [InputTopic.PipeRaw] pipes a record given as bytes: a nil key or value is a Kafka null,
// whatever the topic's serdes, as TestInputTopic.pipeInput with a null key or value.
//
// A Driver is not safe for concurrent use.
package kstreamtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/kstream-go/kstream/internal/partition"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/hook"
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoRecord is returned when an output topic has no record left to read.
var ErrNoRecord = errors.New("kstreamtest: no record in the output topic")

// ErrClosed is returned by a Driver after Close.
var ErrClosed = errors.New("kstreamtest: driver is closed")

// Option configures a [Driver].
type Option func(*options)

type options struct {
	partitions int32
	topicParts map[string]int32
	wall       time.Time
}

// Partitions sets the partition count of every topic, overriding the default 1.
func Partitions(n int32) Option { return func(o *options) { o.partitions = n } }

// TopicPartitions sets the partition count of one topic.
func TopicPartitions(topic string, n int32) Option {
	return func(o *options) { o.topicParts[topic] = n }
}

// WallClock sets the driver's initial wall-clock time, overriding the default of the time
// New was called. Records piped without a timestamp get the wall-clock time; wall-clock
// punctuators run on it (see [Driver.AdvanceWallClockTime]).
func WallClock(t time.Time) Option { return func(o *options) { o.wall = t } }

type topicPartition struct {
	topic     string
	partition int32
}

// Driver runs a topology without a broker.
type Driver struct {
	topo    *runtime.Topology
	log     *slog.Logger
	opts    options
	maxIdle time.Duration  // Config.MaxTaskIdle
	subOf   map[string]int // source topic -> sub-topology
	// patterns are the pattern sources (kstream.StreamPattern): a topic that one matches
	// joins its sub-topology's tasks when it is first written (matchPattern).
	patterns []driverPattern
	global   map[string]*runtime.GlobalStoreSpec // global table topic -> its store
	tasks    map[runtime.TaskID]*task
	order    []*task                  // the tasks, by id
	next     map[topicPartition]int64 // next offset per partition
	topics   map[string][]*kgo.Record // every record written to each topic, in order
	// slots are the records waiting to be processed, in the order they were written: a
	// record of a global table's topic, or a turn of the task whose partition got one (it
	// then processes the head of its partition group, its record with the lowest
	// timestamp).
	slots    []slot
	wall     time.Time
	db       store.DB                // every store, in memory
	drops    int64                   // records dropped for a null key or value, or a negative timestamp
	counts   *runtime.OperatorCounts // what the operators dropped or lost, by operator and reason
	enforced int64
	fatal    error
	closed   bool
	held     map[string][]*kgo.Record // topics held back (holdBack): their unprocessed records
	// heldParts are the partitions held back of the topics held back by partition
	// (holdBackPartition); a topic without an entry is held back whole.
	heldParts map[string]map[int32]bool
	// woken gets a token when an async call of a task finishes (taskEnv.Wake).
	woken chan struct{}
}

// task is one task of the topology and the buffer of its input partitions.
type task struct {
	id    runtime.TaskID
	t     runtime.Task
	group *runtime.PartitionGroup
}

type slot struct {
	global *kgo.Record
	task   *task
}

// New builds b as [kstream.New] would for cfg (only the application id, the error handlers,
// the logger, the topology checks such as EnsureExplicitInternalResourceNaming and the
// settings of processing such as MaxTaskIdle matter here; an empty ApplicationID becomes
// "kstreamtest") and returns a driver for it. The driver's logger discards output unless cfg.Logger is set.
func New(b *kstream.Builder, cfg kstream.Config, opts ...Option) (*Driver, error) {
	if cfg.ApplicationID == "" {
		cfg.ApplicationID = "kstreamtest"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o := options{partitions: 1, topicParts: map[string]int32{}, wall: time.Now()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.partitions < 1 {
		return nil, fmt.Errorf("kstreamtest: Partitions(%d): need at least 1", o.partitions)
	}
	for t, n := range o.topicParts {
		if n < 1 {
			return nil, fmt.Errorf("kstreamtest: TopicPartitions(%q, %d): need at least 1", t, n)
		}
	}
	topo, rc, err := hook.Compile(b, cfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		topo:   topo,
		log:    rc.Logger,
		counts: rc.OperatorCounts,
		opts:   o,
		subOf:  map[string]int{},
		global: map[string]*runtime.GlobalStoreSpec{},
		tasks:  map[runtime.TaskID]*task{},
		next:   map[topicPartition]int64{},
		topics: map[string][]*kgo.Record{},
		wall:   o.wall,
		db:     memory.New(),
		woken:  make(chan struct{}, 1),
	}
	for _, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern != nil {
				d.patterns = append(d.patterns, driverPattern{runtime.AnchoredPattern(src.Pattern), st.ID})
				continue
			}
			d.subOf[src.Topic] = st.ID
		}
	}
	for i := range topo.GlobalStores {
		d.global[topo.GlobalStores[i].Topic] = &topo.GlobalStores[i]
	}
	for _, g := range topo.CopartitionGroups {
		// A pattern source's topics are not known here (runtime.PatternMarker): they are
		// not checked.
		g = slices.DeleteFunc(slices.Clone(g), func(t string) bool { return strings.HasPrefix(t, "/") })
		if len(g) == 0 {
			continue
		}
		for _, t := range g[1:] {
			if d.partitionsOf(t) != d.partitionsOf(g[0]) {
				return nil, fmt.Errorf("kstreamtest: topics %v must be co-partitioned, but %s has %d partitions and %s has %d",
					g, g[0], d.partitionsOf(g[0]), t, d.partitionsOf(t))
			}
		}
	}
	d.maxIdle = rc.MaxTaskIdle
	// Every task exists from the start, as in TopologyTestDriver: its processors are
	// initialized and their wall-clock punctuators run before any record arrives.
	for _, st := range topo.SubTopologies {
		var parts int32
		for _, src := range st.Sources {
			parts = max(parts, d.partitionsOf(src.Topic))
		}
		for p := range parts {
			if err := d.newTask(st, p); err != nil {
				d.Close()
				return nil, err
			}
		}
	}
	return d, nil
}

// newTask creates the task of sub-topology st for partition p.
func (d *Driver) newTask(st runtime.SubTopology, p int32) error {
	id := runtime.TaskID{SubTopology: st.ID, Partition: p}
	backends := make(map[string]store.Backend, len(st.Stores))
	for _, spec := range st.Stores {
		b, err := d.db.Open(spec.Name, p)
		if err != nil {
			return fmt.Errorf("kstreamtest: opening store %s: %w", spec.Name, err)
		}
		backends[spec.Name] = b
	}
	t := &task{id: id}
	t.group = runtime.NewPartitionGroup(runtime.GroupConfig{
		MaxTaskIdle: d.maxIdle,
		Extract: func(r *kgo.Record, partitionTime int64) (int64, error) {
			ts, err := t.t.Timestamp(r, partitionTime)
			if err != nil {
				return 0, fmt.Errorf("kstreamtest: task %s: extracting the timestamp of the record at topic %q partition %d offset %d: %w", id, r.Topic, r.Partition, r.Offset, err)
			}
			return ts, nil
		},
		Dropped: func(r *kgo.Record, ts int64) {
			d.log.Warn("kstreamtest: skipping a record with a negative timestamp", "task", id.String(), "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "timestamp", ts)
			d.drops++
		},
		// Every record written is "fetched" at once: a partition without records is
		// caught up, as with TopologyTestDriver's consumer.
		Lag:      func(string, int32, time.Time) (int64, bool) { return 0, true },
		Enforced: func() { d.enforced++ },
	})
	for _, src := range st.Sources {
		if p < d.partitionsOf(src.Topic) {
			t.group.AddPartition(src.Topic, p)
		}
	}
	var err error
	if t.t, err = st.NewTask((*taskEnv)(d), id, backends); err != nil {
		return fmt.Errorf("kstreamtest: creating task %s: %w", id, err)
	}
	d.tasks[id] = t
	d.order = append(d.order, t)
	return nil
}

// keepsPartition reports whether the records written to topic carry their partition.
func (d *Driver) keepsPartition(topic string) bool {
	for _, it := range d.topo.InternalTopics {
		if it.Name == topic {
			return it.KeepPartition
		}
	}
	return false
}

func (d *Driver) partitionsOf(topic string) int32 {
	if n, ok := d.opts.topicParts[topic]; ok {
		return n
	}
	for _, it := range d.topo.InternalTopics {
		if it.Name == topic && it.Partitions == 0 && len(it.PartitionsOf) > 0 {
			// Sized like the topics it is co-partitioned with (InternalTopic.PartitionsOf).
			var n int32
			for _, like := range it.PartitionsOf {
				n = max(n, d.partitionsOf(like))
			}
			return n
		}
	}
	return d.opts.partitions
}

// WallClockTime returns the driver's wall-clock time.
func (d *Driver) WallClockTime() time.Time { return d.wall }

// AdvanceWallClockTime moves the driver's wall clock forward by by, then runs the wall-clock
// punctuators that are due (task by task, in the order of their ids), processes what they
// wrote to topics the topology reads, and processes the records that waited for
// [kstream.Config.MaxTaskIdle] to pass, as TopologyTestDriver.advanceWallClockTime does. A
// punctuator's failure that the error handler does not absorb is returned, and stops the
// driver as a record's would.
func (d *Driver) AdvanceWallClockTime(by time.Duration) error {
	d.wall = d.wall.Add(by)
	if d.closed {
		return ErrClosed
	}
	if d.fatal != nil {
		return d.fatal
	}
	for _, t := range d.order {
		if at := t.t.NextPunctuation(); at.IsZero() || at.After(d.wall) {
			continue
		}
		if _, err := t.t.Punctuate(d.wall); err != nil {
			d.fatal, d.slots = err, nil
			return err
		}
	}
	return d.drain()
}

// EnforcedProcessing counts the records processed although another input partition of
// their task had none buffered, once [kstream.Config.MaxTaskIdle] passed (see
// [kstream.Stats].EnforcedProcessing).
func (d *Driver) EnforcedProcessing() int64 { return d.enforced }

// Err returns the fatal error that stopped the topology, if any: once a record failure
// that the error handlers did not absorb happens, every later Pipe returns it, as a real
// application would have stopped.
func (d *Driver) Err() error { return d.fatal }

// Commit does what a commit does in an application, task by task in the order of their
// ids: each task first finishes the work its commit must cover (a
// [kstream.KStream.ForeachBatch] sink hands over its pending batch; an async operator such as
// [kstream.MapValuesAsync] waits for every call in flight and forwards its outputs, as an
// exactly-once commit does), then takes what it did as committed; records that this writes to topics the topology reads are then processed.
// A failure that the error handler does not absorb is returned, and stops the driver as a
// record's would.
func (d *Driver) Commit() error {
	if d.closed {
		return ErrClosed
	}
	if d.fatal != nil {
		return d.fatal
	}
	for _, t := range d.order {
		if err := t.t.PreCommit(context.Background()); err != nil {
			d.fatal, d.slots = err, nil
			return err
		}
		t.t.Cut()
		t.t.Committed()
	}
	return d.drain()
}

// taskEnv is the driver seen as the runtime's task environment (runtime.TaskEnv): its
// methods are the plumbing between the tasks and the driver, kept out of Driver's API.
type taskEnv Driver

// Context implements the runtime's task environment: the driver never shuts down under a
// task, so its context is never done.
func (d *taskEnv) Context() context.Context { return context.Background() }

// Close commits, as [Driver.Commit] does, unless a fatal error stopped the topology, as an
// application commits at shutdown; then closes every task. It returns the first fatal
// error, if one stopped the topology (or the final commit failed), joined with errors from
// closing processors.
func (d *Driver) Close() error {
	if d.closed {
		return nil
	}
	if d.fatal == nil {
		_ = d.Commit() // a failure is in d.fatal
	}
	d.closed = true
	errs := []error{d.fatal}
	for _, t := range d.order {
		errs = append(errs, t.t.Close())
	}
	errs = append(errs, d.db.Close())
	return errors.Join(errs...)
}

// pipe writes raw into its topic and processes it, and everything it causes, to the end.
func (d *Driver) pipe(raw *kgo.Record) error {
	if d.closed {
		return ErrClosed
	}
	if d.fatal != nil {
		return d.fatal
	}
	if !d.reads(raw.Topic) {
		return fmt.Errorf("kstreamtest: topic %q is not a source of the topology (sources: %v)", raw.Topic, d.sources())
	}
	if err := d.append(raw); err != nil {
		d.fatal, d.slots = err, nil
		return err
	}
	return d.drain()
}

// drain processes records until none is left that may be processed now: every record
// written so far, unless Config.MaxTaskIdle holds some back.
func (d *Driver) drain() error {
	for {
		if d.fatal != nil { // a record written while processing failed its extractor
			d.slots = nil
			return d.fatal
		}
		i := d.nextSlot()
		if i < 0 {
			return nil
		}
		s := d.slots[i]
		d.slots = slices.Delete(d.slots, i, i+1)
		var err error
		if s.global != nil {
			err = d.applyGlobal(d.global[s.global.Topic], s.global)
		} else {
			err = d.step(s.task)
		}
		if err != nil {
			d.fatal, d.slots = err, nil
			return err
		}
	}
}

// nextSlot is the index of the first slot that can be processed now, or -1: a task's turn
// waits while its partition group is not ready (see PartitionGroup.Ready). Turns of tasks
// that have nothing buffered any more (their records were dropped for a negative
// timestamp) are dropped.
func (d *Driver) nextSlot() int {
	var waiting map[*task]bool
	for i := 0; i < len(d.slots); i++ {
		s := d.slots[i]
		if s.global != nil {
			return i
		}
		if waiting[s.task] {
			continue
		}
		if s.task.group.Buffered() == 0 {
			d.slots = slices.Delete(d.slots, i, i+1)
			i--
			continue
		}
		if ready, _, _ := s.task.group.Ready(d.wall); ready {
			return i
		}
		if waiting == nil {
			waiting = map[*task]bool{}
		}
		waiting[s.task] = true
	}
	return -1
}

// step processes the next record of task t, then flushes the task's record caches
// (kstream.Config.CacheMaxBytes), as TopologyTestDriver commits after each record it
// processes: a cached table forwards every input's update, but one update per key for the
// several updates that one input record makes.
//
// A task with async operators ([kstream.MapValuesAsync]) first hands back the calls that
// finished, and waits for one to finish while it takes no record (its operator holds
// [kstream.WithConcurrency] records); after the record, the calls that finished meanwhile
// are handed back. Outputs of calls still running come later: at a later step, or at
// [Driver.Commit] (or Close), which waits for every call.
func (d *Driver) step(t *task) error {
	if err := d.resumeAsync(t, true); err != nil {
		return err
	}
	r, ts, err := t.group.Next()
	if err != nil || r == nil {
		return err
	}
	if err := t.t.Process(r, ts); err != nil {
		return err
	}
	if err := d.resumeAsync(t, false); err != nil {
		return err
	}
	if c, ok := t.t.(interface{ FlushCaches() error }); ok {
		return c.FlushCaches()
	}
	return nil
}

// resumeAsync hands the finished async calls of t back to it; with room, while t takes
// no record, it waits for calls to finish until it does.
func (d *Driver) resumeAsync(t *task, room bool) error {
	a, ok := t.t.(runtime.Async)
	if !ok {
		return nil
	}
	for {
		if a.Completed() {
			if err := a.Resume(); err != nil {
				return err
			}
			continue
		}
		if !room || !a.Saturated() {
			return nil
		}
		<-d.woken // a call finishes (the task holds records, so calls run)
	}
}

// Wake implements the runtime's task environment: an async call finished.
func (d *taskEnv) Wake() {
	select {
	case d.woken <- struct{}{}:
	default:
	}
}

// reads reports whether the topology reads topic, as a source or a global table.
func (d *Driver) reads(topic string) bool {
	_, src := d.subOf[topic]
	return src || d.matchPattern(topic) || d.global[topic] != nil
}

func (d *Driver) sources() []string {
	out := make([]string, 0, len(d.subOf)+len(d.global))
	for t := range d.subOf {
		out = append(out, t)
	}
	for t := range d.global {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// append gives raw a partition, an offset and a timestamp, records it in its topic, and
// buffers it for processing if the topology reads that topic. The error is the timestamp
// extractor's.
func (d *Driver) append(raw *kgo.Record) error { return d.appendChosen(raw, false) }

// appendChosen is append, keeping the partition of raw when chosen says its writer chose
// it.
func (d *Driver) appendChosen(raw *kgo.Record, chosen bool) error {
	n := d.partitionsOf(raw.Topic)
	switch {
	case (chosen || d.keepsPartition(raw.Topic)) && raw.Partition >= 0 && raw.Partition < n:
		// The writer chose the partition (runtime.InternalTopic.KeepPartition, or a
		// stream partitioner: runtime.OutRecord.Partitioned).
	case n > 1 && raw.Key != nil:
		raw.Partition = javaPartition(raw.Key, n)
	default:
		raw.Partition = 0
	}
	tp := topicPartition{raw.Topic, raw.Partition}
	raw.Offset = d.next[tp]
	d.next[tp]++
	if raw.Timestamp.IsZero() {
		raw.Timestamp = d.wall
	}
	d.topics[raw.Topic] = append(d.topics[raw.Topic], raw)
	if h, ok := d.held[raw.Topic]; ok && (d.heldParts[raw.Topic] == nil || d.heldParts[raw.Topic][raw.Partition]) {
		d.held[raw.Topic] = append(h, raw)
		return nil
	}
	return d.enqueue(raw)
}

// enqueue buffers raw, written to its topic, for processing.
func (d *Driver) enqueue(raw *kgo.Record) error {
	if d.global[raw.Topic] != nil {
		d.slots = append(d.slots, slot{global: raw})
		return nil
	}
	sub, ok := d.subOf[raw.Topic]
	if !ok && d.matchPattern(raw.Topic) {
		sub, ok = d.subOf[raw.Topic]
	}
	if !ok {
		return nil
	}
	t := d.tasks[runtime.TaskID{SubTopology: sub, Partition: raw.Partition}]
	d.slots = append(d.slots, slot{task: t})
	_, err := t.group.Add(raw.Topic, raw.Partition, []*kgo.Record{raw})
	return err
}

func init() {
	hook.HoldBack = func(d any, topic string) { d.(*Driver).holdBack(topic) }
	hook.HoldBackPartition = func(d any, topic string, partitions ...int32) {
		d.(*Driver).holdBackPartition(topic, partitions...)
	}
	hook.Release = func(d any, topic string) error { return d.(*Driver).release(topic) }
}

// holdBack makes the driver keep the records written to topic from now on (an internal
// topic by its full name, "<application.id>-...", or a source topic) without processing
// them, until release: a test can so deliver them after records written later, as
// a broker may under load (for example the responses of a foreign-key join, which come
// from other tasks than the left updates). Kafka Streams' TopologyTestDriver has no
// counterpart; it processes every record, and what it causes, before the next input.
func (d *Driver) holdBack(topic string) {
	if d.held == nil {
		d.held = map[string][]*kgo.Record{}
	}
	if _, ok := d.held[topic]; !ok {
		d.held[topic] = nil
	}
}

// holdBackPartition is holdBack for the given partitions of topic only: the
// records written to them are kept, those of its other partitions processed. A test can so
// make one task of a sub-topology run ahead of another, as after a reset, when the upstream
// tasks replay their input at different speeds; a task whose partition holds records back
// is not caught up with its input. release processes them.
func (d *Driver) holdBackPartition(topic string, partitions ...int32) {
	d.holdBack(topic)
	if d.heldParts == nil {
		d.heldParts = map[string]map[int32]bool{}
	}
	if d.heldParts[topic] == nil {
		d.heldParts[topic] = map[int32]bool{}
	}
	for _, p := range partitions {
		d.heldParts[topic][p] = true
	}
}

// release processes the records of topic held back since holdBack, in the order
// they were written, and everything they cause, and stops holding topic back.
func (d *Driver) release(topic string) error {
	if d.closed {
		return ErrClosed
	}
	if d.fatal != nil {
		return d.fatal
	}
	recs := d.held[topic]
	delete(d.held, topic)
	delete(d.heldParts, topic)
	for _, r := range recs {
		if err := d.enqueue(r); err != nil {
			d.fatal, d.slots = err, nil
			return err
		}
	}
	return d.drain()
}

// Produce implements the runtime's task environment: the record lands in its topic at
// once (every topic exists in the driver).
func (d *taskEnv) Produce(o *runtime.OutRecord) {
	rec := o.Record
	if err := (*Driver)(d).appendChosen(&rec, o.Partitioned); err != nil && d.fatal == nil {
		d.fatal = err
	}
}

// Now implements the runtime's task environment: the driver's wall clock.
func (d *taskEnv) Now() time.Time { return d.wall }

// Logger implements the runtime's task environment.
func (d *taskEnv) Logger() *slog.Logger { return d.log }

// RecordDropped implements the runtime's task environment.
func (d *taskEnv) RecordDropped() { d.drops++ }

// DroppedRecords returns how many records the topology's operators dropped for a null key
// or a null value so far, as [kstream.Stats].DroppedRecords counts them in an application
// (TopologyTestDriver shows them in the dropped-records-total metric). A record with a null
// key piped into a global table's topic counts too.
func (d *Driver) DroppedRecords() int64 { return d.drops }

// Losses returns what the topology's operators dropped or lost so far, by operator and
// reason, all tasks together, as [kstream.Stats].Losses counts them in an application:
// the records dropped (late, or for a null key or value), the records an error handler
// skipped or dead-lettered (reasons skipped_deserialization_error, ...), and the final
// results never emitted (windows that expired before they closed).
func (d *Driver) Losses() []kstream.OperatorLoss {
	var out []kstream.OperatorLoss
	for _, oc := range d.counts.Snapshot() { // sorted by operator, lost, reason, then task
		if k := len(out) - 1; k >= 0 && out[k].Operator == oc.Operator && out[k].LostResults == oc.Lost && out[k].Reason == oc.Reason {
			out[k].Count += oc.N
			continue
		}
		out = append(out, kstream.OperatorLoss{Operator: oc.Operator, Reason: oc.Reason, LostResults: oc.Lost, Count: oc.N})
	}
	return out
}

// LostResults returns how many final results the topology's operators never emitted so far
// (see [kstream.Stats].LostResults).
func (d *Driver) LostResults() int64 {
	var n int64
	for _, l := range d.Losses() {
		if l.LostResults {
			n += l.Count
		}
	}
	return n
}

// GlobalStore implements the runtime's task environment: global stores live in the
// driver's memory DB, in the same namespace as in an application.
func (d *taskEnv) GlobalStore(name string) (store.Backend, error) {
	for _, g := range d.topo.GlobalStores {
		if g.Name == name {
			b, err := d.db.Open(name, runtime.GlobalDataPartition)
			if err != nil {
				return nil, fmt.Errorf("kstreamtest: opening global store %s: %w", name, err)
			}
			return runtime.ReadOnly(name, b), nil
		}
	}
	return nil, fmt.Errorf("kstreamtest: the topology has no global store named %q", name)
}

// applyGlobal writes a record of a global table's topic into its store, as the runtime's
// global goroutine does.
func (d *Driver) applyGlobal(g *runtime.GlobalStoreSpec, r *kgo.Record) error {
	if r.Key == nil {
		d.drops++ // the global KTableSource drops it
		return nil
	}
	if g.Accept != nil {
		ok, err := g.Accept((*taskEnv)(d), r)
		if err != nil || !ok {
			return err
		}
	}
	b, err := d.db.Open(g.Name, runtime.GlobalDataPartition)
	if err != nil {
		return fmt.Errorf("kstreamtest: opening global store %s: %w", g.Name, err)
	}
	if r.Value == nil {
		return b.Delete(r.Key)
	}
	return b.Set(r.Key, r.Value)
}

// javaPartition is the Java producer's partition for a keyed record.
func javaPartition(key []byte, partitions int32) int32 {
	return partition.ForKey(key, partitions)
}

// KeyValueStore returns the store named name of the task for the given partition (0 unless
// the driver has several partitions), typed with the store's serdes. For a global store,
// which holds every partition, partition is ignored. Stores are kept in memory in the
// driver, whatever the topology asks for.
//
// The stores of tables (those of [kstream.Table], [kstream.KStream.ToTable], aggregations
// and [kstream.Materialized]) keep a timestamp with each value; the typed view returned here
// shows the values alone, and a value written through it gets the timestamp 0.
func KeyValueStore[K, V any](d *Driver, name string, partition int32, ks serde.Serde[K], vs serde.Serde[V]) (*store.KeyValueStore[K, V], error) {
	for _, g := range d.topo.GlobalStores {
		if g.Name == name {
			b, err := d.db.Open(name, runtime.GlobalDataPartition)
			if err != nil {
				return nil, err
			}
			return store.NewKeyValueStore(name, b, ks, vs), nil
		}
	}
	var spec *runtime.StoreSpec
	for _, st := range d.topo.SubTopologies {
		for i := range st.Stores {
			if st.Stores[i].Name == name {
				spec = &st.Stores[i]
			}
		}
	}
	if spec == nil {
		return nil, fmt.Errorf("kstreamtest: the topology has no store named %q", name)
	}
	b, err := d.db.Open(name, partition)
	if err != nil {
		return nil, err
	}
	if spec.Timestamped {
		vs = untimestamped[V]{vs}
	}
	return store.NewKeyValueStore(name, b, ks, vs), nil
}

// storeSpec returns the spec of the task store named name.
func (d *Driver) storeSpec(name string) (*runtime.StoreSpec, error) {
	for _, st := range d.topo.SubTopologies {
		for i := range st.Stores {
			if st.Stores[i].Name == name {
				return &st.Stores[i], nil
			}
		}
	}
	return nil, fmt.Errorf("kstreamtest: the topology has no store named %q", name)
}

// WindowStore returns a typed view of partition partition of the window store named name:
// the store of a windowed aggregation over time or sliding windows ([kstream.WindowedCount]
// and the like). ks is the serde of the aggregation's keys (not of its windowed keys) and
// vs of its values; the stores of aggregations keep a timestamp with each value, which the
// view hides (a value written through it gets the timestamp 0). The view reads the store as
// of the last record piped: every record is committed before the driver returns.
func WindowStore[K, V any](d *Driver, name string, partition int32, ks serde.Serde[K], vs serde.Serde[V]) (*store.WindowStore[K, V], error) {
	spec, err := d.storeSpec(name)
	if err != nil {
		return nil, err
	}
	c, ok := spec.Codec.(interface{ WindowOptions() store.WindowOptions })
	if !ok {
		return nil, fmt.Errorf("kstreamtest: store %q is not a window store", name)
	}
	b, err := d.db.Open(name, partition)
	if err != nil {
		return nil, err
	}
	if spec.Timestamped {
		vs = untimestamped[V]{vs}
	}
	return store.NewWindowStore(name, b, ks, vs, c.WindowOptions())
}

// SessionStore returns a typed view of partition partition of the session store named name
// (the store of [kstream.SessionCount] and the like); ks is the serde of the aggregation's
// keys. See [WindowStore].
func SessionStore[K, V any](d *Driver, name string, partition int32, ks serde.Serde[K], vs serde.Serde[V]) (*store.SessionStore[K, V], error) {
	spec, err := d.storeSpec(name)
	if err != nil {
		return nil, err
	}
	c, ok := spec.Codec.(interface{ SessionOptions() store.SessionOptions })
	if !ok {
		return nil, fmt.Errorf("kstreamtest: store %q is not a session store", name)
	}
	b, err := d.db.Open(name, partition)
	if err != nil {
		return nil, err
	}
	if spec.Timestamped {
		vs = untimestamped[V]{vs}
	}
	return store.NewSessionStore(name, b, ks, vs, c.SessionOptions())
}

// untimestamped reads the values of a timestamped store (an 8-byte timestamp, then the
// value) without their timestamps.
type untimestamped[V any] struct{ inner serde.Serde[V] }

func (u untimestamped[V]) Serialize(v V) ([]byte, error) {
	b, err := u.inner.Serialize(v)
	if err != nil {
		return nil, err
	}
	return append(make([]byte, 8, 8+len(b)), b...), nil
}

func (u untimestamped[V]) Deserialize(b []byte) (V, error) {
	if len(b) < 8 {
		var zero V
		return zero, fmt.Errorf("kstreamtest: a timestamped store value has %d bytes, fewer than its 8-byte timestamp", len(b))
	}
	return u.inner.Deserialize(b[8:])
}

// Upstream implements the runtime's task environment: the sub-topology that writes the
// repartition topic topic, its number of tasks, and the topic's partition count.
func (d *taskEnv) Upstream(topic string) (sub int, tasks, partitions int32, ok bool) {
	dd := (*Driver)(d)
	for _, it := range d.topo.InternalTopics {
		if it.Name != topic {
			continue
		}
		for _, src := range d.topo.SubTopologies[it.Writer].Sources {
			tasks = max(tasks, dd.partitionsOf(src.Topic))
		}
		return it.Writer, tasks, dd.partitionsOf(topic), tasks > 0
	}
	return 0, 0, 0, false
}

// PartitionCount implements the runtime's task environment: every topic exists in the
// driver, with the partitions of [Partitions] and [TopicPartitions].
func (d *taskEnv) PartitionCount(_ context.Context, topic string) (int32, error) {
	return (*Driver)(d).partitionsOf(topic), nil
}

// CaughtUp implements the runtime's task environment: task id has nothing buffered, and
// none of its source topics holds records back (holdBack).
// Holding implements runtime.TaskEnv: the driver holds no output.
func (d *taskEnv) Holding() bool { return false }

func (d *taskEnv) CaughtUp(id runtime.TaskID) bool {
	t := d.tasks[id]
	if t == nil || t.group.Buffered() > 0 {
		return false
	}
	for _, src := range d.topo.SubTopologies[id.SubTopology].Sources {
		for _, r := range d.held[src.Topic] {
			if r.Partition == id.Partition {
				return false
			}
		}
	}
	return true
}

// driverPattern is a pattern source of sub-topology sub.
type driverPattern struct {
	re  *regexp.Regexp // anchored
	sub int
}

// matchPattern reports whether a pattern source reads topic, which is not a named source;
// if so, topic becomes a source of the pattern's sub-topology, whose tasks read its
// partitions from now on, as a topic created later joins them in an application.
func (d *Driver) matchPattern(topic string) bool {
	if _, ok := d.subOf[topic]; ok || d.global[topic] != nil {
		return false
	}
	for _, p := range d.patterns {
		if !p.re.MatchString(topic) {
			continue
		}
		d.subOf[topic] = p.sub
		for _, t := range d.order {
			if t.id.SubTopology == p.sub && t.id.Partition < d.partitionsOf(topic) {
				t.group.AddPartition(topic, t.id.Partition)
			}
		}
		return true
	}
	return false
}
