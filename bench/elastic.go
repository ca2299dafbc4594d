package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The elastic-fleet scenarios (issue 26). A Pebble count over rebalancePartitions tasks first
// takes -records distinct keys (its state: -records 5000000 is the 5M keys), then
// input arrives at rebalanceRate records/s while the fleet changes. The longest gap between
// two records of a partition is the longest processing pause of its task (gapRecorder).
//
//   - scale-out: two instances, a third joins. With warm-up replicas (the default) a moved
//     task keeps running on its owner until the new instance restored it; scale-out-nowarmup
//     is the same with MaxWarmupReplicas -1: a moved task restores its whole store on the
//     new instance first (kstream before warm-ups).
//   - rolling-restart: three static instances (InstanceID), each stopped and started again
//     in turn, within the session timeout.
//   - scale-in: three instances with one standby each; one stops (it leaves the group).
//
// Each prints how long the group took to settle, the longest pause of a task that moved and
// of one that stayed, and how many changelog records instances restored as active tasks.

// fleetRestores counts the records restored by active tasks.
type fleetRestores struct{ n atomic.Int64 }

func (*fleetRestores) OnRestoreStart(string, string, int32, int64, int64) {}
func (r *fleetRestores) OnBatchRestored(_, _ string, _ int32, _ int64, n int) {
	r.n.Add(int64(n))
}
func (*fleetRestores) OnRestoreEnd(string, string, int32, int64) {}

type fleetMember struct {
	app      *kstream.App
	cfg      kstream.Config
	stop     context.CancelFunc
	done     chan error
	restored *fleetRestores
}

// fleet runs instances of the counting application of one scenario run.
type fleet struct {
	ctx     context.Context
	env     *runEnv
	gaps    *gapRecorder
	members []*fleetMember
	dirs    []string
}

func (f *fleet) newConfig(dir string) kstream.Config {
	return kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:     -1,
		ApplicationID:     f.env.group,
		Brokers:           f.env.brokers,
		CommitInterval:    commitInterval,
		CloseTimeout:      shutdownTimeout,
		Logger:            f.env.logger,
		StateDir:          dir,
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: 250 * time.Millisecond,
	}
}

// start runs an instance with cfg (a fresh state directory if cfg.StateDir is empty).
func (f *fleet) start(cfg kstream.Config) (*fleetMember, error) {
	if cfg.StateDir == "" {
		dir, err := os.MkdirTemp("", "kstream-bench-fleet-")
		if err != nil {
			return nil, err
		}
		f.dirs = append(f.dirs, dir)
		cfg.StateDir = dir
	}
	m := &fleetMember{cfg: cfg, restored: &fleetRestores{}, done: make(chan error, 1)}
	cfg.RestoreListener = m.restored
	app, err := kstream.New(countWithGaps(f.env, f.gaps), cfg)
	if err != nil {
		return nil, err
	}
	m.app = app
	actx, stop := context.WithCancel(f.ctx)
	m.stop = stop
	go func() { m.done <- app.Run(actx) }()
	f.members = append(f.members, m)
	return m, nil
}

