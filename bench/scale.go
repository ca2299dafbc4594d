package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The scale scenarios (issue 15, item 7).
//
// baseline-1000p and passthrough-1000p are baseline and passthrough over input and output
// topics of scalePartitions partitions (the same -records): printScale sets them against the
// same scenarios over -partitions (target: the passthrough keeps >= 0.7x).
//
// scale-rebalance measures what a cooperative rebalance costs the tasks that stay: two
// instances of a Pebble count share rebalancePartitions tasks while input arrives at a
// steady pace; a third instance joins and takes a third of the tasks. Every record's
// processing time is noted per input partition, and the longest gap between two records of
// a partition is the longest pause of its task. Printed: the longest pause of a staying
// task from the third instance's start until the group has settled (plus a second), the
// same figure over an equally long steady window before it (commits pause every task a
// little), and how long the moved tasks paused (revoked, then restored and resumed on the
// new instance).
const (
	scalePartitions     = 1000
	targetScale         = 0.7
	rebalancePartitions = 12
	rebalanceRate       = 12_000 // input records/s, spread evenly over the partitions
)

// printScale prints the ratios of the 1000-partition scenarios to their -partitions forms.
func printScale(o options, sums map[string]summary) {
	line := func(name, base string) (float64, bool) {
		s, ok1 := sums[name]
		b, ok2 := sums[base]
		if !ok1 || !ok2 {
			return 0, false
		}
		return b.median.seconds / s.median.seconds, true
	}
	raw, haveRaw := line("baseline-1000p", "baseline")
	pass, havePass := line("passthrough-1000p", "passthrough")
	if !haveRaw && !havePass {
		return
	}
	fmt.Printf("scale: %d partitions against %d (same records; median time at %d / median time at %d):", scalePartitions, o.partitions, o.partitions, scalePartitions)
	if haveRaw {
		fmt.Printf(" raw loop %.2fx;", raw)
	}
	if havePass {
		fmt.Printf(" passthrough %.2fx (target >= %.1fx: %s)", pass, targetScale, metOrMissed(pass >= targetScale))
	}
	fmt.Printf("\n\n")
}

// gapRecorder notes, per input partition, when its last record was processed and the
// longest gap between two records in the current window.
type gapRecorder struct {
	last [rebalancePartitions]atomic.Int64 // unix nanos of the last record, 0 before the first
	mu   sync.Mutex
	max  [rebalancePartitions]time.Duration
	on   bool // a window is open
}

func (g *gapRecorder) note(p int32, now time.Time) {
	if p < 0 || int(p) >= rebalancePartitions {
		return
	}
	prev := g.last[p].Swap(now.UnixNano())
	if prev == 0 {
		return
	}
	gap := now.Sub(time.Unix(0, prev))
	g.mu.Lock()
	if g.on && gap > g.max[p] {
		g.max[p] = gap
	}
	g.mu.Unlock()
}

// window opens a new window (now: records processed from now on count).
func (g *gapRecorder) window() {
	g.mu.Lock()
	g.on = true
	g.max = [rebalancePartitions]time.Duration{}
	g.mu.Unlock()
}

// close ends the window and returns each partition's longest gap in it, the gap still
// open at now included (a partition that stopped altogether).
func (g *gapRecorder) close(now time.Time) [rebalancePartitions]time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = false
	m := g.max
	for p := range m {
		if l := g.last[p].Load(); l != 0 {
			m[p] = max(m[p], now.Sub(time.Unix(0, l)))
		}
	}
	return m
}

// runScaleRebalance runs the scenario once (see the comment at the top of the file).
func runScaleRebalance(k *kafka, o options, env *runEnv, run int) error {
	return scaleRebalance(k, o, env, run, "scale-rebalance", kstream.AtLeastOnce, kstream.GroupProtocolClassic, 0)
}

// runScaleRebalanceEOS is runScaleRebalance under exactly-once.
func runScaleRebalanceEOS(k *kafka, o options, env *runEnv, run int) error {
	return scaleRebalance(k, o, env, run, "scale-rebalance-eos", kstream.ExactlyOnce, kstream.GroupProtocolClassic, 0)
}

