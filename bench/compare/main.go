// Command compare runs go run ./bench's scenarios side by side on a real Apache Kafka
// broker with three contestants, each in its own process: a raw franz-go loop, kstream and
// Kafka Streams 4.4 (Java, bench/java). It runs them round-robin for -rounds rounds with a
// fresh application id and output topic per run and prints, per scenario, the median
// records/s, CPU seconds and peak RSS of each contestant and the paired ratios of kstream to
// the others. See the section "Side by side with Kafka Streams (Java)" of bench/README.md.
//
//	go run ./bench/compare [-records 1000000] [-rounds 5] [-scenarios passthrough,...] [-brokers host:port]
//
// Without -brokers it starts a broker with testing/kafka/kafka.sh on -port and
// -controller-port (19692 and 19693) with its cache in -kafka-cache, and stops it at the end.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scenario is one of the compared pipelines.
type scenario struct {
	name string
	// countKeyed: the input has go run ./bench's count keys (countKey) and the output is a
	// count per key.
	countKeyed bool
	// latency: the contestant runs before its input is produced, at -rate records/s, and
	// the driver measures each record's end-to-end latency (latency.go) instead of the
	// time to process a filled input.
	latency bool
	// commit is the commit interval of every contestant; 0: commitInterval.
	commit time.Duration
}

// scenarios are the compared pipelines, in the order they run.
var scenarios = []scenario{
	{name: "passthrough"},
	{name: "filter-mapvalues"},
	{name: "count", countKeyed: true},
	{name: "count-cache", countKeyed: true},
	{name: "count-eos", countKeyed: true},
	// count at-least-once with the record cache off and a producer that does not linger
	// (kstream: Config.Linger = NoLinger, Java: linger.ms=0, raw: linger 0), as go run
	// ./bench's latency-count.
	{name: "latency-count", countKeyed: true, latency: true},
	// count-eos with 20 ms commits and a producer that does not linger, as go run ./bench's
	// latency-eos-20ms.
	{name: "latency-eos-20ms", countKeyed: true, latency: true, commit: 20 * time.Millisecond},
}

// interval is the commit interval of s's contestants.
func (s scenario) interval() time.Duration {
	if s.commit > 0 {
		return s.commit
	}
	return commitInterval
}

// allContestants are the contestants, in the order of the first round.
// kstream-memlimit is kstream with Config.GoMemoryLimit (-kstream-memlimit-headroom sets its
// headroom); not run unless named in -contestants.
var allContestants = []string{"raw", "kstream", "java", "kstream-memlimit"}

