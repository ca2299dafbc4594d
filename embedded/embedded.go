// Package embedded runs an in-process, single-node Kafka-protocol broker for
// demos, tests and local development.
//
// The broker is built on kfake (github.com/twmb/franz-go/pkg/kfake). It speaks
// the real Kafka wire protocol over TCP on 127.0.0.1, so any Kafka client
// (franz-go, sarama, librdkafka/kcat, ...) can use it, and it supports produce
// and fetch, consumer groups, transactions, compaction and retention. Apache
// Kafka's own command-line tools (kafka-topics, kafka-consumer-groups,
// kafka-get-offsets, the console producer and consumer,
// kafka-streams-application-reset) work against it: where kfake's answers
// lack what the Java admin client needs, the broker amends them (see
// docs/dev-broker.md in the repository). It is
// not a replacement for a production cluster: there is one broker, no
// replication, and durability is best effort.
//
// This package owns the broker's lifecycle only: [Start] builds it from
// [Option]s, [Broker.Close] stops it, and [FromEnv] lets examples run either
// against a real cluster named by the KSTREAM_BROKERS environment variable or
// against a fresh embedded broker.
//
// By default the broker mirrors a production cluster in the ways that matter
// to applications: topics are not created automatically ([AutoCreateTopics]
// turns that on) and auto-created topics get one partition ([Partitions]
// changes that). Unlike a production cluster, consumer groups accept session
// timeouts down to 100ms so that tests can detect dead members quickly
// ([GroupMinSessionTimeout] changes that). Data lives in memory unless
// [DataDir] names a directory, in which case topics, records, committed
// offsets and transactional state survive a Close and a later Start with the
// same directory, on the same or a different port.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBrokers is the environment variable [FromEnv] reads: a comma-separated
// list of host:port seed brokers of an existing cluster.
const EnvBrokers = "KSTREAM_BROKERS"

// Defaults applied by [Start] when the corresponding option is not given.
const (
	// DefaultPartitions is the partition count of auto-created topics and of
	// topics seeded with a non-positive partition count. It matches Kafka's
	// num.partitions default.
	DefaultPartitions = 1

	// DefaultGroupMinSessionTimeout is the smallest consumer group session
	// timeout the broker accepts. Kafka's default is 6s; the embedded broker
	// allows much shorter timeouts so tests can run fast.
	DefaultGroupMinSessionTimeout = 100 * time.Millisecond
)

// closeTimeout bounds how long [Broker.Close] waits for client connections
// to be torn down after the broker stopped.
const closeTimeout = 10 * time.Second

// ensureTopicsTimeout bounds the topic creation [Start] performs when it
// reopens a data directory.
const ensureTopicsTimeout = 10 * time.Second

// ErrClosed is returned by [Broker] methods called after [Broker.Close].
var ErrClosed = errors.New("embedded: broker is closed")

// Option configures [Start].
type Option func(*config)

type seedTopics struct {
	partitions int32
	names      []string
}

type config struct {
	port          int
	dataDir       string
	partitions    int
	autoCreate    bool
	topics        []seedTopics
	logger        *slog.Logger
	minSession    time.Duration
	brokerConfigs map[string]string
	registry      bool // SchemaRegistry
	registryPort  int
}

// Port sets the TCP port the broker listens on, on 127.0.0.1. Zero, the
// default, picks a free port; read it back with [Broker.Addr].
func Port(p int) Option {
	return func(c *config) { c.port = p }
}

// DataDir makes the broker persist its state (topics, records, committed
// offsets, producer and transaction state) under dir, creating it if needed,
// and reload that state on Start. The empty string, the default, keeps
// everything in memory. Only one broker at a time may use a directory.
//
// Writes are not fsynced per record: data survives Close and process crashes
// (it is in the OS page cache) but not necessarily power loss.
func DataDir(dir string) Option {
	return func(c *config) { c.dataDir = dir }
}

// Partitions sets the partition count of auto-created topics and of topics
// seeded by [Topics] with a non-positive count. The default is
// [DefaultPartitions].
func Partitions(n int) Option {
	return func(c *config) { c.partitions = n }
}

