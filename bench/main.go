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

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde/registry"
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
	// brokerChild runs the embedded broker in a child process instead of this one.
	brokerChild bool
	cpuProfile  string
	seed        uint64
	warmup      int
	// latency scenarios: input records/s, how long the input is produced, and how much of
	// its start is left out of the figures
	rate          int
	latencyFor    time.Duration
	latencyWarmup time.Duration
	// rss-pebble: the memory budget's parts in MiB (0: the library's defaults), and the file
	// of a heap profile taken at the end of its timed phase
	rssBlockCacheMiB int
	rssMemTableMiB   int
	rssStoreCacheMiB int
	memProfile       string
	// rss-*: the consumer's fetch limits in KiB (0: the library's defaults), to show their
	// effect on memory
	rssFetchKiB     int
	rssPartFetchKiB int
}

// scenario is one way of copying the input topic to the output topic.
type scenario struct {
	name string
	// keep reports whether a value reaches the output (to count the expected records).
	keep func(v []byte) bool
	// run processes in to out until ctx is done, then shuts down cleanly and returns.
	run func(ctx context.Context, env *runEnv) error
	// countKeys: the input has the count scenarios' string keys (countKeys distinct ones,
	// partitioned by key hash) instead of distinct 8-byte keys spread round-robin.
	countKeys bool
	// eventTime: the input's timestamps are spread evenly over eventTimeSpan of event time
	// (record i: start + i*eventTimeSpan/records), covering several 1-minute windows.
	eventTime bool
	// finalWindows: the output is one final result per closed window (the distinct (key,
	// window) pairs of the input whose window closed, computed while filling), and the run is
	// complete when the app has committed the end offsets of every input partition (the last
	// window of each partition gets records without output, so the output count alone would
	// not mean every input record was processed).
	finalWindows bool
	// stateful: the app has the store countStore, whose changelog is deleted in clean-up.
	stateful bool
	// readCommitted: the run is complete when a read_committed consumer of the output has
	// read the expected number of records (counted, not summed end offsets: under
	// exactly-once transaction markers take offsets too).
	readCommitted bool
	// latency: not a throughput run but runLatency: run processes a paced input on empty
	// topics and the end-to-end latency is measured (no fill, no warm-up run).
	latency bool
	// raw: the latency run's pipeline is a plain franz-go loop, not an App: runLatency
	// waits for runEnv.onReady instead of the App's tasks.
	raw bool
	// second, if set, fills a second input topic (runEnv.in2, created like in) after in was
	// filled: the join scenarios' other side.
	second func(ctx context.Context, k *kafka, o options, topic string, first filled) error
	// drained: the run is complete when the group has committed every input topic (in, in2
	// and the application's internal topics, repartition and foreign-key topics included) to
	// its end; the output then holds want(o) records exactly (want nil: any number, reported).
	drained bool
	want    func(o options) int64
	// atMost: want is an upper bound, not an exact count (a join whose inputs drift apart in
	// time by more than its retention loses matches, as in Kafka Streams): the output is
	// reported against it.
	atMost bool
	// inputs is the number of input topics (0 means 1): rates count the records of all.
	inputs int
	// rss: not a throughput run but runRSS: the count over distinct keys with the broker in
	// a child process, measuring the resident set against the configured memory budget.
	rss bool
	// gets: not a throughput run but runGets (queries.go): local gets on a count over
	// -records distinct keys.
	gets bool

	// after, if set, makes this a follow-up scenario: instead of copying a topic of its own
	// it runs after each run of the scenario named after, on that run's topics (before they
	// are deleted), and is timed by follow itself.
	after  string
	follow func(ctx context.Context, k *kafka, o options, env *runEnv, profile string) (result, error)

	// own, if set, runs the scenario its own way (topics, timing, printing): slow-task,
	// scale-rebalance.
	own func(k *kafka, o options, env *runEnv, run int) error
	// verify, if set, checks the output after the run (untimed): fk-pebble.
	verify func(ctx context.Context, k *kafka, env *runEnv) error
	// partitions, if set, is the number of partitions of the scenario's topics instead of
	// -partitions (the *-1000p scenarios, scale.go).
	partitions int
	// values, if set, makes the input values: value i is values(env, o)(i) instead of
	// random bytes (the serde scenarios, serdes.go).
	values valuesFunc
	// registry: the scenario needs the Schema Registry (runEnv.registry).
	registry bool
}

// runEnv is what a scenario run gets.
type runEnv struct {
	brokers []string
	in, out string
	in2     string // the second input of scenarios with second (else unused)
	group   string // consumer group / application id, fresh per run
	logger  *slog.Logger

	// profileOperators sets Config.ProfileOperators (the *-oplabels scenarios).
	profileOperators bool
	// compression sets Config.Compression (passthrough-snappy).
	compression kstream.Compression
	// linger sets Config.Linger (and the baseline loop's linger, NoLinger: 0), and
	// commitEvery Config.CommitInterval unless zero (the latency scenarios).
	linger, commitEvery time.Duration
	// onReady, if set, is called by the baseline loop once it has every input partition.
	onReady func()

	// onApp, if set, is given the app before it runs (stateful scenarios).
	onApp func(*kstream.App)
	// stats: the app's Stats when its Run returned (stateful scenarios).
	stats *kstream.Stats
	// registry is the process's Schema Registry client (nil unless a selected scenario
	// needs it).
	registry *registry.Client
}

