// Command fleet is a kstream application made to be deployed: it counts the position
// reports of vehicles per vehicle id into a queryable store, and serves, on one HTTP port,
// the ops page and health probes of package ops under /ops/ and the interactive queries of
// package query under /v1/. One process is one instance; deploy/kubernetes runs it as a
// StatefulSet (see docs/kubernetes.md).
//
// It takes its settings from environment variables (see [configFromEnv]); with none set it
// runs against the dev broker on 127.0.0.1:9092 and serves on :8080:
//
//	go run ./cmd/kstream dev &
//	FLEET_DEMO_RATE=50 go run ./examples/fleet
//	curl 'http://127.0.0.1:8080/v1/stores/positions-per-vehicle/keys?key=vehicle-007'
//	curl 'http://127.0.0.1:8080/v1/metadata'
//	curl 'http://127.0.0.1:8080/ops/healthz/ready'
//
// and the ops page is at http://127.0.0.1:8080/ops/. A second local instance needs its own
// port and state directory:
//
//	KSTREAM_HTTP_ADDR=127.0.0.1:8081 KSTREAM_STATE_DIR=/tmp/fleet-2 go run ./examples/fleet
//
// SIGTERM or an interrupt stops it gracefully: the instance commits what it processed and
// closes its stores (within KSTREAM_CLOSE_TIMEOUT), then the HTTP server shuts down.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/ops"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The HTTP routes. The ops handler is mounted under opsPrefix; the Kubernetes probes use
// livePath and readyPath (deploy/kubernetes/statefulset.yaml, checked by main_test.go).
const (
	opsPrefix = "/ops"
	livePath  = opsPrefix + "/healthz/live"
	readyPath = opsPrefix + "/healthz/ready"
)

// storeName is the queryable store of the counts.
const storeName = "positions-per-vehicle"

// httpShutdownTimeout bounds the HTTP server's shutdown once the instance has stopped.
// A stop takes at most Config.CloseTimeout plus this (plus closing the stores): the pod's
// termination grace period must be longer.
const httpShutdownTimeout = 5 * time.Second

// topicTimeout bounds the creation of the input topic at start.
const topicTimeout = time.Minute

// Defaults of the settings that kstream.Config does not default the same way.
const (
	defaultBrokers         = "127.0.0.1:9092" // kstream dev
	defaultApplicationID   = "fleet"
	defaultHTTPAddr        = ":8080"
	defaultCommitInterval  = time.Second // queries see a store as of its task's last commit
	defaultInputTopic      = "fleet-positions"
	defaultInputPartitions = 6
)

// settings are what the process runs with: the kstream.Config and the example's own.
type settings struct {
	// Config is the instance's kstream configuration (its Logger is set by run).
	Config kstream.Config
	// HTTPAddr is the address the HTTP server listens on, "host:port" (host optional).
	HTTPAddr string
	// InputTopic is the topic of position reports: key the vehicle id, value anything.
	InputTopic string
	// InputPartitions, when positive, creates InputTopic with that many partitions at
	// start if it does not exist (with Config.ReplicationFactor); 0 leaves it to you.
	InputPartitions int32
	// DemoRate, when positive, makes the instance write that many random position reports
	// per second to InputTopic: a load for trying the example, not for production.
	DemoRate int
	// LogLevel is the level of the JSON logs written to stderr.
	LogLevel slog.Level
}

