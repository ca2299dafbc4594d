package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The batch-sink scenarios (issue 15, item 6): Stream(bytes, bytes) -> ForeachBatch into a
// fake bulk sink, timed until the group has committed the input's end offsets (every record
// handed over and accepted: the sink commits only accepted batches).
var (
	batchSize    int
	batchWait    time.Duration
	batchLatency time.Duration
)

func init() {
	flag.IntVar(&batchSize, "batch-size", 500, "batch-sink*: BatchConfig.MaxRecords")
	flag.DurationVar(&batchWait, "batch-wait", time.Second, "batch-sink*: BatchConfig.MaxWait")
	flag.DurationVar(&batchLatency, "batch-latency", time.Millisecond, "batch-sink-latency: simulated time of each bulk write")
}

// batchScenarios are the batch-sink scenarios; their output topic stays empty.
var batchScenarios = []scenario{
	{name: "batch-sink", run: runBatchSink("batch-sink", false), drained: true, want: noOutput},
	{name: "batch-sink-latency", run: runBatchSink("batch-sink-latency", true), drained: true, want: noOutput},
}

func noOutput(options) int64 { return 0 }

// fakeBulkSink stands for a database table written in bulk: each batch becomes one bulk
// request (a slice of rows, as a driver would build for a multi-row INSERT), optionally
// takes a fixed time to "write", and is then counted. It checks that every input record
// was handed over (at least once) and counts the records handed over twice.
type fakeBulkSink struct {
	latency time.Duration

	// writing counts the writes in progress; overlap sums it as seen by each write's
	// start, so overlap/batches is the mean number of writes in progress (tasks' writes
	// overlap only when they run in the same turn of the loop).
	writing atomic.Int32
	overlap atomic.Int64

	mu      sync.Mutex
	batches int
	records int
	dups    int
	seen    map[int32][]bool // partition -> offsets handed over
}

type bulkRow struct {
	key, value []byte
	partition  int32
	offset     int64
}

func (s *fakeBulkSink) write(_ context.Context, batch []kstream.BatchRecord[[]byte, []byte]) error {
	rows := make([]bulkRow, 0, len(batch))
	for _, r := range batch {
		rows = append(rows, bulkRow{key: r.Key, value: r.Value, partition: r.Partition, offset: r.Offset})
	}
	s.overlap.Add(int64(s.writing.Add(1)))
	if s.latency > 0 {
		time.Sleep(s.latency) // the bulk write's round trip (the task waits for it)
	}
	s.writing.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	s.records += len(rows)
	for _, r := range rows {
		offs := s.seen[r.partition]
		if int64(len(offs)) <= r.offset {
			offs = append(offs, make([]bool, int(r.offset)+1-len(offs)+1024)...)
			s.seen[r.partition] = offs
		}
		if offs[r.offset] {
			s.dups++
		}
		offs[r.offset] = true
	}
	return nil
}

// check reports an error unless every offset below the input's end offsets was handed over.
func (s *fakeBulkSink) check(ends kadm.ListedOffsets, topic string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, o := range ends[topic] {
		offs := s.seen[p]
		for i := int64(0); i < o.Offset; i++ {
			if i >= int64(len(offs)) || !offs[i] {
				return fmt.Errorf("batch sink: partition %d offset %d (of %d) never handed over", p, i, o.Offset)
			}
		}
	}
	return nil
}

// runBatchSink returns the run of a batch-sink scenario: with latency, each bulk write takes
// -batch-latency.
func runBatchSink(name string, latency bool) func(ctx context.Context, env *runEnv) error {
	return func(ctx context.Context, env *runEnv) error {
		sink := &fakeBulkSink{seen: map[int32][]bool{}}
		if latency {
			sink.latency = batchLatency
		}
		b := kstream.NewBuilder()
		kstream.Stream(b, env.in, serde.Bytes(), serde.Bytes()).
			ForeachBatch(sink.write, kstream.BatchConfig{MaxRecords: batchSize, MaxWait: batchWait}, kstream.Named("bulk"))
		began := time.Now()
		if err := runApp(ctx, b, env); err != nil {
			return err
		}
		took := time.Since(began)
		// Every input record must have reached the sink.
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...))
		if err != nil {
			return err
		}
		defer cl.Close()
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(lctx, env.in)
		if err != nil {
			return fmt.Errorf("end offsets of %s: %w", env.in, err)
		}
		if err := sink.check(ends, env.in); err != nil {
			return err
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		per := 0.0
		if sink.batches > 0 {
			per = float64(sink.records) / float64(sink.batches)
		}
		overlap := 0.0
		if sink.batches > 0 {
			overlap = float64(sink.overlap.Load()) / float64(sink.batches)
		}
		fmt.Printf("  %-21s sink: %d records in %d batches (%.0f per batch, MaxRecords %d, write latency %v, %.2f writes in progress on average), %d handed over twice, app ran %.3fs\n",
			name, sink.records, sink.batches, per, batchSize, sink.latency, overlap, sink.dups, took.Seconds())
		return nil
	}
}