var scenarios = []scenario{
	{name: "baseline", keep: keepAll, run: runBaseline},
	{name: "passthrough", keep: keepAll, run: runPassthrough},
	{name: "passthrough-metrics", keep: keepAll, run: runPassthroughMetrics},
	{name: "passthrough-snappy", keep: keepAll, run: runPassthroughSnappy},
	{name: "filter-mapvalues", keep: keepFilter, run: runFilterMapValues},
	{name: "passthrough-oplabels", keep: keepAll, run: runPassthroughOpLabels},
	{name: "filter-mapvalues-oplabels", keep: keepFilter, run: runFilterMapValuesOpLabels},
	{name: "count-memory", keep: keepAll, run: runCountMemory, countKeys: true, stateful: true},
	{name: "count-pebble", keep: keepAll, run: runCountPebble, countKeys: true, stateful: true},
	{name: "restore-pebble", after: "count-pebble", follow: runRestorePebble},
	{name: "cogroup-pebble", keep: keepAll, run: runCogroupPebble, countKeys: true, stateful: true},
	{name: "count-alos", keep: keepAll, run: runCountALOS, countKeys: true, stateful: true, readCommitted: true},
	{name: "count-eos", keep: keepAll, run: runCountEOS, countKeys: true, stateful: true, readCommitted: true},
	{name: "window-pebble", keep: keepAll, run: runWindowPebble, countKeys: true, eventTime: true, stateful: true},
	{name: "window-final-pebble", run: runWindowFinalPebble, countKeys: true, eventTime: true, stateful: true, finalWindows: true},
	{name: "window-suppress-pebble", run: runWindowSuppressPebble, countKeys: true, eventTime: true, stateful: true, finalWindows: true},
	{name: "join-pebble", run: runJoinPebble, countKeys: true, eventTime: true, stateful: true, second: fillSame, drained: true, want: joinPairs, atMost: true, inputs: 2},
	{name: "fk-pebble", run: runFKPebble, countKeys: true, stateful: true, second: fillCustomers, drained: true, verify: verifyFK},
	{name: "latency-alos", run: runCountALOS, stateful: true, latency: true},
	{name: "latency-eos", run: runCountEOS, stateful: true, latency: true},
	{name: "latency-raw", run: runBaselineNoLinger, latency: true, raw: true},
	{name: "latency-pass", run: runPassthroughNoLinger, latency: true},
	{name: "latency-count", run: runCountNoLinger, stateful: true, latency: true},
	{name: "latency-eos-20ms", run: runCountEOS20ms, stateful: true, latency: true},
	{name: "rss-pebble", rss: true},
	{name: "rss-count", rss: true, countKeys: true},
	{name: "count-pebble-queries", keep: keepAll, run: runCountPebbleQueries, countKeys: true, stateful: true},
	{name: "gets-memory", gets: true},
	{name: "gets-pebble", gets: true},
	batchScenarios[0], batchScenarios[1], // batch.go
	{name: "slow-task", own: runSlowTask},
	{name: "async-enrich", own: runAsyncEnrich}, // async.go
	{name: "window-align", own: runWindowAlign},
	{name: "baseline-1000p", keep: keepAll, run: runBaseline, partitions: scalePartitions}, // scale.go
	{name: "passthrough-1000p", keep: keepAll, run: runPassthrough, partitions: scalePartitions},
	{name: "scale-rebalance", own: runScaleRebalance},
	{name: "scale-rebalance-eos", own: runScaleRebalanceEOS},
	{name: "scale-rebalance-protocols", own: runScaleRebalanceProtocols},
	{name: "scale-out", own: runScaleOut}, // elastic.go
	{name: "scale-out-nowarmup", own: runScaleOutNoWarmup},
	{name: "rolling-restart", own: runRollingRestart},
	{name: "scale-in", own: runScaleIn},
	{name: "kill-9", own: runKill9}, // kill.go
}

// targets are printed next to the figures: the count with the Pebble store should reach half
// the passthrough's throughput, the restoration 1M records/s.
const (
	targetPebbleVsPassthrough = 0.5
	targetRestoreRecordsPerS  = 1e6
	// the windowed counts (issue 11) against count-pebble in the same run
	targetWindowVsCountPebble = 0.8
	// the joins (issue 12) against count-pebble in the same run, in input records/s
	targetJoinVsCountPebble = 0.5
	// the passthrough with Config.Metrics (issue 14) against the passthrough in the same run
	targetMetricsVsPassthrough = 0.95
)

// windowScenarios are judged against count-pebble (targetWindowVsCountPebble, or the
// scenario's own in vsCountPebbleTargets).
var windowScenarios = []string{"window-pebble", "window-final-pebble", "window-suppress-pebble"}

// joinScenarios are judged against count-pebble by input records per second
// (targetJoinVsCountPebble, or the scenario's own in vsCountPebbleTargets).
var joinScenarios = []string{"join-pebble", "fk-pebble"}

// vsCountPebbleTargets are the targets of issue 28 (item 3) where they differ from the
// windowed counts' and joins' of issues 11 and 12: the suppressed windowed count at 0.6x
// count-pebble, the foreign-key join at 0.4x.
var vsCountPebbleTargets = map[string]float64{"window-suppress-pebble": 0.6, "fk-pebble": 0.4}

// vsCountPebbleTarget is scenario name's target against count-pebble, def unless it has
// its own.
func vsCountPebbleTarget(name string, def float64) float64 {
	if t, ok := vsCountPebbleTargets[name]; ok {
		return t
	}
	return def
}

// inputsOf is the number of input topics of s, each of o.records records.
func inputsOf(s scenario) int { return max(1, s.inputs) }

// result is one timed run.
type result struct {
	seconds    float64
	outRecords int64
	firstOut   time.Duration // start to the first output record visible
	cpuSeconds float64       // process user+system CPU during the timed phase
	allocs     uint64        // heap allocations (whole process) during the timed phase
	allocBytes uint64
	gcs        uint32 // garbage collections during the timed phase
	rssAfter   int64  // VmRSS (kB) at the end of the timed phase
	peakRSS    int64  // VmHWM (kB) of the scenario run (fill included), 0 if unknown
	// restore scenarios: first OnRestoreStart to last OnRestoreEnd (firstOut is the time to
	// the first OnRestoreStart, outRecords the records restored).
	restorePhase time.Duration
	// stateful scenarios: the app's commit figures when it stopped
	stats *kstream.Stats
	// latency scenarios
	lat *latencyResult
}

