package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kill-9 (issue 26): three instances of an exactly-once count, each a child process of this
// binary with one standby per task, share rebalancePartitions tasks while rebalanceRate
// records/s arrive over killKeys keys; one is killed with SIGKILL (no commit, no leaving the
// group). The parent reads the output read_committed and notes when each partition's records
// arrive: the output of a partition is its task's (the input is partitioned by the key's
// murmur2 hash, as the count's sink is), so the longest gap of a partition is the longest
// pause of its task, committed output included. Printed: the longest pause of a task of the
// killed instance (its tasks wait for the session timeout to expire its membership, then for
// a standby's promotion, and its open transaction to be aborted: the leader fences its
// transactional id once it is gone, without which the broker would abort it at its
// TransactionTimeout, 10 s) against SessionTimeout + 1 s, that of the other tasks, and
// whether every key's counts are exactly 1, 2, ..., n.

// envInstanceChild makes the bench binary run one instance of the kill-9 count.
const envInstanceChild = "KSTREAM_BENCH_INSTANCE_CHILD"

const (
	killKeys    = 10_000
	killSession = 6 * time.Second
)

// runInstanceChild runs the count configured by the environment until killed, or until its
// stdin is closed (then it stops cleanly).
func runInstanceChild() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := kstream.Config{
		// Every update forwarded: the scenarios measure kstream without the record cache
		// (on by default), as they always have; bench/compare's count-cache turns it on.
		CacheMaxBytes:     -1,
		ApplicationID:     os.Getenv("BENCH_GROUP"),
		ClientID:          os.Getenv("BENCH_CLIENT"),
		Brokers:           strings.Split(os.Getenv("BENCH_BROKERS"), ","),
		StateDir:          os.Getenv("BENCH_STATE"),
		Guarantee:         kstream.ExactlyOnce,
		NumStandbys:       1,
		SessionTimeout:    killSession,
		HeartbeatInterval: 250 * time.Millisecond,
		// TransactionTimeout is the default, 10s, longer than the session timeout: the
		// killed instance's open transaction would hold read_committed readers of its
		// output partitions until the broker aborts it at that timeout (plus up to its
		// 10s check interval), but the group's leader fences its transactional id once it
		// is gone, which aborts it at once.
		CloseTimeout: shutdownTimeout,
		Logger:       logger,
	}
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, os.Getenv("BENCH_IN"), serde.String(), serde.Bytes()).GroupByKey(), countStore).
		ToStream().To(os.Getenv("BENCH_OUT"), serde.String(), serde.Int64())
	app, err := kstream.New(b, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench instance child:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	if err := app.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "bench instance child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type instanceChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string
	done  chan struct{}
}

func startInstanceChild(env *runEnv, client string) (*instanceChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kstream-bench-kill-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envInstanceChild+"=1", "BENCH_GROUP="+env.group, "BENCH_CLIENT="+client,
		"BENCH_BROKERS="+strings.Join(env.brokers, ","), "BENCH_STATE="+dir, "BENCH_IN="+env.in, "BENCH_OUT="+env.out)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting an instance child: %w", err)
	}
	c := &instanceChild{cmd: cmd, stdin: stdin, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c, nil
}

// stop closes the child's stdin (a clean stop) and waits for it, killing it after a minute.
func (c *instanceChild) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	os.RemoveAll(c.dir)
}

