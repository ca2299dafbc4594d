package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxPollRecords matches the library's default Config.MaxPollRecords.
const maxPollRecords = 10000

// shutdownTimeout bounds the final flush and commit of the baseline loop.
const shutdownTimeout = 30 * time.Second

func keepAll([]byte) bool { return true }

// keepFilter is the predicate of the filter-mapvalues scenario: it drops the values whose
// first byte is 0, about 1 in 256 of random values.
func keepFilter(v []byte) bool { return len(v) == 0 || v[0] != 0 }

// flipLast is the mapper of the filter-mapvalues scenario: a copy of v with its last byte
// inverted.
func flipLast(v []byte) []byte {
	out := make([]byte, len(v))
	copy(out, v)
	if len(out) > 0 {
		out[len(out)-1] ^= 0xff
	}
	return out
}

// runBaseline is a hand-written at-least-once consume-and-produce loop with franz-go: a
// group consumer reads the input and a producer with the library's producer settings writes
// every record unchanged. Every commitInterval (and at the end) it flushes the producer and
// then commits what it has polled, so a committed offset never covers an unacknowledged
// output record.
func runBaseline(ctx context.Context, env *runEnv) error {
	// Produced records outlive ctx so that the final flush can still deliver them.
	prodCtx, prodCancel := context.WithTimeout(context.WithoutCancel(ctx), scenarioCap)
	defer prodCancel()
	linger := 5 * time.Millisecond // the library's default
	if env.linger < 0 {
		linger = 0
	}
	prod, err := kgo.NewClient(
		kgo.SeedBrokers(env.brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // the library's default codec
	)
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(
		kgo.SeedBrokers(env.brokers...),
		kgo.ConsumerGroup(env.group),
		kgo.ConsumeTopics(env.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			if env.onReady != nil && len(assigned[env.in]) > 0 {
				env.onReady() // one member: its first assignment is every partition
			}
		}),
	)
	if err != nil {
		return err
	}
	defer cons.Close()

	var (
		mu      sync.Mutex
		prodErr error
	)
	onProduced := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if prodErr == nil {
				prodErr = err
			}
			mu.Unlock()
		}
	}
	commit := func(ctx context.Context) error {
		if err := prod.Flush(ctx); err != nil {
			return fmt.Errorf("flushing: %w", err)
		}
		mu.Lock()
		err := prodErr
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("producing: %w", err)
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("committing: %w", err)
		}
		return nil
	}

	lastCommit := time.Now()
	for {
		fetches := cons.PollRecords(ctx, maxPollRecords)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cons.AllowRebalance()
			break
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && fetchErr == nil {
				fetchErr = fmt.Errorf("fetching %s/%d: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			cons.AllowRebalance()
			return fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			prod.Produce(prodCtx, &kgo.Record{Topic: env.out, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers}, onProduced)
		})
		if time.Since(lastCommit) >= commitInterval {
			cctx, cancel := context.WithTimeout(prodCtx, shutdownTimeout)
			err := commit(cctx)
			cancel()
			if err != nil {
				cons.AllowRebalance()
				return err
			}
			lastCommit = time.Now()
		}
		cons.AllowRebalance()
	}
	cctx, cancel := context.WithTimeout(prodCtx, shutdownTimeout)
	defer cancel()
	if err := commit(cctx); err != nil {
		return err
	}
	return cons.LeaveGroupContext(cctx)
}

// runPassthrough is Stream(bytes, bytes) -> To(output).
func runPassthrough(ctx context.Context, env *runEnv) error {
	b := kstream.NewBuilder()
	kstream.Stream(b, env.in, serde.Bytes(), serde.Bytes()).
		To(env.out, serde.Bytes(), serde.Bytes())
	return runApp(ctx, b, env)
}

// runPassthroughMetrics is runPassthrough with Config.Metrics: a registry that is gathered
// every second, as a Prometheus server scraping the app would.
func runPassthroughMetrics(ctx context.Context, env *runEnv) error {
	b := kstream.NewBuilder()
	kstream.Stream(b, env.in, serde.Bytes(), serde.Bytes()).
		To(env.out, serde.Bytes(), serde.Bytes())
	reg := prometheus.NewRegistry()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if _, err := reg.Gather(); err != nil {
					env.logger.Warn("bench: gathering metrics", "err", err)
				}
			}
		}
	}()
	app, err := kstream.New(b, kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:  -1,
		ApplicationID:  env.group,
		Brokers:        env.brokers,
		CommitInterval: commitInterval,
		CloseTimeout:   shutdownTimeout,
		Logger:         env.logger,
		Metrics:        reg,
	})
	if err != nil {
		return err
	}
	return app.Run(ctx)
}

// runPassthroughSnappy is runPassthrough with Config.Compression = CompressionSnappy (the
// codec franz-go and kstream used by default before issue 15).
func runPassthroughSnappy(ctx context.Context, env *runEnv) error {
	env.compression = kstream.CompressionSnappy
	defer func() { env.compression = kstream.CompressionNone }()
	return runPassthrough(ctx, env)
}

// runFilterMapValues is Stream -> Filter(first byte != 0) -> MapValues(flipLast) -> To.
func runFilterMapValues(ctx context.Context, env *runEnv) error {
	b := kstream.NewBuilder()
	kept := kstream.Stream(b, env.in, serde.Bytes(), serde.Bytes()).
		Filter(func(_, v []byte) bool { return keepFilter(v) })
	kstream.MapValues(kept, flipLast).
		To(env.out, serde.Bytes(), serde.Bytes())
	return runApp(ctx, b, env)
}

// runPassthroughOpLabels is runPassthrough with Config.ProfileOperators (operator pprof
// labels switched around every operator call).
func runPassthroughOpLabels(ctx context.Context, env *runEnv) error {
	return withOpLabels(runPassthrough)(ctx, env)
}

// runFilterMapValuesOpLabels is runFilterMapValues with Config.ProfileOperators.
func runFilterMapValuesOpLabels(ctx context.Context, env *runEnv) error {
	return withOpLabels(runFilterMapValues)(ctx, env)
}

func withOpLabels(run func(context.Context, *runEnv) error) func(context.Context, *runEnv) error {
	return func(ctx context.Context, env *runEnv) error {
		env.profileOperators = true
		defer func() { env.profileOperators = false }()
		return run(ctx, env)
	}
}

func runApp(ctx context.Context, b *kstream.Builder, env *runEnv) error {
	app, err := kstream.New(b, kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:    -1,
		ApplicationID:    env.group,
		Brokers:          env.brokers,
		CommitInterval:   env.commitInterval(), // the baseline's commit cadence, instead of the 30s default
		CloseTimeout:     shutdownTimeout,
		Logger:           env.logger,
		ProfileOperators: env.profileOperators,
		Compression:      env.compression,
		Linger:           env.linger,
	})
	if err != nil {
		return err
	}
	if env.onApp != nil {
		env.onApp(app)
	}
	return app.Run(ctx)
}

// commitInterval is the scenario's commit interval: commitEvery, or the baseline's.
func (env *runEnv) commitInterval() time.Duration {
	if env.commitEvery > 0 {
		return env.commitEvery
	}
	return commitInterval
}