func main() {
	if os.Getenv(envBrokerChild) != "" {
		runBrokerChild() // a broker child process of rss-pebble; does not return
	}
	if os.Getenv(envInstanceChild) != "" {
		runInstanceChild() // an instance child process of kill-9; does not return
	}
	startRSSKB = currentRSS()
	var o options
	var only, brokers string
	flag.IntVar(&o.records, "records", 1_000_000, "input records per scenario")
	flag.IntVar(&o.valueSize, "value-size", 100, "bytes of random value per record")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the input and output topics")
	flag.IntVar(&o.runs, "runs", 1, "runs of each scenario (best and median are printed)")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run (default all: "+strings.Join(scenarioNames(), ",")+")")
	flag.StringVar(&brokers, "brokers", "", "comma-separated host:port of an external cluster (default: start an embedded broker)")
	flag.BoolVar(&o.brokerChild, "broker-child", false, "run the embedded broker in a child process of this binary, not in this one: the\nbroker's data (every record produced) is then not on the app's Go heap, and the\nCPU, allocation and RSS figures are the app's and the harness's alone")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed phase of each scenario's first run to this file\n(with several scenarios: FILE with .<scenario> before its extension)")
	flag.IntVar(&countKeys, "count-keys", countKeys, fmt.Sprintf("distinct keys of the count-*, window-* and latency-* inputs (1..%d)", maxCountKeys))
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random values (every scenario gets the same data)")
	flag.IntVar(&o.warmup, "warmup", 100_000, "records of one untimed warm-up run of each scenario before the measured runs (0: none)")
	var eos, queries bool
	flag.BoolVar(&eos, "eos", false, "select the exactly-once scenarios (with -only: in addition): "+strings.Join(eosScenarios, ","))
	flag.BoolVar(&queries, "queries", false, "select the interactive query scenarios (with -only: in addition): "+strings.Join(queryScenarios, ","))
	flag.IntVar(&queryRate, "query-rate", queryRate, "count-pebble-queries: background gets/s")
	flag.BoolVar(&blockingCommits, "blocking-commits", false, "stateful scenarios: Config.BlockingCommits (at-least-once commits stop the tasks until they are over, as Kafka Streams' do)")
	flag.DurationVar(&getsFor, "gets-for", getsFor, "gets-*: how long each gets measurement lasts")
	flag.IntVar(&o.rate, "rate", 10000, "latency-*: input records/s (a batch every 10ms)")
	flag.DurationVar(&o.latencyFor, "latency-for", 10*time.Second, "latency-*: how long the input is produced")
	flag.DurationVar(&o.latencyWarmup, "latency-warmup", time.Second, "latency-*: outputs of inputs produced in this first part of the run are not measured")
	flag.IntVar(&o.rssBlockCacheMiB, "rss-block-cache", 0, "rss-pebble, rss-count: Config.BlockCacheBytes in MiB (default: the library's 64)")
	flag.IntVar(&o.rssMemTableMiB, "rss-memtable", 0, "rss-pebble, rss-count: Config.MemTableBytes in MiB (default: the library's 16)")
	flag.IntVar(&o.rssStoreCacheMiB, "rss-store-cache", 0, "rss-pebble, rss-count: Config.StoreCacheBytes in MiB (default: the library's 32, shared by every store partition; -1 disables the store read caches)")
	flag.IntVar(&o.rssFetchKiB, "rss-fetch-max", 0, "rss-pebble, rss-count: the consumer's FetchMaxBytes in KiB (default: the library's)")
	flag.IntVar(&o.rssPartFetchKiB, "rss-partition-fetch-max", 0, "rss-pebble, rss-count: the consumer's FetchMaxPartitionBytes in KiB (default: the library's)")
	flag.StringVar(&o.memProfile, "memprofile", "", "rss-pebble, rss-count: write a heap profile at the end of its timed phase (state still open) to this file, and one at the highest live heap to this file.peak")
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments: %v", flag.Args())
	}
	if o.records <= 0 || o.valueSize <= 0 || o.partitions <= 0 || o.runs <= 0 || o.warmup < 0 {
		fatalf("-records, -value-size, -partitions and -runs must be positive, -warmup not negative")
	}
	if countKeys <= 0 || countKeys > maxCountKeys {
		fatalf("-count-keys must be in 1..%d", maxCountKeys)
	}
	if o.rate <= 0 || o.latencyWarmup < 0 || o.latencyFor <= o.latencyWarmup {
		fatalf("-rate must be positive, -latency-warmup not negative and -latency-for longer than -latency-warmup")
	}
	if eos {
		if only != "" {
			only += ","
		}
		only += strings.Join(eosScenarios, ",")
	}
	if queries {
		if only != "" {
			only += ","
		}
		only += strings.Join(queryScenarios, ",")
	}
	if queryRate <= 0 || getsFor <= 0 {
		fatalf("-query-rate and -gets-for must be positive")
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
		if after := scenarios[i].after; after != "" && !slices.ContainsFunc(out, func(s scenario) bool { return s.name == after }) {
			j := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == after })
			out = append(out, scenarios[j]) // a follow-up needs its scenario's run
		}
		if !slices.ContainsFunc(out, func(s scenario) bool { return s.name == name }) {
			out = append(out, scenarios[i])
		}
	}
	return out, nil
}