func runKill9(k *kafka, o options, env *runEnv, run int) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioCap)
	defer cancel()
	if err := k.createTopics(ctx, rebalancePartitions, env.in, env.out); err != nil {
		return err
	}
	defer func() {
		if derr := k.cleanUp(env, true); derr != nil && err == nil {
			err = derr
		}
	}()

	// The output, read_committed: per partition its arrival times, per key its counts.
	gaps := &gapRecorder{}
	var outMu sync.Mutex
	seqs := map[string][]int64{}
	reader, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.ConsumeTopics(env.out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer reader.Close()
	rctx, stopReading := context.WithCancel(ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for rctx.Err() == nil {
			fs := reader.PollFetches(rctx)
			now := time.Now()
			outMu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				gaps.note(r.Partition, now)
				n, _ := serde.Int64().Deserialize(r.Value)
				seqs[string(r.Key)] = append(seqs[string(r.Key)], n)
			})
			outMu.Unlock()
		}
	}()
	defer func() { stopReading(); <-readDone }()

	var children []*instanceChild
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	for i := range 3 {
		c, err := startInstanceChild(env, fmt.Sprintf("kill9-%d", i))
		if err != nil {
			return err
		}
		children = append(children, c)
	}

	// The input: keyed, partitioned by murmur2 (kgo's default), rebalanceRate records/s.
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer prod.Close()
	want := map[string]int64{}
	var wantMu sync.Mutex
	pctx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan error, 1)
	go func() {
		const tick = 5 * time.Millisecond
		per := rebalanceRate * int(tick) / int(time.Second)
		t := time.NewTicker(tick)
		defer t.Stop()
		rng := rand.New(rand.NewPCG(uint64(run), 26))
		var perr atomic.Value
		for {
			select {
			case <-pctx.Done():
				if err := prod.Flush(context.Background()); err != nil {
					perr.CompareAndSwap(nil, err)
				}
				e, _ := perr.Load().(error)
				prodDone <- e
				return
			case <-t.C:
			}
			wantMu.Lock()
			for range per {
				key := fmt.Sprintf("k%05d", rng.IntN(killKeys))
				want[key]++
				prod.Produce(ctx, &kgo.Record{Topic: env.in, Key: []byte(key), Value: []byte("v")}, func(_ *kgo.Record, err error) {
					if err != nil {
						perr.CompareAndSwap(nil, err)
					}
				})
			}
			wantMu.Unlock()
		}
	}()
	producing := true
	defer func() {
		if producing {
			stopProd()
			<-prodDone
		}
	}()

	adm := kadm.NewClient(k.cl)
	// members returns the group's members by client id prefix (kill9-<i>) with their
	// partitions of the input, once the group is stable.
	members := func() map[string][]int32 {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		described, err := adm.DescribeGroups(dctx, env.group)
		if err != nil {
			return nil
		}
		g := described[env.group]
		if g.State != "Stable" {
			return nil
		}
		out := map[string][]int32{}
		for _, m := range g.Members {
			name, _, _ := strings.Cut(m.ClientID, "-StreamThread")
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range ca.Topics {
					if t.Topic == env.in {
						out[name] = append(out[name], t.Partitions...)
					}
				}
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool) error { return waitUntil(ctx, what, 50*time.Millisecond, cond) }
	var before map[string][]int32
	if err := waitFor("three instances with four tasks each", func() bool {
		before = members()
		if len(before) != 3 {
			return false
		}
		for _, ps := range before {
			if len(ps) != rebalancePartitions/3 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // standbys caught up, steady output
	victim := children[2]
	victimParts := before["kill9-2"]
	gaps.window()
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing an instance: %w", err)
	}
	<-victim.done
	os.RemoveAll(victim.dir)
	children = children[:2]
	if err := waitFor("two instances with six tasks each", func() bool {
		m := members()
		return len(m) == 2 && len(m["kill9-0"]) == rebalancePartitions/2 && len(m["kill9-1"]) == rebalancePartitions/2
	}); err != nil {
		return err
	}
	settled := time.Since(killed)
	time.Sleep(2 * time.Second)
	during := gaps.close(time.Now())
	var victimMax, otherMax time.Duration
	for p := range int32(rebalancePartitions) {
		if contains(victimParts, p) {
			victimMax = max(victimMax, during[p])
		} else {
			otherMax = max(otherMax, during[p])
		}
	}
	stopProd()
	producing = false
	if perr := <-prodDone; perr != nil {
		return fmt.Errorf("producing: %w", perr)
	}
	// Exact: every key's counts 1..n, read_committed.
	wantMu.Lock()
	defer wantMu.Unlock()
	reached := func() bool {
		outMu.Lock()
		defer outMu.Unlock()
		for key, n := range want {
			s := seqs[key]
			if len(s) == 0 || s[len(s)-1] != n {
				return false
			}
		}
		return true
	}
	exact := "exact"
	if err := waitFor("every count", reached); err != nil {
		exact = "NOT exact: " + err.Error()
	} else {
		outMu.Lock()
		bad := 0
		for key, n := range want {
			s := seqs[key]
			ok := int64(len(s)) == n
			for i := 0; ok && i < len(s); i++ {
				ok = s[i] == int64(i+1)
			}
			if !ok {
				bad++
			}
		}
		outMu.Unlock()
		if bad > 0 {
			exact = fmt.Sprintf("NOT exact: %d of %d keys' counts are not 1..n", bad, len(want))
		}
	}
	total := int64(0)
	for _, n := range want {
		total += n
	}
	fmt.Printf("  %-21s run %d: one of 3 exactly-once instances (one standby each) killed with SIGKILL (session timeout %v, transaction timeout 10s): its %d tasks paused up to %v (target: session timeout %v + 1s = %v: %s), the others up to %v; the group settled %v after the kill; %d records over %d keys: %s\n",
		"kill-9", run, killSession, len(victimParts), victimMax.Round(time.Millisecond), killSession, killSession+time.Second,
		metOrMissed(victimMax <= killSession+time.Second), otherMax.Round(time.Millisecond), settled.Round(100*time.Millisecond), total, len(want), exact)
	if !strings.HasPrefix(exact, "exact") {
		return errors.New("kill-9: the output is not exact")
	}
	return nil
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
