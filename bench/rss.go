package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	pebblestore "github.com/kstream-go/kstream/store/pebble"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The memory scenario rss-pebble: the count-pebble topology over -records distinct keys
// (every key once, so the store ends with -records entries), with the broker in a child
// process so that the resident set measured is the application's (and the harness's small
// admin client), not the broker's copy of the topics. It prints the peak RSS (VmHWM of the
// timed phase) and the RSS sampled every 100ms against the configured memory budget:
// BlockCacheBytes + MemTableBytes + StoreCacheBytes (the budget of all the read caches).

// startRSSKB is the VmRSS of this process when main started (the binary and the Go runtime,
// nothing else): with an app's share of a run, an estimate of the peak RSS of a process that
// runs only the app (as bench/compare's contestants do).
var startRSSKB int64

// envBrokerChild makes the bench binary run only an embedded broker (see runBrokerChild).
const envBrokerChild = "KSTREAM_BENCH_BROKER_CHILD"

// rssKeyLen is the length of an rss-pebble key: "k" and 7 digits.
const rssKeyLen = 8

// putRSSKey writes the key of record i, "k%07d", into dst (rssKeyLen bytes).
func putRSSKey(dst []byte, i int) {
	dst[0] = 'k'
	for j := rssKeyLen - 1; j >= 1; j-- {
		dst[j] = byte('0' + i%10)
		i /= 10
	}
}

// runBrokerChild runs an embedded broker, prints "ADDR <host:port>" on stdout and serves
// until its stdin is closed (the parent closes it, or dies), then closes the broker.
func runBrokerChild() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := embedded.Start(embedded.Logger(logger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench broker child:", err)
		os.Exit(1)
	}
	fmt.Printf("ADDR %s\n", b.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "bench broker child: closing:", err)
	}
	os.Exit(0)
}

// brokerChild is an embedded broker in a child process of this binary.
type brokerChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startBrokerChild() (*brokerChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to start the broker child: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envBrokerChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the broker child: %w", err)
	}
	c := &brokerChild{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR "); ok && err == nil {
		c.addr = addr
		return c, nil
	}
	c.close()
	return nil, fmt.Errorf("the broker child printed %q, want ADDR <host:port> (%v)", line, err)
}

// peakKB is the child's VmHWM in kB (0 if unknown).
func (c *brokerChild) peakKB() int64 {
	return statusKB(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid), "VmHWM")
}

func (c *brokerChild) close() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// statusKB returns a "<field>: N kB" value of a /proc status file, 0 if unknown.
func statusKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb
			}
		}
	}
	return 0
}

// rssSample is one sample of the process's memory during the run.
type rssSample struct {
	at       time.Duration
	rssKB    int64
	heapKB   int64 // Go heap in use (HeapInuse)
	goSysKB  int64 // memory the Go runtime obtained from the OS (Sys)
	released int64 // kB of Go heap returned to the OS (HeapReleased)
	liveKB   int64 // Go heap live at the last GC (runtime/metrics /gc/heap/live:bytes)
	idleKB   int64 // Go heap free but kept from the OS (HeapIdle - HeapReleased)
	heapSys  int64 // HeapSys
}

// rssResult is what an rss-pebble run measured.
type rssResult struct {
	name       string // rss-pebble or rss-count
	keys       int
	records    int
	seconds    float64
	budget     int64 // bytes
	blockCache int64
	memTable   uint64
	storeCache int
	partitions int
	baselineKB int64 // VmRSS before the app started (harness, Go runtime, after the fill's memory was released)
	// baselineOutsideKB is the baseline's RSS outside the Go runtime's memory (the binary,
	// the C libraries): what is outside Go beyond it during the run is Pebble's (cgo).
	baselineOutsideKB int64
	peakKB            int64 // VmHWM of the timed phase (0 if it could not be reset)
	samples           []rssSample
	brokerPeak        int64 // the broker child's VmHWM (kB), 0 if it ran elsewhere
	heapProfile       string
	// batches and batchBytes: the record batches the app's consumer fetched, and their bytes
	// (how much each record in flight keeps alive: a fetched record pins its batch)
	batches, batchBytes int64
}