// followUps returns the selected follow-up scenarios of s.
func followUps(selected []scenario, s scenario) []scenario {
	var out []scenario
	for _, f := range selected {
		if f.after == s.name {
			out = append(out, f)
		}
	}
	return out
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func run(o options, selected []scenario) error {
	// The application's logger: quiet, warnings and errors only, to stderr.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	brokers := o.brokers
	srURL := registryURL // -registry, or the embedded broker's
	where := "external cluster " + strings.Join(brokers, ",")
	onlyRSS := !slices.ContainsFunc(selected, func(s scenario) bool { return !s.rss })
	switch {
	case len(brokers) == 0 && onlyRSS:
		where = "embedded broker in a child process (rss-pebble)"
	case len(brokers) == 0 && o.brokerChild:
		if slices.ContainsFunc(selected, func(s scenario) bool { return s.registry }) {
			return errors.New("-broker-child: the serde scenarios need the embedded broker's schema registry, which the child does not start")
		}
		child, err := startBrokerChild()
		if err != nil {
			return err
		}
		defer child.close()
		brokers = []string{child.addr}
		where = "embedded broker in a child process at " + child.addr
	case len(brokers) == 0:
		opts := []embedded.Option{embedded.Logger(logger)}
		if slices.ContainsFunc(selected, func(s scenario) bool { return s.registry }) {
			opts = append(opts, embedded.SchemaRegistry(0)) // the serde scenarios' registry
		}
		b, err := embedded.Start(opts...)
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
		if url := b.RegistryURL(); url != "" {
			srURL = url
			where += ", schema registry at " + url
		}
	}
	src, err := newRegistryClient(selected, srURL, len(o.brokers) > 0)
	if err != nil {
		return err
	}
	if src != nil {
		defer src.Close()
	}
	var k *kafka // the harness's client of the shared broker (none when only rss-pebble runs)
	if !onlyRSS {
		var err error
		if k, err = newKafka(brokers); err != nil {
			return err
		}
		defer k.close()
	}

	fmt.Printf("kstream bench: %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("broker: %s\n", where)
	fmt.Printf("per scenario: %d records, %d-byte random values, 8-byte distinct keys (count-*, window-*: %d distinct 8-byte string keys; window-*: timestamps over %v), %d partitions, %d run(s), commit interval %v\n\n",
		o.records, o.valueSize, countKeys, eventTimeSpan, o.partitions, o.runs, commitInterval)

	stamp := time.Now().UnixNano()
	newEnv := func(s scenario, run string) *runEnv {
		return &runEnv{
			brokers:  brokers,
			in:       fmt.Sprintf("bench-%x-%s-%s-in", stamp, s.name, run),
			in2:      fmt.Sprintf("bench-%x-%s-%s-in2", stamp, s.name, run),
			out:      fmt.Sprintf("bench-%x-%s-%s-out", stamp, s.name, run),
			group:    fmt.Sprintf("bench-%x-%s-%s", stamp, s.name, run),
			logger:   logger,
			registry: src,
		}
	}

	// Warm-up: one small untimed run of each scenario, so that the first measured run does
	// not pay for cold connections, heap growth and first-touch page faults alone.
	if o.warmup > 0 {
		wo := o
		wo.records = min(o.warmup, o.records)
		for _, s := range selected {
			if s.after != "" {
				continue // runs with its scenario
			}
			if s.latency || s.rss || s.gets || s.own != nil {
				continue // latency: its first -latency-warmup is its warm-up; rss: measures memory, not time
			}
			fus := followUps(selected, s)
			res, err := runScenario(k, wo, s, newEnv(s, "warmup"), "", fus, nil)
			if err != nil {
				return fmt.Errorf("scenario %s (warm-up): %w", s.name, err)
			}
			fmt.Printf("  %-21s warm-up: %d records in %.3fs (not counted)\n", s.name, wo.records, res[0].seconds)
			for i, f := range fus {
				fmt.Printf("  %-21s warm-up: %d records in %.3fs (not counted)\n", f.name, res[i+1].outRecords, res[i+1].seconds)
			}
		}
	}

	results := map[string][]result{}
	gets := map[string][]getsResult{}
	// Runs are interleaved (all scenarios, then all again) and each run starts with the
	// next scenario, so that drift in the machine's speed affects every scenario alike.
	var mains []scenario // the scenarios with topics of their own, in rotation
	for _, s := range selected {
		if s.after == "" {
			mains = append(mains, s)
		}
	}
	profileOf := func(r int, name string) string {
		if r == 0 && o.cpuProfile != "" {
			return profilePath(o.cpuProfile, name, len(selected))
		}
		return ""
	}
	for r := range o.runs {
		for i := range mains {
			s := mains[(i+r)%len(mains)]
			if s.rss {
				profile := ""
				if r == 0 {
					profile = o.memProfile
				}
				rr, err := runRSS(o, newEnv(s, fmt.Sprint(r)), profile, s.countKeys)
				if err != nil {
					return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
				}
				printRSS(rr)
				results[s.name] = append(results[s.name], result{seconds: rr.seconds, outRecords: int64(rr.records), peakRSS: rr.peakKB})
				continue
			}
			if s.own != nil {
				if err := s.own(k, o, newEnv(s, fmt.Sprint(r)), r+1); err != nil {
					return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
				}
				continue
			}
			if s.gets {
				gr, err := runGets(k, o, s, newEnv(s, fmt.Sprint(r)), profileOf(r, s.name))
				if err != nil {
					return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
				}
				printGets(s.name, r+1, gr)
				gets[s.name] = append(gets[s.name], gr)
				continue
			}
			if s.latency {
				res, err := runLatency(k, o, s, newEnv(s, fmt.Sprint(r)))
				if err != nil {
					return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
				}
				results[s.name] = append(results[s.name], res)
				l := res.lat
				fmt.Printf("  %-21s run %d: %d records at %.0f rec/s in %.3fs, %d samples: p50 %s  p99 %s  max %s ms%s\n",
					s.name, r+1, l.produced, l.rate, res.seconds, len(l.samples),
					ms(l.quantile(0.50)), ms(l.quantile(0.99)), ms(l.samples[len(l.samples)-1]), statsNote(res.stats))
				continue
			}
			fus := followUps(selected, s)
			res, err := runScenario(k, o, s, newEnv(s, fmt.Sprint(r)), profileOf(r, s.name), fus,
				func(name string) string { return profileOf(r, name) })
			if err != nil {
				return fmt.Errorf("scenario %s (run %d): %w", s.name, r+1, err)
			}
			for j, sc := range append([]scenario{s}, fus...) {
				res := res[j]
				results[sc.name] = append(results[sc.name], res)
				n, what := float64(o.records*inputsOf(sc)), "first output"
				if sc.after != "" {
					n, what = float64(res.outRecords), "first restore start"
				}
				fmt.Printf("  %-21s run %d: %8.3fs  %10.0f rec/s  %5.2f CPU s  %3d GCs  RSS %s, peak %s  (%s after %v)%s\n",
					sc.name, r+1, res.seconds, n/res.seconds, res.cpuSeconds, res.gcs, mib(res.rssAfter), mib(res.peakRSS),
					what, res.firstOut.Round(time.Millisecond), statsNote(res.stats))
				if sc.name == "count-pebble-queries" {
					fmt.Println(queryLoadNote())
				}
				if p := profileOf(r, sc.name); p != "" {
					fmt.Printf("  %-21s CPU profile of the timed phase: %s\n", "", p)
				}
			}
		}
	}
	fmt.Println()
	printSlowTask()
	printWindowAlign()
	printGetsTable(selected, gets)
	printTable(o, selected, results, len(o.brokers) == 0)
	return nil
}

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func profilePath(path, scenario string, n int) string {
	if n == 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + scenario + ext
}

// runScenario creates and fills the topics, times one run of s, runs the follow-up scenarios
// fus on its topics, and deletes the topics. It returns the result of s, then those of fus;
// fprofile gives the CPU profile file of a follow-up ("" for none).
func runScenario(k *kafka, o options, s scenario, env *runEnv, profile string, fus []scenario, fprofile func(string) string) ([]result, error) {
	resetPeakRSS()
	res, err := runMain(k, o, s, env, profile, fus, fprofile)
	if err != nil {
		return nil, err
	}
	res[0].peakRSS = readPeakRSS() // the follow-ups' peaks are included
	for i := range fus {
		res[i+1].peakRSS = res[0].peakRSS
	}
	return res, nil
}

func runMain(k *kafka, o options, s scenario, env *runEnv, profile string, fus []scenario, fprofile func(string) string) (results []result, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap*time.Duration(1+len(fus)))
	defer cancel()
	var res result
	if s.partitions > 0 {
		o.partitions = s.partitions
	}

	topics := []string{env.in, env.out}
	if s.second != nil {
		topics = append(topics, env.in2)
	}
	if err := k.createTopics(ctx, int32(o.partitions), topics...); err != nil {
		return nil, err
	}
	defer func() {
		if derr := k.cleanUp(env, s.stateful); derr != nil && err == nil {
			err = derr
		}
		// Give the next scenario a clean heap (the broker's copy of these topics is gone).
		runtime.GC()
		debug.FreeOSMemory()
	}()
	keep := s.keep
	if keep == nil {
		keep = keepAll
	}
	var values func(int) ([]byte, error)
	if s.values != nil {
		if values, err = s.values(env, o); err != nil {
			return nil, err
		}
	}
	in, err := k.fillValues(ctx, env.in, o, keep, s.countKeys, s.eventTime, values)
	if err != nil {
		return nil, fmt.Errorf("filling input topic %s: %w", env.in, err)
	}
	if s.second != nil {
		if err := s.second(ctx, k, o, env.in2, in); err != nil {
			return nil, fmt.Errorf("filling input topic %s: %w", env.in2, err)
		}
	}
	want := in.kept
	switch {
	case s.finalWindows:
		want = in.closedWindows
	case s.want != nil:
		want = s.want(o)
	case s.drained:
		want = -1 // any number
	}
	res.outRecords = want
	var watcher *committedWatcher
	if s.readCommitted {
		// Started before the clock: it reads the (still empty) output from its start.
		if watcher, err = newCommittedWatcher(env.brokers, env.out, nil); err != nil {
			return nil, err
		}
		defer watcher.close()
	}
	runtime.GC()

	if profile != "" {
		stop, err := startProfile(profile)
		if err != nil {
			return nil, err
		}
		defer stop() // after the timed phase (stopped early below)
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

	var firstOut time.Duration
	var werr error
	if watcher != nil {
		firstOut, werr = watcher.wait(ctx, env.out, want, start, done)
	} else if s.drained {
		firstOut, werr = k.waitForDrained(ctx, env, want, start, done)
	} else if s.finalWindows {
		firstOut, werr = k.waitForCommitted(ctx, env.group, env.in, env.out, want, start, done)
	} else {
		firstOut, werr = k.waitForOutput(ctx, env.out, want, start, done)
	}
	elapsed := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&ms1)
	if profile != "" {
		pprof.StopCPUProfile()
	}
	res.rssAfter = currentRSS()
	if werr != nil {
		stopApp()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		return nil, werr
	}

	// Stop the app and wait for Run to return.
	stopApp()
	if err := awaitStop(done); err != nil {
		return nil, err
	}
	// Nothing may appear after the target was reached (duplicates would mean the count hid a gap).
	var got int64
	if watcher != nil {
		got, err = watcher.settle(ctx, k, env.out) // committed records up to the end offsets
	} else {
		got, err = k.countOutput(ctx, env.out)
	}
	if err != nil {
		return nil, err
	}
	if want < 0 || (s.atMost && got <= want) {
		res.outRecords = got // drained without an exact count: what came out
		if s.atMost && got < want {
			fmt.Printf("  %-21s %d of the %d possible results (%d matches lost to records out of time)\n", s.name, got, want, want-got)
		}
	} else if got != want {
		drops := ""
		if env.stats != nil {
			drops = fmt.Sprintf(" (the app dropped %d input records)", env.stats.DroppedRecords)
		}
		return nil, fmt.Errorf("output topic %s holds %d records after shutdown, want exactly %d%s", env.out, got, want, drops)
	}
	if s.verify != nil {
		if err := s.verify(ctx, k, env); err != nil {
			return nil, err
		}
	}
	res.stats = env.stats

	res.seconds = elapsed.Seconds()
	res.firstOut = firstOut
	res.cpuSeconds = cpu1 - cpu0
	res.allocs = ms1.Mallocs - ms0.Mallocs
	res.allocBytes = ms1.TotalAlloc - ms0.TotalAlloc
	res.gcs = ms1.NumGC - ms0.NumGC
	results = append(results, res)

	for _, f := range fus {
		fp := ""
		if fprofile != nil {
			fp = fprofile(f.name)
		}
		fres, err := f.follow(ctx, k, o, env, fp)
		if err != nil {
			return nil, fmt.Errorf("follow-up %s: %w", f.name, err)
		}
		results = append(results, fres)
	}
	return results, nil
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

// procStatusKB returns a "<field>: N kB" value of /proc/self/status, 0 if unknown.
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb
			}
		}
	}
	return 0
}