// configFromEnv reads the settings from the environment through getenv (os.Getenv in
// main). An unset or empty variable takes its default:
//
//	KSTREAM_BROKERS               bootstrap brokers, comma-separated (127.0.0.1:9092)
//	KSTREAM_APPLICATION_ID        Config.ApplicationID (fleet)
//	KSTREAM_INSTANCE_ID           Config.InstanceID: static membership (none: dynamic)
//	KSTREAM_LEAVE_GROUP_ON_CLOSE  Config.LeaveGroupOnClose, true or false (false)
//	KSTREAM_HTTP_ADDR             where the HTTP server listens (:8080)
//	KSTREAM_APPLICATION_SERVER    Config.ApplicationServer, host:port (127.0.0.1 and the
//	                              port of KSTREAM_HTTP_ADDR, when that has no host)
//	KSTREAM_STATE_DIR             Config.StateDir (kstream's default)
//	KSTREAM_NUM_STANDBYS          Config.NumStandbys (0)
//	KSTREAM_REPLICATION_FACTOR    Config.ReplicationFactor of internal topics (the broker's)
//	KSTREAM_COMMIT_INTERVAL       Config.CommitInterval, a Go duration (1s)
//	KSTREAM_CLOSE_TIMEOUT         Config.CloseTimeout (kstream's default, 30s)
//	KSTREAM_SESSION_TIMEOUT       Config.SessionTimeout (kstream's default, 45s)
//	KSTREAM_BLOCK_CACHE_BYTES     Config.BlockCacheBytes: bytes, or with Ki, Mi, Gi (KiB...)
//	KSTREAM_MEMTABLE_BYTES        Config.MemTableBytes, the same way
//	KSTREAM_STORE_CACHE_BYTES     Config.StoreCacheBytes, the same way (negative: none)
//	KSTREAM_LOG_LEVEL             debug, info, warn or error (info)
//	FLEET_INPUT_TOPIC             the topic of position reports (fleet-positions)
//	FLEET_INPUT_PARTITIONS        create the input topic with this many partitions if it
//	                              is missing; 0: do not create it (6)
//	FLEET_DEMO_RATE               write this many random reports per second (0: none)
//
// It returns every malformed variable in one error.
func configFromEnv(getenv func(string) string) (settings, error) {
	p := envParser{getenv: getenv}
	s := settings{
		HTTPAddr:        p.str("KSTREAM_HTTP_ADDR", defaultHTTPAddr),
		InputTopic:      p.str("FLEET_INPUT_TOPIC", defaultInputTopic),
		InputPartitions: int32(p.integer("FLEET_INPUT_PARTITIONS", defaultInputPartitions, 0, 1<<20)),
		DemoRate:        int(p.integer("FLEET_DEMO_RATE", 0, 0, 1_000_000)),
		LogLevel:        p.level("KSTREAM_LOG_LEVEL"),
	}
	c := &s.Config
	c.Brokers = p.list("KSTREAM_BROKERS", defaultBrokers)
	c.ApplicationID = p.str("KSTREAM_APPLICATION_ID", defaultApplicationID)
	c.InstanceID = p.str("KSTREAM_INSTANCE_ID", "")
	c.LeaveGroupOnClose = p.boolean("KSTREAM_LEAVE_GROUP_ON_CLOSE")
	c.StateDir = p.str("KSTREAM_STATE_DIR", "")
	c.NumStandbys = int(p.integer("KSTREAM_NUM_STANDBYS", 0, 0, 100))
	c.ReplicationFactor = int16(p.integer("KSTREAM_REPLICATION_FACTOR", 0, -1, 32767))
	c.CommitInterval = p.duration("KSTREAM_COMMIT_INTERVAL", defaultCommitInterval)
	c.CloseTimeout = p.duration("KSTREAM_CLOSE_TIMEOUT", 0)
	c.SessionTimeout = p.duration("KSTREAM_SESSION_TIMEOUT", 0)
	c.BlockCacheBytes = p.bytes("KSTREAM_BLOCK_CACHE_BYTES", false)
	c.MemTableBytes = uint64(p.bytes("KSTREAM_MEMTABLE_BYTES", false))
	c.StoreCacheBytes = int(p.bytes("KSTREAM_STORE_CACHE_BYTES", true))

	_, httpPort, err := net.SplitHostPort(s.HTTPAddr)
	if err != nil {
		p.fail("KSTREAM_HTTP_ADDR", s.HTTPAddr, err)
	}
	c.ApplicationServer = p.str("KSTREAM_APPLICATION_SERVER", "")
	if c.ApplicationServer == "" && err == nil {
		c.ApplicationServer = defaultApplicationServer(s.HTTPAddr)
	}
	if c.ApplicationServer != "" {
		if err := checkHostPort(c.ApplicationServer); err != nil {
			p.fail("KSTREAM_APPLICATION_SERVER", c.ApplicationServer, err)
		}
	} else if err == nil && httpPort == "0" {
		p.fail("KSTREAM_APPLICATION_SERVER", "", errors.New("needed when KSTREAM_HTTP_ADDR picks a port (port 0)"))
	}
	if c.LeaveGroupOnClose && c.InstanceID == "" {
		p.fail("KSTREAM_LEAVE_GROUP_ON_CLOSE", "true", errors.New("only a static member (KSTREAM_INSTANCE_ID) can stay in the group; a dynamic one always leaves"))
	}
	if err := errors.Join(p.errs...); err != nil {
		return settings{}, err
	}
	return s, nil
}

