package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The async-enrich scenario (issue 30): a topology that calls a slow service, with
// MapValuesAsync. The function sleeps asyncSleep per record (a remote call's round trip)
// and returns the value; the input has 6 partitions (-partitions) and asyncKeys keys. Each
// run times three apps, each over fresh topics:
//
//   - N=1: MapValuesAsync with WithConcurrency(1), over asyncSerialRecords records: one call
//     at a time per task, as a synchronous operator would (today's behaviour);
//   - N=256: WithConcurrency(256), over asyncRecords records;
//   - sync: a synchronous MapValues whose function does not sleep, over -records records
//     (at least asyncRecords): what records cost without the calls.
//
// The figures are the rate from the first output record seen to the last (the group join
// left out), the ratio N=256 / N=1 (target >= 100), and the process's CPU per output record
// over the same span, N=256 against sync (target <= 2).
const (
	asyncSleep          = 20 * time.Millisecond
	asyncKeys           = 1000
	asyncSerialRecords  = 3000
	asyncRecords        = 100_000
	asyncWide           = 256
	targetAsyncSpeedup  = 100.0
	targetAsyncCPURatio = 2.0
)

// asyncFigure is one timed app of the scenario.
type asyncFigure struct {
	records int64
	steady  time.Duration // from the first output seen to the last
	atFirst int64         // outputs visible at the first sighting
	cpu     float64       // process CPU seconds over steady
}

func (f asyncFigure) rate() float64 { return float64(f.records-f.atFirst) / f.steady.Seconds() }

// cpuPerRecord is the CPU per output record over steady, in microseconds.
func (f asyncFigure) cpuPerRecord() float64 { return f.cpu / float64(f.records-f.atFirst) * 1e6 }

// runAsyncEnrich runs the scenario once.
func runAsyncEnrich(k *kafka, o options, env *runEnv, run int) error {
	serial, err := asyncApp(k, o, env, run, "n1", asyncSerialRecords, 1, kstream.AtLeastOnce)
	if err != nil {
		return fmt.Errorf("N=1: %w", err)
	}
	wide, err := asyncApp(k, o, env, run, "n256", asyncRecords, asyncWide, kstream.AtLeastOnce)
	if err != nil {
		return fmt.Errorf("N=%d: %w", asyncWide, err)
	}
	// The synchronous app is fast: -records (1,000,000 by default) of them, so that its span
	// is long enough to measure.
	sync, err := asyncApp(k, o, env, run, "sync", max(o.records, asyncRecords), 0, kstream.AtLeastOnce)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	// The operator's own cost: MapValuesAsync with a function that returns at once, over
	// as many records as the synchronous app.
	bare, err := asyncApp(k, o, env, run, "bare", max(o.records, asyncRecords), -asyncWide, kstream.AtLeastOnce)
	if err != nil {
		return fmt.Errorf("N=%d without the sleep: %w", asyncWide, err)
	}
	// Exactly-once: each commit (every 100 ms here) waits for the calls in flight.
	eos, err := asyncApp(k, o, env, run, "eos", asyncRecords, asyncWide, kstream.ExactlyOnce)
	if err != nil {
		return fmt.Errorf("N=%d, exactly-once: %w", asyncWide, err)
	}
	alone := sleepyAlone(o.partitions, asyncRecords)
	speedup := wide.rate() / serial.rate()
	cpuRatio := wide.cpuPerRecord() / sync.cpuPerRecord()
	bareRatio := bare.cpuPerRecord() / sync.cpuPerRecord()
	fmt.Printf("  %-21s run %d: function sleeping %v, %d keys, %d partitions\n", "async-enrich", run, asyncSleep, asyncKeys, o.partitions)
	fmt.Printf("  %-21s   N=1:   %8d records %10.0f rec/s (%.3fs)  CPU %6.1f µs/rec\n", "", serial.records, serial.rate(), serial.steady.Seconds(), serial.cpuPerRecord())
	fmt.Printf("  %-21s   N=%d: %8d records %10.0f rec/s (%.3fs)  CPU %6.1f µs/rec\n", "", asyncWide, wide.records, wide.rate(), wide.steady.Seconds(), wide.cpuPerRecord())
	fmt.Printf("  %-21s   N=%d, exactly-once (commit every %v): %d records %10.0f rec/s (%.3fs)  CPU %6.1f µs/rec; %.0fx N=1\n", "",
		asyncWide, commitInterval, eos.records, eos.rate(), eos.steady.Seconds(), eos.cpuPerRecord(), eos.rate()/serial.rate())
	fmt.Printf("  %-21s   sync MapValues (no sleep): %d records %10.0f rec/s (%.3fs)  CPU %6.1f µs/rec\n", "", sync.records, sync.rate(), sync.steady.Seconds(), sync.cpuPerRecord())
	fmt.Printf("  %-21s   N=%d, no sleep: %d records %10.0f rec/s (%.3fs)  CPU %6.1f µs/rec\n", "", asyncWide, bare.records, bare.rate(), bare.steady.Seconds(), bare.cpuPerRecord())
	fmt.Printf("  %-21s   CPU per record of the operator itself (N=%d, no sleep) / sync: %.2fx\n", "", asyncWide, bareRatio)
	fmt.Printf("  %-21s   the function alone (%d goroutines calling it, no kstream): CPU %.1f µs/call; N=%d less that / sync: %.2fx\n", "",
		o.partitions*asyncWide, alone, asyncWide, (wide.cpuPerRecord()-alone)/sync.cpuPerRecord())
	fmt.Printf("  %-21s   N=%d / N=1: %.0fx (target >= %.0fx: %s); CPU per record N=%d / sync: %.2fx (target <= %.0fx: %s)\n\n", "",
		asyncWide, speedup, targetAsyncSpeedup, metOrMissed(speedup >= targetAsyncSpeedup), asyncWide, cpuRatio, targetAsyncCPURatio, metOrMissed(cpuRatio <= targetAsyncCPURatio))
	return nil
}