func currentRSS() int64 { return procStatusKB("VmRSS") }

var (
	// processPeakKB is the highest VmHWM seen before it was reset (resetPeakRSS).
	processPeakKB int64
	// peakResettable: writing 5 to /proc/self/clear_refs resets VmHWM (Linux >= 4.0).
	peakResettable bool
)

// resetPeakRSS starts a new VmHWM period (per-scenario peaks), keeping the process peak.
func resetPeakRSS() {
	processPeakKB = max(processPeakKB, procStatusKB("VmHWM"))
	peakResettable = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// readPeakRSS is VmHWM (kB) since the last resetPeakRSS, 0 if it could not be reset.
func readPeakRSS() int64 {
	kb := procStatusKB("VmHWM")
	processPeakKB = max(processPeakKB, kb)
	if !peakResettable {
		return 0
	}
	return kb
}

func mib(kb int64) string {
	if kb <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
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
				kb = max(kb, processPeakKB) // VmHWM may have been reset per scenario
				return fmt.Sprintf("%.1f MiB (max VmHWM %d kB)", float64(kb)/1024, kb)
			}
			return v
		}
	}
	return "unknown"
}

// summary is a scenario's best and median run (by time).
type summary struct {
	best, median result
}

func printTable(o options, selected []scenario, results map[string][]result, embeddedBroker bool) {
	if !slices.ContainsFunc(selected, func(s scenario) bool { return !s.rss && !s.gets && s.own == nil }) {
		return // rss-pebble and gets-* alone: printed after their runs (printRSS, printGetsTable)
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

	pass, havePass := sums["passthrough"]
	ratio := func(ref, x result, have bool) string {
		if !have {
			return "-"
		}
		return fmt.Sprintf("%.2fx", ref.seconds/x.seconds)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trecords\tout\truns\tbest s\tmedian s\tbest rec/s\tmedian rec/s\tmedian MB/s\tvs base best\tvs base median\tvs pass best\tvs pass median\tCPU s\tallocs/rec\tB/rec\tfirst out\tRSS after\tpeak RSS\ttarget (median)\t")
	var restores, latencies, withStats []scenario
	alos, haveALOS := sums["count-alos"]
	for _, s := range selected {
		if s.after != "" {
			restores = append(restores, s)
			continue
		}
		if s.stateful {
			withStats = append(withStats, s)
		}
		if s.latency {
			latencies = append(latencies, s)
			continue
		}
		if s.rss || s.gets || s.own != nil {
			continue // printed after each run (printRSS, own) or before (printGetsTable)
		}
		sm := sums[s.name]
		m := sm.median
		target := "-"
		if s.name == "count-pebble" {
			target = fmt.Sprintf(">= %.1fx pass", targetPebbleVsPassthrough)
			if havePass {
				r := pass.median.seconds / m.seconds
				target += fmt.Sprintf(": %s", metOrMissed(r >= targetPebbleVsPassthrough))
			}
		}
		if slices.Contains(windowScenarios, s.name) {
			want := vsCountPebbleTarget(s.name, targetWindowVsCountPebble)
			target = fmt.Sprintf(">= %.1fx count-pebble", want)
			if cp, ok := sums["count-pebble"]; ok {
				r := cp.median.seconds / m.seconds
				target += fmt.Sprintf(": %.2fx %s", r, metOrMissed(r >= want))
			}
		}
		if s.name == "count-pebble-queries" {
			target = fmt.Sprintf(">= %.1fx count-pebble", targetQueriesVsCountPebble)
			if cp, ok := sums["count-pebble"]; ok {
				r := cp.median.seconds / m.seconds
				target += fmt.Sprintf(": %.2fx %s (best %.2fx, CPU s %.2fx)", r, metOrMissed(r >= targetQueriesVsCountPebble),
					cp.best.seconds/sm.best.seconds, cp.median.cpuSeconds/m.cpuSeconds)
			}
		}
		if s.name == "passthrough-metrics" {
			target = fmt.Sprintf(">= %.2fx pass", targetMetricsVsPassthrough)
			if havePass {
				r := pass.median.seconds / m.seconds
				target += fmt.Sprintf(": %.3fx %s (best %.3fx, CPU s %.3fx)", r, metOrMissed(r >= targetMetricsVsPassthrough),
					pass.best.seconds/sm.best.seconds, pass.median.cpuSeconds/m.cpuSeconds)
			}
		}
		if s.name == "passthrough-snappy" && havePass {
			// No target: what snappy costs (or saves) against the default, no compression.
			target = fmt.Sprintf("%.3fx pass (CPU s %.3fx)", pass.median.seconds/m.seconds, pass.median.cpuSeconds/m.cpuSeconds)
		}
		if s.name == "cogroup-pebble" {
			// No target: the ratio to count-pebble, the same count as a cogroup of two streams.
			if cp, ok := sums["count-pebble"]; ok {
				target = fmt.Sprintf("%.2fx count-pebble", cp.median.seconds/m.seconds)
			}
		}
		if slices.Contains(joinScenarios, s.name) {
			// By input records per second: a join reads two inputs of o.records each.
			want := vsCountPebbleTarget(s.name, targetJoinVsCountPebble)
			target = fmt.Sprintf(">= %.1fx count-pebble rec/s", want)
			if cp, ok := sums["count-pebble"]; ok {
				r := float64(inputsOf(s)) * cp.median.seconds / m.seconds
				target += fmt.Sprintf(": %.2fx %s", r, metOrMissed(r >= want))
			}
		}
		if t := serdeTarget(s.name, sums); t != "" {
			target = t
		}
		if s.name == "count-eos" {
			target = fmt.Sprintf(">= %.2fx alos", targetEOSVsALOS)
			if haveALOS {
				r := alos.median.seconds / m.seconds
				target += fmt.Sprintf(": %.2fx %s", r, metOrMissed(r >= targetEOSVsALOS))
			}
		}
		n := n * float64(inputsOf(s))
		mb := mb * float64(inputsOf(s))
		if size, ok := meanValueSize(s.name); ok {
			mb = n * size / 1e6 // the serde scenarios' encoded values, not -value-size
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%.3f\t%.0f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%.0f\t%v\t%s\t%s\t%s\t\n",
			s.name, o.records*inputsOf(s), m.outRecords, len(results[s.name]),
			sm.best.seconds, m.seconds, n/sm.best.seconds, n/m.seconds, mb/m.seconds,
			ratio(base.best, sm.best, haveBase), ratio(base.median, m, haveBase),
			ratio(pass.best, sm.best, havePass), ratio(pass.median, m, havePass),
			m.cpuSeconds, float64(m.allocs)/n, float64(m.allocBytes)/n,
			m.firstOut.Round(time.Millisecond), mib(m.rssAfter), mib(m.peakRSS), target)
	}
	tw.Flush()
	fmt.Println()

	if len(restores) > 0 {
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "restore\tchangelog recs\truns\tbest s\tmedian s\tbest rec/s\tmedian rec/s\tmedian MB/s\trestore phase s\tphase rec/s\tCPU s\tallocs/rec\tB/rec\tfirst start\tRSS after\ttarget (median)\t")
		for _, s := range restores {
			sm := sums[s.name]
			m := sm.median
			rn := float64(m.outRecords)
			rmb := rn * (countKeyLen + changelogValueLen) / 1e6
			rate := rn / m.seconds
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.0f\t%.0f\t%.1f\t%.3f\t%.0f\t%.2f\t%.2f\t%.0f\t%v\t%s\t>= %.0f rec/s: %s\t\n",
				s.name, m.outRecords, len(results[s.name]), sm.best.seconds, m.seconds,
				float64(sm.best.outRecords)/sm.best.seconds, rate, rmb/m.seconds,
				m.restorePhase.Seconds(), rn/m.restorePhase.Seconds(),
				m.cpuSeconds, float64(m.allocs)/rn, float64(m.allocBytes)/rn,
				m.firstOut.Round(time.Millisecond), mib(m.rssAfter),
				targetRestoreRecordsPerS, metOrMissed(rate >= targetRestoreRecordsPerS))
		}
		tw.Flush()
		fmt.Printf("restore: a new instance (same application id, empty state dir) after each count-pebble run, timed from\n")
		fmt.Printf("starting it until all %d partitions' OnRestoreEnd; records/s and MB/s count changelog records and their\n", o.partitions)
		fmt.Printf("key+value bytes (%d+%d B each); restore phase = first OnRestoreStart to last OnRestoreEnd; first start = start\n", countKeyLen, changelogValueLen)
		fmt.Printf("to the first OnRestoreStart (group join, assignment); allocs/rec and B/rec per changelog record.\n\n")
	}

	if haveALOS {
		if eos, ok := sums["count-eos"]; ok {
			fmt.Printf("exactly-once / at-least-once (count-alos time / count-eos time): best %.2fx, median %.2fx (target >= %.2fx: %s);\n",
				alos.best.seconds/eos.best.seconds, alos.median.seconds/eos.median.seconds, targetEOSVsALOS,
				metOrMissed(alos.median.seconds/eos.median.seconds >= targetEOSVsALOS))
			fmt.Printf("both count the output's committed records with a read_committed consumer, commit interval %v.\n\n", commitInterval)
		}
	}

	printScale(o, sums)
	printSerdes(o, selected, sums)
	if len(latencies) > 0 {
		printLatencies(o, latencies, results)
	}
	if len(withStats) > 0 {
		printStats(o.records, withStats, results, sums)
	}

	fmt.Println("records/s and MB/s count input records and input value bytes (MB = 1e6 bytes); vs base / vs pass = baseline /")
	fmt.Println("passthrough time / scenario time (>1 is faster). CPU s, allocs/rec, B/rec, first out and RSS are of the median run")
	fmt.Println("(RSS after: VmRSS at the end of the timed phase; peak RSS: VmHWM during the run, fill and follow-ups included); the first three cover")
	if embeddedBroker {
		fmt.Println("the whole process during the timed phase, the in-process broker included (it shares the CPUs with the app).")
	} else {
		fmt.Println("the whole process during the timed phase (the harness's end-offset polling included).")
	}
	fmt.Printf("%s, GOMAXPROCS=%d, peak RSS of the process: %s\n", runtime.Version(), runtime.GOMAXPROCS(0), peakRSS())
}