// halt stops m and waits for it.
func (f *fleet) halt(m *fleetMember) error {
	m.stop()
	select {
	case err := <-m.done:
		m.done <- err // for close
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("an instance stopped with %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		return errors.New("an instance did not stop within 1 minute")
	}
}

func (f *fleet) close() (err error) {
	for _, m := range f.members {
		m.stop()
	}
	for _, m := range f.members {
		select {
		case rerr := <-m.done:
			if rerr != nil && !errors.Is(rerr, context.Canceled) && err == nil {
				err = fmt.Errorf("an instance stopped with %w", rerr)
			}
		case <-time.After(time.Minute):
			if err == nil {
				err = errors.New("an instance did not stop within 1 minute")
			}
		}
	}
	for _, d := range f.dirs {
		os.RemoveAll(d)
	}
	return err
}

func (f *fleet) waitFor(what string, cond func() bool) error {
	return waitUntil(f.ctx, what, 20*time.Millisecond, cond)
}

// waitUntil polls cond every interval until it holds or ctx ends.
func waitUntil(ctx context.Context, what string, every time.Duration, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
	return nil
}

// balanced reports whether ms run every task, evenly, with no warm-up left, all running.
func balanced(ms []*fleetMember) bool {
	n := 0
	for _, m := range ms {
		st := m.app.Status()
		if st.State != kstream.StateRunning || len(st.Active) != rebalancePartitions/len(ms) {
			return false
		}
		for _, s := range st.Standby {
			if s.Warmup {
				return false
			}
		}
		n += len(st.Active)
	}
	return n == rebalancePartitions
}

func owners(ms []*fleetMember) map[int32]int {
	out := map[int32]int{}
	for i, m := range ms {
		for _, t := range m.app.Tasks() {
			out[t.Partition] = i
		}
	}
	return out
}

// countWithGaps is the count of the scale scenarios, noting each record's processing time.
func countWithGaps(env *runEnv, gaps *gapRecorder) *kstream.Builder {
	b := kstream.NewBuilder()
	s := kstream.ProcessValues(kstream.Stream(b, env.in, serde.String(), serde.Bytes()),
		func() kstream.FixedKeyProcessor[string, []byte, []byte] {
			return kstream.FixedKeyProcessorFunc[string, []byte, []byte](func(c kstream.FixedKeyProcessorContext[string, []byte], r kstream.FixedKeyRecord[string, []byte]) error {
				if md, ok := c.RecordMetadata(); ok {
					gaps.note(md.Partition, time.Now())
				}
				c.Forward(r)
				return nil
			})
		})
	kstream.Count(s.GroupByKey(), countStore).ToStream().To(env.out, serde.String(), serde.Int64())
	return b
}

// preload writes keys distinct keys, spread evenly over the partitions.
func preload(ctx context.Context, env *runEnv, keys int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var perr atomic.Value
	for i := range keys {
		cl.Produce(ctx, &kgo.Record{Topic: env.in, Partition: int32(i % rebalancePartitions), Key: fmt.Appendf(nil, "k%08d", i), Value: []byte("v")},
			func(_ *kgo.Record, err error) {
				if err != nil {
					perr.CompareAndSwap(nil, err)
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if e, ok := perr.Load().(error); ok {
		return fmt.Errorf("preloading: %w", e)
	}
	return nil
}

// steadyInput produces rebalanceRate records/s over keys keys until the returned stop is
// called; stop returns the first produce error.
func steadyInput(ctx context.Context, env *runEnv, keys int) (stop func() error, err error) {
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		const tick = 5 * time.Millisecond
		per := rebalanceRate * int(tick) / int(time.Second)
		t := time.NewTicker(tick)
		defer t.Stop()
		var perr atomic.Value
		for n := 0; ; {
			select {
			case <-pctx.Done():
				e, _ := perr.Load().(error)
				done <- e
				return
			case <-t.C:
			}
			for range per {
				k := n % keys
				prod.Produce(pctx, &kgo.Record{Topic: env.in, Partition: int32(k % rebalancePartitions), Key: fmt.Appendf(nil, "k%08d", k), Value: []byte("v")},
					func(_ *kgo.Record, err error) {
						if err != nil && !errors.Is(err, context.Canceled) {
							perr.CompareAndSwap(nil, err)
						}
					})
				n++
			}
		}
	}()
	return func() error {
		cancel()
		err := <-done
		prod.Close()
		return err
	}, nil
}

// fleetRun sets a scenario run up: topics, the preloaded state on the first instances,
// steady input; body changes the fleet and returns its line.
func fleetRun(k *kafka, o options, env *runEnv, run int, name string, first int, cfg func(*kstream.Config, int), body func(f *fleet) (string, error)) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	if err := k.createTopics(ctx, rebalancePartitions, env.in, env.out); err != nil {
		return err
	}
	f := &fleet{ctx: ctx, env: env, gaps: &gapRecorder{}}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = cerr
		}
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
		runtime.GC()
		debug.FreeOSMemory()
	}()
	keys := o.records
	if err := preload(ctx, env, keys); err != nil {
		return err
	}
	began := time.Now()
	for i := range first {
		c := f.newConfig("")
		cfg(&c, i)
		if _, err := f.start(c); err != nil {
			return err
		}
	}
	processed := func() bool {
		var n int64
		for _, m := range f.members {
			n += m.app.Status().ProcessedRecords
		}
		return n >= int64(keys) && balanced(f.members)
	}
	if err := f.waitFor("the preloaded keys counted", processed); err != nil {
		return err
	}
	loaded := time.Since(began)
	stop, err := steadyInput(ctx, env, keys)
	if err != nil {
		return err
	}
	defer func() {
		if perr := stop(); perr != nil && err == nil {
			err = fmt.Errorf("producing: %w", perr)
		}
	}()
	time.Sleep(3 * time.Second) // settle into the steady input
	line, err := body(f)
	if err != nil {
		return err
	}
	fmt.Printf("  %-21s run %d: %d keys of state counted in %v; %s\n", name, run, keys, loaded.Round(100*time.Millisecond), line)
	return nil
}

// pauses splits the longest gaps of the window into tasks that moved (owner before != after)
// and tasks that stayed.
func pauses(during [rebalancePartitions]time.Duration, before, after map[int32]int) (moved, stayed int, movedMax, stayMax time.Duration) {
	for p := range int32(rebalancePartitions) {
		if b, ok := before[p]; ok && after[p] == b {
			stayed++
			stayMax = max(stayMax, during[p])
		} else {
			moved++
			movedMax = max(movedMax, during[p])
		}
	}
	return moved, stayed, movedMax, stayMax
}

func runScaleOut(k *kafka, o options, env *runEnv, run int) error {
	return scaleOut(k, o, env, run, "scale-out", 0)
}

func runScaleOutNoWarmup(k *kafka, o options, env *runEnv, run int) error {
	return scaleOut(k, o, env, run, "scale-out-nowarmup", -1)
}

func scaleOut(k *kafka, o options, env *runEnv, run int, name string, warmups int) error {
	const probing = 30 * time.Second
	cfg := func(c *kstream.Config, _ int) {
		c.MaxWarmupReplicas = warmups
		c.ProbingRebalanceInterval = probing
	}
	return fleetRun(k, o, env, run, name, 2, cfg, func(f *fleet) (string, error) {
		before := owners(f.members)
		f.gaps.window()
		joined := time.Now()
		c := f.newConfig("")
		cfg(&c, 2)
		third, err := f.start(c)
		if err != nil {
			return "", err
		}
		if err := f.waitFor("three instances balanced", func() bool { return balanced(f.members) }); err != nil {
			return "", err
		}
		settled := time.Since(joined)
		time.Sleep(time.Second)
		during := f.gaps.close(time.Now())
		moved, stayed, movedMax, stayMax := pauses(during, before, owners(f.members))
		return fmt.Sprintf("a third instance joined: %d tasks moved, %d stayed; balanced after %v (probing interval %v); longest pause of a moved task %v, of a staying task %v; the new instance restored %d records as active tasks",
			moved, stayed, settled.Round(100*time.Millisecond), probing, movedMax.Round(time.Millisecond), stayMax.Round(time.Millisecond), third.restored.n.Load()), nil
	})
}

func runRollingRestart(k *kafka, o options, env *runEnv, run int) error {
	cfg := func(c *kstream.Config, i int) {
		c.InstanceID = fmt.Sprintf("pod-%d", i)
		c.SessionTimeout = 30 * time.Second
	}
	return fleetRun(k, o, env, run, "rolling-restart", 3, cfg, func(f *fleet) (string, error) {
		before := owners(f.members)
		f.gaps.window()
		began := time.Now()
		var restored int64
		var slowest time.Duration
		for i := range 3 {
			old := f.members[i]
			down := time.Now()
			if err := f.halt(old); err != nil {
				return "", err
			}
			m, err := f.start(old.cfg)
			if err != nil {
				return "", err
			}
			f.members[i] = m
			f.members = f.members[:3]
			if err := f.waitFor(fmt.Sprintf("pod-%d back", i), func() bool { return balanced(f.members) }); err != nil {
				return "", err
			}
			slowest = max(slowest, time.Since(down))
			restored += m.restored.n.Load()
		}
		took := time.Since(began)
		time.Sleep(time.Second)
		during := f.gaps.close(time.Now())
		moved, _, _, _ := pauses(during, before, owners(f.members))
		var longest time.Duration
		for _, d := range during {
			longest = max(longest, d)
		}
		return fmt.Sprintf("3 static instances restarted one at a time in %v: %d tasks moved, %d records restored beyond the local checkpoints; longest pause of any task %v (each instance's tasks wait for it: down and back up to %v)",
			took.Round(100*time.Millisecond), moved, restored, longest.Round(time.Millisecond), slowest.Round(time.Millisecond)), nil
	})
}

func runScaleIn(k *kafka, o options, env *runEnv, run int) error {
	cfg := func(c *kstream.Config, _ int) { c.NumStandbys = 1 }
	return fleetRun(k, o, env, run, "scale-in", 3, cfg, func(f *fleet) (string, error) {
		// The standbys caught up first.
		var seen []string
		if err := f.waitFor("standbys caught up", func() bool {
			seen = seen[:0]
			ok := true
			for _, m := range f.members {
				st := m.app.Status()
				var lags []int64
				for _, s := range st.Standby {
					for _, ss := range s.Stores {
						lags = append(lags, ss.Lag)
						ok = ok && ss.Lag >= 0 && ss.Lag <= 10_000
					}
				}
				seen = append(seen, fmt.Sprintf("%d active, standby lags %v", len(st.Active), lags))
				ok = ok && len(st.Standby) == rebalancePartitions/3
			}
			return ok
		}); err != nil {
			return "", fmt.Errorf("%w (last seen: %s)", err, strings.Join(seen, "; "))
		}
		before := owners(f.members)
		gone := f.members[2]
		var restoredBefore int64
		for _, m := range f.members[:2] {
			restoredBefore += m.restored.n.Load()
		}
		f.gaps.window()
		left := time.Now()
		if err := f.halt(gone); err != nil {
			return "", err
		}
		f.members = f.members[:2]
		if err := f.waitFor("two instances balanced", func() bool { return balanced(f.members) }); err != nil {
			return "", err
		}
		settled := time.Since(left)
		time.Sleep(time.Second)
		during := f.gaps.close(time.Now())
		var restored int64
		for _, m := range f.members {
			restored += m.restored.n.Load()
		}
		after := owners(f.members)
		moved, stayed, movedMax, stayMax := pauses(during, before, after)
		f.members = append(f.members, gone) // closed with the others
		return fmt.Sprintf("one of 3 instances (one standby each) stopped: %d tasks moved, %d stayed; balanced after %v; longest pause of a moved task %v, of a staying task %v; %d records restored as active tasks",
			moved, stayed, settled.Round(100*time.Millisecond), movedMax.Round(time.Millisecond), stayMax.Round(time.Millisecond), restored-restoredBefore), nil
	})
}
