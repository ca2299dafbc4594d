package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Production errors come in three kinds:
//
//   - errors of the record itself (too large, invalid, a topic that does not exist or may not
//     be written): the production error handler decides (fail, continue, dead letter);
//   - a fenced producer (another instance with the same transactional id): fatal;
//   - everything else (a coordinator or leader that moved, a timeout, a transaction the
//     broker aborted): under exactly-once the transaction aborts and its records are
//     processed again from the committed offsets; under at-least-once kgo retries them.
//
// Under exactly-once a record error also fails its transaction, which aborts. As Kafka
// Streams does since KIP-1065, the handler is asked once, when the record first fails, and
// its decision is applied when the same output is produced again by the replay: the record
// is then skipped, or its dead letter written, inside the new transaction. Without this the
// record would fail every replay and the instance would never get past it.

// recordError reports whether err is about the record itself, so that producing it again
// would fail again, and the production error handler must decide.
func recordError(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) ||
		errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) ||
		errors.Is(err, kerr.CorruptMessage) ||
		errors.Is(err, kerr.InvalidTimestamp) ||
		errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.InvalidRequiredAcks) ||
		errors.Is(err, kerr.PolicyViolation) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.UnknownTopicID) ||
		errors.Is(err, kerr.TopicAuthorizationFailed)
}

// fencedError reports whether err means that the transactional producer cannot go on:
// fenced (see fencedProducer, which is handled as a task migration), or not allowed to
// use its transactional id (fatal).
func fencedError(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// replayKey names one output of one input record: the input's position and a hash of the
// output's topic, key and value. Replaying the same input produces the same key.
type replayKey struct {
	topic     string
	partition int32
	offset    int64
	out       uint64
}

// replays remembers, under exactly-once, the handler's decisions on records that failed in
// an aborted transaction, to apply them when the replay produces the same records.
type replays struct {
	mu sync.Mutex
	m  map[replayKey]Decision
	n  atomic.Int32 // len(m), read without the lock on every produce
}

func newReplayKey(o *kgo.Record, src *kgo.Record) replayKey {
	h := fnv.New64a()
	h.Write([]byte(o.Topic))
	h.Write([]byte{0})
	// The lengths tell a null (-1) from empty bytes (0), and the key from the value.
	for _, b := range [][]byte{o.Key, o.Value} {
		n := len(b)
		if b == nil {
			n = -1
		}
		h.Write([]byte(strconv.Itoa(n) + ":"))
		h.Write(b)
	}
	return replayKey{topic: src.Topic, partition: src.Partition, offset: src.Offset, out: h.Sum64()}
}

func (rp *replays) remember(k replayKey, d Decision) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.m == nil {
		rp.m = map[replayKey]Decision{}
	}
	rp.m[k] = d
	rp.n.Store(int32(len(rp.m)))
}

