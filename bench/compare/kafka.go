package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// admin is the driver's own client: topics, the input, the verification of outputs.
type admin struct {
	brokers []string
	cl      *kgo.Client
	adm     *kadm.Client
}

func newAdmin(brokers []string) (*admin, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}
	return &admin{brokers: brokers, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (k *admin) close() { k.cl.Close() }

// createTopics creates topics with partitions partitions each and waits until they are
// visible with all of them.
func (k *admin) createTopics(ctx context.Context, partitions int32, topics ...string) error {
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

// deleteTopics deletes topics and every topic named "<prefix>-..." for each prefix (the
// internal topics of an application id), and the groups named by prefixes. Missing topics
// and groups are not errors.
func (k *admin) deleteTopics(ctx context.Context, topics []string, prefixes ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if len(prefixes) > 0 {
		all, err := k.adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("listing topics: %w", err)
		}
		for _, t := range all.Names() {
			for _, p := range prefixes {
				if strings.HasPrefix(t, p+"-") && !slices.Contains(topics, t) {
					topics = append(topics, t)
				}
			}
		}
	}
	resps, err := k.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting topics %v: %w", topics, err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting topic %s: %w", r.Topic, r.Err)
		}
	}
	if len(prefixes) > 0 {
		_, _ = k.adm.DeleteGroups(ctx, prefixes...) // best effort
	}
	return nil
}

// input describes the records fill produced.
type input struct {
	records int
	kept    int64            // records whose value keepFilter keeps
	perKey  map[string]int64 // countKeyed: records per key, the final count of each key
}

// countKey is the key of record i of a count scenario: "key%05d" of i%keys.
func countKey(i, keys int) string { return fmt.Sprintf("key%05d", i%keys) }

// fill produces o.records records of o.valueSize random bytes (ChaCha8 with a fixed seed,
// so every scenario sees the same values; incompressible) to topic, uncompressed. Without
// countKeyed, record i has the 8-byte big-endian key i and goes to partition i%partitions
// (go run ./bench's copy scenarios); with countKeyed it has the key countKey(i, o.keys) and
// goes to the partition of the key's murmur2 hash (Kafka's default partitioner), so that
// each key lives in one task (go run ./bench's count scenarios).
func (k *admin) fill(ctx context.Context, topic string, o options, countKeyed bool) (input, error) {
	res := input{records: o.records}
	partitioner := kgo.ManualPartitioner()
	if countKeyed {
		partitioner = kgo.StickyKeyPartitioner(nil)
		res.perKey = make(map[string]int64, o.keys)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.RecordPartitioner(partitioner),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return res, fmt.Errorf("creating the producer of %s: %w", topic, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], 1)
	rng := rand.NewChaCha8(seed)
	var (
		mu      sync.Mutex
		prodErr error
	)
	for i := range o.records {
		val := make([]byte, o.valueSize)
		_, _ = rng.Read(val)
		if keepFilter(val) {
			res.kept++
		}
		rec := &kgo.Record{Topic: topic, Value: val}
		if countKeyed {
			key := countKey(i, o.keys)
			res.perKey[key]++
			rec.Key = []byte(key)
		} else {
			rec.Key = binary.BigEndian.AppendUint64(nil, uint64(i))
			rec.Partition = int32(i % o.partitions)
		}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if prodErr == nil {
					prodErr = fmt.Errorf("producing to %s/%d: %w", r.Topic, r.Partition, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return res, fmt.Errorf("flushing %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return res, prodErr
}

// output is what verify read from an output topic.
type output struct {
	records int64
	last    map[string]int64 // countKeyed: the last count of each key
}

// readOutput reads topic read_committed from the start to its end: it first waits (up to
// 10 s) until every partition's last stable offset is its end offset (a transaction's
// commit markers are written shortly after EndTxn returns), then consumes up to there,
// transaction markers included. With counts, it keeps the last value of each key as a
// big-endian int64.
func (k *admin) readOutput(ctx context.Context, topic string, counts bool) (output, error) {
	out := output{}
	if counts {
		out.last = map[string]int64{}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var ends kadm.ListedOffsets
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := k.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = e.Error()
		}
		if err != nil {
			return out, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
		}
		lso, err := k.adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return out, fmt.Errorf("listing the last stable offsets of %s: %w", topic, err)
		}
		stable := true
		e.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(o.Topic, o.Partition); !ok || l.Offset != o.Offset {
				stable = false
			}
		})
		ends = e
		if stable {
			break
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("%s: last stable offsets still behind the end offsets after 10 s (an open transaction)", topic)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return out, fmt.Errorf("creating the consumer of %s: %w", topic, err)
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("reading %s: %d records read, partitions %v not at their end: %w", topic, out.records, want, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("reading %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			out.records++
			if counts && len(r.Value) == 8 {
				out.last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
			}
		})
	}
	return out, nil
}

// verify checks the output of a run of scenario s against the input in: the exact record
// count (passthrough: every record; filter-mapvalues: the kept ones; count and count-eos: an
// update per record; count-cache: at most that) and, for the counts, that every key's last
// output is its number of input records. It returns the output's record count.
func (k *admin) verify(ctx context.Context, s scenario, topic string, in input) (int64, error) {
	out, err := k.readOutput(ctx, topic, s.countKeyed)
	if err != nil {
		return 0, err
	}
	switch {
	case s.name == "filter-mapvalues":
		if out.records != in.kept {
			return out.records, fmt.Errorf("%s holds %d records, want %d", topic, out.records, in.kept)
		}
	case s.name == "count-cache":
		if out.records > int64(in.records) || out.records < int64(len(in.perKey)) {
			return out.records, fmt.Errorf("%s holds %d records, want %d to %d", topic, out.records, len(in.perKey), in.records)
		}
	default:
		if out.records != int64(in.records) {
			return out.records, fmt.Errorf("%s holds %d records, want %d", topic, out.records, in.records)
		}
	}
	if s.countKeyed {
		if len(out.last) != len(in.perKey) {
			return out.records, fmt.Errorf("%s has counts of %d keys, want %d", topic, len(out.last), len(in.perKey))
		}
		for key, n := range in.perKey {
			if got := out.last[key]; got != n {
				return out.records, fmt.Errorf("%s: the last count of key %q is %d, want %d", topic, key, got, n)
			}
		}
	}
	return out.records, nil
}