// defaultApplicationServer is the address of the HTTP server for this machine: addr's host,
// or 127.0.0.1 when addr has none (or listens on every address), and addr's port. Port 0
// has no address: it returns "".
func defaultApplicationServer(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// checkHostPort checks that s is "host:port" with a host and a port from 1 to 65535.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}

// envParser reads variables through getenv and collects the errors of malformed ones.
type envParser struct {
	getenv func(string) string
	errs   []error
}

func (p *envParser) fail(name, value string, err error) {
	p.errs = append(p.errs, fmt.Errorf("%s=%q: %w", name, value, err))
}

// str returns the variable with spaces trimmed, or def when it is empty.
func (p *envParser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

// list returns the comma-separated elements of the variable (or of def), without empty ones.
func (p *envParser) list(name, def string) []string {
	var out []string
	for e := range strings.SplitSeq(p.str(name, def), ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (p *envParser) integer(name string, def, lo, hi int64) int64 {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && (n < lo || n > hi) {
		err = fmt.Errorf("out of range [%d, %d]", lo, hi)
	}
	if err != nil {
		p.fail(name, v, err)
		return def
	}
	return n
}

func (p *envParser) boolean(name string) bool {
	v := p.str(name, "")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, err)
	}
	return b
}

// duration parses a positive Go duration ("30s", "1m30s").
func (p *envParser) duration(name string, def time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = errors.New("not a positive duration")
	}
	if err != nil {
		p.fail(name, v, err)
		return def
	}
	return d
}

// byteUnits are the suffixes of byte sizes: Kubernetes' (Mi) and GOMEMLIMIT's (MiB).
var byteUnits = []struct {
	suffix string
	shift  uint
}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"B", 0}}

// bytes parses a size in bytes, "67108864", "64Mi" or "64MiB"; a negative one only when
// negative is allowed. Empty is 0, kstream's default.
func (p *envParser) bytes(name string, negative bool) int64 {
	v := p.str(name, "")
	if v == "" {
		return 0
	}
	n, err := parseBytes(v)
	if err == nil && n < 0 && !negative {
		err = errors.New("negative")
	}
	if err != nil {
		p.fail(name, v, err)
		return 0
	}
	return n
}

func parseBytes(s string) (int64, error) {
	num, shift := s, uint(0)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a size in bytes (such as 67108864, 64Mi or 64MiB): %w", err)
	}
	if n > (1<<63-1)>>shift || n < -(1<<63)>>shift {
		return 0, errors.New("too large")
	}
	return n << shift, nil
}

func (p *envParser) level(name string) slog.Level {
	v := p.str(name, "")
	var l slog.Level
	if v == "" {
		return slog.LevelInfo
	}
	if err := l.UnmarshalText([]byte(v)); err != nil {
		p.fail(name, v, err)
		return slog.LevelInfo
	}
	return l
}