// take returns and forgets the decision remembered for k.
func (rp *replays) take(k replayKey) (Decision, bool) {
	if rp.n.Load() == 0 {
		return Decision{}, false
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	d, ok := rp.m[k]
	if ok {
		delete(rp.m, k)
		rp.n.Store(int32(len(rp.m)))
	}
	return d, ok
}

// replayed applies a remembered decision to an output about to be produced again; it
// reports whether the output was dealt with (skipped or sent to its dead-letter topic).
func (r *Runtime) replayed(o *OutRecord) bool {
	if r.sess == nil || o.Source == nil || o.changelog != nil || r.replay.n.Load() == 0 {
		return false
	}
	d, ok := r.replay.take(newReplayKey(&o.Record, o.Source))
	if !ok {
		return false
	}
	f := ProduceFailure{Record: &o.Record, Operator: o.Operator, Source: o.Source, Err: errors.New("failed in an aborted transaction")}
	if d.DeadLetterTopic != "" {
		r.log.Warn("kstream: replaying a record that failed in the aborted transaction: writing it to the dead-letter topic", "topic", o.Record.Topic, "dead_letter_topic", d.DeadLetterTopic, "source_topic", o.Source.Topic, "source_partition", o.Source.Partition, "source_offset", o.Source.Offset)
		if r.cfg.DeadLetter != nil {
			if dl := r.cfg.DeadLetter(d.DeadLetterTopic, f); dl != nil {
				if r.met != nil {
					r.met.deadLetter("production")
				}
				r.producer.TryProduce(r.prodCtx, dl, r.onDeadLetterProduced)
			}
		}
		return true
	}
	r.log.Warn("kstream: replaying a record that failed in the aborted transaction: skipping it", "topic", o.Record.Topic, "source_topic", o.Source.Topic, "source_partition", o.Source.Partition, "source_offset", o.Source.Offset)
	return true
}

// failedInTxn handles, under exactly-once, a record error: the transaction aborts (the
// caller marked it failed), and the handler's decision is remembered for the replay. A
// changelog record that cannot be written stops the application: skipping it would leave the
// store ahead of its changelog.
func (r *Runtime) failedInTxn(f ProduceFailure) {
	if r.fatal() != nil {
		return
	}
	o, _ := f.Record.Context.(*OutRecord)
	if o != nil && o.changelog != nil {
		r.fail(fmt.Errorf("%w (a changelog write cannot be skipped)", produceError(f)))
		return
	}
	if o == nil || o.Source == nil {
		r.produceFailed(f)
		return
	}
	d := r.cfg.OnProduceError(f)
	if !d.Continue && d.DeadLetterTopic == "" {
		r.fail(produceError(f))
		return
	}
	r.log.Warn("kstream: production error in a transaction; the transaction aborts and the handler's decision applies when the record is produced again", "err", produceError(f), "dead_letter_topic", d.DeadLetterTopic)
	r.replay.remember(newReplayKey(f.Record, o.Source), d)
}

// onDeadLetterProduced is the produce callback of dead-letter records. Under exactly-once
// an error that is not about the record only aborts the transaction (the dead letter is
// written again by the replay); any other failure stops the application, which has nowhere
// left to put the record.
func (r *Runtime) onDeadLetterProduced(dl *kgo.Record, err error) {
	if err == nil {
		r.noteDeadLetter(dl)
		return
	}
	if r.sess != nil && fencedProducer(err) {
		r.txnFailed.Store(true)
		r.onFenced(err)
		return
	}
	if r.sess != nil && !recordError(err) && !fencedError(err) {
		r.txnFailed.Store(true)
		return
	}
	r.fail(fmt.Errorf("kstream: writing to dead-letter topic %q partition %d: %w", dl.Topic, dl.Partition, err))
}

// maxMessageBytes is the largest record batch kgo builds by default (Kafka's default
// max.message.bytes minus the batch overhead).
const maxMessageBytes = 1_000_012

// batchLimit is the producer's batch size bound for topic: the topic's max.message.bytes
// when it is lower than the default, so that the broker never rejects a whole batch for its
// size (it would fail every record in it). A record larger than the bound then fails alone,
// on the client, and goes to the production error handler by itself.
func (r *Runtime) batchLimit(topic string) int32 {
	if v, ok := r.limits.Load(topic); ok {
		return max(512, min(maxMessageBytes, v.(int32)))
	}
	return maxMessageBytes
}

// learnLimits reads max.message.bytes of every topic the application writes, for
// [Runtime.batchLimit]. A failure only leaves the default bound.
func (r *Runtime) learnLimits(ctx context.Context, topics []string) {
	if len(topics) == 0 {
		return
	}
	var rcs kadm.ResourceConfigs
	err := r.retry(ctx, "reading the configs of the output topics", func(ctx context.Context) error {
		var err error
		rcs, err = r.admin.DescribeTopicConfigs(ctx, topics...)
		return err
	})
	if err != nil {
		r.log.Warn("kstream: cannot read max.message.bytes of the output topics; using the default batch size", "err", err)
		return
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key != "max.message.bytes" || c.Value == nil {
				continue
			}
			if v, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && v < maxMessageBytes {
				r.limits.Store(rc.Name, int32(v))
			}
		}
	}
}

// outputTopics lists every topic the application produces to.
func (r *Runtime) outputTopics() []string {
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, s := range r.topo.SinkTopics {
		add(s.Topic)
	}
	for _, it := range r.topo.InternalTopics {
		add(it.Name)
	}
	for t := range r.changelogs {
		add(t)
	}
	return out
}

// produceError names everything known about a failed output record.
func produceError(f ProduceFailure) error {
	msg := fmt.Sprintf("kstream: producing to topic %q partition %d (operator %s)", f.Record.Topic, f.Record.Partition, f.Operator)
	if errors.Is(f.Err, kerr.MessageTooLarge) || errors.Is(f.Err, kerr.RecordListTooLarge) {
		size := len(f.Record.Key) + len(f.Record.Value)
		for _, h := range f.Record.Headers {
			size += len(h.Key) + len(h.Value)
		}
		msg += fmt.Sprintf(", a record of %d bytes (key, value and headers),", size)
	}
	if f.Source != nil {
		msg += fmt.Sprintf(" for input topic %q partition %d offset %d", f.Source.Topic, f.Source.Partition, f.Source.Offset)
	}
	return fmt.Errorf("%s: %w", msg, f.Err)
}