// sleepy is the scenario's function: a remote call's round trip of asyncSleep.
func sleepy(ctx context.Context, _, v []byte) ([]byte, error) {
	t := time.NewTimer(asyncSleep)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return v, nil
}

// sleepyAlone makes n calls of sleepy on its own, without kstream, from as many goroutines
// as the N=256 app runs calls at once at most (256 per task, one task per partition), each
// goroutine making call after call, and returns the process's CPU per call in
// microseconds: what the function costs by itself.
func sleepyAlone(partitions, n int) float64 {
	workers := partitions * asyncWide
	var next sync.WaitGroup
	calls := make(chan struct{}, n)
	for range n {
		calls <- struct{}{}
	}
	close(calls)
	cpu0 := cpuTime()
	ctx := context.Background()
	for range workers {
		next.Go(func() {
			for range calls {
				_, _ = sleepy(ctx, nil, nil)
			}
		})
	}
	next.Wait()
	return (cpuTime() - cpu0) / float64(n) * 1e6
}

// asyncApp fills fresh topics with n records and times one app over them: MapValuesAsync
// with concurrency c, or with c = 0 a synchronous MapValues without the sleep.
func asyncApp(k *kafka, o options, env *runEnv, run int, variant string, n, c int, g kstream.Guarantee) (fig asyncFigure, err error) {
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
	if err := fillAsync(ctx, k, o, e.in, n); err != nil {
		return fig, fmt.Errorf("filling %s: %w", e.in, err)
	}
	fig.records = int64(n)
	runtime.GC()

	b := kstream.NewBuilder()
	in := kstream.Stream(b, e.in, serde.Bytes(), serde.Bytes())
	switch {
	case c == 0:
		kstream.MapValues(in, func(v []byte) []byte { return v }).To(e.out, serde.Bytes(), serde.Bytes())
	case c < 0:
		kstream.MapValuesAsync(in, func(_ context.Context, _, v []byte) ([]byte, error) { return v, nil },
			kstream.WithConcurrency(-c)).To(e.out, serde.Bytes(), serde.Bytes())
	default:
		kstream.MapValuesAsync(in, sleepy, kstream.WithConcurrency(c)).To(e.out, serde.Bytes(), serde.Bytes())
	}
	app, err := kstream.New(b, kstream.Config{
		CacheMaxBytes:  -1,
		Guarantee:      g,
		ApplicationID:  e.group,
		Brokers:        e.brokers,
		CommitInterval: commitInterval,
		CloseTimeout:   shutdownTimeout,
		Logger:         e.logger,
	})
	if err != nil {
		return fig, err
	}
	// Under exactly-once the output ends in transaction markers: a read_committed consumer
	// counts its records (its CPU is in the figure too).
	count := func() (int64, error) { return k.countOutput(ctx, e.out) }
	if g == kstream.ExactlyOnce {
		w, err := newCommittedWatcher(e.brokers, e.out, nil)
		if err != nil {
			return fig, err
		}
		defer w.close()
		count = func() (int64, error) {
			n, _, err := w.count()
			return n, err
		}
	}
	start := time.Now()
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()

	// The output is counted every 10 ms, then every 2% of the time since the first output
	// (at most every 100 ms): counting costs CPU of this process too, and a slow app's long
	// span would otherwise carry a thousand counts of it.
	tick := time.NewTimer(10 * time.Millisecond)
	defer tick.Stop()
	var first time.Time
	var cpu0 float64
	var stopProfile func() // the CPU profile of the timed span (-cpuprofile, first run)
	for {
		got, err := count()
		if err == nil {
			now := time.Now()
			if got > 0 && first.IsZero() {
				first, fig.atFirst, cpu0 = now, got, cpuTime()
				if run == 1 && o.cpuProfile != "" {
					if stopProfile, err = startProfile(profilePath(o.cpuProfile, "async-"+variant, 2)); err != nil {
						return fig, err
					}
				}
			}
			if got == fig.records {
				fig.steady, fig.cpu = now.Sub(first), cpuTime()-cpu0
				if stopProfile != nil {
					stopProfile()
				}
				break
			}
			if got > fig.records {
				return fig, fmt.Errorf("output %s holds %d records, more than the %d expected", e.out, got, fig.records)
			}
		}
		select {
		case err := <-done:
			return fig, fmt.Errorf("the app stopped early: %v", err)
		case <-ctx.Done():
			return fig, fmt.Errorf("output short after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
		wait := 10 * time.Millisecond
		if !first.IsZero() {
			wait = min(max(wait, time.Since(first)/50), 100*time.Millisecond)
		}
		tick.Reset(wait)
	}
	stopApp()
	if err := awaitStop(done); err != nil {
		return fig, err
	}
	if fig.atFirst == fig.records {
		return fig, fmt.Errorf("every output appeared at once (%d records): no rate to measure", fig.records)
	}
	return fig, nil
}

// fillAsync writes n records of asyncKeys random keys (o.seed), values of o.valueSize bytes.
func fillAsync(ctx context.Context, k *kafka, o options, topic string, n int) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
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
	rng := rand.New(rand.NewPCG(o.seed, 30))
	val := make([]byte, o.valueSize)
	for i := range val {
		val[i] = byte(i*7 + 1)
	}
	for range n {
		key := fmt.Appendf(nil, "k%04d", rng.IntN(asyncKeys))
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: val}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return prodErr
}
