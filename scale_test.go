package kstream_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Three processes of one application id share the work: three child processes run the
// counting pipeline under exactly-once over 12 input partitions while the input arrives;
// the group gives each of them a third of the partitions, and, read read_committed, every
// key's counts are exactly 1, 2, ..., n. The consumer group is the distributed engine: no
// coordination other than Kafka's.
func TestThreeProcessesShareTheWork(t *testing.T) {
	t.Parallel()
	const parts, processes = 12, 3
	records, keys := 30_000, 600
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		records, keys = 300_000, 5_000
	}
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	outputs := collect(t, out, readCommitted)

	children := make([]*kafkatest.Child, processes)
	for i := range children {
		children[i] = kafkatest.StartChild(t, "count-app", "APP_ID="+app, "STATE_DIR="+t.TempDir(),
			"IN="+in, "OUT="+out, "GUARANTEE=eos", "COMMIT_MS=100")
	}
	t.Cleanup(func() {
		for _, c := range children {
			c.Kill(t)
		}
	})
	adm := kadm.NewClient(kafkatest.Client(t))
	var shares map[string][]int32
	kafkatest.Eventually(t, 120*time.Second, "three members with four partitions each", func() bool {
		shares = groupShares(t, adm, app, in)
		if len(shares) != processes {
			return false
		}
		for _, ps := range shares {
			if len(ps) != parts/processes {
				return false
			}
		}
		return true
	})
	t.Logf("shares: %v", shares)

	var mu sync.Mutex
	want := map[string]int64{}
	feed(t, in, records, keys, 20*time.Millisecond, 31, &mu, want)
	kafkatest.Eventually(t, 120*time.Second, "every count", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)

	// The input arrived while the three ran: each of them processed records of its own
	// partitions (a child prints nothing per record, so the group's committed offsets say
	// it: every partition moved, and the group still has the same three members).
	final := groupShares(t, adm, app, in)
	if len(final) != processes {
		t.Errorf("group after the run: %v, want the same %d members", final, processes)
	}
	for m, ps := range shares {
		if !slices.Equal(final[m], ps) {
			t.Errorf("member %s held %v and now holds %v: the work moved during a run without failures", m, ps, final[m])
		}
	}
	committed, err := adm.FetchOffsets(kafkatest.Context(t, 10*time.Second), app)
	if err != nil {
		t.Fatalf("fetching the group's offsets: %v", err)
	}
	for p := range int32(parts) {
		if o, ok := committed.Lookup(in, p); !ok || o.At <= 0 {
			t.Errorf("input partition %d: committed offset %v, want progress", p, o.At)
		}
	}
	for i, c := range children {
		if exited, err := c.Exited(); exited {
			t.Errorf("process %d exited: %v\n%s", i, err, tail(c.Output(), 2000))
		}
	}
}

// groupShares returns, for each member of group, the partitions of topic it is assigned,
// sorted.
func groupShares(t *testing.T, adm *kadm.Client, group, topic string) map[string][]int32 {
	t.Helper()
	gs, err := adm.DescribeGroups(kafkatest.Context(t, 10*time.Second), group)
	if err != nil {
		return nil
	}
	shares := map[string][]int32{}
	for _, g := range gs {
		if g.State != "Stable" {
			return nil
		}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return nil
			}
			var ps []int32
			for _, tp := range a.Topics {
				if tp.Topic == topic {
					ps = append(ps, tp.Partitions...)
				}
			}
			slices.Sort(ps)
			shares[m.MemberID] = ps
		}
	}
	return shares
}

// tail returns the last n bytes of s, cut at a line start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// A rebalance does not hold the tasks that stay: while the group waits for a member to
// rejoin (here a frozen process, for up to the rebalance timeout), an instance whose tasks do
// not move keeps processing. kgo holds offset commits for as long as the member joins and
// syncs; before joinWatch the instance's periodic commit waited there with every task at
// rest, so its tasks stopped for the whole join (up to 5 s here; up to a heartbeat interval
// in an ordinary rebalance).
func TestRebalanceJoinDoesNotHoldStayingTasks(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "AtLeastOnce", true: "ExactlyOnce"}[eos], func(t *testing.T) {
			t.Parallel()
			joinHoldCase(t, eos)
		})
	}
}

// childTasksRe matches a child's log line of its tasks after an assignment.
var childTasksRe = regexp.MustCompile(`msg="kstream: partitions assigned".* tasks=([0-9]+)`)

