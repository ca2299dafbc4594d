package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The latency scenarios measure how long a record takes from the driver's producer to a
// read_committed consumer of the output, through a contestant that is already running: the
// driver starts the contestant on empty topics with -serve (--serve for Java), waits for
// its READY line (it runs with every input partition), produces -rate records/s for
// -latency-for, reads the output read_committed as it appears, and closes the contestant's
// stdin once every output is visible, which stops it.

// latencyStats are the end-to-end latencies of one latency run, in milliseconds.
type latencyStats struct {
	p50, p90, p99, max float64
	samples            int
	rate               float64 // input records/s actually produced
}

// quantileMs is the nearest-rank q-quantile of sorted, in milliseconds.
func quantileMs(sorted []time.Duration, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return float64(sorted[min(max(i, 0), n-1)]) / float64(time.Millisecond)
}

// latencyOf summarizes samples (sorted in place).
func latencyOf(samples []time.Duration, rate float64) *latencyStats {
	slices.Sort(samples)
	return &latencyStats{
		p50: quantileMs(samples, 0.50), p90: quantileMs(samples, 0.90), p99: quantileMs(samples, 0.99),
		max: quantileMs(samples, 1), samples: len(samples), rate: rate,
	}
}

// latencyWatcher reads a topic read_committed from its start and records, for every record
// whose timestamp is at or after from, the time between its timestamp (the input's produce
// time, which the count keeps) and the poll that returned it.
type latencyWatcher struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	records int64
	samples []time.Duration
	err     error
}

func newLatencyWatcher(brokers []string, topic string, from time.Time) (*latencyWatcher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		return nil, fmt.Errorf("creating the read_committed consumer of %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &latencyWatcher{cl: cl, cancel: cancel, done: make(chan struct{})}
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
				w.records++
				if !r.Timestamp.Before(from) {
					w.samples = append(w.samples, now.Sub(r.Timestamp))
				}
			})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *latencyWatcher) close() {
	w.cancel()
	<-w.done
	w.cl.Close()
}

// await waits until the watcher has read want records, failing on a fetch error, more
// records than want, the contestant's exit (exited) or ctx.
func (w *latencyWatcher) await(ctx context.Context, want int64, exited <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		w.mu.Lock()
		n, err := w.records, w.err
		w.mu.Unlock()
		switch {
		case err != nil:
			return err
		case n == want:
			return nil
		case n > want:
			return fmt.Errorf("read %d committed output records, more than the %d inputs", n, want)
		}
		select {
		case <-exited:
			return fmt.Errorf("the contestant exited with %d of %d outputs visible", n, want)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d outputs visible: %w", n, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// produceAt produces o.rate records/s to topic for o.latencyFor: every 10 ms the records
// due by then, all timestamped with the time of their batch, keyed as the count scenarios'
// input (countKey of the record's index), with random values of o.valueSize bytes. The
// producer does not linger, so a batch leaves when it is produced. It returns the input it
// produced (records per key) and the rate it achieved.
func produceAt(ctx context.Context, brokers []string, topic string, o options, began time.Time) (input, float64, error) {
	in := input{perKey: map[string]int64{}}
	prod, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return in, 0, fmt.Errorf("creating the producer of %s: %w", topic, err)
	}
	defer prod.Close()
	var (
		mu      sync.Mutex
		prodErr error
	)
	onProduced := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if prodErr == nil {
				prodErr = fmt.Errorf("producing to %s/%d: %w", r.Topic, r.Partition, err)
			}
			mu.Unlock()
		}
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], 1)
	rng := rand.NewChaCha8(seed)
	total := int(float64(o.rate) * o.latencyFor.Seconds())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	produced := 0
	for produced < total {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return in, 0, fmt.Errorf("producing %s: %w", topic, ctx.Err())
		}
		now := time.Now()
		due := min(total, int(float64(o.rate)*now.Sub(began).Seconds()))
		for ; produced < due; produced++ {
			key := countKey(produced, o.keys)
			in.perKey[key]++
			val := make([]byte, o.valueSize)
			_, _ = rng.Read(val)
			prod.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: val, Timestamp: now}, onProduced)
		}
	}
	producedFor := time.Since(began)
	if err := prod.Flush(ctx); err != nil {
		return in, 0, fmt.Errorf("flushing %s: %w", topic, err)
	}
	in.records = produced
	mu.Lock()
	defer mu.Unlock()
	return in, float64(produced) / producedFor.Seconds(), prodErr
}

