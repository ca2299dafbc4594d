package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The clients of an instance: the consumer (the group member), the producer, the
// transactional session of exactly-once, and how a partition without a committed offset
// starts.

func (r *Runtime) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...), kgo.WithLogger(slogAdapter{r.log}),
		// A leader or coordinator that moved is looked up again at once, not after kgo's
		// default 5s between metadata refreshes: one retriable error costs a round trip.
		kgo.MetadataMinAge(250 * time.Millisecond),
		// A connection that a broker closes right after a request is written is retried like
		// any other cut connection (kgo does not by default, taking it for a TLS or SASL
		// mismatch): a broker that restarts or drops connections under load does that, and a
		// produce failed so stopped the application (TestFaultsAtLeastOnce, once in CI).
		// Produces are idempotent, so a retry writes nothing twice.
		kgo.AlwaysRetryEOF(),
	}
	if r.cfg.Rack != "" {
		opts = append(opts, kgo.Rack(r.cfg.Rack)) // fetch from a replica in this rack (KIP-392)
	}
	opts = append(opts, r.cfg.ClientOpts...)
	return append(opts, extra...)
}

// linger is the producer's linger: Config.Linger, or def when it is zero (none when
// negative).
func (r *Runtime) linger(def time.Duration) time.Duration {
	switch {
	case r.cfg.Linger < 0:
		return 0
	case r.cfg.Linger > 0:
		return r.cfg.Linger
	}
	return def
}

// compression is the producer option of Config.Compression (its zero value is
// kgo.NoCompression()).
func (r *Runtime) compression() []kgo.Opt {
	return []kgo.Opt{kgo.ProducerBatchCompression(r.cfg.Compression)}
}

func (r *Runtime) openProducer() error {
	opts := r.clientOpts(
		// Java producers hash keyed records with murmur2; so does this partitioner, so Go
		// and Java applications place equal keys on equal partitions.
		kgo.RecordPartitioner(partitioner{sticky: kgo.StickyKeyPartitioner(nil), manual: kgo.ManualPartitioner(), changelogs: r.changelogs, keep: r.keepPartition}),
		kgo.ProducerLinger(r.linger(5*time.Millisecond)),
		kgo.UnknownTopicRetries(3),
		kgo.ProducerBatchMaxBytesFn(r.batchLimit),
		// At most two polls' worth of records buffered (20,000; kgo's default is 50,000):
		// every record waiting for its acknowledgement holds its kgo.Record and encoding on
		// the heap, and a commit's changelog burst (a record per key changed) on top of the
		// outputs filled the buffer far enough to be several MiB of a count's peak RSS;
		// Produce waits for room instead. One poll's worth (10,000) cost a fifth of the
		// passthrough's throughput (a poll's outputs waited for the previous poll's
		// acknowledgements); two cost nothing measurable (bench/README.md, memory).
		kgo.MaxBufferedRecords(r.producerMaxBufferedRecords()),
		r.clientIDOpt(roleProducer),
	)
	opts = append(opts, r.compression()...)
	opts = append(opts, r.clientMetrics("producer", "")...)
	opts = append(opts, r.cfg.ProducerOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kstream: creating producer: %w", err)
	}
	r.producer = cl
	r.admin = kadm.NewClient(cl)
	r.plain = cl
	return nil
}

// producerMaxBufferedRecords is the producer's MaxBufferedRecords, twice the records of a
// poll (20,000 by default): see openProducer. Config.ProducerOptions may override it.
func (r *Runtime) producerMaxBufferedRecords() int { return 2 * r.cfg.MaxPollRecords }

