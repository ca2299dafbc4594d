package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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

// cleanUp deletes the scenario's topics (its inputs and output, and with stateful every
// topic of the application: changelogs, repartition and foreign-key topics, all named
// "<group>-...") and group so that the broker's memory is freed.
func (k *kafka) cleanUp(env *runEnv, stateful bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := []string{env.in, env.out}
	if env.in2 != "" { // a second input: the join scenarios (Kafka refuses an empty name)
		topics = append(topics, env.in2)
	}
	if stateful {
		internal, err := k.internalTopics(ctx, env.group)
		if err != nil {
			return err
		}
		topics = append(topics, internal...)
	}
	// The inputs are named "<group>-in...", so the internal topics list them again: Kafka
	// refuses a DeleteTopics that names a topic twice (INVALID_REQUEST).
	slices.Sort(topics)
	topics = slices.Compact(topics)
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

// internalTopics lists the topics of application group: those named "<group>-...".
func (k *kafka) internalTopics(ctx context.Context, group string) ([]string, error) {
	all, err := k.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	var out []string
	for _, t := range all.Names() {
		if strings.HasPrefix(t, group+"-") {
			out = append(out, t)
		}
	}
	return out, nil
}

// eventTimeSpan is how much event time the input of the windowed scenarios covers.
const eventTimeSpan = 10 * time.Minute

// filled is what fill reports about the input.
type filled struct {
	kept int64 // records whose value keep accepts
	// closedWindows (eventTime only): the distinct (key, window) pairs of the input whose
	// 1-minute window closes within its partition, i.e. ends at or before the largest
	// timestamp of the partition: the final results an aggregation emitting on window close
	// (no grace) produces.
	closedWindows int64
	// startMs (eventTime only): the timestamp of the first record.
	startMs int64
}

// fill produces o.records records with distinct 8-byte keys and random values to topic,
// spread round-robin over its partitions, and returns how many values keep accepts.
// With countKeyed, record i has the string key "key%05d" of i%countKeys instead and goes to the
// partition of its key's hash (Kafka's default partitioner), so that each key lives in one
// task. With eventTime, record i has the timestamp start + i*eventTimeSpan/o.records (in
// whole ms, in order within each partition), start being the wall clock's minute 10 minutes
// ago, so that the input covers eventTimeSpan/windowSize tumbling windows exactly; otherwise
// the producer's time. Every call with the same options produces the same keys and values.
func (k *kafka) fill(ctx context.Context, topic string, o options, keep func([]byte) bool, countKeyed, eventTime bool) (filled, error) {
	return k.fillFrom(ctx, topic, o, keep, countKeyed, eventTime, 0, nil)
}

// fillValues is fill with value i values(i) instead of random bytes, if values is not nil.
func (k *kafka) fillValues(ctx context.Context, topic string, o options, keep func([]byte) bool, countKeyed, eventTime bool, values func(int) ([]byte, error)) (filled, error) {
	return k.fillFrom(ctx, topic, o, keep, countKeyed, eventTime, 0, values)
}

// fillFrom is fillValues with the event time starting at startMs (0: the wall clock's
// minute 10 minutes ago), so that a second input can have the first one's timestamps.
func (k *kafka) fillFrom(ctx context.Context, topic string, o options, keep func([]byte) bool, countKeyed, eventTime bool, startMs int64, values func(int) ([]byte, error)) (filled, error) {
	var res filled
	partitioner := kgo.ManualPartitioner()
	if countKeyed {
		partitioner = kgo.StickyKeyPartitioner(nil) // murmur2 of the key, as the library's producer
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.RecordPartitioner(partitioner),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // random values do not compress
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return res, err
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
	// eventTime: the windows (index from startMs) each key appears in, the partition of each
	// key and the largest timestamp of each partition, from the produced records.
	win := int64(windowSize / time.Millisecond)
	span := int64(eventTimeSpan / time.Millisecond)
	if startMs == 0 {
		startMs = (time.Now().UnixMilli()/win)*win - span
	}
	res.startMs = startMs
	nWindows := int((span + win - 1) / win)
	var (
		seen    []bool // [window*countKeys+key]
		keyPart []int32
		maxTs   = make([]int64, o.partitions)
	)
	if eventTime {
		seen = make([]bool, nWindows*countKeys)
		keyPart = make([]int32, countKeys)
	}
	const slab = 4096 // records per allocation
	var buf []byte
	for i := range o.records {
		if len(buf) < 8+o.valueSize {
			buf = make([]byte, slab*(8+o.valueSize))
		}
		key, val := buf[:8:8], buf[8:8+o.valueSize:8+o.valueSize]
		buf = buf[8+o.valueSize:]
		if countKeyed {
			putCountKey(key, i)
		} else {
			binary.BigEndian.PutUint64(key, uint64(i))
		}
		_, _ = rng.Read(val)
		if values != nil {
			var err error
			if val, err = values(i); err != nil {
				return res, fmt.Errorf("value %d: %w", i, err)
			}
		}
		if keep(val) {
			res.kept++
		}
		rec := &kgo.Record{Topic: topic, Partition: int32(i % o.partitions), Key: key, Value: val}
		if eventTime {
			ts := startMs + int64(i)*span/int64(o.records)
			rec.Timestamp = time.UnixMilli(ts)
			seen[int((ts-startMs)/win)*countKeys+i%countKeys] = true
		}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if prodErr == nil {
					prodErr = err
				}
				return
			}
			if eventTime {
				keyPart[i%countKeys] = r.Partition
				maxTs[r.Partition] = max(maxTs[r.Partition], r.Timestamp.UnixMilli())
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return res, err
	}
	mu.Lock()
	defer mu.Unlock()
	if prodErr != nil {
		return res, prodErr
	}
	n, err := k.countOutput(ctx, topic)
	if err != nil {
		return res, err
	}
	if n != int64(o.records) {
		return res, fmt.Errorf("input topic holds %d records, want %d", n, o.records)
	}
	for w := range len(seen) / max(countKeys, 1) {
		end := startMs + int64(w+1)*win
		for key := range countKeys {
			if seen[w*countKeys+key] && end <= maxTs[keyPart[key]] {
				res.closedWindows++
			}
		}
	}
	return res, nil
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

// waitForCommitted polls, every 10ms, the offsets group has committed for the input topic in
// until every partition's committed offset is its end offset (inEnd, summed: every input
// record processed, and its outputs flushed, since the library commits after flushing). It
// also polls the output's end offsets: for the first output (returned, as the time after
// start) and to fail if more than want records appear. It fails if the run ends early (done
// receives) or when ctx expires.
func (k *kafka) waitForCommitted(ctx context.Context, group, in, out string, want int64, start time.Time, done <-chan error) (time.Duration, error) {
	inEnd, err := k.countOutput(ctx, in)
	if err != nil {
		return 0, err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var firstOut time.Duration
	var committed, got int64
	for {
		if n, err := k.countOutput(ctx, out); err == nil {
			got = n
			if n > 0 && firstOut == 0 {
				firstOut = time.Since(start)
			}
			if n > want {
				return firstOut, fmt.Errorf("output topic %s holds %d records, more than the %d expected", out, n, want)
			}
		}
		if offs, err := k.adm.FetchOffsets(ctx, group); err == nil && offs.Error() == nil {
			committed = 0
			for _, ps := range offs[in] {
				if ps.At >= 0 {
					committed += ps.At
				}
			}
			if committed == inEnd {
				return firstOut, nil
			}
		} // else: a transient admin error (or the group not yet created); keep polling.
		select {
		case err := <-done:
			return firstOut, fmt.Errorf("stopped after %v with %d of %d input offsets committed, %d of %d output records: %v",
				time.Since(start).Round(time.Millisecond), committed, inEnd, got, want, err)
		case <-ctx.Done():
			return firstOut, fmt.Errorf("input not committed: %d of %d offsets, %d of %d output records after %v (the %v scenario cap)",
				committed, inEnd, got, want, time.Since(start).Round(time.Millisecond), scenarioCap)
		case <-tick.C:
		}
	}
}

// waitForDrained polls, every 10ms, until group has committed every topic it reads to the
// topic's end: env.in, env.in2 (if it exists) and the application's internal source topics
// (repartition topics and foreign-key subscription topics, named "<group>-...-repartition"
// or "<group>-...-topic"), with the inputs' end offsets fixed at the start and the internal
// topics' read on each poll (they grow while the app runs). It polls the output's end
// offsets too, for the first output (returned, as the time after start) and, with want >= 0,
// to fail if more than want records appear. It fails if the run ends early (done receives)
// or when ctx expires.
func (k *kafka) waitForDrained(ctx context.Context, env *runEnv, want int64, start time.Time, done <-chan error) (time.Duration, error) {
	inputs := []string{env.in}
	if d, err := k.adm.ListTopics(ctx, env.in2); err == nil && d.Has(env.in2) {
		inputs = append(inputs, env.in2)
	}
	ends := map[string]map[int32]kadm.ListedOffset{}
	for _, t := range inputs {
		o, err := k.adm.ListEndOffsets(ctx, t)
		if err != nil {
			return 0, fmt.Errorf("end offsets of %s: %w", t, err)
		}
		if err := o.Error(); err != nil {
			return 0, fmt.Errorf("end offsets of %s: %w", t, err)
		}
		ends[t] = o[t]
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var firstOut time.Duration
	var got int64
	behind := "no offsets committed yet"
	for {
		if n, err := k.countOutput(ctx, env.out); err == nil {
			got = n
			if n > 0 && firstOut == 0 {
				firstOut = time.Since(start)
			}
			if want >= 0 && n > want {
				return firstOut, fmt.Errorf("output topic %s holds %d records, more than the %d expected", env.out, n, want)
			}
		}
		if b, err := k.drainedBehind(ctx, env.group, ends); err == nil {
			if b == "" {
				return firstOut, nil
			}
			behind = b
		} // else: a transient admin error (or the group not yet created); keep polling.
		select {
		case err := <-done:
			return firstOut, fmt.Errorf("stopped after %v with %s, %d output records: %v",
				time.Since(start).Round(time.Millisecond), behind, got, err)
		case <-ctx.Done():
			return firstOut, fmt.Errorf("not drained after %v (the scenario cap): %s, %d output records",
				time.Since(start).Round(time.Millisecond), behind, got)
		case <-tick.C:
		}
	}
}

// drainedBehind returns "" when group has committed every partition of the topics of inputEnds
// to those end offsets and every partition of its internal source topics to their current
// end, else what is behind.
func (k *kafka) drainedBehind(ctx context.Context, group string, inputEnds map[string]map[int32]kadm.ListedOffset) (string, error) {
	internal, err := k.internalTopics(ctx, group)
	if err != nil {
		return "", err
	}
	// The committed offsets are read before the internal topics' ends: a record written to
	// an internal topic is flushed before the commit of the offset of the record that
	// caused it, so ends listed afterwards include everything the committed work wrote
	// (listed before, they could miss the last records of a chain of internal topics, and
	// the run would end before they are processed).
	offs, err := k.adm.FetchOffsets(ctx, group)
	if err != nil {
		return "", err
	}
	if err := offs.Error(); err != nil {
		return "", err
	}
	ends := map[string]map[int32]kadm.ListedOffset{}
	for t, o := range inputEnds {
		ends[t] = o
	}
	for _, t := range internal {
		if !strings.HasSuffix(t, "-repartition") && !strings.HasSuffix(t, "-topic") {
			continue // changelogs are written, not read
		}
		o, err := k.adm.ListEndOffsets(ctx, t)
		if err != nil {
			return "", err
		}
		if err := o.Error(); err != nil {
			return "", err
		}
		ends[t] = o[t]
	}
	for t, o := range ends {
		var end, committed int64
		for _, lo := range o {
			end += lo.Offset
			if c, ok := offs.Lookup(t, lo.Partition); ok && c.At >= 0 {
				committed += c.At
			}
		}
		if committed < end {
			return fmt.Sprintf("%s committed to %d of %d", t, committed, end), nil
		}
	}
	return "", nil
}

// lastValues reads topic from its start to its end offsets (as of the call) and returns the
// last value of every key (nil for a tombstone).
func (k *kafka) lastValues(ctx context.Context, topic string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ends, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	last := map[string][]byte{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %d partitions not read to their end: %w", topic, len(left), err)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench: reading %s: %v\n", topic, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			last[string(r.Key)] = r.Value
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return last, nil
}
