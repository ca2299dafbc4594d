package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kstream-go/kstream"
)

// Interactive queries (issue 13): gets-memory and gets-pebble measure local gets on a loaded
// store, count-pebble-queries measures what a background query load costs the count.

// queryScenarios are selected by -queries.
var queryScenarios = []string{"count-pebble", "count-pebble-queries", "gets-memory", "gets-pebble"}

// targets of the query scenarios.
const (
	// gets/s of one goroutine on a loaded Pebble store, judged at GOMAXPROCS=1
	targetPebbleGetsPerS = 500_000
	// count-pebble-queries against count-pebble in the same run
	targetQueriesVsCountPebble = 0.9
)

// queryRate is count-pebble-queries' background load in gets/s (-query-rate); getsFor is how
// long each gets-* measurement lasts (-gets-for).
var (
	queryRate = 5000
	getsFor   = 3 * time.Second
)

// getsFigure is one measurement of gets on one goroutine.
type getsFigure struct {
	procs          int
	gets           int
	seconds        float64
	allocs, bytes_ uint64
}

func (f getsFigure) perSecond() float64 { return float64(f.gets) / f.seconds }
func (f getsFigure) nsPerGet() float64  { return f.seconds * 1e9 / float64(f.gets) }

// getsResult is a gets-* run: the load, then the figures at the default GOMAXPROCS and at 1.
type getsResult struct {
	keys     int
	loadSecs float64
	all, one getsFigure
}

// runGets fills the input with o.records distinct keys ("k%07d", as rss-pebble), runs the
// count (countTopology, memory or Pebble store) until the group has committed the input's end
// offsets (every key counted once and, for Pebble, written to the engine by the commit), then
// reads random existing keys with RawStore.Get on this goroutine for getsFor, first at the
// default GOMAXPROCS and then at GOMAXPROCS=1. Every get must find its key with the count 1.
// With profile, the gets phase (both parts) is CPU-profiled into it.
func runGets(k *kafka, o options, s scenario, env *runEnv, profile string) (res getsResult, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	if err := k.createTopics(ctx, int32(o.partitions), env.in, env.out); err != nil {
		return res, err
	}
	defer func() {
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
		runtime.GC()
		debug.FreeOSMemory()
	}()
	if err := fillDistinct(ctx, k, env.in, o); err != nil {
		return res, fmt.Errorf("filling input topic %s: %w", env.in, err)
	}
	res.keys = o.records

	var opts []kstream.StoreOption
	if s.name == "gets-memory" {
		opts = append(opts, kstream.InMemory())
	}
	appCh := make(chan *kstream.App, 1)
	env.onApp = func(a *kstream.App) { appCh <- a }
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- runStatefulApp(appCtx, countTopology(env, opts...), env, nil, kstream.AtLeastOnce) }()
	stop := func() error {
		stopApp()
		return awaitStop(done)
	}
	var app *kstream.App
	select {
	case app = <-appCh:
	case err := <-done:
		return res, fmt.Errorf("the app stopped before running: %w", err)
	}
	if _, err := k.waitForCommitted(ctx, env.group, env.in, env.out, int64(o.records), start, done); err != nil {
		_ = stop()
		return res, err
	}
	res.loadSecs = time.Since(start).Seconds()

	store, err := app.RawStore(countStore)
	if err != nil {
		_ = stop()
		return res, err
	}
	// The keys, and a random sequence of them (a fixed seed: every run reads the same keys).
	keys := make([]byte, o.records*rssKeyLen)
	for i := range o.records {
		putRSSKey(keys[i*rssKeyLen:(i+1)*rssKeyLen], i)
	}
	rng := rand.New(rand.NewPCG(o.seed, 13))
	order := make([]int32, 1<<20)
	for i := range order {
		order[i] = int32(rng.IntN(o.records))
	}
	runtime.GC()

	if profile != "" {
		stopProfile, err := startProfile(profile)
		if err != nil {
			_ = stop()
			return res, err
		}
		defer stopProfile()
	}
	measure := func(procs int) (getsFigure, error) {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		f := getsFigure{procs: runtime.GOMAXPROCS(0)}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		deadline := t0.Add(getsFor)
		for {
			for range 1024 {
				i := order[f.gets&(len(order)-1)]
				key := keys[int(i)*rssKeyLen : (int(i)+1)*rssKeyLen]
				v, ok, err := store.Get(key)
				if err != nil {
					return f, fmt.Errorf("get %q: %w", key, err)
				}
				if !ok || len(v.Value) != 8 || binary.BigEndian.Uint64(v.Value) != 1 {
					return f, fmt.Errorf("get %q: found %v, value %x; want the count 1", key, ok, v.Value)
				}
				f.gets++
			}
			if time.Now().After(deadline) {
				break
			}
		}
		f.seconds = time.Since(t0).Seconds()
		runtime.ReadMemStats(&ms1)
		f.allocs, f.bytes_ = ms1.Mallocs-ms0.Mallocs, ms1.TotalAlloc-ms0.TotalAlloc
		return f, nil
	}
	if res.all, err = measure(runtime.GOMAXPROCS(0)); err == nil {
		res.one, err = measure(1)
	}
	if profile != "" {
		pprof.StopCPUProfile()
	}
	if serr := stop(); err == nil {
		err = serr
	}
	return res, err
}

