package kstream_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stormLength is how long the input flows while instances join and leave: the 60s
// with KSTREAM_TEST_LONG=1, 15s in a plain go test.
func stormLength() time.Duration {
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		return 60 * time.Second
	}
	return 15 * time.Second
}

// The storm's pace: input records per second (in batches every 50ms) over stormKeys keys;
// an instance stays up for stormUp and then, if another instance is up, leaves for
// stormDown (both drawn uniformly from [min, max)).
const (
	stormRate  = 3000
	stormKeys  = 2000
	stormSlots = 3
)

// stormRebalance is every instance's RebalanceTimeout: it bounds how long a member cancelled
// during a join waits in Run (kgo lets a join in flight finish before it leaves), and how
// long a rebalance waits for a member that does not rejoin. (A child killed while it waited
// in a JoinGroup is expired by its 6s session timeout, as on Kafka: the in-process broker
// works around kfake, which at random never started such a member's session timer, see
// embedded/compat.go holdsRead.)
const stormRebalance = 10 * time.Second

var (
	stormUp   = [2]time.Duration{2 * time.Second, 5 * time.Second}
	stormDown = [2]time.Duration{500 * time.Millisecond, 2500 * time.Millisecond}
)

// stormEvent is a line of the storm's timeline.
type stormEvent struct {
	at   time.Duration
	slot int
	what string
}

// storm is the shared state of a rebalance storm.
type storm struct {
	brokers []string         // the storm's own in-process broker, or the real cluster
	broker  *embedded.Broker // the storm's own in-process broker; nil on a real cluster
	t       *testing.T
	began   time.Time
	appID   string
	in, out string
	cfg     kstream.Config // the in-process instances' configuration, StateDir set per slot

	mu       sync.Mutex
	up       int // instances up (started and not told to stop)
	events   []stormEvent
	joins    int
	graceful int
	killed   int
	failures []string // instances that stopped by themselves, with their error
	// logDir (KSTREAM_STORM_LOGDIR): every instance's log goes to a file there, at debug
	// level in process and the child's output as it is
	logDir string
}

func (s *storm) event(slot int, format string, args ...any) {
	s.eventAt(time.Since(s.began), slot, format, args...)
}

// eventAt records an event that happened at (since the storm began).
func (s *storm) eventAt(at time.Duration, slot int, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, stormEvent{at: at, slot: slot, what: fmt.Sprintf(format, args...)})
	slices.SortStableFunc(s.events, func(a, b stormEvent) int { return cmp.Compare(a.at, b.at) })
}

// instance is one running instance of the count pipeline: an App in this process (stopped
// by cancelling its context: a graceful leave) or a child process (stopped with SIGKILL:
// no commit, no leave, an open transaction left behind).
type instance struct {
	slot   int
	child  *kafkatest.Child
	app    *kstream.App
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	joinNo int // the instance's number, in the order of the joins
}