// startProfile starts a CPU profile into path; stop ends it and closes the file (stopping
// twice is harmless, so the timed phase may stop it early).
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// statsNote is the commit figures of a run for its progress line ("" without them).
func statsNote(st *kstream.Stats) string {
	if st == nil {
		return ""
	}
	what := "commits"
	if st.ExactlyOnce {
		what = "transactions"
	}
	return fmt.Sprintf("  [%d %s, %d aborted, commit p99 %s ms]", st.Commits, what, st.TransactionsAborted, ms(st.CommitLatencyP99))
}

// medianOf returns the median of f over rs.
func medianOf(rs []result, f func(result) time.Duration) time.Duration {
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// printLatencies prints the latency scenarios: each figure is the median over the runs of
// that figure.
func printLatencies(o options, latencies []scenario, results map[string][]result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\trecords\truns\trate rec/s\tsamples\tp50 ms\tp99 ms\tmax ms\tmax producer lag ms\t")
	for _, s := range latencies {
		rs := results[s.name]
		lat := func(f func(*latencyResult) time.Duration) time.Duration {
			return medianOf(rs, func(r result) time.Duration { return f(r.lat) })
		}
		rates := make([]float64, len(rs))
		samples := make([]int, len(rs))
		for i, r := range rs {
			rates[i], samples[i] = r.lat.rate, len(r.lat.samples)
		}
		slices.Sort(rates)
		slices.Sort(samples)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%d\t%s\t%s\t%s\t%s\t\n", s.name, rs[0].lat.produced, len(rs),
			rates[(len(rates)-1)/2], samples[(len(samples)-1)/2],
			ms(lat(func(l *latencyResult) time.Duration { return l.quantile(0.50) })),
			ms(lat(func(l *latencyResult) time.Duration { return l.quantile(0.99) })),
			ms(lat(func(l *latencyResult) time.Duration { return l.samples[len(l.samples)-1] })),
			ms(lat(func(l *latencyResult) time.Duration { return l.lagMax })))
	}
	tw.Flush()
	fmt.Printf("latency: %d records/s (a batch every 10ms, timestamped when produced) for %v into empty topics once the app runs\n", o.rate, o.latencyFor)
	fmt.Printf("with every task; per output record read by a read_committed consumer: time read - record timestamp (the count\n")
	fmt.Printf("keeps the input's timestamp; Kafka timestamps are whole milliseconds, so figures may be up to 1 ms high).\n")
	fmt.Printf("Outputs of inputs of the first %v are left out; every figure is the median over the runs; producer lag: how\n", o.latencyWarmup)
	fmt.Printf("late the producer's batches were against the schedule at worst (one 10ms tick is normal).\n\n")
}

