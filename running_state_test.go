package kstream_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An instance that holds its tasks and processes them reports RUNNING, and is ready, soon
// after the group's assignment last changed: after a failover (an instance SIGKILLed, then
// restarted on its state directory), a graceful restart, and a new instance joining, under
// both guarantees, on both brokers. Before the fix, an exactly-once instance whose
// assignment arrived while its transactional producer was still being initialized (as after
// a SIGKILL on Apache Kafka, where initializing aborts the transaction the dead incarnation
// left open) went RUNNING, then REBALANCING when the initialization ended, and stayed there.
func TestInstancesReportRunningAfterAssignmentChanges(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"alos", "eos"} {
		t.Run(g, func(t *testing.T) {
			t.Parallel()
			for _, sc := range []string{"failover", "graceful-restart", "new-instance"} {
				t.Run(sc, func(t *testing.T) {
					t.Parallel()
					runningAfterChange(t, g == "eos", sc)
				})
			}
		})
	}
}

// runningAfterChange runs one scenario of TestInstancesReportRunningAfterAssignmentChanges.
func runningAfterChange(t *testing.T, eos bool, scenario string) {
	const parts = 4
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	cfgFor := func(app, dir string) kstream.Config {
		cfg := testConfig(t)
		cfg.ApplicationID, cfg.StateDir = app, dir
		if eos {
			cfg.Guarantee = kstream.ExactlyOnce
		}
		return cfg
	}
	app := kafkatest.Name(t, "app")
	dirA, dirB := t.TempDir(), t.TempDir()
	a := start(t, newApp(t, countTopology(in, out), cfgFor(app, dirA)))
	cl := kafkatest.ManualProducer(t)
	produce := func(n, from int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%03d", (from+i)%200), Value: []byte("v")}
		}
		kafkatest.Produce(t, cl, recs...)
	}
	produce(1000, 0)

	switch scenario {
	case "failover":
		// B is a child process, killed for real while A runs; then B restarts, in this
		// process, on its state directory (so that, under exactly-once, it fences the dead
		// incarnation's producer and aborts its open transaction).
		guarantee := "alos"
		if eos {
			guarantee = "eos"
		}
		child := kafkatest.StartChild(t, "count-app", "APP_ID="+app, "STATE_DIR="+dirB, "IN="+in, "OUT="+out,
			"GUARANTEE="+guarantee, "COMMIT_MS=200")
		kafkatest.Eventually(t, 60*time.Second, "the child to take a share of the tasks", func() bool {
			n := len(a.app.Status().Active)
			return n > 0 && n < parts
		})
		produce(1000, 1000)
		child.Kill(t)
		if !eos {
			awaitRunningAfterChange(t, parts, a.app)
		}
		// Under exactly-once, A restores B's tasks only once the transaction B left open
		// ends: when B's next incarnation aborts it (below), or after the transaction
		// timeout. Java waits the same.
		b := start(t, newApp(t, countTopology(in, out), cfgFor(app, dirB)))
		produce(1000, 2000)
		awaitRunningAfterChange(t, parts, a.app, b.app)
	case "graceful-restart":
		b := start(t, newApp(t, countTopology(in, out), cfgFor(app, dirB)))
		awaitRunningAfterChange(t, parts, a.app, b.app)
		produce(1000, 1000)
		if err := b.stop(); err != nil {
			t.Fatalf("stopping B: %v", err)
		}
		awaitRunningAfterChange(t, parts, a.app)
		b = start(t, newApp(t, countTopology(in, out), cfgFor(app, dirB)))
		produce(1000, 2000)
		awaitRunningAfterChange(t, parts, a.app, b.app)
	case "new-instance":
		awaitRunningAfterChange(t, parts, a.app)
		b := start(t, newApp(t, countTopology(in, out), cfgFor(app, dirB)))
		produce(1000, 1000)
		awaitRunningAfterChange(t, parts, a.app, b.app)
	}
}

// settleBound is how soon after the last change of the assignment every instance that
// holds tasks must report RUNNING and be ready.
const settleBound = 2 * time.Second