// sourceTopics returns the topics the tasks consume, sorted.
func (r *Runtime) sourceTopics() []string {
	var topics []string
	for t := range r.sources().topicSub {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}

func (r *Runtime) openConsumer() error {
	reset := kgo.NewOffset().AtStart()
	if r.cfg.DefaultReset == ResetLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := r.clientOpts(
		kgo.ConsumeResetOffset(reset),
		// Java's fetch.max.wait.ms (500 ms), not kgo's 5 s. A fetch waits that long when none
		// of its partitions has data, and a partition resumed meanwhile (flowControlLocked) is
		// only in the next request: its task, waiting for it (PartitionGroup.Ready), could wait
		// as long as staleLag and then run ahead of it, which made a stream-stream left join
		// emit non-matches before their match arrived (a CI rehearsal on Apache Kafka).
		kgo.FetchMaxWait(500*time.Millisecond),
		// 256 KiB of each partition per fetch, not kgo's (and Java's) 1 MiB: a task holds
		// records of several fetches at once (its partition group and inbox), and each
		// record keeps its whole fetch response and decoded batch alive, so with 1 MiB per
		// partition the records in flight were the largest part of the Go heap (about 35 MB
		// of a count over 6 partitions, twice that in RSS with the GC's headroom); at 256 KiB
		// they take 5 MB, at the same throughput (bench/README.md, memory). A batch larger
		// than this still comes whole (bench/compare's input batches are about 370 KiB: a
		// fetch then returns one batch of each partition, and a smaller limit changes
		// nothing).
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
		kgo.WithHooks(&r.joins),
		kgo.AdjustFetchOffsetsFn(r.adjustOffsets),
		// Control records (transaction markers) come too, so that the position after the
		// last fetched record is the consumer's, which the lag of a partition needs (lag.go);
		// processLocked drops them.
		kgo.KeepControlRecords(),
		r.clientIDOpt(roleConsumer),
	)
	opts = append(opts, r.member.groupOpts()...)
	opts = append(opts, r.clientMetrics("consumer", "")...)
	opts = append(opts, r.traceOpts()...)
	opts = append(opts, r.cfg.ConsumerOpts...)
	if r.cfg.ExactlyOnce {
		return r.openSession(opts)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kstream: creating consumer: %w", err)
	}
	r.consumer = cl
	return nil
}

// openSession creates the transactional group member of exactly-once: one client that
// consumes read_committed and produces transactionally. The non-transactional client made
// by openProducer stays the admin client.
func (r *Runtime) openSession(consumerOpts []kgo.Opt) error {
	pid, err := processID(r.cfg.StateDir)
	if err != nil {
		return err
	}
	if r.txnID == "" { // the same id again after a fence (fence.go)
		r.txnID = r.cfg.ApplicationID + "-" + pid
		r.stats.mu.Lock()
		r.stats.txnID = r.txnID // Stats reads it from other goroutines
		r.stats.mu.Unlock()
	}
	opts := append(consumerOpts,
		kgo.TransactionalID(r.txnID),
		kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(partitioner{sticky: kgo.StickyKeyPartitioner(nil), manual: kgo.ManualPartitioner(), changelogs: r.changelogs, keep: r.keepPartition}),
		kgo.ProducerLinger(r.linger(0)),
		kgo.UnknownTopicRetries(3),
		kgo.ProducerBatchMaxBytesFn(r.batchLimit),
		kgo.MaxBufferedRecords(r.producerMaxBufferedRecords()), // see openProducer
	)
	opts = append(opts, r.compression()...)
	opts = append(opts, r.cfg.ProducerOpts...)
	sess, err := r.newTxnSession(opts)
	if err != nil {
		return fmt.Errorf("kstream: creating the transactional consumer and producer (transactional id %s): %w", r.txnID, err)
	}
	r.sess = sess
	r.consumer, r.producer = sess.Client(), sess.Client()
	r.log.Info("kstream: exactly-once", "app", r.cfg.ApplicationID, "transactional_id", r.txnID)
	return nil
}

// adjustOffsets applies per-source reset policies to partitions that have no committed
// offset (kgo reports those with the client-wide reset offset, which is negative): the
// client-wide reset is the earliest offset, or the latest with a DefaultReset of
// ResetLatest; a source whose policy differs starts where its own says, a by-duration one
// at the first record stamped at or after now minus its duration (the end if none).
func (r *Runtime) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	clientWide := ResetEarliest
	if r.cfg.DefaultReset == ResetLatest {
		clientWide = ResetLatest
	}
	now := time.Now()
	for _, srcs := range r.sources().subs {
		for _, src := range srcs {
			policy, d := r.sourceReset(src)
			if policy == clientWide {
				continue // the client-wide reset already applies
			}
			for p, o := range offsets[src.Topic] {
				if o.EpochOffset().Offset >= 0 {
					continue
				}
				switch policy {
				case ResetLatest:
					offsets[src.Topic][p] = kgo.NewOffset().AtEnd()
				case ResetByDuration:
					offsets[src.Topic][p] = kgo.NewOffset().AfterMilli(now.Add(-d).UnixMilli())
				default:
					offsets[src.Topic][p] = kgo.NewOffset().AtStart()
				}
			}
		}
	}
	return offsets, nil
}

// sourceReset is the reset policy of src, and its duration for ResetByDuration: its own,
// else the config's, else ResetEarliest. A repartition topic, which the application
// writes itself, does not start by duration: it starts at its earliest record, as in
// Kafka Streams, which resets internal topics to the earliest offset.
func (r *Runtime) sourceReset(src Source) (Reset, time.Duration) {
	policy, d := src.Reset, src.ResetDuration
	if policy == ResetDefault {
		policy, d = r.cfg.DefaultReset, r.cfg.DefaultResetDuration
	}
	if policy == ResetDefault || policy == ResetByDuration && src.Internal {
		policy = ResetEarliest
	}
	return policy, d
}