// printGets prints a gets-* run.
func printGets(name string, run int, r getsResult) {
	line := func(f getsFigure) string {
		return fmt.Sprintf("GOMAXPROCS=%d: %d gets in %.2fs, %.0f gets/s, %.0f ns/get, %.2f allocs/get, %.0f B/get",
			f.procs, f.gets, f.seconds, f.perSecond(), f.nsPerGet(), float64(f.allocs)/float64(f.gets), float64(f.bytes_)/float64(f.gets))
	}
	fmt.Printf("  %-21s run %d: %d keys loaded and committed in %.3fs\n", name, run, r.keys, r.loadSecs)
	fmt.Printf("  %-21s        %s\n", "", line(r.all))
	fmt.Printf("  %-21s        %s\n", "", line(r.one))
}

// printGetsTable prints the gets-* scenarios' figures, each the median over the runs.
func printGetsTable(selected []scenario, gets map[string][]getsResult) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "gets\tkeys\truns\tgets/s\tns/get\tallocs/get\tgets/s 1 proc\tns/get 1 proc\ttarget (median, 1 proc)\t")
	printed := false
	for _, s := range selected {
		rs := gets[s.name]
		if !s.gets || len(rs) == 0 {
			continue
		}
		printed = true
		// Each column is the median of its own figure over the runs.
		med := func(f func(getsResult) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			sort.Float64s(v)
			return v[(len(v)-1)/2]
		}
		allRate, oneRate := med(func(r getsResult) float64 { return r.all.perSecond() }), med(func(r getsResult) float64 { return r.one.perSecond() })
		allocs := med(func(r getsResult) float64 { return float64(r.all.allocs) / float64(r.all.gets) })
		target := "-"
		if s.name == "gets-pebble" {
			target = fmt.Sprintf(">= %d/s: %s", targetPebbleGetsPerS, metOrMissed(oneRate >= targetPebbleGetsPerS))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%s\t\n", s.name, rs[0].keys, len(rs),
			allRate, 1e9/allRate, allocs, oneRate, 1e9/oneRate, target)
	}
	if !printed {
		return
	}
	tw.Flush()
	fmt.Println("gets: RawStore.Get of random existing keys of a count over distinct keys, on one goroutine, the app running")
	fmt.Println("(idle); the first figures at the default GOMAXPROCS, the second at GOMAXPROCS=1. allocs/get: the whole process.")
	fmt.Println()
}

// queryLoad issues gets of random count keys at a fixed rate in the background.
type queryLoad struct {
	stopCh chan struct{}
	done   chan struct{}

	gets, found, unavailable int64
	firstErr                 error
	elapsed                  time.Duration
}

// startQueryLoad starts rate gets/s of random keys of the count scenarios ("key%05d" of
// 0..countKeys-1) on app's countStore: a 1 ms ticker, each tick issuing the gets due by then.
// Gets that find the store not available yet (the app starting, a partition restoring) are
// counted, not errors.
func startQueryLoad(app *kstream.App, rate int, seed uint64) (*queryLoad, error) {
	store, err := app.RawStore(countStore)
	if err != nil {
		return nil, err
	}
	l := &queryLoad{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		rng := rand.New(rand.NewPCG(seed, 7))
		key := make([]byte, countKeyLen)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-l.stopCh:
				l.elapsed = time.Since(start)
				return
			case <-tick.C:
			}
			due := int64(time.Since(start).Seconds() * float64(rate))
			for ; l.gets < due; l.gets++ {
				putCountKey(key, rng.IntN(countKeys))
				_, ok, err := store.Get(key)
				switch {
				case errors.Is(err, kstream.ErrStoreUnavailable):
					l.unavailable++
				case err != nil:
					if l.firstErr == nil {
						l.firstErr = err
					}
				case ok:
					l.found++
				}
			}
		}
	}()
	return l, nil
}

// stop ends the load and waits for it.
func (l *queryLoad) stop() {
	close(l.stopCh)
	<-l.done
}

// lastQueryLoad is the load of the last count-pebble-queries run, printed after it.
var (
	lastQueryLoadMu sync.Mutex
	lastQueryLoad   *queryLoad
)

// runCountPebbleQueries is count-pebble with a background load of queryRate gets/s of
// random keys through RawStore.Get (startQueryLoad) while the app runs.
func runCountPebbleQueries(ctx context.Context, env *runEnv) error {
	var load *queryLoad
	var lerr error
	env.onApp = func(a *kstream.App) { load, lerr = startQueryLoad(a, queryRate, uint64(time.Now().UnixNano())) }
	err := runStatefulApp(ctx, countTopology(env), env, nil, kstream.AtLeastOnce)
	if lerr != nil {
		return lerr
	}
	if load != nil {
		load.stop()
		lastQueryLoadMu.Lock()
		lastQueryLoad = load
		lastQueryLoadMu.Unlock()
		if load.firstErr != nil && err == nil {
			err = fmt.Errorf("a background get failed: %w", load.firstErr)
		}
	}
	return err
}

// queryLoadNote describes the last count-pebble-queries load.
func queryLoadNote() string {
	lastQueryLoadMu.Lock()
	defer lastQueryLoadMu.Unlock()
	l := lastQueryLoad
	if l == nil {
		return ""
	}
	return fmt.Sprintf("  (queries: %d gets in %.2fs = %.0f/s, %d found, %d store not yet available)",
		l.gets, l.elapsed.Seconds(), float64(l.gets)/l.elapsed.Seconds(), l.found, l.unavailable)
}