// AutoCreateTopics sets whether a client's metadata request for an unknown
// topic creates it, as Kafka's auto.create.topics.enable does. The default is
// false, like a well-run production cluster, so that applications which
// forget to create their topics fail in tests too.
func AutoCreateTopics(enabled bool) Option {
	return func(c *config) { c.autoCreate = enabled }
}

// Topics creates the named topics with the given partition count when the
// broker starts (a non-positive count means the [Partitions] default). It
// may be given several times. Topics that already exist, for instance in a
// reopened [DataDir], are left as they are, partition count included.
func Topics(partitions int32, names ...string) Option {
	names = append([]string(nil), names...)
	return func(c *config) { c.topics = append(c.topics, seedTopics{partitions, names}) }
}

// Logger sends the broker's internal log messages to l, at the levels kfake
// reports them (errors, warnings, group membership changes at info, request
// details at debug), with the attribute component=kfake. The default
// discards them.
func Logger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// GroupMinSessionTimeout sets the smallest session timeout a classic consumer
// group member may ask for (Kafka's group.min.session.timeout.ms). The
// default is [DefaultGroupMinSessionTimeout].
func GroupMinSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.minSession = d }
}

// BrokerConfigs sets broker-level configuration values, as a Kafka
// server.properties would, for the keys kfake understands, for example
// "group.consumer.heartbeat.interval.ms" (KIP-848 heartbeat interval, default
// 5000), "log.cleaner.backoff.ms" (how often compaction and retention run,
// default one hour) or "message.max.bytes". An empty value resets a key to
// its default. It may be given several times; later values win.
//
// With a [DataDir], broker configs are persisted like everything else
// (including changes made by clients through AlterConfigs): on restart the
// persisted values apply, and the keys given here override them.
func BrokerConfigs(configs map[string]string) Option {
	cp := make(map[string]string, len(configs))
	for k, v := range configs {
		cp[k] = v
	}
	return func(c *config) {
		if c.brokerConfigs == nil {
			c.brokerConfigs = make(map[string]string, len(cp))
		}
		for k, v := range cp {
			c.brokerConfigs[k] = v
		}
	}
}

func (c *config) validate() error {
	if c.port < 0 || c.port > 65535 {
		return fmt.Errorf("embedded: invalid port %d", c.port)
	}
	if c.partitions < 1 {
		return fmt.Errorf("embedded: invalid default partition count %d, must be at least 1", c.partitions)
	}
	if c.minSession <= 0 {
		return fmt.Errorf("embedded: invalid group min session timeout %v, must be positive", c.minSession)
	}
	for _, st := range c.topics {
		for _, name := range st.names {
			if name == "" {
				return errors.New("embedded: empty topic name")
			}
		}
	}
	return nil
}

// Broker is a running embedded broker. Its methods are safe for concurrent
// use.
type Broker struct {
	cluster *kfake.Cluster
	conns   *connTracker
	addr    string
	dataDir string // absolute, "" when in memory

	registry *registry // SchemaRegistry; nil without

	mu     sync.RWMutex // held for reading by calls into the cluster's run loop
	closed bool
}

