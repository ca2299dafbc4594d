package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The slow-task scenario (issue 15, item 5): does one slow task hold the other tasks of the
// instance to its pace? The input has o.partitions partitions; partition 0 is the slow
// task's: its records have keys starting with 's', and the operator sleeps slowTaskSleep
// for each of them (and drops it). The other partitions' records (keys starting with 'f',
// o.records of them, round-robin over partitions 1..n-1) pass through to the output.
//
// Each run times two apps of the same topology on fresh topics: "reference", whose
// partition 0 is empty, and "slow", whose partition 0 holds slowTaskRecords records (more
// than the slow task can process while the others run: it is busy for the whole run). Both
// are timed until the output holds every fast record; the figure is the fast records' rate
// from the first output record to the last (the group join, the same for both, left out),
// and the ratio slow/reference (target >= 0.9).
const (
	slowTaskSleep   = 10 * time.Millisecond
	slowTaskRecords = 100_000
	targetSlowTask  = 0.9
)

// slowTaskFigure is one timed app of the scenario.
type slowTaskFigure struct {
	total    time.Duration // from starting the app to the last fast output
	steady   time.Duration // from the first fast output visible to the last
	atFirst  int64         // output records visible at the first sighting
	fast     int64
	slowDone int64 // slow records processed when the fast ones were done
}

func (f slowTaskFigure) rate() float64 {
	return float64(f.fast-f.atFirst) / f.steady.Seconds()
}

// runSlowTask runs the scenario once: the reference app, then the slow one.
func runSlowTask(k *kafka, o options, env *runEnv, run int) error {
	if o.partitions < 2 {
		return errors.New("slow-task needs at least 2 partitions")
	}
	// The two apps run one after the other, in turns first (odd runs: the reference), so
	// that a drift in the machine's speed does not favour one.
	var ref, slow slowTaskFigure
	var err error
	for i := range 2 {
		if (i+run)%2 == 1 {
			if ref, err = slowTaskApp(k, o, env, "ref", 0); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
		} else if slow, err = slowTaskApp(k, o, env, "slow", slowTaskRecords); err != nil {
			return fmt.Errorf("with the slow task: %w", err)
		}
	}
	ratio := slow.rate() / ref.rate()
	fmt.Printf("  %-21s run %d: others' rec/s without the slow task %10.0f (%.3fs, %.3fs from start), with it %10.0f (%.3fs, %.3fs from start; slow task processed %d records): ratio %.2f (target >= %.1f: %s)\n",
		"slow-task", run, ref.rate(), ref.steady.Seconds(), ref.total.Seconds(), slow.rate(), slow.steady.Seconds(), slow.total.Seconds(), slow.slowDone, ratio, targetSlowTask, metOrMissed(ratio >= targetSlowTask))
	slowTaskRatios = append(slowTaskRatios, ratio)
	return nil
}

// slowTaskRatios are the ratios of every run, for printSlowTask.
var slowTaskRatios []float64

// printSlowTask prints the median ratio of the runs.
func printSlowTask() {
	if len(slowTaskRatios) == 0 {
		return
	}
	s := slices.Clone(slowTaskRatios)
	slices.Sort(s)
	m := s[(len(s)-1)/2]
	fmt.Printf("slow-task: median ratio of the other tasks' throughput with/without a task sleeping %v per record: %.2f over %d run(s) (target >= %.1f: %s)\n\n",
		slowTaskSleep, m, len(s), targetSlowTask, metOrMissed(m >= targetSlowTask))
}

// slowTaskApp fills fresh topics (slow records in partition 0) and times one app over them.
func slowTaskApp(k *kafka, o options, env *runEnv, variant string, slow int) (fig slowTaskFigure, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	e := *env
	e.in, e.out, e.group = env.in+"-"+variant, env.out+"-"+variant, env.group+"-"+variant
	if err := k.createTopics(ctx, int32(o.partitions), e.in, e.out); err != nil {
		return fig, err
	}
	defer func() {
		if derr := k.cleanUp(&e, false); derr != nil && err == nil {
			err = derr
		}
		runtime.GC()
		debug.FreeOSMemory()
	}()
	if err := fillSlowTask(ctx, k, o, e.in, slow); err != nil {
		return fig, fmt.Errorf("filling %s: %w", e.in, err)
	}
	fig.fast = int64(o.records)
	runtime.GC()

	var slowSeen atomic.Int64
	b := kstream.NewBuilder()
	kstream.Stream(b, e.in, serde.Bytes(), serde.Bytes()).
		Filter(func(key, _ []byte) bool {
			if len(key) > 0 && key[0] == 's' {
				time.Sleep(slowTaskSleep)
				slowSeen.Add(1)
				return false
			}
			return true
		}).
		To(e.out, serde.Bytes(), serde.Bytes())
	app, err := kstream.New(b, kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:  -1,
		ApplicationID:  e.group,
		Brokers:        e.brokers,
		CommitInterval: commitInterval,
		CloseTimeout:   shutdownTimeout,
		Logger:         e.logger,
	})
	if err != nil {
		return fig, err
	}
	start := time.Now()
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var first time.Time
	for {
		n, err := k.countOutput(ctx, e.out)
		if err == nil {
			now := time.Now()
			if n > 0 && first.IsZero() {
				first, fig.atFirst = now, n
			}
			if n == fig.fast {
				fig.total, fig.steady = now.Sub(start), now.Sub(first)
				break
			}
			if n > fig.fast {
				return fig, fmt.Errorf("output %s holds %d records, more than the %d expected", e.out, n, fig.fast)
			}
		}
		select {
		case err := <-done:
			return fig, fmt.Errorf("the app stopped early: %v", err)
		case <-ctx.Done():
			return fig, fmt.Errorf("output short after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
	}
	fig.slowDone = slowSeen.Load()
	stopApp()
	if err := awaitStop(done); err != nil {
		return fig, err
	}
	if fig.atFirst == fig.fast {
		return fig, fmt.Errorf("every output appeared at once (%d records): no rate to measure; use more -records", fig.fast)
	}
	return fig, nil
}

// fillSlowTask writes o.records fast records ("f" keys) round-robin to partitions
// 1..o.partitions-1 and slow records ("s" keys) to partition 0, values of o.valueSize bytes.
func fillSlowTask(ctx context.Context, k *kafka, o options, topic string, slow int) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu      sync.Mutex
		prodErr error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			prodErr = cmpErr(prodErr, err)
			mu.Unlock()
		}
	}
	val := make([]byte, o.valueSize)
	for i := range val {
		val[i] = byte(i*7 + 1)
	}
	produce := func(prefix byte, i int, p int32) {
		key := make([]byte, 9)
		key[0] = prefix
		binary.BigEndian.PutUint64(key[1:], uint64(i))
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: val}, promise)
	}
	for i := range slow {
		produce('s', i, 0)
	}
	for i := range o.records {
		produce('f', i, int32(1+i%(o.partitions-1)))
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return prodErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
