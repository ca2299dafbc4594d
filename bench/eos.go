package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runEOS is the -eos mode: the count pipeline (Pebble, countKeys keys, 100ms commits) under
// at-least-once and under exactly-once in one process, each reading the same input, timed
// until a read_committed consumer has seen one output record per input record; then the
// end-to-end latency of each at a paced input rate.
func runEOS(records, partitions, runs int, rate int, latencyFor time.Duration) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := embedded.Start(embedded.Logger(logger))
	if err != nil {
		return err
	}
	defer b.Close()
	brokers := b.Brokers()
	k, err := newKafka(brokers)
	if err != nil {
		return err
	}
	defer k.close()
	ctx := context.Background()
	stamp := time.Now().UnixNano()
	in := fmt.Sprintf("bench-eos-%x-in", stamp)
	if err := k.createTopics(ctx, int32(partitions), in); err != nil {
		return err
	}
	// The input, written once: record i has key i%countKeys and a 100-byte value.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	val := make([]byte, 100)
	for i := 0; i < records; i += 10000 {
		recs := make([]*kgo.Record, 0, 10000)
		for j := i; j < min(i+10000, records); j++ {
			key := make([]byte, countKeyLen)
			putCountKey(key, j)
			recs = append(recs, &kgo.Record{Topic: in, Key: key, Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	fmt.Printf("kstream bench -eos: %d records, %d keys, %d partitions, commit interval 100ms for both guarantees, %d run(s)\n\n", records, countKeys, partitions, runs)

	type outcome struct {
		secs  float64
		stats kstream.Stats
	}
	one := func(g kstream.Guarantee, run int) (outcome, error) {
		name := fmt.Sprintf("bench-eos-%x-%s-%d", stamp, g, run)
		out := name + "-out"
		if err := k.createTopics(ctx, int32(partitions), out); err != nil {
			return outcome{}, err
		}
		bld := kstream.NewBuilder()
		kstream.Count(kstream.Stream(bld, in, serde.String(), serde.Bytes()).GroupByKey(), countStore).
			ToStream().To(out, serde.String(), serde.Int64())
		dir, err := os.MkdirTemp("", "kstream-bench-eos-")
		if err != nil {
			return outcome{}, err
		}
		defer os.RemoveAll(dir)
		app, err := kstream.New(bld, kstream.Config{ApplicationID: name, Brokers: brokers, Guarantee: g,
			CommitInterval: 100 * time.Millisecond, StateDir: dir, Logger: logger})
		if err != nil {
			return outcome{}, err
		}
		rc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return outcome{}, err
		}
		defer rc.Close()
		actx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- app.Run(actx) }()
		var seen int
		deadline := time.Now().Add(5 * time.Minute)
		for seen < records {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := rc.PollFetches(pctx)
			pcancel()
			seen += fs.NumRecords()
			if time.Now().After(deadline) {
				cancel()
				<-done
				return outcome{}, fmt.Errorf("%s: %d of %d outputs after 5 minutes", g, seen, records)
			}
		}
		secs := time.Since(start).Seconds()
		st := app.Stats()
		cancel()
		if err := <-done; err != nil {
			return outcome{}, err
		}
		return outcome{secs, st}, nil
	}
	var alos, eos []outcome
	for r := range runs {
		a, err := one(kstream.AtLeastOnce, r)
		if err != nil {
			return err
		}
		e, err := one(kstream.ExactlyOnce, r)
		if err != nil {
			return err
		}
		fmt.Printf("  run %d: at-least-once %.3fs (%.0f rec/s)   exactly-once %.3fs (%.0f rec/s, %d transactions, %d aborted, commit p99 %v)\n",
			r+1, a.secs, float64(records)/a.secs, e.secs, float64(records)/e.secs, e.stats.Commits, e.stats.TransactionsAborted, e.stats.CommitLatencyP99.Round(time.Microsecond))
		alos, eos = append(alos, a), append(eos, e)
	}
	med := func(o []outcome) float64 {
		s := make([]float64, len(o))
		for i := range o {
			s[i] = o[i].secs
		}
		slices.Sort(s)
		return s[len(s)/2]
	}
	ma, me := med(alos), med(eos)
	verdict := "met"
	if ma/me < 0.85 {
		verdict = "MISSED"
	}
	fmt.Printf("\n  median: at-least-once %.0f rec/s, exactly-once %.0f rec/s: exactly-once/at-least-once = %.2fx (target >= 0.85x: %s)\n\n",
		float64(records)/ma, float64(records)/me, ma/me, verdict)

	// Latency at a paced rate: input timestamp to output visible read_committed.
	for _, g := range []kstream.Guarantee{kstream.AtLeastOnce, kstream.ExactlyOnce} {
		lat, err := latency(ctx, k, brokers, logger, g, partitions, rate, latencyFor, stamp)
		if err != nil {
			return err
		}
		slices.Sort(lat)
		if len(lat) == 0 {
			return fmt.Errorf("%s: no latency samples", g)
		}
		q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
		fmt.Printf("  latency %-16s at %d rec/s for %v: p50 %v  p99 %v  max %v  (%d samples, the first second excluded)\n",
			g, rate, latencyFor, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), len(lat))
	}
	return nil
}

// latency runs the count pipeline under g while records arrive at rate per second (batches
// every 10ms, timestamped when produced), and returns, for each output record seen by a
// read_committed consumer after the first second, now minus its timestamp.
func latency(ctx context.Context, k *kafka, brokers []string, logger *slog.Logger, g kstream.Guarantee, partitions, rate int, d time.Duration, stamp int64) ([]time.Duration, error) {
	name := fmt.Sprintf("bench-lat-%x-%s", stamp, g)
	in, out := name+"-in", name+"-out"
	if err := k.createTopics(ctx, int32(partitions), in, out); err != nil {
		return nil, err
	}
	bld := kstream.NewBuilder()
	kstream.Count(kstream.Stream(bld, in, serde.String(), serde.Bytes()).GroupByKey(), countStore).
		ToStream().To(out, serde.String(), serde.Int64())
	dir, err := os.MkdirTemp("", "kstream-bench-lat-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	app, err := kstream.New(bld, kstream.Config{ApplicationID: name, Brokers: brokers, Guarantee: g,
		CommitInterval: 100 * time.Millisecond, StateDir: dir, Logger: logger})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(actx) }()
	for app.State() != kstream.StateRunning {
		time.Sleep(10 * time.Millisecond)
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	rc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	began := time.Now()
	go func() {
		perTick := max(1, rate/100)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		i := 0
		for time.Since(began) < d {
			<-tick.C
			now := time.Now()
			for range perTick {
				key := make([]byte, countKeyLen)
				putCountKey(key, i)
				i++
				pcl.Produce(actx, &kgo.Record{Topic: in, Key: key, Value: []byte("v"), Timestamp: now}, nil)
			}
		}
	}()
	var lat []time.Duration
	for time.Since(began) < d+2*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := rc.PollFetches(pctx)
		pcancel()
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Timestamp.Sub(began) > time.Second {
				lat = append(lat, now.Sub(r.Timestamp))
			}
		})
	}
	cancel()
	if err := <-done; err != nil {
		return nil, err
	}
	return lat, nil
}
