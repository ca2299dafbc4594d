// Command bench measures the throughput of kstream topologies against a hand-written
// franz-go consume-and-produce loop on the same broker, in one process.
//
//	go run ./bench                         # 1M records, embedded broker
//	go run ./bench -records 200000 -runs 3
//	go run ./bench -only passthrough -cpuprofile /tmp/pass.prof
//	go run ./bench -brokers localhost:9092 # an external cluster
//
// See bench/README.md for what is measured and how to read the output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kstream-go/kstream/embedded"
)

// scenarioCap bounds one scenario (fill, timed phase, shutdown, clean-up).
const scenarioCap = 5 * time.Minute

// commitInterval is used by the baseline loop and given to the library as
// Config.CommitInterval, so both commit (after a flush) equally often.
const commitInterval = 100 * time.Millisecond

type options struct {
	records    int
	valueSize  int
	partitions int
	runs       int
	only       []string
	brokers    []string
	cpuProfile string
	seed       uint64
	warmup     int
}

// scenario is one way of copying the input topic to the output topic.
type scenario struct {
	name string
	// keep reports whether a value reaches the output (to count the expected records).
	keep func(v []byte) bool
	// run processes in to out until ctx is done, then shuts down cleanly and returns.
	run func(ctx context.Context, env *runEnv) error
}

// runEnv is what a scenario run gets.
type runEnv struct {
	brokers []string
	in, out string
	group   string // consumer group / application id, fresh per run
	logger  *slog.Logger
}

var scenarios = []scenario{
	{name: "baseline", keep: keepAll, run: runBaseline},
	{name: "passthrough", keep: keepAll, run: runPassthrough},
	{name: "filter-mapvalues", keep: keepFilter, run: runFilterMapValues},
}

// result is one timed run.
type result struct {
	seconds    float64
	outRecords int64
	firstOut   time.Duration // start to the first output record visible
	cpuSeconds float64       // process user+system CPU during the timed phase
	allocs     uint64        // heap allocations (whole process) during the timed phase
	allocBytes uint64
	gcs        uint32 // garbage collections during the timed phase
}

func main() {
	var o options
	var only, brokers string
	flag.IntVar(&o.records, "records", 1_000_000, "input records per scenario")
	flag.IntVar(&o.valueSize, "value-size", 100, "bytes of random value per record")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the input and output topics")
	flag.IntVar(&o.runs, "runs", 1, "runs of each scenario (best and median are printed)")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run (default all: "+strings.Join(scenarioNames(), ",")+")")
	flag.StringVar(&brokers, "brokers", "", "comma-separated host:port of an external cluster (default: start an embedded broker)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed phase of each scenario's first run to this file\n(with several scenarios: FILE with .<scenario> before its extension)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random values (every scenario gets the same data)")
	flag.IntVar(&o.warmup, "warmup", 100_000, "records of one untimed warm-up run of each scenario before the measured runs (0: none)")
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments: %v", flag.Args())
	}
	if o.records <= 0 || o.valueSize <= 0 || o.partitions <= 0 || o.runs <= 0 || o.warmup < 0 {
		fatalf("-records, -value-size, -partitions and -runs must be positive, -warmup not negative")
	}
	selected, err := selectScenarios(only)
	if err != nil {
		fatalf("%v", err)
	}
	if brokers != "" {
		o.brokers = strings.Split(brokers, ",")
	}
	if err := run(o, selected); err != nil {
		fatalf("%v", err)
	}
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

