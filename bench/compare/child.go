package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Go contestants run in a child process each: the driver starts its own executable with
// -child raw or -child kstream. A child runs one scenario until its group has committed the
// input's end offsets, prints the result line and exits.

// commitInterval is every contestant's commit interval (go run ./bench's) unless the
// scenario has its own (-commit-interval).
const commitInterval = 100 * time.Millisecond

// maxPollRecords is what the raw loops poll at once (the library's default
// Config.MaxPollRecords, as go run ./bench's baseline).
const maxPollRecords = 10000

// donePoll is how often a contestant reads its group's committed offsets to know it is done
// (the Java contestant uses the same interval).
const donePoll = 20 * time.Millisecond

// closeTimeout bounds a contestant's final flush, commit and shutdown.
const closeTimeout = 30 * time.Second

// runningAt is when the kstream contestant first reached StateRunning, in ms after the
// process started (-1 before, and for the raw loops, which have no such state).
var runningAt atomic.Int64

// What -serve's READY line waits for: the kstream contestant's app running with a task
// per input partition, or the raw loops' consumer assigned every input partition.
var (
	serving  atomic.Pointer[kstream.App]
	assigned atomic.Int64
)

// childArgs are the parameters of one contestant run.
type childArgs struct {
	contestant string // "raw" or "kstream"
	scenario   string
	brokers    []string
	in, out    string
	group      string // the consumer group (raw) or application id (kstream)
	stateDir   string // kstream's Config.StateDir
	timeout    time.Duration
	memtrace   string                  // -memtrace: the directory of the memory diagnostic (memtrace.go), "" for none
	memLimit   kstream.MemoryLimitMode // -memlimit: kstream's Config.GoMemoryLimit
	headroom   int64                   // -memlimit-headroom: kstream's Config.GoMemoryLimitHeadroom
	commit     time.Duration           // -commit-interval
	serve      bool                    // -serve: a latency scenario (see serve)
	partitions int                     // -partitions: the input's partitions, for -serve's READY
	blocking   bool                    // -blocking-commits: kstream's Config.BlockingCommits
}

// lowLatency reports whether a's scenario is a latency scenario, whose producers do not
// linger.
func (a childArgs) lowLatency() bool { return strings.HasPrefix(a.scenario, "latency-") }

// childMain runs a Go contestant (the process was started with -child) and returns the
// process's exit code.
func childMain(a childArgs) int {
	start := time.Now()
	var mt *memTracer
	if a.memtrace != "" {
		mt = startMemTrace(a.memtrace, a.group)
	}
	err := runChild(a, start)
	if mt != nil {
		mt.report(os.Stderr)
	}
	if kib, ok := peakRSSKiB("/proc/self/status"); ok {
		fmt.Printf("PEAK vmhwm_kib=%d\n", kib)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR %s %s: %v\n", a.contestant, a.scenario, err)
		return 1
	}
	return 0
}

// peakRSSKiB reads VmHWM, the peak resident set of the process since its exec, from a
// /proc/<pid>/status file.
func peakRSSKiB(statusFile string) (int64, bool) {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// runChild starts the contestant, waits until its group has committed the end offsets of
// the input, prints the RESULT line, then stops the contestant and waits for it.
func runChild(a childArgs, start time.Time) error {
	runningAt.Store(-1)
	var run func(context.Context, childArgs, time.Time) error
	switch a.contestant {
	case "raw":
		run = rawRunner(a.scenario)
	case "kstream":
		run = kstreamRunner(a.scenario)
	default:
		return fmt.Errorf("unknown contestant %q", a.contestant)
	}
	if run == nil {
		return fmt.Errorf("unknown scenario %q", a.scenario)
	}
	if a.serve {
		return serve(a, run, start)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.brokers...))
	if err != nil {
		return fmt.Errorf("creating the admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, a.in)
	if err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", a.in, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", a.in, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(runCtx, a, start) }()

	tick := time.NewTicker(donePoll)
	defer tick.Stop()
	for {
		if ok, err := committedAll(ctx, adm, a.group, ends); err != nil {
			return err
		} else if ok {
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("stopped before committing the input: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("input %s not committed by group %s within %v: %w", a.in, a.group, a.timeout, ctx.Err())
		case <-tick.C:
		}
	}
	return finishChild(a, start, stop, done, "its input was committed")
}

// finishChild prints the RESULT line of a contestant that is done, stops it and waits for
// it (at most closeTimeout and 10 s), reporting an error it stopped with.
func finishChild(a childArgs, start time.Time, stop context.CancelFunc, done <-chan error, after string) error {
	fmt.Printf("RESULT contestant=%s scenario=%s done_ms=%d running_ms=%d\n", a.contestant, a.scenario,
		time.Since(start).Milliseconds(), runningAt.Load())
	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("stopping: %w", err)
		}
	case <-time.After(closeTimeout + 10*time.Second):
		return fmt.Errorf("did not stop after %s", after)
	}
	return nil
}