// printStats prints the commit figures (App.Stats when Run returned) of the stateful
// scenarios: of the median run, except for the aborted transactions, summed over all runs.
func printStats(records int, withStats []scenario, results map[string][]result, sums map[string]summary) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "commits\tguarantee\tcommits\taborted (all runs)\trecords/commit\tcommit avg ms\tcommit p99 ms\tcommit max ms\t")
	for _, s := range withStats {
		rs := results[s.name]
		m := sums[s.name].median
		if s.latency {
			// the run with the median p99 latency
			p99 := medianOf(rs, func(r result) time.Duration { return r.lat.quantile(0.99) })
			for _, r := range rs {
				if r.lat.quantile(0.99) == p99 {
					m = r
					break
				}
			}
		}
		if m.stats == nil {
			continue
		}
		var aborted int64
		for _, r := range rs {
			if r.stats != nil {
				aborted += r.stats.TransactionsAborted
			}
		}
		st := m.stats
		g := kstream.AtLeastOnce
		if st.ExactlyOnce {
			g = kstream.ExactlyOnce
		}
		in := m.outRecords
		if s.finalWindows {
			in = int64(records) // the output is the closed windows, not one per input record
		}
		perCommit := "-"
		if st.Commits > 0 {
			perCommit = fmt.Sprintf("%.0f", float64(in)/float64(st.Commits))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", s.name, g, st.Commits, aborted, perCommit,
			ms(st.CommitLatencyAvg), ms(st.CommitLatencyP99), ms(st.CommitLatencyMax))
	}
	tw.Flush()
	fmt.Println("commits: App.Stats of the median run (latency-*: the run with the median p99) when Run returned, the final commit at")
	fmt.Println("shutdown included (under exactly-once: transactions committed); aborted: summed over all runs, 0 expected in a clean")
	fmt.Println("run; records/commit: input records / commits; commit p99 over the last 1024 commits.")
	fmt.Println()
}

// awaitStop waits for an app's Run, whose context was just cancelled, to return (done
// receives its result): an error if it failed other than by the cancellation, or if it
// did not return within a minute.
func awaitStop(done <-chan error) error {
	select {
	case rerr := <-done:
		if rerr != nil && !errors.Is(rerr, context.Canceled) {
			return fmt.Errorf("run returned an error at shutdown: %w", rerr)
		}
		return nil
	case <-time.After(time.Minute):
		return errors.New("did not stop within 1 minute of cancelling its context")
	}
}