func selectScenarios(only string) ([]scenario, error) {
	if only == "" {
		return scenarios, nil
	}
	var out []scenario
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-only: unknown scenario %q (known: %s)", name, strings.Join(scenarioNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(s scenario) bool { return s.name == name }) {
			out = append(out, scenarios[i])
		}
	}
	return out, nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func run(o options, selected []scenario) error {
	// The application's logger: quiet, warnings and errors only, to stderr.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	brokers := o.brokers
	where := "external cluster " + strings.Join(brokers, ",")
	if len(brokers) == 0 {
		b, err := embedded.Start(embedded.Logger(logger))
		if err != nil {
			return fmt.Errorf("starting the embedded broker: %w", err)
		}
		defer func() {
			if err := b.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: closing the embedded broker:", err)
			}
		}()
		brokers = b.Brokers()
		where = "embedded broker (in this process) at " + b.Addr()
	}
	k, err := newKafka(brokers)
	if err != nil {
		return err
	}
	defer k.close()

	fmt.Printf("kstream bench: %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("broker: %s\n", where)
	fmt.Printf("per scenario: %d records, %d-byte random values, 8-byte distinct keys, %d partitions, %d run(s), commit interval %v\n\n",
		o.records, o.valueSize, o.partitions, o.runs, commitInterval)

	stamp := time.Now().UnixNano()
	newEnv := func(s scenario, run string) *runEnv {
		return &runEnv{
			brokers: brokers,
			in:      fmt.Sprintf("bench-%x-%s-%s-in", stamp, s.name, run),
			out:     fmt.Sprintf("bench-%x-%s-%s-out", stamp, s.name, run),
			group:   fmt.Sprintf("bench-%x-%s-%s", stamp, s.name, run),
			logger:  logger,
		}
	}

	// Warm-up: one small untimed run of each scenario, so that the first measured run does
	// not pay for cold connections, heap growth and first-touch page faults alone.
	if o.warmup > 0 {
		wo := o
		wo.records = min(o.warmup, o.records)
		for _, s := range selected {
			res, err := runScenario(k, wo, s, newEnv(s, "warmup"), "")
			if err != nil {
				return fmt.Errorf("scenario %s (warm-up): %w", s.name, err)
			}
			fmt.Printf("  %-17s warm-up: %d records in %.3fs (not counted)\n", s.name, wo.records, res.seconds)
		}
	}

	results := map[string][]result{}
	// Runs are interleaved (all scenarios, then all again) and each run starts with the
	// next scenario, so that drift in the machine's speed affects every scenario alike.
	for r := range o.runs {
		for i := range selected {
			s := selected[(i+r)%len(selected)]
			profile := ""
			if r == 0 && o.cpuProfile != "" {
				profile = profilePath(o.cpuProfile, s.name, len(selected))
			}
			res, err := runScenario(k, o, s, newEnv(s, fmt.Sprint(r)), profile)
			if err != nil {
				return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
			}
			results[s.name] = append(results[s.name], res)
			fmt.Printf("  %-17s run %d: %8.3fs  %10.0f rec/s  %5.2f CPU s  %3d GCs  (first output after %v)\n",
				s.name, r+1, res.seconds, float64(o.records)/res.seconds, res.cpuSeconds, res.gcs, res.firstOut.Round(time.Millisecond))
			if profile != "" {
				fmt.Printf("  %-17s CPU profile of the timed phase: %s\n", "", profile)
			}
		}
	}
	fmt.Println()
	printTable(o, selected, results, len(o.brokers) == 0)
	return nil
}

func profilePath(path, scenario string, n int) string {
	if n == 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + scenario + ext
}