// runScaleRebalanceProtocols is runScaleRebalance under the classic protocol and then, on
// topics and a group of its own each, under the streams protocol (KIP-1071, issue 29),
// first with the groups' default timings: kstream's classic member heartbeats every 3 s
// (kgo's default), a streams member at the interval the broker names
// (group.streams.heartbeat.interval.ms, 5 s by default); then both with 500 ms heartbeats. On a cluster without the streams
// protocol (the embedded broker) the streams half is skipped. A third run has the streams
// group heartbeat every 500 ms (its config streams.heartbeat.interval.ms; the broker must
// allow it: group.streams.min.heartbeat.interval.ms is 5 s by default, and the run is then
// skipped with the broker's answer).
func runScaleRebalanceProtocols(k *kafka, o options, env *runEnv, run int) error {
	if err := scaleRebalance(k, o, env, run, "classic", kstream.AtLeastOnce, kstream.GroupProtocolClassic, 0); err != nil {
		return err
	}
	cenv := *env
	cenv.in, cenv.out, cenv.group = env.in+"-classic500", env.out+"-classic500", env.group+"-classic500"
	if err := scaleRebalance(k, o, &cenv, run, "classic, 500ms beats", kstream.AtLeastOnce, kstream.GroupProtocolClassic, 500*time.Millisecond); err != nil {
		return err
	}
	ok, err := k.speaksStreamsProtocol()
	if err != nil {
		return err
	}
	if !ok {
		fmt.Printf("  %-21s run %d: skipped: the cluster does not speak the streams protocol (KIP-1071: Apache Kafka 4.2 or later; run with -brokers)\n", "streams", run)
		return nil
	}
	senv := *env
	senv.in, senv.out, senv.group = env.in+"-streams", env.out+"-streams", env.group+"-streams"
	if err := scaleRebalance(k, o, &senv, run, "streams", kstream.AtLeastOnce, kstream.GroupProtocolStreams, 0); err != nil {
		return err
	}
	fenv := *env
	fenv.in, fenv.out, fenv.group = env.in+"-streams500", env.out+"-streams500", env.group+"-streams500"
	if err := k.setGroupConfig(fenv.group, "streams.heartbeat.interval.ms", "500"); err != nil {
		fmt.Printf("  %-21s run %d: skipped: %v\n", "streams, 500ms beats", run, err)
		return nil
	}
	return scaleRebalance(k, o, &fenv, run, "streams, 500ms beats", kstream.AtLeastOnce, kstream.GroupProtocolStreams, 0)
}

// setGroupConfig sets a config of group (a streams group's streams.* configs).
func (k *kafka) setGroupConfig(group, name, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return fmt.Errorf("setting %s=%s on group %s: %w", name, value, group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("setting %s=%s on group %s%s: %w", name, value, group, msg, err)
		}
	}
	return nil
}

// speaksStreamsProtocol reports whether the cluster offers StreamsGroupHeartbeat.
func (k *kafka) speaksStreamsProtocol() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, k.cl)
	if err != nil {
		return false, fmt.Errorf("asking the cluster for its API versions: %w", err)
	}
	return slices.ContainsFunc(resp.ApiKeys, func(a kmsg.ApiVersionsResponseApiKey) bool { return a.ApiKey == 88 }), nil
}