// start starts an instance in slot's state directory: a child process if child.
func (s *storm) start(slot int, dir string, child bool) *instance {
	s.mu.Lock()
	inst := &instance{slot: slot, joinNo: s.joins}
	s.joins++
	s.up++
	s.mu.Unlock()
	if child {
		inst.child = kafkatest.StartChild(s.t, "count-app", "APP_ID="+s.appID, "STATE_DIR="+dir,
			kafkatest.EnvBrokers+"="+strings.Join(s.brokers, ","),
			"IN="+s.in, "OUT="+s.out, "GUARANTEE=eos", "COMMIT_MS=100",
			fmt.Sprintf("REBALANCE_MS=%d", stormRebalance.Milliseconds()))
	} else {
		cfg := s.cfg
		cfg.StateDir = dir
		if s.logDir != "" {
			f, err := os.Create(filepath.Join(s.logDir, fmt.Sprintf("slot%d-%02d-inprocess.log", slot, inst.joinNo)))
			if err != nil {
				s.t.Errorf("storm log: %v", err)
				s.notStarted()
				return nil
			}
			s.t.Cleanup(func() { f.Close() })
			cfg.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		app, err := kstream.New(countTopology(s.in, s.out), cfg)
		if err != nil {
			s.t.Errorf("kstream.New: %v", err)
			s.notStarted()
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		inst.app, inst.cancel, inst.done = app, cancel, make(chan struct{})
		go func() {
			defer close(inst.done)
			inst.err = app.Run(ctx)
		}()
	}
	kind := "in-process"
	if child {
		kind = fmt.Sprintf("child pid %d", inst.child.Pid())
	}
	s.event(slot, "join (%s)", kind)
	return inst
}

// notStarted undoes start's counting for an instance that could not be started.
func (s *storm) notStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joins--
	s.up--
}

// exited reports whether the instance stopped by itself, with its error.
func (inst *instance) exited() (bool, string) {
	if inst.child != nil {
		if ok, err := inst.child.Exited(); ok {
			out := inst.child.Output()
			return true, fmt.Sprintf("child exited: %v; last output: %s", err, out[max(0, len(out)-2000):])
		}
		return false, ""
	}
	select {
	case <-inst.done:
		return true, fmt.Sprintf("Run returned: %v", inst.err)
	default:
		return false, ""
	}
}

// stop stops the instance: SIGKILL for a child, a cancel (and waiting for Run) in process.
// An instance that had stopped by itself is recorded as a failure.
func (s *storm) stop(inst *instance) {
	if ok, why := inst.exited(); ok {
		s.mu.Lock()
		s.failures = append(s.failures, fmt.Sprintf("slot %d at %v: %s", inst.slot, time.Since(s.began).Round(time.Millisecond), why))
		s.mu.Unlock()
		s.event(inst.slot, "found stopped by itself: %s", why)
		return
	}
	if inst.child != nil {
		inst.child.Kill(s.t)
		if s.logDir != "" {
			_ = os.WriteFile(filepath.Join(s.logDir, fmt.Sprintf("slot%d-%02d-child.log", inst.slot, inst.joinNo)), []byte(inst.child.Output()), 0o644)
		}
		s.mu.Lock()
		s.killed++
		s.mu.Unlock()
		s.event(inst.slot, "leave (SIGKILL pid %d, reaped)", inst.child.Pid())
		return
	}
	began := time.Now()
	at := time.Since(s.began)
	inst.cancel()
	select {
	case <-inst.done:
	case <-time.After(60 * time.Second):
		s.t.Errorf("slot %d: Run did not return within 60s of cancelling its context", inst.slot)
		<-inst.done
	}
	if inst.err != nil && !errors.Is(inst.err, context.Canceled) {
		s.mu.Lock()
		s.failures = append(s.failures, fmt.Sprintf("slot %d at %v: Run returned %v after cancel", inst.slot, time.Since(s.began).Round(time.Millisecond), inst.err))
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.graceful++
	s.mu.Unlock()
	s.eventAt(at, inst.slot, "leave (cancel; Run returned after %v)", time.Since(began).Round(time.Millisecond))
}

// mayLeave takes an instance down if another one is up, so that the storm never leaves the
// input without any instance (that would measure absence, not rebalancing).
func (s *storm) mayLeave() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up > 1 {
		s.up--
		return true
	}
	return false
}

// committedCollector is an outputCollector (every int64 value per key, in order) that also
// keeps how far it has read each partition, transaction markers included, so that the end
// of the topic can be awaited.
type committedCollector struct {
	*outputCollector
	next map[int32]int64 // under outputCollector.mu
}

func collectCommitted(t *testing.T, brokers []string, topic string) *committedCollector {
	t.Helper()
	c := &committedCollector{outputCollector: &outputCollector{seqs: map[string][]int64{}}, next: map[int32]int64{}}
	cl := clientOn(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		readCommitted, kgo.KeepControlRecords())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				c.next[r.Partition] = r.Offset + 1
				if r.Attrs.IsControl() {
					return
				}
				n, err := serde.Int64().Deserialize(r.Value)
				if err != nil {
					n = -1
				}
				c.seqs[string(r.Key)] = append(c.seqs[string(r.Key)], n)
				c.n++
			})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *committedCollector) records() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// readTo reports whether every partition was read up to end.