// options are the driver's flags.
type options struct {
	brokers        string
	records        int
	valueSize      int
	partitions     int
	keys           int
	rounds         int
	scenarios      string
	contestants    string
	port           int
	controllerPort int
	kafkaCache     string
	timeout        time.Duration
	java           string
	javaOpts       string
	javaProps      string
	verify         bool
	keepLogs       bool
	memtrace       string
	memLimit       string        // -kstream-memlimit: Config.GoMemoryLimit of the kstream contestant
	memHeadroom    int           // -kstream-memlimit-headroom, MiB
	blocking       bool          // -kstream-blocking-commits: Config.BlockingCommits of the kstream contestants
	rate           int           // latency scenarios: input records/s
	latencyFor     time.Duration // latency scenarios: how long the input is produced
	latencyWarmup  time.Duration // latency scenarios: outputs of inputs of this first part are not measured
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		a, err := parseChildFlags(os.Args[2], os.Args[3:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "ERROR", err)
			os.Exit(2)
		}
		os.Exit(childMain(a))
	}
	var o options
	flag.StringVar(&o.brokers, "brokers", "", "use these brokers (comma-separated) instead of starting one with testing/kafka/kafka.sh")
	flag.IntVar(&o.records, "records", 1_000_000, "input records per scenario")
	flag.IntVar(&o.valueSize, "value-size", 100, "value size in bytes")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the input and output topics")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct keys of the count scenarios (at most 100000)")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds: each runs every contestant once")
	flag.StringVar(&o.scenarios, "scenarios", "passthrough,filter-mapvalues,count,count-cache,count-eos", "scenarios to run, comma-separated (latency-count and latency-eos-20ms run only when named)")
	flag.StringVar(&o.contestants, "contestants", "raw,kstream,java", "contestants, comma-separated")
	flag.IntVar(&o.port, "port", 19692, "PLAINTEXT port of the broker this starts")
	flag.IntVar(&o.controllerPort, "controller-port", 19693, "controller port of the broker this starts")
	flag.StringVar(&o.kafkaCache, "kafka-cache", defaultKafkaCache(), "KSTREAM_KAFKA_CACHE of the broker this starts (jars, data, log)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on a run after this long")
	flag.StringVar(&o.java, "java", "java", "the java binary of the Java contestant")
	flag.StringVar(&o.javaOpts, "java-opts", "", "JVM options of the Java contestant, space-separated (default: the JVM's defaults)")
	flag.StringVar(&o.javaProps, "java-props", "", "extra Kafka Streams properties of the Java contestant, k=v,k=v")
	flag.BoolVar(&o.verify, "verify", true, "read every run's output after it (untimed) and check its records and final counts")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the contestants' stderr logs even if every run succeeded")
	flag.StringVar(&o.memtrace, "memtrace", "", "diagnostic: the Go contestants sample their memory, print its breakdown at the peak to their log and write heap profiles to this directory (not for the figures)")
	flag.StringVar(&o.memLimit, "kstream-memlimit", "off", "Config.GoMemoryLimit of the kstream contestant: off, from-budgets or override (the kstream-memlimit contestant has from-budgets)")
	flag.BoolVar(&o.blocking, "kstream-blocking-commits", false, "Config.BlockingCommits of the kstream contestants (commits stop the tasks until they are over, as Kafka Streams' do)")
	flag.IntVar(&o.memHeadroom, "kstream-memlimit-headroom", 0, "Config.GoMemoryLimitHeadroom of the kstream and kstream-memlimit contestants in MiB (0: the default)")
	flag.IntVar(&o.rate, "rate", 10000, "latency scenarios: input records/s (a batch every 10 ms)")
	flag.DurationVar(&o.latencyFor, "latency-for", 10*time.Second, "latency scenarios: how long the input is produced")
	flag.DurationVar(&o.latencyWarmup, "latency-warmup", 2*time.Second, "latency scenarios: outputs of inputs produced in this first part are not measured")
	flag.Parse()
	if err := drive(o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// defaultKafkaCache is a cache directory of its own, so that the broker this starts never
// touches the one of testing/kafka/.cache (another broker may be running from it).
func defaultKafkaCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "kstream-compare", "kafka")
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// selected returns the scenarios and contestants named by o.
func selected(o options) ([]scenario, []string, error) {
	var ss []scenario
	for _, name := range splitList(o.scenarios) {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
		if i < 0 {
			return nil, nil, fmt.Errorf("unknown scenario %q", name)
		}
		ss = append(ss, scenarios[i])
	}
	cs := splitList(o.contestants)
	for _, c := range cs {
		if !slices.Contains(allContestants, c) {
			return nil, nil, fmt.Errorf("unknown contestant %q (raw, kstream, java, kstream-memlimit)", c)
		}
	}
	if len(ss) == 0 || len(cs) == 0 {
		return nil, nil, errors.New("no scenario or no contestant selected")
	}
	return ss, cs, nil
}

