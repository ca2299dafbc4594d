package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// countStore is the store of the count scenarios; its changelog is
// "<application id>-counts-changelog".
const countStore = "counts"

// countKeys is the number of distinct keys of the count scenarios: record i has key
// i%countKeys. Set by -count-keys (at most maxCountKeys: the key has 5 digits).
var countKeys = 100_000

const maxCountKeys = 100_000

// countKeyLen is the length of a count scenario key, "key" and 5 digits (8 bytes, the same as
// the distinct keys of the copy scenarios).
const countKeyLen = 8

// changelogValueLen is the size of a count in the changelog (serde.Int64, big-endian).
const changelogValueLen = 8

// putCountKey writes the key of record i, "key%05d" of i%countKeys, into dst (countKeyLen bytes).
func putCountKey(dst []byte, i int) {
	copy(dst, "key")
	n := i % countKeys
	for j := countKeyLen - 1; j >= 3; j-- {
		dst[j] = byte('0' + n%10)
		n /= 10
	}
}

func changelogTopic(env *runEnv) string { return env.group + "-" + countStore + "-changelog" }

// countTopology is Stream(String, Bytes) -> GroupByKey -> Count(countStore) -> ToStream ->
// To(out, String, Int64). The key is unchanged, so there is no repartition topic.
func countTopology(env *runEnv, opts ...kstream.StoreOption) *kstream.Builder {
	b := kstream.NewBuilder()
	g := kstream.Stream(b, env.in, serde.String(), serde.Bytes()).GroupByKey()
	kstream.Count(g, countStore, opts...).ToStream().
		To(env.out, serde.String(), serde.Int64())
	return b
}

// windowSize is the size of the windowed scenarios' tumbling windows.
const windowSize = time.Minute

// suppressName names the suppression of window-suppress-pebble: its buffer is logged to
// "<application id>-suppress-store-changelog".
const suppressName = "suppress"

// windowTopology is Stream(String, Bytes) -> GroupByKey -> WindowedBy(TimeWindowsOf(1 minute))
// [-> EmitOnWindowClose] -> WindowedCount(countStore) -> ToStream ->
// To(out, TimeWindowed(String), Int64). The key is unchanged: no repartition topic.
func windowTopology(env *runEnv, onClose bool) *kstream.Builder {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, env.in, serde.String(), serde.Bytes()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(windowSize))
	if onClose {
		w = w.EmitOnWindowClose()
	}
	kstream.WindowedCount(w, countStore).ToStream().
		To(env.out, serde.TimeWindowed(serde.String(), windowSize), serde.Int64())
	return b
}

// runWindowPebble: a tumbling 1-minute windowed count (Pebble window store), an update per
// input record.
func runWindowPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, windowTopology(env, false), env, nil, kstream.AtLeastOnce)
}

// runWindowFinalPebble: the same emitting only the final count of each window when it closes.
func runWindowFinalPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, windowTopology(env, true), env, nil, kstream.AtLeastOnce)
}

// runWindowSuppressPebble: the windowed count's final results through
// Suppress(UntilWindowCloses(Unbounded())) instead of EmitOnWindowClose.
func runWindowSuppressPebble(ctx context.Context, env *runEnv) error {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, env.in, serde.String(), serde.Bytes()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(windowSize))
	kstream.WindowedCount(w, countStore).
		Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName(suppressName)).
		ToStream().
		To(env.out, serde.TimeWindowed(serde.String(), windowSize), serde.Int64())
	return runStatefulApp(ctx, b, env, nil, kstream.AtLeastOnce)
}

// cogroupTopology is count-pebble's count as a cogroup (issue 12): Stream(String, Bytes) ->
// Split by the parity of the key's last digit into two streams -> GroupByKey each ->
// Cogroup (each adds one) -> Aggregate(countStore, Int64) -> ToStream -> To(out, String,
// Int64). Every record updates its key in the one store (an update per input record, as
// count-pebble's); the keys are unchanged, so there is no repartition topic.
func cogroupTopology(env *runEnv) *kstream.Builder {
	b := kstream.NewBuilder()
	br := kstream.Stream(b, env.in, serde.String(), serde.Bytes()).Split().
		Branch("even", func(k string, _ []byte) bool { return k != "" && k[len(k)-1]%2 == 0 }).
		DefaultBranch("odd")
	one := func(_ string, _ []byte, n int64) int64 { return n + 1 }
	c := kstream.CogroupWith(kstream.Cogroup(br["even"].GroupByKey(), one), br["odd"].GroupByKey(), one)
	c.Aggregate(func() int64 { return 0 }, serde.Int64(), countStore).ToStream().
		To(env.out, serde.String(), serde.Int64())
	return b
}

// runCogroupPebble: the count as a cogroup of two streams (cogroupTopology), Pebble store.
func runCogroupPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, cogroupTopology(env), env, nil, kstream.AtLeastOnce)
}

func runCountMemory(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, countTopology(env, kstream.InMemory()), env, nil, kstream.AtLeastOnce)
}

// blockingCommits is the -blocking-commits flag: the stateful scenarios' commits stop their
// tasks until they are over (Config.BlockingCommits), for a comparison with the default.
var blockingCommits bool

func runCountPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, countTopology(env), env, nil, kstream.AtLeastOnce)
}

