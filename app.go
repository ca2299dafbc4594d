package kstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/hook"
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// App is one running instance of a topology. Create it with [New] and start it with
// [App.Run]. Its methods are safe for concurrent use.
type App struct {
	appID   string // Config.ApplicationID
	topo    *Topology
	rt      *runtime.Runtime
	counts  *runtime.OperatorCounts // what the operators dropped or lost (losses.go)
	started atomic.Bool
	state   atomic.Int32
	// runMu orders Run and CleanUp: running is set while Run runs.
	runMu   sync.Mutex
	running bool
	// memLimit is the Go memory limit Run sets (memlimit.go); nil for none.
	memLimit *goMemoryLimit
}

// ErrAlreadyRun is returned by [App.Run] when it is called a second time.
var ErrAlreadyRun = errors.New("kstream: App.Run called twice; create a new App with kstream.New")

// New builds the topology of b and checks cfg. It connects to nothing; [App.Run] does.
func New(b *Builder, cfg Config) (*App, error) {
	topo, rtopo, rc, err := compile(b, cfg)
	if err != nil {
		return nil, err
	}
	a := &App{topo: topo, appID: cfg.ApplicationID, counts: rc.OperatorCounts}
	a.memLimit = newGoMemoryLimit(cfg, rtopo, rc.Logger)
	listener := rc.OnState
	rc.OnState = func(old, new runtime.State) {
		a.state.Store(int32(new))
		if listener != nil {
			listener(old, new)
		}
	}
	rt, err := runtime.New(rtopo, rc)
	if err != nil {
		return nil, err
	}
	a.rt = rt
	return a, nil
}

func init() {
	hook.Compile = func(b, cfg any) (*runtime.Topology, runtime.Config, error) {
		builder, ok := b.(*Builder)
		if !ok {
			return nil, runtime.Config{}, fmt.Errorf("kstream: internal error: hook.Compile got %T", b)
		}
		_, rtopo, rc, err := compile(builder, cfg.(Config))
		return rtopo, rc, err
	}
}