// drive runs the comparison.
func drive(o options) (err error) {
	ss, cs, err := selected(o)
	if err != nil {
		return err
	}
	if o.keys < 1 || o.keys > 100_000 || o.records < 1 || o.rounds < 1 || o.partitions < 1 {
		return errors.New("-keys must be 1..100000, -records, -rounds and -partitions positive")
	}
	if o.rate < 100 || o.latencyWarmup < 0 || o.latencyFor <= o.latencyWarmup {
		return errors.New("-rate must be at least 100 and -latency-for longer than -latency-warmup")
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	root, err := repoRoot()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable (the Go contestants' binary): %w", err)
	}
	var javaCP string
	if slices.Contains(cs, "java") {
		if javaCP, err = buildJava(ctx, filepath.Join(root, "bench", "java")); err != nil {
			return err
		}
	}

	brokers := splitList(o.brokers)
	if len(brokers) == 0 {
		b := &broker{script: filepath.Join(root, "testing", "kafka", "kafka.sh"), port: o.port, controllerPort: o.controllerPort, cache: o.kafkaCache}
		if err := b.start(ctx); err != nil {
			return err
		}
		defer func() {
			if serr := b.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		brokers = []string{fmt.Sprintf("127.0.0.1:%d", o.port)}
	}

	k, err := newAdmin(brokers)
	if err != nil {
		return err
	}
	defer k.close()
	logs, err := os.MkdirTemp("", "kstream-compare-logs-")
	if err != nil {
		return fmt.Errorf("creating the log directory: %w", err)
	}
	failed := false
	defer func() {
		if failed || o.keepLogs {
			fmt.Fprintf(os.Stderr, "compare: the contestants' logs are in %s\n", logs)
		} else {
			os.RemoveAll(logs)
		}
	}()

	d := &driver{o: o, k: k, brokers: brokers, self: self, javaCP: javaCP, logs: logs}
	nonce := time.Now().Format("150405")
	fmt.Printf("compare: %d records of %d B, %d partitions, %d count keys, %d rounds, commit interval %v, brokers %s\n",
		o.records, o.valueSize, o.partitions, o.keys, o.rounds, commitInterval, strings.Join(brokers, ","))
	for _, s := range ss {
		runs, err := d.scenario(ctx, s, cs, nonce)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
		for _, r := range runs {
			failed = failed || r.err != nil
		}
		if s.latency {
			title := fmt.Sprintf("== %s: %d records/s for %v after the contestant runs, commit interval %v, latencies of the inputs after the first %v, %d rounds (medians of the successful runs) ==",
				s.name, o.rate, o.latencyFor, s.interval(), o.latencyWarmup, o.rounds)
			printLatencyTable(os.Stdout, title, cs, runs)
			continue
		}
		title := fmt.Sprintf("== %s: %d records, %d rounds (medians of the successful runs) ==", s.name, o.records, o.rounds)
		printTable(os.Stdout, title, o.records, cs, runs)
	}
	return nil
}

// driver holds what every run needs.
type driver struct {
	o       options
	k       *admin
	brokers []string
	self    string // this executable: the Go contestants
	javaCP  string // the Java contestant's class path
	logs    string // directory of the contestants' stderr logs
}

// scenario produces the input of s once and runs the contestants cs round-robin on it, each
// round starting with the next contestant.
func (d *driver) scenario(ctx context.Context, s scenario, cs []string, nonce string) ([]run, error) {
	var in string
	var input input
	if s.latency {
		fmt.Printf("\n%s: each run produces its own input\n", s.name)
	} else {
		in = fmt.Sprintf("compare-%s-%s-in", s.name, nonce)
		if err := d.k.createTopics(ctx, int32(d.o.partitions), in); err != nil {
			return nil, err
		}
		defer func() {
			if err := d.k.deleteTopics(context.WithoutCancel(ctx), []string{in}); err != nil {
				fmt.Fprintln(os.Stderr, "compare:", err)
			}
		}()
		t0 := time.Now()
		var err error
		if input, err = d.k.fill(ctx, in, d.o, s.countKeyed); err != nil {
			return nil, err
		}
		fmt.Printf("\n%s: input %s filled in %.1f s\n", s.name, in, time.Since(t0).Seconds())
	}
	var runs []run
	for round := 1; round <= d.o.rounds; round++ {
		for i := range cs {
			c := cs[(i+round-1)%len(cs)]
			id := fmt.Sprintf("compare-%s-%s-%s-r%d", s.name, nonce, c, round)
			runIn := in
			if s.latency {
				runIn = id + "-in" // deleted with the run's topics ("<id>-...")
			}
			r := d.runOne(ctx, s, c, runIn, id, input)
			r.round = round
			if ctx.Err() != nil {
				return runs, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			runs = append(runs, r)
			status := "ok"
			if r.err != nil {
				status = "FAILED: " + r.err.Error()
			}
			if s.latency {
				fmt.Printf("  round %d %-8s %8.2f s (READY at %5s s) %s %7.2f CPU s %6d MiB RSS %10s out  %s\n",
					round, c, r.wall, fixed(r.runningOrNaN(), 2), r.lat, r.cpu, r.rssKiB/1024, group(float64(r.out)), status)
				continue
			}
			fmt.Printf("  round %d %-8s %8.2f s (RUNNING at %5s s) %10s records/s %7.2f CPU s %6d MiB RSS %10s out  %s\n",
				round, c, r.wall, fixed(r.runningOrNaN(), 2), group(r.recordsPerSec(d.o.records)), r.cpu, r.rssKiB/1024, group(float64(r.out)), status)
		}
	}
	return runs, nil
}

// runOne runs contestant c on input topic in with application id / group id and a fresh
// output topic "<id>-out", measures it, verifies its output and deletes its topics.
func (d *driver) runOne(ctx context.Context, s scenario, c, in, id string, input input) run {
	r := run{contestant: c, out: -1}
	out := id + "-out"
	cleanup := context.WithoutCancel(ctx)
	defer func() {
		if err := d.k.deleteTopics(cleanup, []string{out}, id); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
		}
	}()
	topics := []string{out}
	if s.latency {
		topics = append(topics, in)
	}
	if r.err = d.k.createTopics(ctx, int32(d.o.partitions), topics...); r.err != nil {
		return r
	}
	stateDir, err := os.MkdirTemp("", "kstream-compare-state-")
	if err != nil {
		r.err = fmt.Errorf("creating a state directory: %w", err)
		return r
	}
	defer os.RemoveAll(stateDir)

	var cmd *exec.Cmd
	switch c {
	case "java":
		args := strings.Fields(d.o.javaOpts)
		args = append(args, "-cp", d.javaCP, "kstreambench.Main", s.name,
			"--brokers", strings.Join(d.brokers, ","), "--in", in, "--out", out, "--app-id", id,
			"--state-dir", stateDir, "--timeout-s", fmt.Sprint(int(d.o.timeout.Seconds())),
			"--commit-ms", fmt.Sprint(s.interval().Milliseconds()))
		if s.latency {
			args = append(args, "--serve", "1")
		}
		for _, p := range splitList(d.o.javaProps) {
			args = append(args, "--prop", p)
		}
		cmd = exec.CommandContext(ctx, d.o.java, args...)
	default:
		child, memLimit := c, d.o.memLimit
		if c == "kstream-memlimit" {
			child, memLimit = "kstream", "from-budgets"
		}
		cmd = exec.CommandContext(ctx, d.self, "-child", child, "-scenario", s.name,
			"-brokers", strings.Join(d.brokers, ","), "-in", in, "-out", out, "-group", id,
			"-state-dir", stateDir, "-timeout", d.o.timeout.String(), "-commit-interval", s.interval().String())
		if s.latency {
			cmd.Args = append(cmd.Args, "-serve", "-partitions", fmt.Sprint(d.o.partitions))
		}
		if d.o.memtrace != "" {
			cmd.Args = append(cmd.Args, "-memtrace", d.o.memtrace)
		}
		if d.o.blocking {
			cmd.Args = append(cmd.Args, "-blocking-commits")
		}
		if child == "kstream" && memLimit != "off" {
			cmd.Args = append(cmd.Args, "-memlimit", memLimit, "-memlimit-headroom", fmt.Sprint(d.o.memHeadroom))
		}
	}
	logPath := filepath.Join(d.logs, id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		r.err = fmt.Errorf("creating %s: %w", logPath, err)
		return r
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	cmd.WaitDelay = 10 * time.Second
	if s.latency {
		d.runLatency(ctx, s, c, in, out, cmd, logFile, logPath, &r)
		return r
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.err = fmt.Errorf("piping the stdout of %s: %w", c, err)
		return r
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.err = fmt.Errorf("starting %s: %w", c, err)
		return r
	}
	kill := time.AfterFunc(d.o.timeout+time.Minute, func() { _ = cmd.Process.Kill() })
	defer kill.Stop()
	watch := watchPeakRSS(cmd.Process.Pid)
	var done time.Duration
	var reported int64 // the VmHWM the process printed just before exiting
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "RESULT ") && done == 0 {
			done = time.Since(start)
			r.running = resultField(line, "running_ms") / 1000
		}
		if strings.HasPrefix(line, "PEAK ") {
			reported = int64(resultField(line, "vmhwm_kib"))
		}
		fmt.Fprintln(logFile, "stdout:", line)
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	r.rssKiB = max(watch(), reported)
	if st := cmd.ProcessState; st != nil {
		r.cpu = (st.UserTime() + st.SystemTime()).Seconds()
	}
	r.wall = done.Seconds()
	switch {
	case werr != nil:
		r.err = fmt.Errorf("%s exited: %w (log: %s)", c, werr, logPath)
		return r
	case done == 0:
		r.err = fmt.Errorf("%s printed no RESULT line (log: %s)", c, logPath)
		return r
	}
	if d.o.verify {
		r.out, r.err = d.k.verify(ctx, s, out, input)
	}
	return r
}

// watchPeakRSS samples the VmHWM of process pid every 50 ms until the returned function is
// called, which returns the largest value seen. The contestants print their own VmHWM just
// before they exit; this covers a contestant that dies first. (The rusage ru_maxrss of a
// child is no use here: Linux carries the forking parent's peak RSS into the child at exec,
// so every child would show at least the driver's peak.)
func watchPeakRSS(pid int) func() int64 {
	stop := make(chan struct{})
	res := make(chan int64, 1)
	status := fmt.Sprintf("/proc/%d/status", pid)
	go func() {
		var peak int64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib, ok := peakRSSKiB(status); ok {
				peak = max(peak, kib)
			}
			select {
			case <-stop:
				res <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-res
	}
}

// resultField is the number after "name=" in a RESULT line, -1000 if absent or not a number.
func resultField(line, name string) float64 {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return n
			}
		}
	}
	return -1000
}