// runStatefulApp runs b like runApp under the guarantee g, with a fresh, empty state
// directory that is removed when Run returns. It hands the app to env.onApp (if set) before
// running it, and leaves its final Stats in env.stats when Run has returned.
func runStatefulApp(ctx context.Context, b *kstream.Builder, env *runEnv, rl kstream.RestoreListener, g kstream.Guarantee) error {
	dir, err := os.MkdirTemp("", "kstream-bench-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	app, err := kstream.New(b, kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:   -1,
		BlockingCommits: blockingCommits,
		ApplicationID:   env.group,
		Brokers:         env.brokers,
		CommitInterval:  env.commitInterval(),
		CloseTimeout:    shutdownTimeout,
		Logger:          env.logger,
		StateDir:        dir,
		RestoreListener: rl,
		Guarantee:       g,
		Linger:          env.linger,
	})
	if err != nil {
		return err
	}
	if env.onApp != nil {
		env.onApp(app)
	}
	err = app.Run(ctx)
	st := app.Stats()
	env.stats = &st
	return err
}

// restoreWatch is the RestoreListener of the restore scenario: it closes done once
// partitions partitions of countStore have ended their restoration.
type restoreWatch struct {
	partitions int
	start      time.Time
	done       chan struct{}

	mu         sync.Mutex
	firstStart time.Duration // start to the first OnRestoreStart
	lastEnd    time.Duration // start to the last OnRestoreEnd
	ended      map[int32]int64
	batched    map[int32]int64 // records reported by OnBatchRestored
	err        error
}

func newRestoreWatch(partitions int, start time.Time) *restoreWatch {
	return &restoreWatch{partitions: partitions, start: start, done: make(chan struct{}),
		ended: map[int32]int64{}, batched: map[int32]int64{}}
}

func (w *restoreWatch) OnRestoreStart(store, _ string, _ int32, _, _ int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if store == countStore && w.firstStart == 0 {
		w.firstStart = time.Since(w.start)
	}
}

func (w *restoreWatch) OnBatchRestored(store, _ string, p int32, _ int64, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if store == countStore {
		w.batched[p] += int64(n)
	}
}

func (w *restoreWatch) OnRestoreEnd(store, _ string, p int32, restored int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if store != countStore {
		return
	}
	if _, dup := w.ended[p]; dup {
		if w.err == nil {
			w.err = fmt.Errorf("partition %d restored twice", p)
		}
		return
	}
	w.ended[p] = restored
	if len(w.ended) == w.partitions {
		w.lastEnd = time.Since(w.start)
		close(w.done)
	}
}

// runRestorePebble runs after a count-pebble run, on its topics: a new instance of the same
// application with an empty state directory restores the Pebble store from the changelog.
// It is timed from starting the app until every partition's restoration has ended; the
// records restored must be every record of the changelog.
func runRestorePebble(ctx context.Context, k *kafka, o options, env *runEnv, profile string) (res result, err error) {
	changelog := changelogTopic(env)
	total, err := k.countOutput(ctx, changelog)
	if err != nil {
		return res, err
	}
	outBefore, err := k.countOutput(ctx, env.out)
	if err != nil {
		return res, err
	}
	b := countTopology(env) // the count-pebble topology: same store, same changelog
	runtime.GC()
	if profile != "" {
		stop, err := startProfile(profile)
		if err != nil {
			return res, err
		}
		defer stop()
	}

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	start := time.Now()
	w := newRestoreWatch(o.partitions, start)
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	go func() { done <- runStatefulApp(appCtx, b, env, w, kstream.AtLeastOnce) }()

	var werr error
	select {
	case <-w.done:
	case rerr := <-done:
		werr = fmt.Errorf("stopped before the restoration ended: %v", rerr)
	case <-ctx.Done():
		werr = fmt.Errorf("restoration not done after the %v scenario cap", scenarioCap)
	}
	elapsed := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&ms1)
	if profile != "" {
		pprof.StopCPUProfile()
	}
	res.rssAfter = currentRSS()
	stopApp()
	if werr != nil {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		return res, werr
	}
	if err := awaitStop(done); err != nil {
		return res, err
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return res, w.err
	}
	var restored, batched int64
	for p, n := range w.ended {
		restored += n
		batched += w.batched[p]
	}
	if restored != total || batched != total {
		return res, fmt.Errorf("restored %d records (batches: %d), the changelog %s holds %d", restored, batched, changelog, total)
	}
	// The restored instance resumes from the committed offsets at the end of the input: it
	// must not have produced anything.
	if got, err := k.countOutput(ctx, env.out); err != nil {
		return res, err
	} else if got != outBefore {
		return res, fmt.Errorf("output topic %s went from %d to %d records during the restore run", env.out, outBefore, got)
	}
	if got, err := k.countOutput(ctx, changelog); err != nil {
		return res, err
	} else if got != total {
		return res, fmt.Errorf("changelog %s went from %d to %d records during the restore run", changelog, total, got)
	}

	res.seconds = elapsed.Seconds()
	res.outRecords = restored
	res.firstOut = w.firstStart
	res.restorePhase = w.lastEnd - w.firstStart
	res.cpuSeconds = cpu1 - cpu0
	res.allocs = ms1.Mallocs - ms0.Mallocs
	res.allocBytes = ms1.TotalAlloc - ms0.TotalAlloc
	res.gcs = ms1.NumGC - ms0.NumGC
	return res, nil
}