// serve runs a latency scenario: it starts the contestant on the (empty) input, prints
// "READY running_ms=N" once it runs with every input partition, and stops it when its
// stdin ends (the driver closes it once it has read every output), printing the RESULT line
// first.
func serve(a childArgs, run func(context.Context, childArgs, time.Time) error, start time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(runCtx, a, start) }()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	ready := func() bool {
		if app := serving.Load(); app != nil {
			return app.State() == kstream.StateRunning && len(app.Tasks()) == a.partitions
		}
		return a.contestant == "raw" && assigned.Load() == int64(a.partitions)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	announced := false
	for stopping := false; !stopping; {
		if !announced && ready() {
			announced = true
			fmt.Printf("READY contestant=%s scenario=%s running_ms=%d\n", a.contestant, a.scenario, time.Since(start).Milliseconds())
		}
		select {
		case err := <-done:
			return fmt.Errorf("stopped while serving: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("still serving after %v: %w", a.timeout, ctx.Err())
		case <-eof:
			stopping = true
		case <-tick.C:
		}
	}
	return finishChild(a, start, stop, done, "its stdin ended")
}

// committedAll reports whether group has committed the end offset of every partition in
// ends. A transient error of the offset fetch is not an error: the next poll tries again.
func committedAll(ctx context.Context, adm *kadm.Client, group string, ends kadm.ListedOffsets) (bool, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
		}
		return false, nil
	}
	all := true
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup(e.Topic, e.Partition)
		if !ok || o.Err != nil || o.At < e.Offset {
			all = false
		}
	})
	return all, nil
}

// kstreamRunner returns the kstream topology of scenario, run until ctx is cancelled, or nil
// for an unknown scenario. The topologies are go run ./bench's: passthrough and
// filter-mapvalues as there, count and count-cache as count-pebble (count-cache with
// Config.CacheMaxBytes of 10 MiB, Kafka Streams' default statestore.cache.max.bytes, as the
// Java side keeps it; the others with the cache off, as the Java side sets
// statestore.cache.max.bytes=0), count-eos as count-eos.
func kstreamRunner(scenario string) func(context.Context, childArgs, time.Time) error {
	switch scenario {
	case "passthrough":
		return func(ctx context.Context, a childArgs, start time.Time) error {
			b := kstream.NewBuilder()
			kstream.Stream(b, a.in, serde.Bytes(), serde.Bytes()).To(a.out, serde.Bytes(), serde.Bytes())
			return runKStream(ctx, b, a, kstream.AtLeastOnce, -1, start)
		}
	case "filter-mapvalues":
		return func(ctx context.Context, a childArgs, start time.Time) error {
			b := kstream.NewBuilder()
			kept := kstream.Stream(b, a.in, serde.Bytes(), serde.Bytes()).
				Filter(func(_, v []byte) bool { return keepFilter(v) })
			kstream.MapValues(kept, flipLast).To(a.out, serde.Bytes(), serde.Bytes())
			return runKStream(ctx, b, a, kstream.AtLeastOnce, -1, start)
		}
	case "count", "count-cache", "count-eos", "latency-count", "latency-eos-20ms":
		g := kstream.AtLeastOnce
		if scenario == "count-eos" || scenario == "latency-eos-20ms" {
			g = kstream.ExactlyOnce
		}
		return func(ctx context.Context, a childArgs, start time.Time) error {
			b := kstream.NewBuilder()
			grouped := kstream.Stream(b, a.in, serde.String(), serde.Bytes()).GroupByKey()
			kstream.Count(grouped, "counts").ToStream().To(a.out, serde.String(), serde.Int64())
			cache := int64(-1) // off: every update is forwarded, as on the Java side
			if scenario == "count-cache" {
				cache = 10 << 20
			}
			return runKStream(ctx, b, a, g, cache, start)
		}
	}
	return nil
}