// Start starts a single-node broker listening on 127.0.0.1 and returns once
// it accepts connections. The caller must call [Broker.Close].
func Start(opts ...Option) (*Broker, error) {
	cfg := config{
		partitions: DefaultPartitions,
		minSession: DefaultGroupMinSessionTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}

	b := &Broker{conns: newConnTracker()}
	if cfg.dataDir != "" {
		abs, err := filepath.Abs(cfg.dataDir)
		if err != nil {
			return nil, fmt.Errorf("embedded: data dir %q: %w", cfg.dataDir, err)
		}
		if err := claimDataDir(abs); err != nil {
			return nil, err
		}
		b.dataDir = abs
	}

	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(cfg.port),
		kfake.ListenFn(b.conns.listen),
		kfake.DefaultNumPartitions(cfg.partitions),
		kfake.GroupMinSessionTimeout(cfg.minSession),
	}
	if b.dataDir != "" {
		kopts = append(kopts, kfake.DataDir(b.dataDir))
	}
	if cfg.autoCreate {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	for _, st := range cfg.topics {
		kopts = append(kopts, kfake.SeedTopics(st.partitions, st.names...))
	}
	if cfg.logger != nil {
		kopts = append(kopts, kfake.WithLogger(slogAdapter{cfg.logger}))
	}
	if len(cfg.brokerConfigs) > 0 {
		kopts = append(kopts, kfake.BrokerConfigs(cfg.brokerConfigs))
	}

	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		releaseDataDir(b.dataDir)
		return nil, fmt.Errorf("embedded: start broker on 127.0.0.1:%d: %w", cfg.port, err)
	}
	b.cluster = cluster
	installRequestFixes(cluster)
	b.addr = b.conns.firstAddr()
	b.conns.fx.setAddr(b.addr)
	b.conns.fx.setGroupInfo(b.groupInfo)

	if cfg.registry {
		reg, err := startRegistry(cfg.registryPort)
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		b.registry = reg
	}

	// kfake applies seed topics only to a fresh data directory; when it
	// reloaded persisted state, create any seeded topic that is missing.
	if b.dataDir != "" && len(cfg.topics) > 0 {
		if err := b.ensureTopics(cfg.topics); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	return b, nil
}

func (b *Broker) ensureTopics(topics []seedTopics) error {
	ctx, cancel := context.WithTimeout(context.Background(), ensureTopicsTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return fmt.Errorf("embedded: seed topics: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, st := range topics {
		p := st.partitions
		if p < 1 {
			p = -1 // broker default
		}
		resps, err := adm.CreateTopics(ctx, p, -1, nil, st.names...)
		if err != nil {
			return fmt.Errorf("embedded: seed topics %v: %w", st.names, err)
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("embedded: seed topic %q: %w", r.Topic, r.Err)
			}
		}
	}
	return nil
}

// Addr returns the broker's address, "127.0.0.1:port".
func (b *Broker) Addr() string { return b.addr }

// Brokers returns the seed broker list to hand to a client, for example
// kgo.SeedBrokers(b.Brokers()...).
func (b *Broker) Brokers() []string { return []string{b.addr} }

// Close stops the broker: it stops listening (the port is free again when
// Close returns), drops client connections, and, with a [DataDir], writes the
// final state to disk. It waits until every client connection is closed.
// Calling Close more than once is safe; later calls do nothing and return
// nil.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var regErr error
	if b.registry != nil {
		regErr = b.registry.close()
	}
	b.conns.fx.close()
	// With a data dir, kfake's Close runs the final save on its run loop and
	// returns when it is done; without one it only signals the loop.
	b.cluster.Close()
	defer releaseDataDir(b.dataDir)
	if !b.conns.waitIdle(closeTimeout) {
		return fmt.Errorf("embedded: close: client connections still open after %v", closeTimeout)
	}
	return regErr
}

// Compact runs log compaction now on every topic with cleanup.policy=compact,
// instead of waiting for the periodic cleaner (hourly by default). It returns
// [ErrClosed] after Close.
func (b *Broker) Compact() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	b.cluster.Compact()
	return nil
}

// ApplyRetention enforces retention.ms and retention.bytes on every topic
// now, instead of waiting for the periodic cleaner. It returns [ErrClosed]
// after Close.
func (b *Broker) ApplyRetention() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	b.cluster.ApplyRetention()
	return nil
}

// groupInfo returns a snapshot of a group; false if the group does not exist or the broker
// is closed or closing. It never waits for Close: the compatibility layer calls it from
// connection goroutines that Close waits for.
func (b *Broker) groupInfo(group string) (*kfake.GroupInfo, bool) {
	if !b.mu.TryRLock() {
		return nil, false // Close holds the lock
	}
	defer b.mu.RUnlock()
	if b.closed {
		return nil, false
	}
	gi := b.cluster.GroupInfo(group)
	return gi, gi != nil
}