// batchCounter counts the record batches a consumer reads (kgo.HookFetchBatchRead).
type batchCounter struct{ n, bytes atomic.Int64 }

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (c *batchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	c.n.Add(1)
	c.bytes.Add(int64(m.CompressedBytes))
}

func (r *rssResult) maxSample() rssSample {
	var m rssSample
	for _, s := range r.samples {
		if s.rssKB > m.rssKB {
			m = s
		}
	}
	return m
}

// rssBudget returns the configured budget and its parts, the library's defaults filled in.
func rssBudget(o options) (blockCache int64, memTable uint64, storeCache int, total int64) {
	blockCache, memTable, storeCache = pebblestore.DefaultCacheSize, pebblestore.DefaultMemTableSize, 32<<20
	if o.rssBlockCacheMiB > 0 {
		blockCache = int64(o.rssBlockCacheMiB) << 20
	}
	if o.rssMemTableMiB > 0 {
		memTable = uint64(o.rssMemTableMiB) << 20
	}
	switch {
	case o.rssStoreCacheMiB > 0:
		storeCache = o.rssStoreCacheMiB << 20
	case o.rssStoreCacheMiB < 0:
		storeCache = -1 // disabled
	}
	return blockCache, memTable, storeCache, blockCache + int64(memTable) + int64(max(storeCache, 0))
}