func (c *committedCollector) readTo(end map[int32]int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range end {
		if c.next[p] < e {
			return false
		}
	}
	return true
}

// stall is a period without progress.
type stall struct {
	from, to  time.Duration
	partition int32 // -1: the whole output
}

func (s stall) length() time.Duration { return s.to - s.from }

// progressSampler samples, every 100ms, the records read from the output and, per input
// partition, the group's committed offset and the end offset; it keeps the longest period
// without progress while there was work: for the output, no new record while fewer outputs
// than inputs had been read; for a partition, a committed offset that did not move while it
// was below the end offset.
type progressSampler struct {
	mu         sync.Mutex
	worstOut   stall
	worstPart  stall
	samples    int
	firstOut   time.Duration
	partStalls map[int32]time.Duration // longest per partition
}

func sampleProgress(ctx context.Context, t *testing.T, s *storm, outputs *committedCollector, produced *atomic.Int64) (*progressSampler, chan struct{}) {
	ps := &progressSampler{worstOut: stall{partition: -1}, partStalls: map[int32]time.Duration{}}
	adm := kadm.NewClient(clientOn(t, s.brokers))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		lastN, lastNAt := 0, time.Duration(0)
		type part struct {
			committed int64
			since     time.Duration
		}
		parts := map[int32]*part{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Since(s.began)
			n, in := outputs.records(), produced.Load()
			ps.mu.Lock()
			ps.samples++
			if n > 0 && ps.firstOut == 0 {
				ps.firstOut = now
			}
			if n != lastN || int64(n) >= in {
				lastN, lastNAt = n, now
			} else if now-lastNAt > ps.worstOut.length() {
				ps.worstOut = stall{from: lastNAt, to: now, partition: -1}
			}
			ps.mu.Unlock()

			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			committed, cerr := adm.FetchOffsets(rctx, s.appID)
			ends, eerr := adm.ListEndOffsets(rctx, s.in)
			cancel()
			if cerr != nil || eerr != nil {
				continue // the group may not exist yet; a sample is skipped, not a stall
			}
			ps.mu.Lock()
			ends.Each(func(e kadm.ListedOffset) {
				o, ok := committed.Lookup(s.in, e.Partition)
				at := int64(0)
				if ok && o.Err == nil {
					at = o.At
				}
				p := parts[e.Partition]
				if p == nil {
					p = &part{committed: at, since: now}
					parts[e.Partition] = p
				}
				if at != p.committed || at >= e.Offset {
					p.committed, p.since = at, now
					return
				}
				d := now - p.since
				ps.partStalls[e.Partition] = max(ps.partStalls[e.Partition], d)
				if d > ps.worstPart.length() {
					ps.worstPart = stall{from: p.since, to: now, partition: e.Partition}
				}
			})
			ps.mu.Unlock()
		}
	}()
	return ps, done
}

