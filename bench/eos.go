package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The exactly-once scenarios: the count-pebble pipeline under at-least-once and under
// exactly-once, both with the commit interval commitInterval (100ms), for throughput
// (count-alos, count-eos) and for the end-to-end latency at a paced input rate
// (latency-alos, latency-eos). Their output is read by a read_committed consumer
// (committedWatcher): under exactly-once the output's last offsets are transaction
// markers, so the harness counts records, not offsets.

// eosScenarios are what -eos selects.
var eosScenarios = []string{"count-alos", "count-eos", "latency-alos", "latency-eos", "latency-raw", "latency-pass", "latency-count", "latency-eos-20ms"}

// targetEOSVsALOS: count-eos should reach 0.85x the throughput of count-alos.
const targetEOSVsALOS = 0.85

func runCountALOS(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, countTopology(env), env, nil, kstream.AtLeastOnce)
}

func runCountEOS(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, countTopology(env), env, nil, kstream.ExactlyOnce)
}

// runCountEOS20ms is runCountEOS with a 20ms commit interval: the exactly-once latency
// setting (issue 15: p99 <= 40ms at 10k records/s).
func runCountEOS20ms(ctx context.Context, env *runEnv) error {
	env.commitEvery = 20 * time.Millisecond
	defer func() { env.commitEvery = 0 }()
	return runCountEOS(ctx, env)
}

// runBaselineNoLinger is the baseline loop with linger 0 (latency-raw): the floor of a
// consume-and-produce hop.
func runBaselineNoLinger(ctx context.Context, env *runEnv) error {
	env.linger = kstream.NoLinger
	defer func() { env.linger = 0 }()
	return runBaseline(ctx, env)
}

// runCountNoLinger is the at-least-once count with Config.Linger = NoLinger
// (latency-count): compared with latency-pass, what the count itself adds to a hop's
// latency (issue 28: p99 <= 1.3x latency-pass's).
func runCountNoLinger(ctx context.Context, env *runEnv) error {
	env.linger = kstream.NoLinger
	defer func() { env.linger = 0 }()
	return runCountALOS(ctx, env)
}

// runPassthroughNoLinger is the passthrough with Config.Linger = NoLinger (latency-pass):
// kstream's low-latency setting, one hop at-least-once.
func runPassthroughNoLinger(ctx context.Context, env *runEnv) error {
	env.linger = kstream.NoLinger
	defer func() { env.linger = 0 }()
	return runPassthrough(ctx, env)
}

// committedWatcher consumes a topic read_committed from its start, keeping the control
// records (transaction markers) so that it knows how far it has read in offsets, and counts
// the data records. onRecord, if set, is called for every data record with the time the
// poll returned.
type committedWatcher struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	next     map[int32]int64 // partition: offset after the last record read, markers included
	records  int64           // data records read
	firstOut time.Time       // when the first data record was read
	err      error           // first fetch error
}