// runKStream runs b under guarantee g with the commit interval of every contestant, the
// record cache budget cacheBytes (Config.CacheMaxBytes; negative: off) and the library's
// other defaults (a Pebble store in a.stateDir), recording in runningAt when it first
// reaches StateRunning. The at-least-once latency scenarios set Config.Linger = NoLinger
// (under exactly-once the default, 0, already sends at once).
func runKStream(ctx context.Context, b *kstream.Builder, a childArgs, g kstream.Guarantee, cacheBytes int64, start time.Time) error {
	var linger time.Duration
	if a.lowLatency() && g == kstream.AtLeastOnce {
		linger = kstream.NoLinger
	}
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:   a.group,
		Brokers:         a.brokers,
		CommitInterval:  a.commit,
		Linger:          linger,
		BlockingCommits: a.blocking,
		CloseTimeout:    closeTimeout,
		StateDir:        a.stateDir,
		Guarantee:       g,
		CacheMaxBytes:   cacheBytes,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		StateListener: func(_, s kstream.State) {
			if s == kstream.StateRunning && runningAt.CompareAndSwap(-1, time.Since(start).Milliseconds()) && a.memLimit != kstream.MemoryLimitOff {
				fmt.Fprintf(os.Stderr, "MEMLIMIT %v: Go memory limit %d MiB\n", a.memLimit, debug.SetMemoryLimit(-1)>>20)
			}
		},
		GoMemoryLimit:         a.memLimit,
		GoMemoryLimitHeadroom: a.headroom,
	})
	if err != nil {
		return fmt.Errorf("creating the app %s: %w", a.group, err)
	}
	serving.Store(app)
	return app.Run(ctx)
}

// keepFilter is the predicate of filter-mapvalues: it drops the values whose first byte is
// 0, about 1 in 256 of random values.
func keepFilter(v []byte) bool { return len(v) == 0 || v[0] != 0 }

// flipLast is the mapper of filter-mapvalues: a copy of v with its last byte inverted.
func flipLast(v []byte) []byte {
	out := make([]byte, len(v))
	copy(out, v)
	if len(out) > 0 {
		out[len(out)-1] ^= 0xff
	}
	return out
}

// rawProcessor is what a raw at-least-once loop does with the records it polls: process is
// called for every record, flush before every commit; both emit output records through
// emit.
type rawProcessor struct {
	process func(r *kgo.Record, emit func(*kgo.Record))
	flush   func(emit func(*kgo.Record))
}

// rawRunner returns the raw franz-go loop of scenario, or nil for an unknown scenario:
//
//   - passthrough: runRawLoop writing every record unchanged (go run ./bench's baseline);
//   - filter-mapvalues: runRawLoop writing the records keepFilter keeps, values flipLast'ed;
//   - count: runRawLoop counting each key in a Go map and writing (key, count as an 8-byte
//     big-endian int64) for every record; no store, no changelog;
//   - count-cache: the same, but writing at each commit only the latest count of each key
//     updated since the previous commit (what a record cache at best achieves);
//   - count-eos: runRawEOS, count's loop in transactions;
//   - latency-count and latency-eos-20ms: count and count-eos with a producer that does
//     not linger.
func rawRunner(scenario string) func(context.Context, childArgs, time.Time) error {
	switch scenario {
	case "count-eos", "latency-eos-20ms":
		return func(ctx context.Context, a childArgs, _ time.Time) error { return runRawEOS(ctx, a) }
	case "passthrough", "filter-mapvalues", "count", "count-cache", "latency-count":
		p := rawProcessorOf(strings.TrimPrefix(scenario, "latency-"))
		return func(ctx context.Context, a childArgs, _ time.Time) error { return runRawLoop(ctx, a, p) }
	}
	return nil
}

