package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The window-align scenario (issue 25, item 2): what Config.EventTimeAlignment costs a
// windowed count behind a repartition topic. Each run times, in alternating order, the same
// app with alignment off and on:
//
//   - throughput: Stream(String, Bytes) -> GroupBy(the key, through "<app>-rekey-repartition")
//     -> WindowedBy(1 minute) -> EmitOnWindowClose -> WindowedCount -> To(out), over the
//     window scenarios' input (-records records, -count-keys keys, 10 minutes of event
//     time), from starting the app until the output holds every closed window's final
//     count: records/s;
//   - latency of a window's final result: the same topology with 1-second windows on empty
//     topics, fed alignLatencyRate records/s stamped with the wall clock for alignLatencyFor;
//     each final count is read as it is written (read_uncommitted), and its latency is the
//     time it is read minus its window's end: the time a window takes to close once its
//     last moment has passed (the next records must reach the count, and with alignment the
//     upstream tasks' progress too).
const (
	alignLatencyRate = 2_000
	alignLatencyFor  = 8 * time.Second
	alignLatencyKeys = 200
	alignExtra       = time.Hour // Config.EventTimeAlignment of the aligned variant
)

// alignFigures are one variant's figures of one run.
type alignFigures struct {
	elapsed  time.Duration
	recsPerS float64
	p50, p99 time.Duration // final-result latency
	finals   int
}

// alignResults are every run's figures, off and on, for printWindowAlign.
var alignResults [2][]alignFigures

func runWindowAlign(k *kafka, o options, env *runEnv, run int) error {
	var figs [2]alignFigures
	for i := range 2 {
		variant := (i + run) % 2 // 0: off, 1: on
		f, err := windowAlignVariant(k, o, env, variant == 1)
		if err != nil {
			return fmt.Errorf("alignment %v: %w", variant == 1, err)
		}
		figs[variant] = f
		alignResults[variant] = append(alignResults[variant], f)
	}
	off, on := figs[0], figs[1]
	fmt.Printf("  %-21s run %d: off %9.0f rec/s (%.3fs), final results p50 %v p99 %v (%d) | on %9.0f rec/s (%.3fs), p50 %v p99 %v (%d) | on/off %.2fx\n",
		"window-align", run, off.recsPerS, off.elapsed.Seconds(), off.p50, off.p99, off.finals,
		on.recsPerS, on.elapsed.Seconds(), on.p50, on.p99, on.finals, on.recsPerS/off.recsPerS)
	return nil
}

// printWindowAlign prints the medians of the runs.
func printWindowAlign() {
	if len(alignResults[0]) == 0 {
		return
	}
	med := func(fs []alignFigures, get func(alignFigures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[(len(v)-1)/2]
	}
	for i, name := range []string{"off", "on"} {
		fs := alignResults[i]
		fmt.Printf("window-align %-3s: median %9.0f rec/s; final-result latency median p50 %.1f ms, p99 %.1f ms (%d run(s))\n", name,
			med(fs, func(f alignFigures) float64 { return f.recsPerS }),
			med(fs, func(f alignFigures) float64 { return float64(f.p50) / 1e6 }),
			med(fs, func(f alignFigures) float64 { return float64(f.p99) / 1e6 }), len(fs))
	}
	fmt.Println()
}

// alignTopology is the scenario's topology with windows of size w.
func alignTopology(in, out string, w time.Duration) *kstream.Builder {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, in, serde.String(), serde.Bytes())
	g := kstream.GroupBy(s, func(k string, _ []byte) string { return k }, serde.String(), kstream.Named("rekey"))
	kstream.WindowedCount(g.WindowedBy(kstream.TimeWindowsOf(w)).EmitOnWindowClose(), countStore).ToStream().
		To(out, serde.TimeWindowed(serde.String(), w), serde.Int64())
	return b
}

// alignApp starts the scenario's app over e's topics.
func alignApp(ctx context.Context, e *runEnv, b *kstream.Builder, aligned bool, dir string) (chan error, error) {
	cfg := kstream.Config{ApplicationID: e.group, Brokers: e.brokers, CommitInterval: commitInterval, CloseTimeout: shutdownTimeout,
		CacheMaxBytes: -1, // every update forwarded, as the other scenarios
		Logger:        e.logger, StateDir: dir}
	if aligned {
		cfg.EventTimeAlignment = alignExtra
	}
	app, err := kstream.New(b, cfg)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	return done, nil
}