// compile builds b and translates cfg for the runtime: the one path shared by [New] and the
// test driver, so both run the same code.
func compile(b *Builder, cfg Config) (*Topology, *runtime.Topology, runtime.Config, error) {
	topo, err := b.Build()
	if err != nil {
		return nil, nil, runtime.Config{}, err
	}
	if cfg.ApplicationID == "" {
		return nil, nil, runtime.Config{}, errors.New("kstream: Config.ApplicationID is required")
	}
	if err := cfg.OffsetReset.check(); err != nil {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.OffsetReset: %w", err)
	}
	if cfg.EnsureExplicitInternalResourceNaming {
		if err := topo.checkExplicitNames(b, cfg.ApplicationID); err != nil {
			return nil, nil, runtime.Config{}, err
		}
	}
	if cfg.UncaughtErrorPolicy < StopInstance || cfg.UncaughtErrorPolicy > RestartProcessing {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.UncaughtErrorPolicy is %v, not StopInstance, ShutdownApplication or RestartProcessing", cfg.UncaughtErrorPolicy)
	}
	if _, ok := cfg.Compression.codec(); !ok {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.Compression is %v, not one of the Compression constants", cfg.Compression)
	}
	if cfg.GroupProtocol != GroupProtocolClassic && cfg.GroupProtocol != GroupProtocolStreams {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.GroupProtocol is %v, not GroupProtocolClassic or GroupProtocolStreams", cfg.GroupProtocol)
	}
	if err := cfg.checkGoMemoryLimit(); err != nil {
		return nil, nil, runtime.Config{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handlers{deser: cfg.DeserializationErrorHandler, proc: cfg.ProcessingErrorHandler, prod: cfg.ProductionErrorHandler}
	h.ts = cfg.DefaultTimestampExtractor
	h.eos = cfg.Guarantee == ExactlyOnce
	h.profileOps = cfg.ProfileOperators
	h.counts = runtime.NewOperatorCounts()
	h.align = cfg.EventTimeAlignment
	if cfg.AsyncMaxInFlight < 0 {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.AsyncMaxInFlight is %d; it must not be negative (0: no cap)", cfg.AsyncMaxInFlight)
	}
	h.async = newAsyncShared(cfg.AsyncMaxInFlight)
	topo.async = h.async
	h.txnTimeout = cfg.TransactionTimeout
	if h.txnTimeout <= 0 {
		h.txnTimeout = 10 * time.Second // the runtime's default
	}
	caches := runtime.NewCacheBudget(cfg.StoreCacheBytes, cfg.cacheMaxBytes())
	if n := cfg.cacheMaxBytes(); n > 0 {
		h.cache = &cacheBudget{max: n, shared: caches}
	}
	if h.ts == nil {
		h.ts = FailOnInvalidTimestamp{}
	}
	for _, p := range []*ErrorHandler{&h.deser, &h.proc, &h.prod} {
		if *p == nil {
			*p = LogAndFail()
		}
	}
	rc := cfg.runtimeConfig()
	rc.OperatorCounts = h.counts
	if cfg.Metrics != nil {
		rc.Collectors = append(rc.Collectors, newAsyncCollector(h.async))
	}
	rc.Caches = caches
	for _, dh := range []struct {
		name string
		h    ErrorHandler
	}{
		{"Config.DeserializationErrorHandler", h.deser},
		{"Config.ProcessingErrorHandler", h.proc},
		{"Config.ProductionErrorHandler", h.prod},
	} {
		if d, ok := dh.h.(deadLetterTopicer); ok {
			if d.deadLetterTopic() == "" {
				return nil, nil, runtime.Config{}, fmt.Errorf("kstream: %s is DeadLetterQueue with an empty topic name", dh.name)
			}
			rc.DeadLetterTopics = append(rc.DeadLetterTopics, runtime.DeadLetterTopic{Topic: d.deadLetterTopic(), Handler: dh.name + " (DeadLetterQueue)"})
		}
	}
	for _, t := range cfg.DeadLetterTopics {
		if t == "" {
			return nil, nil, runtime.Config{}, errors.New("kstream: Config.DeadLetterTopics holds an empty topic name")
		}
		rc.DeadLetterTopics = append(rc.DeadLetterTopics, runtime.DeadLetterTopic{Topic: t, Handler: "Config.DeadLetterTopics"})
	}
	rc.OnProduceError = func(f runtime.ProduceFailure) runtime.Decision {
		if f.Operator == deadLetterOperator {
			return runtime.Decision{} // a dead-letter write that fails stops the app
		}
		resp := h.prod.HandleError(produceErrorContext(f))
		switch resp.action {
		case 1:
			return runtime.Decision{Continue: true}
		case 2:
			return runtime.Decision{Continue: true, DeadLetterTopic: resp.deadLetter}
		}
		return runtime.Decision{}
	}
	rc.DeadLetter = func(topic string, f runtime.ProduceFailure) *kgo.Record {
		ec := produceErrorContext(f)
		ec.Err = fmt.Errorf("producing to topic %q: %w", f.Record.Topic, f.Err)
		dl := deadLetterRecord(topic, ec)
		return &dl
	}
	appID := cfg.ApplicationID
	rtopo := topo.compile(appID, h, func(sub []*node, env runtime.TaskEnv, id runtime.TaskID, stores map[string]store.Backend) (runtime.Task, error) {
		return newTask(appID, h, sub, env, id, stores)
	})
	if cfg.EventTimeAlignment < 0 {
		return nil, nil, runtime.Config{}, fmt.Errorf("kstream: Config.EventTimeAlignment is %s; it must not be negative", cfg.EventTimeAlignment)
	}
	if cfg.EventTimeAlignment > 0 {
		extendAlignedRetention(rtopo, cfg.EventTimeAlignment)
	}
	return topo, rtopo, rc, nil
}

// extendAlignedRetention lengthens by extra the retention of the changelog codecs of the
// window and session stores of the sub-topologies that read a repartition topic, as their
// tasks lengthen their stores' (align.go): so that restoring keeps the windows that
// processing keeps; and the retention.ms of their changelog topics, unless
// WithChangelogConfig set it.
func extendAlignedRetention(rtopo *runtime.Topology, extra time.Duration) {
	for i := range rtopo.SubTopologies {
		st := &rtopo.SubTopologies[i]
		aligned := false
		for _, src := range st.Sources {
			aligned = aligned || (src.Internal && strings.HasSuffix(src.Topic, "-repartition"))
		}
		if !aligned {
			continue
		}
		for j := range st.Stores {
			if x, ok := st.Stores[j].Codec.(store.RetentionExtender); ok {
				if c, ok := x.WithExtraRetention(extra).(store.ChangelogCodec); ok {
					extendChangelogRetention(rtopo, st.Stores[j].Changelog, st.Stores[j].Codec.TopicConfigs(), c.TopicConfigs())
					st.Stores[j].Codec = c
				}
			}
		}
	}
}

// extendChangelogRetention sets the retention.ms of the internal topic named topic from was
// (the configs of its store's codec before the extension) to now, if it has was's.
func extendChangelogRetention(rtopo *runtime.Topology, topic string, was, now map[string]*string) {
	for i := range rtopo.InternalTopics {
		it := &rtopo.InternalTopics[i]
		if it.Name != topic || topic == "" {
			continue
		}
		cur, old, ext := it.Configs["retention.ms"], was["retention.ms"], now["retention.ms"]
		if cur != nil && old != nil && ext != nil && *cur == *old {
			it.Configs = maps.Clone(it.Configs)
			it.Configs["retention.ms"] = ext
		}
	}
}

// deadLetterOperator is the operator name of dead-letter writes.
const deadLetterOperator = "dead-letter"

func produceErrorContext(f runtime.ProduceFailure) ErrorContext {
	ec := ErrorContext{Kind: ProductionError, Operator: f.Operator, SinkTopic: f.Record.Topic, Offset: -1, Err: f.Err,
		Key: f.Record.Key, Value: f.Record.Value, Headers: fromKgoHeaders(f.Record.Headers), Timestamp: f.Record.Timestamp}
	if s := f.Source; s != nil {
		ec.Topic, ec.Partition, ec.Offset = s.Topic, s.Partition, s.Offset
		ec.Key, ec.Value, ec.Headers, ec.Timestamp = s.Key, s.Value, fromKgoHeaders(s.Headers), s.Timestamp
	}
	return ec
}

// Run connects to the cluster, creates the internal topics, joins the group and processes
// records until ctx is done or a fatal error occurs.
//
// When ctx is done, Run finishes the records in hand, waits for their outputs to be
// acknowledged, commits, leaves the group and returns nil. On a fatal error (a failed record
// whose handler said Fail, a missing topic, a lost permission) it stops without committing
// past the last successful commit, so nothing is lost, and returns the error, unless
// [Config.UncaughtErrorPolicy] restarts the processing ([RestartProcessing]) or shuts every
// instance down ([ShutdownApplication]: Run returns an [*ApplicationShutdownError]). Run may
// be called once. With [Config.GoMemoryLimit] set, Run sets the Go memory limit while it runs.
func (a *App) Run(ctx context.Context) error {
	a.runMu.Lock()
	if !a.started.CompareAndSwap(false, true) {
		a.runMu.Unlock()
		return ErrAlreadyRun
	}
	a.running = true
	a.runMu.Unlock()
	defer func() {
		a.runMu.Lock()
		a.running = false
		a.runMu.Unlock()
	}()
	defer a.memLimit.apply()() // Config.GoMemoryLimit; nothing when off
	if err := a.topo.startChecks(ctx, a.appID); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while a registry was unavailable: nothing ran
		}
		return err
	}
	return publicRunError(a.rt.Run(ctx))
}