// A rebalance storm: three instances of the exactly-once count pipeline (6 input
// partitions, Pebble store) join and leave every few seconds for 60s (15s in the short
// form) while the input flows at a steady rate. Each start is at random an App in this
// process, which later leaves gracefully (its context cancelled), or a child process, which
// later dies by SIGKILL (no commit, no leave, its transaction left open). An instance
// leaves only while another is up; each slot keeps its state directory across its
// instances. At the end one instance stays until everything is processed. Read
// read_committed, every key's counts are exactly 1, 2, ..., n; no instance stops by
// itself. The test prints the number of joins and leaves and the longest periods without
// progress (of the whole output, and of any one input partition's committed offset).
func TestRebalanceStorm(t *testing.T) {
	t.Parallel()
	length := stormLength()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KSTREAM_STORM_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("storm of %v, seed %d (KSTREAM_STORM_SEED replays the schedule)", length, seed)

	// The storm has an in-process broker of its own: its group churn and its instances'
	// request load would otherwise slow the tests sharing the package's broker, and theirs
	// would slow the storm.
	brokers := kafkatest.Brokers(t)
	var broker *embedded.Broker
	if kafkatest.Tier() == "embedded" {
		broker = ownBroker(t)
		brokers = broker.Brokers()
	}
	s := &storm{t: t, brokers: brokers, broker: broker, in: createTopicOn(t, brokers, "in", 6), out: createTopicOn(t, brokers, "out", 6)}
	s.cfg = testConfig(t)
	s.cfg.Brokers = brokers
	s.cfg.Guarantee, s.cfg.CommitInterval = kstream.ExactlyOnce, 0
	s.cfg.RebalanceTimeout = stormRebalance
	s.appID = s.cfg.ApplicationID
	s.logDir = os.Getenv("KSTREAM_STORM_LOGDIR")
	outputs := collectCommitted(t, brokers, s.out)
	dirs := make([]string, stormSlots)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}

	s.began = time.Now()
	stormEnd := s.began.Add(length)
	var produced atomic.Int64
	sctx, stopSampling := context.WithCancel(context.Background())
	sampler, samplerDone := sampleProgress(sctx, t, s, outputs, &produced)
	defer func() { stopSampling(); <-samplerDone }()

	// The input: stormRate records/s in batches every 50ms until the storm ends.
	want := map[string]int64{}
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		cl := clientOn(t, brokers)
		rng := rand.New(rand.NewPCG(seed, 1))
		const every = 50 * time.Millisecond
		perBatch := stormRate * int(every) / int(time.Second)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for time.Now().Before(stormEnd) {
			recs := make([]*kgo.Record, 0, perBatch)
			for range perBatch {
				k := fmt.Sprintf("k%05d", rng.IntN(stormKeys))
				want[k]++
				recs = append(recs, &kgo.Record{Topic: s.in, Key: []byte(k), Value: []byte("v")})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("producing input: %v", err)
				return
			}
			produced.Add(int64(len(recs)))
			<-tick.C
		}
	}()

	// The slots: each starts an instance, keeps it up for a while, takes it down (if another
	// is up), waits, and again, until the storm ends. Slot 0 then keeps (or starts) an
	// in-process instance to the end; the others leave.
	finals := make([]*instance, stormSlots)
	var wg sync.WaitGroup
	for slot := range stormSlots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(2+slot)))
			between := func(r [2]time.Duration) time.Duration {
				return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])))
			}
			// Stagger the first joins a little.
			time.Sleep(time.Duration(slot) * time.Duration(rng.Int64N(int64(time.Second))))
			var inst *instance
			for time.Now().Before(stormEnd) && !t.Failed() {
				if inst == nil {
					if inst = s.start(slot, dirs[slot], rng.IntN(2) == 0); inst == nil {
						return
					}
				}
				time.Sleep(min(between(stormUp), time.Until(stormEnd)))
				if !time.Now().Before(stormEnd) {
					break
				}
				if !s.mayLeave() {
					continue // the only one up: stays a while longer
				}
				s.stop(inst)
				inst = nil
				time.Sleep(min(between(stormDown), max(0, time.Until(stormEnd))))
			}
			if slot == 0 && inst != nil && inst.child != nil {
				s.mu.Lock()
				s.up--
				s.mu.Unlock()
				s.stop(inst)
				inst = nil
			}
			if slot == 0 && inst == nil {
				inst = s.start(slot, dirs[slot], false)
			}
			if slot != 0 && inst != nil {
				s.mu.Lock()
				s.up--
				s.mu.Unlock()
				s.stop(inst)
				inst = nil
			}
			finals[slot] = inst
		}()
	}
	wg.Wait()
	<-feedDone
	s.event(-1, "storm over: %d records produced; one instance stays", produced.Load())
	last := finals[0]
	if last == nil {
		t.Fatalf("no instance left to finish the input")
	}

	// The last instance finishes the input.
	deadline := time.Now().Add(120 * time.Second)
	for !outputs.reached(want) && time.Now().Before(deadline) {
		if ok, why := last.exited(); ok {
			t.Errorf("the last instance stopped by itself: %s", why)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	finished := outputs.reached(want)
	s.event(-1, "every count reached: %v (%d of %d outputs read)", finished, outputs.records(), produced.Load())
	if !finished {
		stuckOutput(t, brokers, s.out)
		stuckInput(t, brokers, s.appID, s.in)
		if s.broker != nil {
			stuckMembers(t, s.broker, s.appID)
		}
		// A restore reads its changelog read_committed up to the last stable offset: a
		// transaction left open there keeps the task restoring.
		if tds, err := kadm.NewClient(clientOn(t, brokers)).ListTopics(kafkatest.Context(t, 10*time.Second)); err == nil {
			for _, td := range tds.Sorted() {
				if strings.HasPrefix(td.Topic, s.appID+"-") {
					stuckOutput(t, brokers, td.Topic)
				}
			}
		}
		if last.app != nil {
			lsp := last.app.LocalStorePartitions()
			t.Logf("last instance: state %v, tasks %v, standbys %v, stats %+v, store partitions %+v",
				last.app.State(), last.app.Tasks(), last.app.StandbyTasks(), last.app.Stats(), lsp)
		}
	}
	s.stop(last)
	stopSampling()
	<-samplerDone

	// Read the output to its end (no transaction is open once the last instance stopped
	// gracefully and every killed one was fenced by its slot's next instance or timed out),
	// so that a late duplicate cannot hide.
	if finished {
		ends, err := kadm.NewClient(clientOn(t, brokers)).ListEndOffsets(kafkatest.Context(t, 10*time.Second), s.out)
		if err != nil {
			t.Fatal(err)
		}
		end := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
		kafkatest.Eventually(t, 30*time.Second, "the output read to its end", func() bool { return outputs.readTo(end) })
	}

	s.mu.Lock()
	events, failures := slices.Clone(s.events), slices.Clone(s.failures)
	joins, graceful, killed := s.joins, s.graceful, s.killed
	s.mu.Unlock()
	sampler.mu.Lock()
	worstOut, worstPart, firstOut, perPart, samples := sampler.worstOut, sampler.worstPart, sampler.firstOut, sampler.partStalls, sampler.samples
	sampler.mu.Unlock()

	var timeline strings.Builder
	for _, e := range events {
		fmt.Fprintf(&timeline, "\n  %8v  slot %2d  %s", e.at.Round(time.Millisecond), e.slot, e.what)
	}
	t.Logf("timeline:%s", timeline.String())
	t.Logf("%d records over %d keys in %v; %d joins, %d leaves (%d graceful, %d SIGKILL); first output after %v; %d samples",
		produced.Load(), len(want), length, joins, graceful+killed, graceful, killed, firstOut.Round(time.Millisecond), samples)
	t.Logf("longest time without a new output record while inputs were pending: %v (%v to %v)",
		worstOut.length().Round(time.Millisecond), worstOut.from.Round(time.Millisecond), worstOut.to.Round(time.Millisecond))
	t.Logf("longest time an input partition's committed offset did not move while behind: %v (partition %d, %v to %v); per partition: %v",
		worstPart.length().Round(time.Millisecond), worstPart.partition, worstPart.from.Round(time.Millisecond), worstPart.to.Round(time.Millisecond), perPart)

	for _, f := range failures {
		t.Errorf("an instance stopped by itself: %s", f)
	}
	if !finished {
		outputs.checkExact(t, want) // says which keys are behind or wrong
		t.Fatalf("not every count was reached within 120s of the storm's end (%d of %d outputs read)", outputs.records(), produced.Load())
	}
	outputs.checkExact(t, want)
}

// stuckInput logs, for a storm whose output stopped short, each input partition's committed
// offset against its end and the group's members with their assignments, so that a
// partition nobody processes (or that a member holds without progress) shows.
func stuckInput(t *testing.T, brokers []string, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(clientOn(t, brokers))
	ctx := kafkatest.Context(t, 10*time.Second)
	ends, eerr := adm.ListEndOffsets(ctx, topic)
	committed, cerr := adm.FetchOffsets(ctx, group)
	if err := errors.Join(eerr, cerr); err != nil {
		t.Logf("input %s: offsets: %v", topic, err)
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup(topic, o.Partition)
		t.Logf("input %s partition %d: committed %d, end %d", topic, o.Partition, c.At, o.Offset)
	})
	groups, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Logf("group %s: %v", group, err)
		return
	}
	for _, g := range groups {
		t.Logf("group %s: state %s, protocol %s, %d members", g.Group, g.State, g.Protocol, len(g.Members))
		for _, m := range g.Members {
			var parts []string
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range a.Topics {
					parts = append(parts, fmt.Sprintf("%s%v", tp.Topic, tp.Partitions))
				}
			}
			t.Logf("  member %s (client %s, host %s): %v", m.MemberID, m.ClientID, m.ClientHost, parts)
		}
	}
}