// repoRoot finds the module root (the directory with go.mod and testing/kafka/kafka.sh)
// from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "testing", "kafka", "kafka.sh")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the kstream repository: no testing/kafka/kafka.sh found above the working directory")
		}
		dir = parent
	}
}

// buildJava builds bench/java with Maven (offline first, then online) when its pom or
// sources are newer than the last build, and returns the class path of kstreambench.Main.
func buildJava(ctx context.Context, dir string) (string, error) {
	cp := filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	stamp := filepath.Join(dir, "target", ".built")
	if st, err := os.Stat(stamp); err == nil && !newerThan(dir, st.ModTime()) {
		return cp, nil
	}
	fmt.Fprintln(os.Stderr, "compare: building bench/java with Maven")
	base := []string{"-q", "-B", "-Dstyle.color=never", "-f", filepath.Join(dir, "pom.xml"), "compile", "dependency:copy-dependencies"}
	var out []byte
	var err error
	for _, offline := range []bool{true, false} {
		args := base
		if offline {
			args = append([]string{"-o"}, base...)
		}
		out, err = exec.CommandContext(ctx, "mvn", args...).CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("building bench/java with Maven: %w\n%s", err, out)
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", stamp, err)
	}
	return cp, nil
}

// newerThan reports whether dir's pom.xml or a file under its src was modified after t.
func newerThan(dir string, t time.Time) bool {
	newer := false
	if info, err := os.Stat(filepath.Join(dir, "pom.xml")); err == nil && info.ModTime().After(t) {
		newer = true
	}
	_ = filepath.Walk(filepath.Join(dir, "src"), func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.ModTime().After(t) {
			newer = true
		}
		return nil
	})
	return newer
}