func windowAlignVariant(k *kafka, o options, env *runEnv, aligned bool) (fig alignFigures, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	suffix := map[bool]string{false: "-off", true: "-on"}[aligned]
	dir, err := os.MkdirTemp("", "kstream-bench-align-")
	if err != nil {
		return fig, err
	}
	defer os.RemoveAll(dir)

	// Throughput.
	e := *env
	e.in, e.out, e.group = env.in+suffix, env.out+suffix, env.group+suffix
	if err := k.createTopics(ctx, int32(o.partitions), e.in, e.out); err != nil {
		return fig, err
	}
	defer func() {
		if derr := k.cleanUp(&e, true); derr != nil && err == nil {
			err = derr
		}
	}()
	in, err := k.fill(ctx, e.in, o, keepAll, true, true)
	if err != nil {
		return fig, fmt.Errorf("filling %s: %w", e.in, err)
	}
	runtime.GC()
	start := time.Now()
	appCtx, stopApp := context.WithCancel(ctx)
	done, err := alignApp(appCtx, &e, alignTopology(e.in, e.out, windowSize), aligned, dir+"/t")
	if err != nil {
		stopApp()
		return fig, err
	}
	_, werr := k.waitForOutput(ctx, e.out, in.closedWindows, start, done)
	fig.elapsed = time.Since(start)
	fig.recsPerS = float64(o.records) / fig.elapsed.Seconds()
	stopApp()
	if rerr := <-done; werr == nil && rerr != nil {
		werr = rerr
	}
	if werr != nil {
		return fig, werr
	}

	// Latency of final results.
	l := *env
	l.in, l.out, l.group = env.in+suffix+"-lat", env.out+suffix+"-lat", env.group+suffix+"-lat"
	if err := k.createTopics(ctx, int32(o.partitions), l.in, l.out); err != nil {
		return fig, err
	}
	defer func() {
		if derr := k.cleanUp(&l, true); derr != nil && err == nil {
			err = derr
		}
	}()
	const w = time.Second
	latCtx, stopLat := context.WithCancel(ctx)
	defer stopLat()
	ldone, err := alignApp(latCtx, &l, alignTopology(l.in, l.out, w), aligned, dir+"/l")
	if err != nil {
		return fig, err
	}
	lats, err := finalLatencies(ctx, k, l.in, l.out, w)
	stopLat()
	if rerr := <-ldone; err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fig, err
	}
	slices.Sort(lats)
	fig.finals = len(lats)
	if len(lats) > 0 {
		fig.p50, fig.p99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return fig, nil
}

// finalLatencies feeds in with alignLatencyRate records/s stamped with the wall clock for
// alignLatencyFor (after a second for the app to start) while reading out, and returns
// each final result's latency: when it was read minus its window's end.
func finalLatencies(ctx context.Context, k *kafka, in, out string, w time.Duration) ([]time.Duration, error) {
	prod, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(out), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	ks := serde.TimeWindowed(serde.String(), w)
	var (
		mu   sync.Mutex
		lats []time.Duration
	)
	began := time.Now().Add(time.Second) // results of windows before this are the warm-up
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	var wg sync.WaitGroup
	wg.Go(func() {
		for readCtx.Err() == nil {
			fs := cons.PollFetches(readCtx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				k, err := ks.Deserialize(r.Key)
				if err != nil || k.End.Before(began) {
					return
				}
				mu.Lock()
				lats = append(lats, now.Sub(k.End))
				mu.Unlock()
			})
		}
	})
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	end := began.Add(alignLatencyFor)
	var n int
	for t := range tick.C {
		if t.After(end) || ctx.Err() != nil {
			break
		}
		due := int(float64(alignLatencyRate) * t.Sub(began.Add(-time.Second)).Seconds())
		for ; n < due; n++ {
			prod.Produce(ctx, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "key%04d", n%alignLatencyKeys), Value: []byte("v"), Timestamp: time.Now()}, nil)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		return nil, err
	}
	time.Sleep(2 * w) // the last windows close with the records already sent
	stopRead()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return lats, nil
}