// topology counts the reports of input per key (the vehicle id) into the store storeName.
func topology(input string) *kstream.Builder {
	b := kstream.NewBuilder()
	reports := kstream.Stream(b, input, serde.String(), serde.String(), kstream.Named("positions"))
	kstream.Count(reports.GroupByKey(), storeName)
	return b
}

// newHandler serves the ops handler of app under /ops/ and the query server qs under /v1/.
func newHandler(app *kstream.App, qs *query.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(opsPrefix+"/", http.StripPrefix(opsPrefix, ops.Handler(app)))
	mux.Handle("/v1/", qs)
	return mux
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := configFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet: configuration:", err)
		os.Exit(1)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: s.LogLevel}))
	ln, err := net.Listen("tcp", s.HTTPAddr)
	if err != nil {
		logger.Error("fleet: listening", "addr", s.HTTPAddr, "err", err)
		os.Exit(1)
	}
	if err := run(ctx, s, ln, logger); err != nil {
		logger.Error("fleet: stopped", "err", err)
		os.Exit(1)
	}
	logger.Info("fleet: stopped")
}

// run runs one instance with settings s, serving HTTP on ln (which it closes), until ctx
// ends (then it stops gracefully and returns nil) or the instance fails.
func run(ctx context.Context, s settings, ln net.Listener, logger *slog.Logger) error {
	defer ln.Close()
	s.Config.Logger = logger
	app, err := kstream.New(topology(s.InputTopic), s.Config)
	if err != nil {
		return fmt.Errorf("building the application: %w", err)
	}
	qs := query.NewServer(query.Config{App: app, Logger: logger})
	defer qs.CloseIdleConnections()
	// Serve before anything talks to the cluster, so that the liveness probe answers at
	// once (live, not ready) while the topic is created and the stores restore.
	hs := &http.Server{
		Handler:           newHandler(app, qs),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		// The HTTP server outlives the instance's close, so that probes and queries get
		// answers (not ready, not running) until the end.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			logger.Warn("fleet: shutting the HTTP server down", "err", err)
		}
	}()
	logger.Info("fleet: serving", "addr", ln.Addr().String(), "application_server", s.Config.ApplicationServer,
		"instance_id", s.Config.InstanceID, "state_dir", s.Config.StateDir)

	if s.InputPartitions > 0 {
		if err := ensureTopic(ctx, s); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting
			}
			return err
		}
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	if s.DemoRate > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Config.Brokers...), kgo.DefaultProduceTopic(s.InputTopic))
		if err != nil {
			return fmt.Errorf("demo producer: %w", err)
		}
		defer func() {
			stopApp() // stops produceDemo before its client closes
			cl.Close()
		}()
		go produceDemo(appCtx, cl, s.DemoRate, logger)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(appCtx) }()
	select {
	case err := <-runErr:
		if err != nil {
			return fmt.Errorf("running the application: %w", err)
		}
		return nil
	case err := <-served:
		stopApp()
		return errors.Join(fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err), <-runErr)
	}
}

// ensureTopic creates the input topic unless it exists.
func ensureTopic(ctx context.Context, s settings) error {
	ctx, cancel := context.WithTimeout(ctx, topicTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Config.Brokers...))
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", s.InputTopic, err)
	}
	defer cl.Close()
	rf := s.Config.ReplicationFactor
	if rf == 0 {
		rf = -1 // the broker's default, as kstream does for its internal topics
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, s.InputPartitions, rf, nil, s.InputTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", s.InputTopic, err)
	}
	return nil
}

// produceDemo writes rate random position reports per second, keyed by one of 100
// vehicle ids, until ctx ends.
func produceDemo(ctx context.Context, cl *kgo.Client, rate int, logger *slog.Logger) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var warned atomic.Bool
	for {
		for range rate {
			key := fmt.Sprintf("vehicle-%03d", rand.IntN(100))
			value := fmt.Sprintf("%.5f,%.5f", 48+rand.Float64(), 2+rand.Float64())
			cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil && warned.CompareAndSwap(false, true) {
					logger.Warn("fleet: demo producer (warned once)", "err", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