// stuckOutput logs, for a storm whose output stopped short, what a topic's (the output's, a
// changelog's) partitions hold: their last stable offset against their high watermark, and
// the producers with a transaction open on them, so that a hanging transaction shows.
func stuckOutput(t *testing.T, brokers []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(clientOn(t, brokers))
	ctx := kafkatest.Context(t, 10*time.Second)
	hwm, herr := adm.ListEndOffsets(ctx, topic)
	lso, lerr := adm.ListCommittedOffsets(ctx, topic)
	if err := errors.Join(herr, lerr); err != nil {
		t.Logf("output %s: offsets: %v", topic, err)
		return
	}
	parts := kadm.TopicsSet{}
	hwm.Each(func(o kadm.ListedOffset) {
		parts.Add(topic, o.Partition)
		l, _ := lso.Lookup(topic, o.Partition)
		t.Logf("output %s partition %d: last stable offset %d, high watermark %d", topic, o.Partition, l.Offset, o.Offset)
	})
	ps, err := adm.DescribeProducers(ctx, parts)
	if err != nil {
		t.Logf("output %s: producers: %v", topic, err)
		return
	}
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			t.Logf("output %s partition %d: producer %d epoch %d has a transaction open since offset %d (last write %s)",
				topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset, time.UnixMilli(p.LastTimestamp).Format(time.RFC3339Nano))
		}
	})
}