// scaleRebalance runs the scenario once as name, under guarantee g and group protocol proto;
// beat, if not zero, is a classic member's Config.HeartbeatInterval.
func scaleRebalance(k *kafka, o options, env *runEnv, run int, name string, g kstream.Guarantee, proto kstream.GroupProtocol, beat time.Duration) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	if err := k.createTopics(ctx, rebalancePartitions, env.in, env.out); err != nil {
		return err
	}
	defer func() {
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
		runtime.GC()
		debug.FreeOSMemory()
	}()

	gaps := &gapRecorder{}
	type member struct {
		app  *kstream.App
		stop context.CancelFunc
		done chan error
	}
	var members []*member
	startMember := func() (*member, error) {
		dir, err := os.MkdirTemp("", "kstream-bench-scale-")
		if err != nil {
			return nil, err
		}
		b := countWithGaps(env, gaps)
		app, err := kstream.New(b, kstream.Config{
			// Every update forwarded: the scenarios measure kstream without the record cache
			// (on by default), as they always have; bench/compare's count-cache turns it on.
			CacheMaxBytes:  -1,
			ApplicationID:  env.group,
			Brokers:        env.brokers,
			CommitInterval: commitInterval,
			CloseTimeout:   shutdownTimeout,
			Logger:         env.logger,
			StateDir:       dir,
			Guarantee:      g,
			GroupProtocol:  proto,
			// 0: kgo's default, 3 s.
			HeartbeatInterval: beat,
		})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		actx, stop := context.WithCancel(ctx)
		m := &member{app: app, stop: stop, done: make(chan error, 1)}
		go func() {
			m.done <- app.Run(actx)
			os.RemoveAll(dir)
		}()
		members = append(members, m)
		return m, nil
	}
	defer func() {
		for _, m := range members {
			m.stop()
		}
		for _, m := range members {
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
	}()

	// The input: rebalanceRate records/s, round-robin over the partitions, every 5ms.
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer prod.Close()
	pctx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan error, 1)
	go func() {
		const tick = 5 * time.Millisecond
		per := rebalanceRate * int(tick) / int(time.Second)
		t := time.NewTicker(tick)
		defer t.Stop()
		value := make([]byte, o.valueSize)
		var n int
		var perr atomic.Value
		for {
			select {
			case <-pctx.Done():
				if e, ok := perr.Load().(error); ok {
					prodDone <- e
					return
				}
				prodDone <- nil
				return
			case <-t.C:
			}
			for range per {
				p := int32(n % rebalancePartitions)
				prod.Produce(pctx, &kgo.Record{Topic: env.in, Partition: p, Key: fmt.Appendf(nil, "k%05d", n%countKeys), Value: value},
					func(_ *kgo.Record, err error) {
						if err != nil && !errors.Is(err, context.Canceled) {
							perr.CompareAndSwap(nil, err)
						}
					})
				n++
			}
		}
	}()
	defer func() {
		stopProd()
		if perr := <-prodDone; perr != nil && err == nil {
			err = fmt.Errorf("producing: %w", perr)
		}
	}()

	tasksOf := func(m *member) []int32 {
		var ps []int32
		for _, t := range m.app.Tasks() {
			ps = append(ps, t.Partition)
		}
		slices.Sort(ps)
		return ps
	}
	waitFor := func(what string, cond func() bool) error { return waitUntil(ctx, what, 10*time.Millisecond, cond) }
	running := func(m *member) bool { return m.app.State() == kstream.StateRunning }

	a, err := startMember()
	if err != nil {
		return err
	}
	b, err := startMember()
	if err != nil {
		return err
	}
	if err := waitFor("two instances sharing the tasks", func() bool {
		return running(a) && running(b) && len(tasksOf(a)) == rebalancePartitions/2 && len(tasksOf(b)) == rebalancePartitions/2
	}); err != nil {
		return err
	}
	// Let the two settle (restores done, the backlog of the join processed), then measure
	// a steady window as long as the rebalance window will be.
	time.Sleep(3 * time.Second)
	before := map[int32]int{}
	for i, m := range []*member{a, b} {
		for _, p := range tasksOf(m) {
			before[p] = i
		}
	}
	gaps.window()
	steadyFrom := time.Now()

	time.Sleep(4 * time.Second)
	steady := gaps.close(time.Now())
	steadyLen := time.Since(steadyFrom)

	gaps.window()
	joined := time.Now()
	c, err := startMember()
	if err != nil {
		return err
	}
	if err := waitFor("the third instance taking a third of the tasks", func() bool {
		return running(a) && running(b) && running(c) && len(tasksOf(c)) == rebalancePartitions/3 &&
			len(tasksOf(a))+len(tasksOf(b)) == rebalancePartitions-rebalancePartitions/3
	}); err != nil {
		return err
	}
	settledAt := time.Now()
	settled := settledAt.Sub(joined)
	// Every task processing on its new (or old) instance: each partition has a record
	// processed since the group settled.
	if err := waitFor("every task processing after the rebalance", func() bool {
		for p := range rebalancePartitions {
			if gaps.last[p].Load() < settledAt.UnixNano() {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	processing := time.Since(joined)
	time.Sleep(time.Second)
	during := gaps.close(time.Now())

	var stayMax, movedMax, steadyMax time.Duration
	stayed, moved := 0, 0
	after := map[int32]int{}
	for i, m := range []*member{a, b, c} {
		for _, p := range tasksOf(m) {
			after[p] = i
		}
	}
	for p := range int32(rebalancePartitions) {
		steadyMax = max(steadyMax, steady[p])
		if after[p] == before[p] {
			stayed++
			stayMax = max(stayMax, during[p])
		} else {
			moved++
			movedMax = max(movedMax, during[p])
		}
	}
	var aborted int64
	for _, m := range members {
		aborted += m.app.Stats().TransactionsAborted
	}
	line := fmt.Sprintf("%d tasks, %d moved, %d stayed; the group settled %v after the third instance started, every task processing after %v; longest pause of a staying task %v (steady state before, over %v: %v); moved tasks paused up to %v",
		rebalancePartitions, moved, stayed, settled.Round(time.Millisecond), processing.Round(time.Millisecond), stayMax.Round(time.Millisecond),
		steadyLen.Round(time.Second), steadyMax.Round(time.Millisecond), movedMax.Round(time.Millisecond))
	if g == kstream.ExactlyOnce {
		line += fmt.Sprintf("; %d transactions aborted", aborted)
	}
	fmt.Printf("  %-21s run %d: %s\n", name, run, line)
	return nil
}