func joinHoldCase(t *testing.T, eos bool) {
	const parts = 4
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.CommitInterval = 100 * time.Millisecond
	// The join waits for the frozen member until its session times out or, at the latest,
	// the rebalance timeout passes. Its session is long (30 s), so that the join lasts the
	// rebalance timeout (5 s) from its start, however long the third instance takes to start:
	// with the frozen member's 6 s session counted from the freeze, a third instance slow to
	// start on a loaded machine (a CI run, under exactly-once) left the join a fraction of a
	// second after the first 1.5 s, and the test saw too few records in it.
	cfg.RebalanceTimeout = 5 * time.Second
	env := []string{"APP_ID=" + cfg.ApplicationID, "STATE_DIR=" + t.TempDir(), "IN=" + in, "OUT=" + out, "COMMIT_MS=100", "REBALANCE_MS=5000", "SESSION_MS=30000"}
	if eos {
		cfg.Guarantee = kstream.ExactlyOnce
		env = append(env, "GUARANTEE=eos")
	}
	frozen := kafkatest.StartChild(t, "count-app", env...)
	t.Cleanup(func() { frozen.Kill(t) })
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	adm := kadm.NewClient(kafkatest.Client(t))
	state := func() string {
		gs, err := adm.DescribeGroups(kafkatest.Context(t, 5*time.Second), cfg.ApplicationID)
		if err != nil || len(gs) != 1 {
			return ""
		}
		for _, g := range gs {
			return g.State
		}
		return ""
	}
	// Both members hold their tasks and the group is stable: a join still under way when
	// the member freezes (the second round of the cooperative rebalance that gave it its
	// tasks) would end at the rebalance timeout counted from before the freeze, and the test
	// would measure that join instead of the third member's.
	kafkatest.Eventually(t, 60*time.Second, "two members sharing the tasks, the group stable", func() bool {
		m := childTasksRe.FindAllStringSubmatch(frozen.Output(), -1)
		return len(app.Tasks()) == parts/2 && app.State() == kstream.StateRunning &&
			len(m) > 0 && m[len(m)-1][1] == strconv.Itoa(parts/2) && state() == "Stable"
	})

	// Input flows to every partition for the rest of the test.
	stop := make(chan struct{})
	fed := make(chan struct{})
	cl := kafkatest.ManualProducer(t)
	go func() {
		defer close(fed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			recs := make([]*kgo.Record, 0, parts*10)
			for j := range parts * 10 {
				recs = append(recs, &kgo.Record{Topic: in, Partition: int32(j % parts), Key: fmt.Appendf(nil, "k%d", j), Value: []byte("v")})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-fed })

	// The other member freezes; a third joins: the group waits for the frozen one to
	// rejoin, for up to the rebalance timeout (5 s).
	frozen.Stop(t)
	third := newApp(t, countTopology(in, out), func() kstream.Config { c := cfg; c.StateDir = t.TempDir(); return c }())
	start(t, third)
	kafkatest.Eventually(t, 30*time.Second, "the group rebalancing", func() bool { return state() == "PreparingRebalance" })
	// This instance learns of the rebalance from its next heartbeat (200 ms) and joins; the
	// join lasts until the frozen member is given up (about 5 s). Before joinWatch, the
	// instance's next commit (100 ms later) waited for the join with every task at rest: no
	// record was processed from then until the join ended. So the staying tasks must still
	// be processing from 1.5 s into the join on, with the group still waiting. The input
	// brings this instance about 2,000 records a second (fewer on a loaded machine); more
	// than 200 records in that part of the join is progress, whatever the rate.
	const settled, progress = 1500 * time.Millisecond, 200
	began := time.Now()
	mark, late := int64(-1), int64(0)
	kafkatest.Eventually(t, 10*time.Second, "the staying tasks processing late in the join, or the join's end", func() bool {
		n := app.Status().ProcessedRecords
		if state() != "PreparingRebalance" {
			return true
		}
		if time.Since(began) < settled {
			return false
		}
		if mark < 0 {
			mark = n
		}
		late = n - mark
		return late > progress
	})
	if s := state(); s != "PreparingRebalance" {
		if mark < 0 {
			t.Fatalf("the group left PreparingRebalance (%s) less than %s into the join: the test proves nothing", s, settled)
		}
		if late <= progress {
			t.Fatalf("the staying tasks processed %d records from %s into the join until it ended (%s after it was seen to begin); want more than %d", late, settled, time.Since(began).Round(time.Millisecond), progress)
		}
	}
	at := mark
	t.Logf("processed %d records from %s into the join on, with the group still waiting for the frozen member", app.Status().ProcessedRecords-at, settled)
}
