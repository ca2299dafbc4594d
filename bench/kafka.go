package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka is the harness's own admin client (topics, end offsets), separate from the clients
// of the scenario being measured.
type kafka struct {
	brokers []string
	cl      *kgo.Client
	adm     *kadm.Client
}

func newKafka(brokers []string) (*kafka, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}
	return &kafka{brokers: brokers, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (k *kafka) close() { k.cl.Close() }

func (k *kafka) createTopics(ctx context.Context, partitions int32, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resps, err := k.adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("creating topics %v: %w", topics, err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	// Wait until the topics are visible with all their partitions.
	for {
		details, err := k.adm.ListTopics(ctx, topics...)
		if err == nil {
			ready := true
			for _, t := range topics {
				d, ok := details[t]
				if !ok || d.Err != nil || len(d.Partitions) != int(partitions) {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for topics %v to appear: %w", topics, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cleanUp deletes the scenario's topics (with stateful, also the changelog of countStore)
// and group so that the broker's memory is freed.
func (k *kafka) cleanUp(env *runEnv, stateful bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := []string{env.in, env.out}
	if stateful {
		topics = append(topics, changelogTopic(env))
	}
	resps, err := k.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting topics: %w", err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting topic %s: %w", r.Topic, r.Err)
		}
	}
	// Best effort: a group that is already gone or still has members is not an error here.
	_, _ = k.adm.DeleteGroups(ctx, env.group)
	return nil
}

// fill produces o.records records with distinct 8-byte keys and random values to topic,
// spread round-robin over its partitions, and returns how many values keep accepts.
// With countKeys, record i has the string key "key%05d" of i%100000 instead and goes to the
// partition of its key's hash (Kafka's default partitioner), so that each key lives in one
// task. Every call with the same options produces the same data.
func (k *kafka) fill(ctx context.Context, topic string, o options, keep func([]byte) bool, countKeys bool) (int64, error) {
	partitioner := kgo.ManualPartitioner()
	if countKeys {
		partitioner = kgo.StickyKeyPartitioner(nil) // murmur2 of the key, as the library's producer
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.RecordPartitioner(partitioner),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // random values do not compress
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], o.seed)
	rng := rand.NewChaCha8(seed)
	var (
		mu      sync.Mutex
		prodErr error
	)
	var kept int64
	const slab = 4096 // records per allocation
	var buf []byte
	for i := range o.records {
		if len(buf) < 8+o.valueSize {
			buf = make([]byte, slab*(8+o.valueSize))
		}
		key, val := buf[:8:8], buf[8:8+o.valueSize:8+o.valueSize]
		buf = buf[8+o.valueSize:]
		if countKeys {
			putCountKey(key, i)
		} else {
			binary.BigEndian.PutUint64(key, uint64(i))
		}
		_, _ = rng.Read(val)
		if keep(val) {
			kept++
		}
		rec := &kgo.Record{Topic: topic, Partition: int32(i % o.partitions), Key: key, Value: val}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if prodErr == nil {
					prodErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	if prodErr != nil {
		return 0, prodErr
	}
	n, err := k.countOutput(ctx, topic)
	if err != nil {
		return 0, err
	}
	if n != int64(o.records) {
		return 0, fmt.Errorf("input topic holds %d records, want %d", n, o.records)
	}
	return kept, nil
}

// countOutput sums the end offsets of topic's partitions (no transactions are involved, so
// that is the record count).
func (k *kafka) countOutput(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if err := offs.Error(); err != nil {
		return 0, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, nil
}

// waitForOutput polls the end offsets of topic every 10ms until they sum to want. It returns
// how long after start the first output record was seen. It fails if the run ends early
// (done receives), if more than want records appear, or when ctx expires.
func (k *kafka) waitForOutput(ctx context.Context, topic string, want int64, start time.Time, done <-chan error) (time.Duration, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var firstOut time.Duration
	var got int64
	for {
		n, err := k.countOutput(ctx, topic)
		if err == nil {
			got = n
			if n > 0 && firstOut == 0 {
				firstOut = time.Since(start)
			}
			if n == want {
				return firstOut, nil
			}
			if n > want {
				return firstOut, fmt.Errorf("output topic %s holds %d records, more than the %d expected", topic, n, want)
			}
		} // else: a transient admin error; keep polling until the scenario cap.
		select {
		case err := <-done:
			return firstOut, fmt.Errorf("stopped after %v with %d of %d output records: %v", time.Since(start).Round(time.Millisecond), got, want, err)
		case <-ctx.Done():
			return firstOut, fmt.Errorf("output short: %d of %d records in %s after %v (the %v scenario cap)", got, want, topic, time.Since(start).Round(time.Millisecond), scenarioCap)
		case <-tick.C:
		}
	}
}