// runScenario creates and fills the topics, times one run of s, and deletes the topics.
func runScenario(k *kafka, o options, s scenario, env *runEnv, profile string) (res result, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()

	if err := k.createTopics(ctx, int32(o.partitions), env.in, env.out); err != nil {
		return res, err
	}
	defer func() {
		if derr := k.cleanUp(env); derr != nil && err == nil {
			err = derr
		}
		// Give the next scenario a clean heap (the broker's copy of these topics is gone).
		runtime.GC()
		debug.FreeOSMemory()
	}()
	want, err := k.fill(ctx, env.in, o, s.keep)
	if err != nil {
		return res, fmt.Errorf("filling input topic %s: %w", env.in, err)
	}
	res.outRecords = want
	runtime.GC()

	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile() // after the timed phase (stopped early below)
	}

	// Timed phase: from starting the app until the output topic holds every expected record.
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	start := time.Now()

	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	done := make(chan error, 1)
	go func() { done <- s.run(appCtx, env) }()

	firstOut, werr := k.waitForOutput(ctx, env.out, want, start, done)
	elapsed := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&ms1)
	if profile != "" {
		pprof.StopCPUProfile()
	}
	if werr != nil {
		stopApp()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		return res, werr
	}

	// Stop the app and wait for Run to return.
	stopApp()
	select {
	case rerr := <-done:
		if rerr != nil && !errors.Is(rerr, context.Canceled) {
			return res, fmt.Errorf("run returned an error at shutdown: %w", rerr)
		}
	case <-time.After(time.Minute):
		return res, errors.New("did not stop within 1 minute of cancelling its context")
	}
	// Nothing may appear after the target was reached (duplicates would mean the count hid a gap).
	got, err := k.countOutput(ctx, env.out)
	if err != nil {
		return res, err
	}
	if got != want {
		return res, fmt.Errorf("output topic %s holds %d records after shutdown, want exactly %d", env.out, got, want)
	}

	res.seconds = elapsed.Seconds()
	res.firstOut = firstOut
	res.cpuSeconds = cpu1 - cpu0
	res.allocs = ms1.Mallocs - ms0.Mallocs
	res.allocBytes = ms1.TotalAlloc - ms0.TotalAlloc
	res.gcs = ms1.NumGC - ms0.NumGC
	return res, nil
}

// cpuTime is the process's user+system CPU seconds so far.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// peakRSS returns the VmHWM line of /proc/self/status, e.g. "512340 kB".
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v = strings.TrimSpace(v)
			var kb int64
			if _, err := fmt.Sscanf(v, "%d kB", &kb); err == nil {
				return fmt.Sprintf("%.1f MiB (VmHWM %s)", float64(kb)/1024, v)
			}
			return v
		}
	}
	return "unknown"
}

func printTable(o options, selected []scenario, results map[string][]result, embeddedBroker bool) {
	type summary struct {
		best, median result
	}
	sums := map[string]summary{}
	for name, rs := range results {
		sorted := slices.Clone(rs)
		slices.SortFunc(sorted, func(a, b result) int {
			switch {
			case a.seconds < b.seconds:
				return -1
			case a.seconds > b.seconds:
				return 1
			}
			return 0
		})
		sums[name] = summary{best: sorted[0], median: sorted[(len(sorted)-1)/2]}
	}
	n := float64(o.records)
	mb := n * float64(o.valueSize) / 1e6
	base, haveBase := sums["baseline"]

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trecords\tout\truns\tbest s\tmedian s\tbest rec/s\tmedian rec/s\tmedian MB/s\tratio best\tratio median\tCPU s\tallocs/rec\tB/rec\tfirst out\t")
	for _, s := range selected {
		sm := sums[s.name]
		ratioBest, ratioMed := "-", "-"
		if haveBase {
			ratioBest = fmt.Sprintf("%.2fx", base.best.seconds/sm.best.seconds)
			ratioMed = fmt.Sprintf("%.2fx", base.median.seconds/sm.median.seconds)
		}
		m := sm.median
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%.3f\t%.0f\t%.0f\t%.1f\t%s\t%s\t%.2f\t%.1f\t%.0f\t%v\t\n",
			s.name, o.records, m.outRecords, len(results[s.name]),
			sm.best.seconds, m.seconds, n/sm.best.seconds, n/m.seconds, mb/m.seconds,
			ratioBest, ratioMed, m.cpuSeconds, float64(m.allocs)/n, float64(m.allocBytes)/n,
			m.firstOut.Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("records/s and MB/s count input records and input value bytes (MB = 1e6 bytes); ratio = baseline time / scenario time")
	fmt.Println("(>1 is faster than baseline). CPU s, allocs/rec, B/rec and first out are of the median run; the first three cover")
	if embeddedBroker {
		fmt.Println("the whole process during the timed phase, the in-process broker included (it shares the CPUs with the app).")
	} else {
		fmt.Println("the whole process during the timed phase (the harness's end-offset polling included).")
	}
	fmt.Printf("%s, GOMAXPROCS=%d, peak RSS of the process: %s\n", runtime.Version(), runtime.GOMAXPROCS(0), peakRSS())
}