// Cluster returns the underlying kfake cluster, for tests that need its
// fault injection or request control hooks. Do not call its Close (use
// [Broker.Close]), and do not call it after Broker.Close: kfake methods
// that talk to the stopped cluster, such as ListenAddrs or Compact, block
// forever.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// FromEnv returns the brokers to connect to. If the KSTREAM_BROKERS
// environment variable is set, it returns the comma-separated brokers it
// lists and a stop function that does nothing; opts are ignored. Otherwise it
// starts an embedded broker with opts and returns its address and its Close.
// The caller must call stop.
func FromEnv(opts ...Option) (brokers []string, stop func() error, err error) {
	if env, ok := os.LookupEnv(EnvBrokers); ok && strings.TrimSpace(env) != "" {
		for _, s := range strings.Split(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				brokers = append(brokers, s)
			}
		}
		if len(brokers) == 0 {
			return nil, nil, fmt.Errorf("embedded: %s=%q lists no brokers", EnvBrokers, env)
		}
		return brokers, func() error { return nil }, nil
	}
	b, err := Start(opts...)
	if err != nil {
		return nil, nil, err
	}
	return b.Brokers(), b.Close, nil
}

// dataDirs holds the absolute data directories of the brokers running in
// this process. kfake does not lock its directory, and two brokers writing
// the same files corrupt them.
var dataDirs struct {
	sync.Mutex
	inUse map[string]bool
}

func claimDataDir(dir string) error {
	dataDirs.Lock()
	defer dataDirs.Unlock()
	if dataDirs.inUse[dir] {
		return fmt.Errorf("embedded: data dir %q is in use by another broker in this process", dir)
	}
	if dataDirs.inUse == nil {
		dataDirs.inUse = make(map[string]bool)
	}
	dataDirs.inUse[dir] = true
	return nil
}

func releaseDataDir(dir string) {
	if dir == "" {
		return
	}
	dataDirs.Lock()
	defer dataDirs.Unlock()
	delete(dataDirs.inUse, dir)
}

// connTracker wraps the broker's listeners so that Close can wait until
// kfake has closed every client connection it accepted.
type connTracker struct {
	mu      sync.Mutex
	lns     []*trackedListener
	open    int
	changed chan struct{} // closed and replaced whenever open or a listener changes
	fx      *fixer        // the compatibility fixes' shared state (compat.go)
}

func newConnTracker() *connTracker {
	return &connTracker{changed: make(chan struct{}), fx: new(fixer)}
}

// listen is the kfake.ListenFn.
func (t *connTracker) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	tl := &trackedListener{Listener: ln, t: t}
	t.mu.Lock()
	t.lns = append(t.lns, tl)
	t.mu.Unlock()
	return tl, nil
}

func (t *connTracker) firstAddr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lns) == 0 {
		return ""
	}
	return t.lns[0].Addr().String()
}

// notifyLocked wakes waitIdle; t.mu must be held.
func (t *connTracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// waitIdle waits until every listener is closed and no accepted connection
// is open, or until timeout; it reports whether that state was reached.
func (t *connTracker) waitIdle(timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		t.mu.Lock()
		idle := t.open == 0
		for _, l := range t.lns {
			idle = idle && l.closed
		}
		ch := t.changed
		t.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
}

type trackedListener struct {
	net.Listener
	t      *connTracker
	closed bool // guarded by t.mu
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.t.open++
	return &trackedConn{Conn: newCompatConn(c, l.t.fx), t: l.t}, nil
}

func (l *trackedListener) Close() error {
	err := l.Listener.Close()
	l.t.mu.Lock()
	if !l.closed {
		l.closed = true
		l.t.notifyLocked()
	}
	l.t.mu.Unlock()
	return err
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.t.mu.Lock()
		c.t.open--
		c.t.notifyLocked()
		c.t.mu.Unlock()
	})
	return err
}

// slogAdapter implements kfake.Logger on top of a *slog.Logger.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	case kfake.LogLevelDebug:
		lvl = slog.LevelDebug
	default:
		return
	}
	ctx := context.Background()
	if !a.l.Enabled(ctx, lvl) {
		return
	}
	a.l.Log(ctx, lvl, fmt.Sprintf(format, args...), "component", "kfake")
}