// runRSS runs rss-pebble: with no -brokers, a broker child process is started for it alone.
// The input (o.records distinct keys) is written and the harness's memory released before
// the clock starts; the peak RSS is reset then, and the RSS is sampled every 100ms until the
// app has counted every key and stopped.
//
// With countKeyed (rss-count) the input is count-pebble's instead: -records records over
// -count-keys keys "key%05d" (the input of go run ./bench/compare's count scenario).
func runRSS(o options, env *runEnv, heapProfile string, countKeyed bool) (res rssResult, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	brokers := o.brokers
	var child *brokerChild
	if len(brokers) == 0 {
		if child, err = startBrokerChild(); err != nil {
			return res, err
		}
		defer child.close()
		brokers = []string{child.addr}
	}
	env.brokers = brokers
	k, err := newKafka(brokers)
	if err != nil {
		return res, err
	}
	defer k.close()
	if err := k.createTopics(ctx, int32(o.partitions), env.in, env.out); err != nil {
		return res, err
	}
	defer func() {
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
	}()
	res.name, res.keys = "rss-pebble", o.records
	if countKeyed {
		res.name, res.keys = "rss-count", countKeys
		if _, err := k.fill(ctx, env.in, o, keepAll, true, false); err != nil {
			return res, fmt.Errorf("filling input topic %s: %w", env.in, err)
		}
	} else if err := fillDistinct(ctx, k, env.in, o); err != nil {
		return res, fmt.Errorf("filling input topic %s: %w", env.in, err)
	}
	res.records, res.partitions = o.records, o.partitions
	res.blockCache, res.memTable, res.storeCache, res.budget = rssBudget(o)
	// The fill's buffers are garbage now: give them back, then start a new peak period.
	runtime.GC()
	debug.FreeOSMemory()
	res.baselineKB = currentRSS()
	var bms runtime.MemStats
	runtime.ReadMemStats(&bms)
	res.baselineOutsideKB = max(0, res.baselineKB-int64((bms.Sys-bms.HeapReleased)>>10))
	resetPeakRSS()

	began := time.Now()
	var (
		smu     sync.Mutex
		samples []rssSample
	)
	var peakLiveKB int64 // guarded by smu
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		s := rssSample{at: time.Since(began), rssKB: currentRSS(), heapKB: int64(ms.HeapInuse >> 10), goSysKB: int64(ms.Sys >> 10), released: int64(ms.HeapReleased >> 10),
			idleKB: int64((ms.HeapIdle - ms.HeapReleased) >> 10), heapSys: int64(ms.HeapSys >> 10)}
		if live[0].Value.Kind() == metrics.KindUint64 {
			s.liveKB = int64(live[0].Value.Uint64() >> 10)
		}
		smu.Lock()
		defer smu.Unlock()
		samples = append(samples, s)
		if heapProfile != "" && s.liveKB > peakLiveKB+1024 {
			// A new high of the live heap: keep its profile (<file>.peak), which shows
			// what the heap holds at its fullest, records in flight included.
			peakLiveKB = s.liveKB
			if f, err := os.Create(heapProfile + ".peak"); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
	}
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopSampling(); <-sampled }()

	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	cfg := kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:   -1,
		ApplicationID:   env.group,
		Brokers:         brokers,
		CommitInterval:  commitInterval,
		CloseTimeout:    shutdownTimeout,
		Logger:          env.logger,
		BlockCacheBytes: res.blockCache,
		MemTableBytes:   res.memTable,
		StoreCacheBytes: res.storeCache,
	}
	if o.rssFetchKiB > 0 {
		cfg.ConsumerOptions = append(cfg.ConsumerOptions, kgo.FetchMaxBytes(int32(o.rssFetchKiB)<<10))
	}
	if o.rssPartFetchKiB > 0 {
		cfg.ConsumerOptions = append(cfg.ConsumerOptions, kgo.FetchMaxPartitionBytes(int32(o.rssPartFetchKiB)<<10))
	}
	var batches batchCounter
	cfg.ConsumerOptions = append(cfg.ConsumerOptions, kgo.WithHooks(&batches))
	go func() { done <- runConfiguredApp(appCtx, countTopology(env), cfg) }()
	if _, err := k.waitForOutput(ctx, env.out, int64(res.records), began, done); err != nil {
		return res, err
	}
	res.seconds = time.Since(began).Seconds()
	if heapProfile != "" {
		// The state is still open: the heap holds the store caches at their fullest.
		runtime.GC()
		f, err := os.Create(heapProfile)
		if err != nil {
			return res, err
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			f.Close()
			return res, err
		}
		if err := f.Close(); err != nil {
			return res, err
		}
		res.heapProfile = heapProfile
	}
	sample()
	stopApp()
	if err := awaitStop(done); err != nil {
		return res, err
	}
	stopSampling()
	<-sampled
	res.peakKB = readPeakRSS()
	res.batches, res.batchBytes = batches.n.Load(), batches.bytes.Load()
	if got, err := k.countOutput(ctx, env.out); err != nil {
		return res, err
	} else if got != int64(res.records) {
		return res, fmt.Errorf("output topic %s holds %d records after shutdown, want exactly %d", env.out, got, res.records)
	}
	smu.Lock()
	res.samples = slices.Clone(samples)
	smu.Unlock()
	if child != nil {
		res.brokerPeak = child.peakKB()
	}
	return res, nil
}