// rawProcessorOf is the processing of runRawLoop for scenario (passthrough,
// filter-mapvalues, count or count-cache; see rawRunner).
func rawProcessorOf(scenario string) rawProcessor {
	var p rawProcessor
	switch scenario {
	case "passthrough":
		p.process = func(r *kgo.Record, emit func(*kgo.Record)) {
			emit(&kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	case "filter-mapvalues":
		p.process = func(r *kgo.Record, emit func(*kgo.Record)) {
			if keepFilter(r.Value) {
				emit(&kgo.Record{Key: r.Key, Value: flipLast(r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	case "count":
		c := newCounter()
		p.process = func(r *kgo.Record, emit func(*kgo.Record)) {
			n := c.add(r.Key)
			emit(&kgo.Record{Key: r.Key, Value: int64Bytes(n), Timestamp: r.Timestamp})
		}
	case "count-cache":
		c := newCounter()
		dirty := map[string]time.Time{}
		p.process = func(r *kgo.Record, _ func(*kgo.Record)) {
			c.add(r.Key)
			dirty[string(r.Key)] = r.Timestamp
		}
		p.flush = func(emit func(*kgo.Record)) {
			for k, ts := range dirty {
				emit(&kgo.Record{Key: []byte(k), Value: int64Bytes(c.counts[k]), Timestamp: ts})
			}
			clear(dirty)
		}
	}
	return p
}

// counter counts records per key.
type counter struct{ counts map[string]int64 }

func newCounter() *counter { return &counter{counts: make(map[string]int64)} }

// add counts one more record of key and returns its count.
func (c *counter) add(key []byte) int64 {
	n := c.counts[string(key)] + 1
	c.counts[string(key)] = n
	return n
}

// int64Bytes is n as 8 big-endian bytes (serde.Int64 and Java's LongSerializer).
func int64Bytes(n int64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(n)) }

// rawClientOpts are the producer settings of the raw loops: go run ./bench's baseline's
// (the library's producer settings), without linger in the latency scenarios.
func rawClientOpts(a childArgs) []kgo.Opt {
	linger := 5 * time.Millisecond
	if a.lowLatency() {
		linger = 0
	}
	return []kgo.Opt{
		kgo.SeedBrokers(a.brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(linger),
	}
}

// rawAssignOpts keep count of the input partitions a raw loop's consumer is assigned, for
// -serve's READY.
func rawAssignOpts(a childArgs) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned.Add(int64(len(m[a.in]))) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned.Add(-int64(len(m[a.in]))) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned.Add(-int64(len(m[a.in]))) }),
	}
}

// runRawLoop is go run ./bench's baseline loop with a processor: a kgo group consumer
// (a.group) polls up to maxPollRecords records, p.process emits output records to a separate
// kgo producer; every a.commit (and at the end) p.flush emits, the producer is flushed
// and then the polled offsets are committed, so a committed offset never covers an
// unacknowledged output record. A poll waits at most until the next commit is due.
func runRawLoop(ctx context.Context, a childArgs, p rawProcessor) error {
	// Produced records outlive ctx so that the final flush can still deliver them.
	prodCtx := context.WithoutCancel(ctx)
	prod, err := kgo.NewClient(rawClientOpts(a)...)
	if err != nil {
		return fmt.Errorf("creating the producer: %w", err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(append(rawAssignOpts(a),
		kgo.SeedBrokers(a.brokers...),
		kgo.ConsumerGroup(a.group),
		kgo.ConsumeTopics(a.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)...)
	if err != nil {
		return fmt.Errorf("creating the consumer: %w", err)
	}
	defer cons.Close()

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
	emit := func(r *kgo.Record) {
		r.Topic = a.out
		prod.Produce(prodCtx, r, onProduced)
	}
	commit := func() error {
		cctx, cancel := context.WithTimeout(prodCtx, closeTimeout)
		defer cancel()
		if p.flush != nil {
			p.flush(emit)
		}
		if err := prod.Flush(cctx); err != nil {
			return fmt.Errorf("flushing to %s: %w", a.out, err)
		}
		mu.Lock()
		err := prodErr
		mu.Unlock()
		if err != nil {
			return err
		}
		if err := cons.CommitUncommittedOffsets(cctx); err != nil {
			return fmt.Errorf("committing the offsets of group %s: %w", a.group, err)
		}
		return nil
	}

	next := time.Now().Add(a.commit)
	for ctx.Err() == nil {
		pctx, cancel := context.WithDeadline(ctx, next)
		fetches := cons.PollRecords(pctx, maxPollRecords)
		cancel()
		if fetches.IsClientClosed() {
			break
		}
		if err := fetchError(fetches); err != nil {
			cons.AllowRebalance()
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) { p.process(r, emit) })
		if !time.Now().Before(next) {
			if err := commit(); err != nil {
				cons.AllowRebalance()
				return err
			}
			next = time.Now().Add(a.commit)
		}
		cons.AllowRebalance()
	}
	if err := commit(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(prodCtx, closeTimeout)
	defer cancel()
	return cons.LeaveGroupContext(cctx)
}

// fetchError is the first error of fetches other than a cancelled or expired poll context.
func fetchError(fetches kgo.Fetches) error {
	var first error
	fetches.EachError(func(topic string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			first = fmt.Errorf("fetching %s/%d: %w", topic, p, err)
		}
	})
	return first
}

// runRawEOS is the raw loop of count-eos: a kgo.GroupTransactSession (transactional id
// "<group>-txn", read_committed, stable offsets) polls, counts each key in a Go map and
// produces (key, count) for every record inside a transaction; every a.commit it ends
// the transaction with a commit (flush, the polled offsets committed in the transaction,
// EndTxn) and begins the next. A transaction that aborts (a rebalance) is an error: the
// map would no longer match the committed offsets.
func runRawEOS(ctx context.Context, a childArgs) error {
	opts := append(append(rawClientOpts(a), rawAssignOpts(a)...),
		kgo.TransactionalID(a.group+"-txn"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup(a.group),
		kgo.ConsumeTopics(a.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("creating the transactional session: %w", err)
	}
	defer sess.Close()
	endCtx := context.WithoutCancel(ctx)
	end := func(commit kgo.TransactionEndTry) error {
		cctx, cancel := context.WithTimeout(endCtx, closeTimeout)
		defer cancel()
		committed, err := sess.End(cctx, commit)
		if err != nil {
			return fmt.Errorf("ending the transaction of group %s: %w", a.group, err)
		}
		if commit == kgo.TryCommit && !committed {
			return fmt.Errorf("the transaction of group %s aborted (a rebalance?)", a.group)
		}
		return nil
	}

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
	c := newCounter()
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	next := time.Now().Add(a.commit)
	for ctx.Err() == nil {
		pctx, cancel := context.WithDeadline(ctx, next)
		fetches := sess.PollRecords(pctx, maxPollRecords)
		cancel()
		if fetches.IsClientClosed() {
			break
		}
		if err := fetchError(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			n := c.add(r.Key)
			sess.Produce(endCtx, &kgo.Record{Topic: a.out, Key: r.Key, Value: int64Bytes(n), Timestamp: r.Timestamp}, onProduced)
		})
		if !time.Now().Before(next) {
			if err := end(kgo.TryCommit); err != nil {
				return err
			}
			mu.Lock()
			err := prodErr
			mu.Unlock()
			if err != nil {
				return err
			}
			if err := sess.Begin(); err != nil {
				return fmt.Errorf("beginning a transaction: %w", err)
			}
			next = time.Now().Add(a.commit)
		}
	}
	return end(kgo.TryCommit)
}

// parseChildFlags reads the flags of a child process from args (after -child).
func parseChildFlags(contestant string, args []string) (childArgs, error) {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	a := childArgs{contestant: contestant}
	var brokers string
	fs.StringVar(&a.scenario, "scenario", "", "scenario")
	fs.StringVar(&brokers, "brokers", "", "brokers, comma-separated")
	fs.StringVar(&a.in, "in", "", "input topic")
	fs.StringVar(&a.out, "out", "", "output topic")
	fs.StringVar(&a.group, "group", "", "consumer group / application id")
	fs.StringVar(&a.stateDir, "state-dir", "", "state directory (kstream)")
	fs.DurationVar(&a.timeout, "timeout", 5*time.Minute, "give up after")
	fs.StringVar(&a.memtrace, "memtrace", "", "sample the memory and write heap profiles to this directory (memtrace.go)")
	fs.DurationVar(&a.commit, "commit-interval", commitInterval, "commit interval")
	fs.BoolVar(&a.serve, "serve", false, "a latency scenario: READY once running, stop when stdin ends")
	fs.IntVar(&a.partitions, "partitions", 0, "the input's partitions (-serve)")
	fs.BoolVar(&a.blocking, "blocking-commits", false, "Config.BlockingCommits (kstream)")
	memLimit := fs.String("memlimit", "off", "Config.GoMemoryLimit (kstream): off, from-budgets or override")
	headroomMiB := fs.Int64("memlimit-headroom", 0, "Config.GoMemoryLimitHeadroom (kstream) in MiB")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	a.headroom = *headroomMiB << 20
	switch *memLimit {
	case "off":
	case "from-budgets":
		a.memLimit = kstream.MemoryLimitFromBudgets
	case "override":
		a.memLimit = kstream.MemoryLimitOverride
	default:
		return a, fmt.Errorf("child: -memlimit %q: want off, from-budgets or override", *memLimit)
	}
	a.brokers = splitList(brokers)
	if a.scenario == "" || len(a.brokers) == 0 || a.in == "" || a.out == "" || a.group == "" {
		return a, errors.New("child: -scenario, -brokers, -in, -out and -group are required")
	}
	return a, nil
}