// awaitRunningAfterChange waits until apps together hold all of the tasks, each exactly
// once, each app some, and every one of them that holds a task reports RUNNING and is ready. It fails the
// test if the assignment is complete and has not changed for settleBound while one of them
// is not, with each instance's state, since when, and why.
func awaitRunningAfterChange(t *testing.T, tasks int, apps ...*kstream.App) {
	t.Helper()
	held := make([][]string, len(apps))
	lastChange := time.Now()
	deadline := time.Now().Add(120 * time.Second)
	for {
		complete, all := true, map[string]int{}
		for i, app := range apps {
			var ids []string
			for _, ts := range app.Status().Active {
				ids = append(ids, ts.ID.String())
				all[ts.ID.String()]++
			}
			slices.Sort(ids)
			if !slices.Equal(ids, held[i]) {
				held[i], lastChange = ids, time.Now()
			}
		}
		// Every task held, each once, and every instance holding some (as the balancer
		// gives each member a share when there are enough tasks).
		complete = len(all) == tasks
		for _, n := range all {
			complete = complete && n == 1
		}
		for i := range apps {
			complete = complete && (len(held[i]) > 0 || tasks < len(apps))
		}
		var behind []string
		for i, app := range apps {
			if len(held[i]) == 0 {
				continue
			}
			st, h := app.Status(), app.Health()
			if st.State != kstream.StateRunning || !h.Ready {
				behind = append(behind, fmt.Sprintf("instance %d (tasks %v): %s since %s (%s ago), reason %q; health: %q",
					i, held[i], st.State, st.StateSince.Format(time.TimeOnly), time.Since(st.StateSince).Round(time.Millisecond), st.StateReason, h.Reason))
			}
		}
		if complete && len(behind) == 0 {
			return
		}
		if complete && time.Since(lastChange) > settleBound {
			t.Fatalf("the assignment last changed %s ago (tasks %v), and yet:\n%s", time.Since(lastChange).Round(time.Millisecond), held, strings.Join(behind, "\n"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instances did not come to hold every task once within 120s: %v", held)
		}
		time.Sleep(20 * time.Millisecond) // polling Status, not waiting for a condition
	}
}

// An exactly-once instance whose assignment arrives while its transactional producer is
// still being initialized reports RUNNING once the initialization ends. The in-process
// broker answers InitProducerID at once; the fault below answers CONCURRENT_TRANSACTIONS
// (retriable: the client asks again) until the consumer was assigned its tasks, as Apache
// Kafka does after a SIGKILL while it aborts the transaction the dead incarnation left
// open. Before the fix, Run set REBALANCING when the initialization ended, after the
// assignment had made the instance RUNNING, and nothing set RUNNING again. (On Apache Kafka,
// the failover scenario of TestInstancesReportRunningAfterAssignmentChanges meets the same
// order of events when the broker is slow to abort.)
func TestRunningWhenAssignedWhileProducerInitializes(t *testing.T) {
	t.Parallel()
	broker := kafkatest.Embedded(t)
	if broker == nil {
		t.Skip("needs the in-process broker's request control; on Apache Kafka the failover scenario covers this")
	}
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	var (
		appRef  atomic.Pointer[kstream.App]
		refused atomic.Int32
		reason  atomic.Value // the state's reason when InitProducerID was first refused
	)
	c := broker.Cluster()
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || !strings.Contains(*req.TransactionalID, cfg.ApplicationID) {
			c.KeepControl() // another test's producer
			return nil, nil, false
		}
		if app := appRef.Load(); app != nil && len(app.Status().Active) > 0 {
			c.DropControl() // assigned: the initialization may end now
			return nil, nil, false
		}
		c.KeepControl()
		if app := appRef.Load(); app != nil && refused.Load() == 0 {
			reason.Store(app.Status().StateReason)
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp, nil, true
	})
	var mu sync.Mutex
	var states []string
	cfg.StateListener = func(old, new kstream.State) {
		mu.Lock()
		states = append(states, old.String()+"->"+new.String())
		mu.Unlock()
	}
	app := newApp(t, countTopology(in, out), cfg)
	appRef.Store(app)
	start(t, app)
	kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("v")})
	// The record's count is out once the loop runs, after the initialization ended.
	kafkatest.Consume(t, out, 1, 60*time.Second, readCommitted)
	awaitRunningAfterChange(t, 2, app)
	if refused.Load() == 0 {
		t.Fatalf("the fault refused no InitProducerID: the test shows nothing")
	}
	// While the producer initialized, Status said so.
	if r, _ := reason.Load().(string); !strings.Contains(r, "initializing the transactional producer (transactional id ") {
		t.Errorf("the state's reason while InitProducerID was refused: %q", r)
	}
	if s := app.Status(); s.StateReason != "" || s.StateSince.IsZero() || s.StateSince.After(s.Time) {
		t.Errorf("once RUNNING: since %s, reason %q", s.StateSince, s.StateReason)
	}
	mu.Lock()
	t.Logf("InitProducerID refused %d times until the assignment; state changes: %v", refused.Load(), states)
	mu.Unlock()
}