// runConfiguredApp runs b with cfg and a fresh state directory, removed when Run returns.
func runConfiguredApp(ctx context.Context, b *kstream.Builder, cfg kstream.Config) error {
	dir, err := os.MkdirTemp("", "kstream-bench-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.StateDir = dir
	app, err := kstream.New(b, cfg)
	if err != nil {
		return err
	}
	return app.Run(ctx)
}

// fillDistinct writes o.records records with the distinct keys "k%07d" (partitioned by the
// key's murmur2 hash, as the library's producer does) and o.valueSize random bytes.
func fillDistinct(ctx context.Context, k *kafka, topic string, o options) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return err
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
	const slab = 4096
	var buf []byte
	for i := range o.records {
		if len(buf) < rssKeyLen+o.valueSize {
			buf = make([]byte, slab*(rssKeyLen+o.valueSize))
		}
		key, val := buf[:rssKeyLen:rssKeyLen], buf[rssKeyLen:rssKeyLen+o.valueSize:rssKeyLen+o.valueSize]
		buf = buf[rssKeyLen+o.valueSize:]
		putRSSKey(key, i)
		_, _ = rng.Read(val)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if prodErr == nil {
					prodErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if prodErr != nil {
		return prodErr
	}
	n, err := k.countOutput(ctx, topic)
	if err != nil {
		return err
	}
	if n != int64(o.records) {
		return fmt.Errorf("input topic holds %d records, want %d", n, o.records)
	}
	return nil
}

// printRSS prints an rss-pebble or rss-count run.
func printRSS(r rssResult) {
	mb := func(kb int64) string { return fmt.Sprintf("%.0f MiB", float64(kb)/1024) }
	budgetKB := r.budget >> 10
	fmt.Printf("  %s: %d records over %d keys counted in %.3fs (%.0f records/s)\n", r.name, r.records, r.keys, r.seconds, float64(r.records)/r.seconds)
	storeCache := mb(int64(r.storeCache) >> 10)
	if r.storeCache < 0 {
		storeCache = "0 (disabled)"
	}
	fmt.Printf("    budget %s = BlockCacheBytes %s + MemTableBytes %s + StoreCacheBytes %s (shared by %d store partitions)\n",
		mb(budgetKB), mb(r.blockCache>>10), mb(int64(r.memTable>>10)), storeCache, r.partitions)
	m := r.maxSample()
	peak := "?"
	if r.peakKB > 0 {
		peak = fmt.Sprintf("%s (app: %s over the baseline = %.2fx budget)", mb(r.peakKB), mb(r.peakKB-r.baselineKB), float64(r.peakKB-r.baselineKB)/float64(budgetKB))
	}
	fmt.Printf("    RSS before the app (harness and Go runtime): %s; peak RSS (VmHWM) of the run: %s\n", mb(r.baselineKB), peak)
	if r.peakKB > 0 && startRSSKB > 0 {
		fmt.Printf("    this process's RSS at its start: %s; a process running only the app would peak at about %s (start + app)\n", mb(startRSSKB), mb(startRSSKB+r.peakKB-r.baselineKB))
	}
	outside := max(0, m.rssKB-(m.goSysKB-m.released))
	fmt.Printf("    sampled RSS (every 100ms, %d samples): max %s at %v (app: %s = %.2fx budget; Go heap in use %s, Go runtime total %s, outside the Go runtime ~%s)\n",
		len(r.samples), mb(m.rssKB), m.at.Round(100*time.Millisecond), mb(m.rssKB-r.baselineKB), float64(m.rssKB-r.baselineKB)/float64(budgetKB),
		mb(m.heapKB), mb(m.goSysKB-m.released), mb(outside))
	fmt.Printf("    breakdown at that sample: Go heap live at the last GC %s, garbage since %s, free heap kept from the OS %s, other Go runtime %s; outside Go %s = baseline %s + Pebble (cgo: memtables, block cache) ~%s\n",
		mb(m.liveKB), mb(max(0, m.heapKB-m.liveKB)), mb(m.idleKB), mb(max(0, m.goSysKB-m.heapSys)), mb(outside), mb(r.baselineOutsideKB), mb(max(0, outside-r.baselineOutsideKB)))
	var series []string
	step := max(1, len(r.samples)/20)
	for i := 0; i < len(r.samples); i += step {
		s := r.samples[i]
		series = append(series, fmt.Sprintf("%.1fs:%d", s.at.Seconds(), s.rssKB>>10))
	}
	if n := len(r.samples); n > 0 && (n-1)%step != 0 {
		s := r.samples[n-1]
		series = append(series, fmt.Sprintf("%.1fs:%d", s.at.Seconds(), s.rssKB>>10))
	}
	fmt.Printf("    RSS over time (s:MiB): %s\n", strings.Join(series, " "))
	if r.batches > 0 {
		fmt.Printf("    the app fetched %d record batches of %.0f KiB on average\n", r.batches, float64(r.batchBytes)/float64(r.batches)/1024)
	}
	if r.brokerPeak > 0 {
		fmt.Printf("    the broker (a child process, not counted above) peaked at %s\n", mb(r.brokerPeak))
	}
	if r.heapProfile != "" {
		fmt.Printf("    heap profile at the end of the timed phase (state still open): %s (go tool pprof -sample_index=inuse_space -top %s); at the highest live heap: %s.peak\n", r.heapProfile, r.heapProfile, r.heapProfile)
	}
	fmt.Println()
}