// runLatency runs contestant c in scenario s (a latency scenario) with the process cmd,
// not yet started, whose input topic in and output topic out exist and are empty (see the
// comment at the top of this file), writing the contestant's stdout to log. It fills r's
// wall (from the start to the end of the input), running (READY), CPU, peak RSS, output
// count and latencies.
func (d *driver) runLatency(ctx context.Context, s scenario, c, in, out string, cmd *exec.Cmd, log io.Writer, logPath string, r *run) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.err = fmt.Errorf("piping the stdin of %s: %w", c, err)
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.err = fmt.Errorf("piping the stdout of %s: %w", c, err)
		return
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.err = fmt.Errorf("starting %s: %w", c, err)
		return
	}
	kill := time.AfterFunc(d.o.timeout+time.Minute, func() { _ = cmd.Process.Kill() })
	defer kill.Stop()
	watch := watchPeakRSS(cmd.Process.Pid)

	ready := make(chan struct{})
	exited := make(chan struct{})
	var reported int64
	var readyOnce sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "READY ") {
				r.running = resultField(line, "running_ms") / 1000
				readyOnce.Do(func() { close(ready) })
			}
			if strings.HasPrefix(line, "PEAK ") {
				reported = int64(resultField(line, "vmhwm_kib"))
			}
			fmt.Fprintln(log, "stdout:", line)
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(exited)
	}()
	finish := func() error {
		_ = stdin.Close()
		<-exited
		werr := cmd.Wait()
		r.rssKiB = max(watch(), reported)
		if st := cmd.ProcessState; st != nil {
			r.cpu = (st.UserTime() + st.SystemTime()).Seconds()
		}
		if werr != nil {
			return fmt.Errorf("%s exited: %w (log: %s)", c, werr, logPath)
		}
		return nil
	}

	select {
	case <-ready:
	case <-exited:
		r.err = errors.Join(errors.New(c+" exited before it was READY"), finish())
		return
	case <-time.After(d.o.timeout):
		r.err = errors.Join(fmt.Errorf("%s not READY within %v", c, d.o.timeout), finish())
		return
	}

	began := time.Now()
	// Record timestamps are whole milliseconds.
	from := time.UnixMilli(began.Add(d.o.latencyWarmup).UnixMilli())
	w, err := newLatencyWatcher(d.brokers, out, from)
	if err != nil {
		r.err = errors.Join(err, finish())
		return
	}
	defer w.close()
	input, rate, err := produceAt(ctx, d.brokers, in, d.o, began)
	if err != nil {
		r.err = errors.Join(err, finish())
		return
	}
	r.wall = time.Since(start).Seconds()
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = w.await(actx, int64(input.records), exited)
	cancel()
	if err != nil {
		r.err = errors.Join(fmt.Errorf("%s: %w", out, err), finish())
		return
	}
	w.mu.Lock()
	r.lat = latencyOf(slices.Clone(w.samples), rate)
	w.mu.Unlock()
	if err := finish(); err != nil {
		r.err = err
		return
	}
	if d.o.verify {
		r.out, r.err = d.k.verify(ctx, s, out, input)
	}
}

// printLatencyTable writes the table of a latency scenario: per contestant the medians of
// its successful runs' latency quantiles, CPU seconds and peak RSS; then kstream's p99 and
// p50 over each other contestant's (ratio of the medians and median of the per-round
// ratios: below 1x kstream is faster).
func printLatencyTable(w io.Writer, title string, contestants []string, runs []run) {
	fmt.Fprintf(w, "\n%s\n", title)
	q := func(name string, f func(*latencyStats) float64) metric {
		return metric{name, func(r run) float64 {
			if r.lat == nil {
				return math.NaN()
			}
			return f(r.lat)
		}}
	}
	p50 := q("p50", func(l *latencyStats) float64 { return l.p50 })
	p90 := q("p90", func(l *latencyStats) float64 { return l.p90 })
	p99 := q("p99", func(l *latencyStats) float64 { return l.p99 })
	mx := q("max", func(l *latencyStats) float64 { return l.max })
	rate := q("records/s", func(l *latencyStats) float64 { return l.rate })
	cpu := metric{"CPU s", func(r run) float64 { return r.cpu }}
	rss := metric{"peak RSS", func(r run) float64 { return float64(r.rssKiB) / 1024 }}
	tw := newTable(w)
	fmt.Fprintln(tw, "contestant\truns ok\tp50 ms\tp90 ms\tp99 ms\tmax ms\tinput records/s\tCPU s\tpeak RSS MiB\t")
	for _, c := range contestants {
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, len(okRuns(runs, c)), runsOf(runs, c),
			fixed(medianOf(runs, c, p50), 1), fixed(medianOf(runs, c, p90), 1), fixed(medianOf(runs, c, p99), 1),
			fixed(medianOf(runs, c, mx), 1), group(medianOf(runs, c, rate)), fixed(medianOf(runs, c, cpu), 2),
			fixed(medianOf(runs, c, rss), 0))
	}
	tw.Flush()
	printRatios(w, contestants, runs, []metric{p50, p99, cpu})
}

// String is l in a run's status line.
func (l *latencyStats) String() string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("p50 %.1f p90 %.1f p99 %.1f max %.1f ms", l.p50, l.p90, l.p99, l.max)
}