func newCommittedWatcher(brokers []string, topic string, onRecord func(now time.Time, r *kgo.Record)) (*committedWatcher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, fmt.Errorf("creating the read_committed consumer of %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &committedWatcher{cl: cl, cancel: cancel, done: make(chan struct{}), next: map[int32]int64{}}
	go func() {
		defer close(w.done)
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			now := time.Now()
			w.mu.Lock()
			fs.EachError(func(t string, p int32, err error) {
				if w.err == nil && !errors.Is(err, context.Canceled) {
					w.err = fmt.Errorf("consuming %s/%d read_committed: %w", t, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				w.next[r.Partition] = r.Offset + 1
				if r.Attrs.IsControl() {
					return
				}
				w.records++
				if w.firstOut.IsZero() {
					w.firstOut = now
				}
				if onRecord != nil {
					onRecord(now, r)
				}
			})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *committedWatcher) close() {
	w.cancel()
	<-w.done
	w.cl.Close()
}

func (w *committedWatcher) count() (int64, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records, w.firstOut, w.err
}

// wait polls the watcher every 10ms until it has read want data records, like
// kafka.waitForOutput: it returns how long after start the first one was read, and fails if
// the run ends early (done receives), if more than want records appear, or when ctx expires.
func (w *committedWatcher) wait(ctx context.Context, topic string, want int64, start time.Time, done <-chan error) (time.Duration, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n, first, err := w.count()
		var firstOut time.Duration
		if !first.IsZero() {
			firstOut = first.Sub(start)
		}
		switch {
		case err != nil:
			return firstOut, err
		case n == want:
			return firstOut, nil
		case n > want:
			return firstOut, fmt.Errorf("output topic %s holds %d committed records, more than the %d expected", topic, n, want)
		}
		select {
		case err := <-done:
			return firstOut, fmt.Errorf("stopped after %v with %d of %d committed output records: %v", time.Since(start).Round(time.Millisecond), n, want, err)
		case <-ctx.Done():
			return firstOut, fmt.Errorf("output short: %d of %d committed records in %s after %v", n, want, topic, time.Since(start).Round(time.Millisecond))
		case <-tick.C:
		}
	}
}

// settle waits until the watcher has read every partition of topic up to its end offset as
// of now (after the app stopped, no transaction is open: the last stable offset is the end),
// then returns the data records read in all.
func (w *committedWatcher) settle(ctx context.Context, k *kafka, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	offs, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if err := offs.Error(); err != nil {
		return 0, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	end := map[int32]int64{}
	for _, ps := range offs {
		for p, o := range ps {
			end[p] = o.Offset
		}
	}
	for {
		w.mu.Lock()
		caught := true
		for p, e := range end {
			if w.next[p] < e {
				caught = false
			}
		}
		n, err := w.records, w.err
		w.mu.Unlock()
		if err != nil {
			return n, err
		}
		if caught {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("the read_committed consumer of %s did not reach the end offsets %v within 30s (read %d records)", topic, end, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// latencyResult is what a latency run measured.
type latencyResult struct {
	produced int64           // input records (= output records expected)
	samples  []time.Duration // now - output timestamp, after the warm-up, sorted
	rate     float64         // input records/s actually produced
	lagMax   time.Duration   // how far the producer fell behind its schedule at most
}

// quantile is the nearest-rank q-quantile of the sorted samples.
func (l *latencyResult) quantile(q float64) time.Duration {
	n := len(l.samples)
	if n == 0 {
		return 0
	}
	i := int(q*float64(n)+0.999999) - 1
	return l.samples[min(max(i, 0), n-1)]
}

// runLatency runs a latency scenario: the count pipeline (s.run) on fresh, empty topics;
// once it runs with every task, a producer writes o.rate records/s (a batch every 10ms,
// each record timestamped with the time of its batch) for o.latencyFor, and a read_committed
// consumer of the output records now - record timestamp for every output whose input was
// produced after the first o.latencyWarmup. The run ends when every output is visible; a
// missing or extra output fails it.
func runLatency(k *kafka, o options, s scenario, env *runEnv) (res result, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	resetPeakRSS()
	if err := k.createTopics(ctx, int32(o.partitions), env.in, env.out); err != nil {
		return res, err
	}
	defer func() {
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
	}()

	appc := make(chan *kstream.App, 1)
	readyc := make(chan struct{})
	env.onApp = func(a *kstream.App) { appc <- a }
	var readyOnce sync.Once
	env.onReady = func() { readyOnce.Do(func() { close(readyc) }) }
	defer func() { env.onApp, env.onReady = nil, nil }()
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	go func() { done <- s.run(appCtx, env) }()
	stop := func() error {
		stopApp()
		return awaitStop(done)
	}

	// Wait until the app runs with all its tasks (the loop has all its partitions), so
	// that the group join is not measured.
	var app *kstream.App
	if s.raw {
		select {
		case <-readyc:
		case rerr := <-done:
			return res, fmt.Errorf("stopped before starting: %v", rerr)
		case <-ctx.Done():
			return res, errors.New("not assigned every partition within the scenario cap")
		}
	} else {
		select {
		case app = <-appc:
		case rerr := <-done:
			return res, fmt.Errorf("stopped before starting: %v", rerr)
		}
	}
	for app != nil && (app.State() != kstream.StateRunning || len(app.Tasks()) != o.partitions) {
		select {
		case rerr := <-done:
			return res, fmt.Errorf("stopped before running: %v", rerr)
		case <-ctx.Done():
			return res, errors.New("not running with every task within the scenario cap")
		case <-time.After(10 * time.Millisecond):
		}
	}

	prod, err := kgo.NewClient(
		kgo.SeedBrokers(env.brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2 of the key, as in fill
		kgo.ProducerLinger(0),                                // a batch leaves when it is produced: its timestamp is its send time
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		_ = stop()
		return res, err
	}
	defer prod.Close()

	var (
		latMu   sync.Mutex
		samples []time.Duration
	)
	began := time.Now() // the producer's schedule starts here
	// Record timestamps come back in whole milliseconds.
	measureFrom := time.UnixMilli(began.Add(o.latencyWarmup).UnixMilli())
	w, err := newCommittedWatcher(env.brokers, env.out, func(now time.Time, r *kgo.Record) {
		if !r.Timestamp.Before(measureFrom) {
			latMu.Lock()
			samples = append(samples, now.Sub(r.Timestamp))
			latMu.Unlock()
		}
	})
	if err != nil {
		_ = stop()
		return res, err
	}
	defer w.close()

	// The paced producer: every 10ms, the records due by then (rate x elapsed), all with the
	// same timestamp, the time of the batch. A late tick produces what is due, so the rate
	// holds on average; lagMax says how late a batch was at worst.
	total := int64(float64(o.rate) * o.latencyFor.Seconds())
	var (
		prodMu  sync.Mutex
		prodErr error
	)
	onProduced := func(_ *kgo.Record, err error) {
		if err != nil {
			prodMu.Lock()
			if prodErr == nil {
				prodErr = err
			}
			prodMu.Unlock()
		}
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], o.seed)
	rng := rand.NewChaCha8(seed)
	var produced int64
	var lagMax time.Duration
	tick := time.NewTicker(10 * time.Millisecond)
	for produced < total {
		select {
		case <-tick.C:
		case rerr := <-done:
			tick.Stop()
			return res, fmt.Errorf("stopped while producing: %v", rerr)
		}
		now := time.Now()
		due := min(total, int64(float64(o.rate)*now.Sub(began).Seconds()))
		if due <= produced {
			continue
		}
		// The batch was due when its first record was.
		lagMax = max(lagMax, now.Sub(began.Add(time.Duration(float64(produced+1)/float64(o.rate)*float64(time.Second)))))
		buf := make([]byte, int(due-produced)*(countKeyLen+o.valueSize))
		for ; produced < due; produced++ {
			key, val := buf[:countKeyLen:countKeyLen], buf[countKeyLen:countKeyLen+o.valueSize:countKeyLen+o.valueSize]
			buf = buf[countKeyLen+o.valueSize:]
			putCountKey(key, int(produced))
			_, _ = rng.Read(val)
			prod.Produce(ctx, &kgo.Record{Topic: env.in, Key: key, Value: val, Timestamp: now}, onProduced)
		}
	}
	tick.Stop()
	producedFor := time.Since(began)
	if err := prod.Flush(ctx); err != nil {
		_ = stop()
		return res, fmt.Errorf("flushing the input: %w", err)
	}
	prodMu.Lock()
	perr := prodErr
	prodMu.Unlock()
	if perr != nil {
		_ = stop()
		return res, fmt.Errorf("producing the input: %w", perr)
	}

	// Every input's output must become visible (30s after the last input at most).
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	_, werr := w.wait(wctx, env.out, total, began, done)
	wcancel()
	if werr != nil {
		_ = stop()
		return res, fmt.Errorf("missing output: %w", werr)
	}
	if err := stop(); err != nil {
		return res, err
	}
	if got, err := w.settle(ctx, k, env.out); err != nil {
		return res, err
	} else if got != total {
		return res, fmt.Errorf("output topic %s holds %d committed records after shutdown, want exactly %d", env.out, got, total)
	}

	latMu.Lock()
	lr := &latencyResult{produced: total, samples: slices.Clone(samples), rate: float64(total) / producedFor.Seconds(), lagMax: lagMax}
	latMu.Unlock()
	slices.Sort(lr.samples)
	if len(lr.samples) == 0 {
		return res, fmt.Errorf("no latency samples after the %v warm-up", o.latencyWarmup)
	}
	res.seconds = producedFor.Seconds()
	res.outRecords = total
	res.lat = lr
	res.stats = env.stats
	res.peakRSS = readPeakRSS()
	return res, nil
}