// stuckMembers logs, for a storm on its own in-process broker whose output stopped short,
// each group member as the broker holds it (its client address with the port, which
// DescribeGroups leaves out) and which process owns the member's group connection: a
// member whose connection no process has any more is a dead member the broker kept.
func stuckMembers(t *testing.T, b *embedded.Broker, group string) {
	t.Helper()
	gi := b.Cluster().GroupInfo(group)
	if gi == nil {
		t.Logf("group %s: not on the broker", group)
		return
	}
	t.Logf("group %s on the broker: state %s, generation %d, %d members", gi.Group, gi.State, gi.Epoch, len(gi.Members))
	for _, m := range gi.Members {
		t.Logf("  member %s (client %s, host %s): %v; group connection: %s", m.MemberID, m.ClientID, m.ClientHost, m.Assignment, socketOwner(m.ClientHost))
	}
}

// socketOwner names the process that owns the local TCP socket whose address is addr
// (host:port, the client's end of a connection to the broker), from /proc (Linux).
func socketOwner(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "unknown address"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "unknown address"
	}
	inode := ""
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "unknown (no /proc)"
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			local := fs[1]
			i := strings.LastIndexByte(local, ':')
			lp, err := strconv.ParseUint(local[i+1:], 16, 16)
			if err != nil || lp != p || fs[9] == "0" {
				continue
			}
			inode = fs[9]
		}
	}
	if inode == "" {
		return "no socket (the connection is closed)"
	}
	want := "socket:[" + inode + "]"
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && l == want {
			pid := strings.Split(fd, "/")[2]
			if pid == strconv.Itoa(os.Getpid()) {
				return "pid " + pid + " (the test process)"
			}
			return "pid " + pid
		}
	}
	return "socket " + inode + " with no owning process"
}