// ErrRunning is returned by [App.CleanUp] while [App.Run] runs.
var ErrRunning = errors.New("kstream: the application is running; CleanUp may be called before Run or after it returned")

// CleanUp deletes this instance's local state: its state directory (Config.StateDir) with
// the Pebble database of its persistent stores and its process id, as Kafka Streams'
// KafkaStreams.cleanUp does. The next Run restores every store from its changelog and,
// under exactly-once, uses a new transactional id. Call it before Run or after Run
// returned: it returns [ErrRunning] while Run runs, and an error naming the holder when
// another instance holds the directory's lock.
func (a *App) CleanUp() error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.running {
		return ErrRunning
	}
	return a.rt.CleanUp()
}

// State returns the instance's current state.
func (a *App) State() State { return State(a.state.Load()) }

// Tasks returns the ids of the active tasks this instance runs now, sorted. It blocks while
// a batch of records is being processed.
func (a *App) Tasks() []TaskID { return taskIDs(a.rt.Tasks()) }

// Stats returns the instance's commit figures (commits, aborted transactions and commit
// latency), the count of records dropped (for a null key or value, or as late), and what
// each operator dropped or lost. It is safe to call at any time.
func (a *App) Stats() Stats { return a.statsOf(a.rt.Stats()) }

// statsOf converts the runtime's figures and adds the operators' losses.
func (a *App) statsOf(rs runtime.Stats) Stats {
	s := statsOf(rs)
	s.Losses = lossesOf(a.counts)
	s.Async = a.topo.async.stats()
	for _, l := range s.Losses {
		if l.LostResults {
			s.LostResults += l.Count
		}
	}
	return s
}

// StandbyTasks returns the ids of the standby tasks this instance keeps now, sorted.
func (a *App) StandbyTasks() []TaskID { return taskIDs(a.rt.StandbyTasks()) }

// Topology returns the built topology (for Describe).
func (a *App) Topology() *Topology { return a.topo }