// broker is a Kafka broker run by testing/kafka/kafka.sh with its own ports and cache.
type broker struct {
	script               string
	port, controllerPort int
	cache                string
}

func (b *broker) command(ctx context.Context, verb string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", b.script, verb)
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("KSTREAM_KAFKA_PORT=%d", b.port),
		fmt.Sprintf("KSTREAM_KAFKA_CONTROLLER_PORT=%d", b.controllerPort),
		"KSTREAM_KAFKA_CACHE="+b.cache)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	return cmd
}

// start starts the broker (kafka.sh start: fresh storage) and waits until it is ready.
func (b *broker) start(ctx context.Context) error {
	if err := os.MkdirAll(b.cache, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", b.cache, err)
	}
	if err := b.command(ctx, "start").Run(); err != nil {
		_ = b.stop() // a half-started broker
		return fmt.Errorf("starting the broker on port %d (kafka.sh start): %w", b.port, err)
	}
	return nil
}

// stop stops the broker by the PID kafka.sh recorded (kafka.sh stop); it is safe to repeat.
func (b *broker) stop() error {
	if err := b.command(context.Background(), "stop").Run(); err != nil {
		return fmt.Errorf("stopping the broker on port %d (kafka.sh stop): %w", b.port, err)
	}
	return nil
}