// Produce implements TaskEnv.
func (r *Runtime) Produce(o *OutRecord) {
	if r.held.hold(o) {
		return // produced into the next transaction (eos_async.go)
	}
	if r.replayed(o) {
		return
	}
	if r.cfg.Propagator != nil {
		r.injectTrace(o)
	}
	o.ctx = r.prodCtx
	o.Record.Context = o
	if g := r.acks.Load(); g != nil {
		o.acks = g
		g.add()
	}
	r.producer.Produce(r.prodCtx, &o.Record, r.promise)
}

// onProduced is the produce callback of every output record.
func (r *Runtime) onProduced(rec *kgo.Record, err error) {
	if o, ok := rec.Context.(*OutRecord); ok && o.acks != nil {
		defer o.acks.ack() // after a dead letter of the record is produced
	}
	if err == nil {
		if o, ok := rec.Context.(*OutRecord); ok && o.DeadLetter {
			r.noteDeadLetter(rec)
		} else if ok && o.changelog != nil {
			for next := rec.Offset + 1; ; {
				cur := o.changelog.acked.Load()
				if cur >= next || o.changelog.acked.CompareAndSwap(cur, next) {
					break
				}
			}
		}
		return
	}
	f := ProduceFailure{Record: rec, Err: err}
	if o, ok := rec.Context.(*OutRecord); ok {
		f.Operator, f.Source = o.Operator, o.Source
	}
	if r.sess != nil {
		// A failed record fails its transaction, which then aborts; its records are
		// processed again from the committed offsets.
		r.txnFailed.Store(true)
		switch {
		case fencedProducer(err):
			r.onFenced(err)
		case fencedError(err):
			r.fail(fencedErr(r.txnID, r.cfg.TransactionTimeout, err))
		case recordError(err):
			r.failedInTxn(f)
		default:
			// A coordinator or leader that moved, a timeout, a transaction the broker
			// aborted: kgo recovers when the transaction ends.
			r.warnEvery("txn-produce", "kstream: a record of the open transaction failed; the transaction will abort and its records are processed again", "topic", rec.Topic, "partition", rec.Partition, "transactional_id", r.txnID, "err", err)
		}
		return
	}
	r.produceFailed(f)
}

func (r *Runtime) produceFailed(f ProduceFailure) {
	if r.fatal() != nil {
		return // already stopping; the first error is the one reported
	}
	err := produceError(f)
	d := r.cfg.OnProduceError(f)
	switch {
	case d.DeadLetterTopic != "":
		r.log.Warn("kstream: production error; writing to the dead-letter topic", "dead_letter_topic", d.DeadLetterTopic, "err", err)
		r.dlqGen.Add(1)
		if r.met != nil {
			r.met.deadLetter("production")
		}
		dl := r.cfg.DeadLetter(d.DeadLetterTopic, f)
		r.producer.TryProduce(r.prodCtx, dl, r.onDeadLetterProduced)
	case d.Continue:
		r.log.Warn("kstream: production error; skipping the record", "err", err)
	default:
		r.fail(err)
	}
}

// partitioner places changelog records on the partition the task set (the task's own), and
// the records of KeepPartition topics on the partition they carry, and every other record by
// the murmur2 hash of its key, as Java producers do.
type partitioner struct {
	sticky, manual kgo.Partitioner
	changelogs     map[string]bool

	keep map[string]bool // topics whose records carry their partition
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.changelogs[topic] || p.keep[topic] {
		return p.manual.ForTopic(topic)
	}
	return chosenOrDefault{p.sticky.ForTopic(topic)}
}

// chosenOrDefault keeps the partition of a record whose stream partitioner chose it
// (OutRecord.Partitioned), and partitions every other record as def does.
type chosenOrDefault struct{ def kgo.TopicPartitioner }

func chosen(r *kgo.Record) bool {
	o, ok := r.Context.(*OutRecord)
	return ok && o.Partitioned
}

// RequiresConsistency implements kgo.TopicPartitioner.
func (c chosenOrDefault) RequiresConsistency(r *kgo.Record) bool {
	return chosen(r) || c.def.RequiresConsistency(r)
}

// Partition implements kgo.TopicPartitioner.
func (c chosenOrDefault) Partition(r *kgo.Record, n int) int {
	if chosen(r) {
		return int(r.Partition)
	}
	return c.def.Partition(r, n)
}

// OnNewBatch implements kgo.TopicPartitionerOnNewBatch (the sticky partitioning of
// records with a null key).
func (c chosenOrDefault) OnNewBatch() {
	if nb, ok := c.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
