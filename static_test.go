package kstream_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// restoredCounter is a RestoreListener that counts the records restored.
type restoredCounter struct{ n atomic.Int64 }

func (*restoredCounter) OnRestoreStart(string, string, int32, int64, int64) {}
func (*restoredCounter) OnBatchRestored(string, string, int32, int64, int)  {}
func (c *restoredCounter) OnRestoreEnd(_, _ string, _ int32, restored int64) {
	c.n.Add(restored)
}

// A rolling restart of 3 static members (Config.InstanceID), one at a time, each away for
// 2 s (within the session timeout) and started again with its state directory: no task
// moves, neither while it is away nor when it is back, and it restores no record (its
// stores are as its own last commit left them). The counts stay exact. With dynamic members
// the others take the tasks of the one away.
func TestStaticMembersRollingRestart(t *testing.T) {
	t.Parallel()
	const parts = 6
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	type instance struct {
		cfg      kstream.Config
		r        *running
		restored *restoredCounter
	}
	insts := make([]*instance, 3)
	for i := range insts {
		cfg := testConfig(t)
		cfg.ApplicationID = app
		cfg.InstanceID = fmt.Sprintf("pod-%d", i)
		c := &restoredCounter{}
		cfg.RestoreListener = c
		insts[i] = &instance{cfg: cfg, restored: c}
		insts[i].r = start(t, newApp(t, countTopology(in, out), cfg))
	}
	tasksOf := func(r *running) []string {
		var ids []string
		for _, ts := range r.app.Status().Active {
			ids = append(ids, ts.ID.String())
		}
		slices.Sort(ids)
		return ids
	}
	settled := func() bool { // balanced: each instance runs a third of the tasks
		for _, in := range insts {
			if in.r.app.State() != kstream.StateRunning || len(tasksOf(in.r)) != parts/len(insts) {
				return false
			}
		}
		return true
	}
	produced := 0
	produce := func() {
		recs := make([]*kgo.Record, 60)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%02d", i%30), Value: []byte("v")}
		}
		kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
		produced += len(recs)
	}
	produce()
	kafkatest.Eventually(t, 60*time.Second, "3 instances running with every task", settled)
	before := make([][]string, len(insts))
	for i, in := range insts {
		before[i] = tasksOf(in.r)
	}
	for i, inst := range insts {
		if err := inst.r.stop(); err != nil {
			t.Fatalf("stopping pod-%d: %v", i, err)
		}
		produce()
		// While it is away, no task moves: a dynamic member's leave would have rebalanced
		// the group at once, and the others would hold its tasks well within this wait (a
		// wait for something not to happen).
		time.Sleep(2 * time.Second)
		for j, other := range insts {
			if j == i {
				continue
			}
			if got := tasksOf(other.r); !slices.Equal(got, before[j]) {
				t.Errorf("while pod-%d is away: pod-%d has tasks %v, had %v", i, j, got, before[j])
			}
		}
		inst.restored.n.Store(0)
		inst.r = start(t, newApp(t, countTopology(in, out), inst.cfg))
		kafkatest.Eventually(t, 60*time.Second, fmt.Sprintf("pod-%d back with every task", i), settled)
		for j, other := range insts {
			if got := tasksOf(other.r); !slices.Equal(got, before[j]) {
				t.Errorf("after restarting pod-%d: pod-%d has tasks %v, had %v", i, j, got, before[j])
			}
		}
		if n := inst.restored.n.Load(); n != 0 {
			t.Errorf("pod-%d restored %d records when it came back, want 0 (its local checkpoint is current)", i, n)
		}
		// Status names the member id the broker knows it by now, not the one of the
		// assignment it got back.
		if id, ids := inst.r.app.Status().MemberID, groupMemberIDs(t, app); !slices.Contains(ids, id) {
			t.Errorf("pod-%d: Status().MemberID %q is not one of the group's members %v", i, id, ids)
		}
	}
	// Exact: the last count of each key is what was produced for it.
	last := map[string]int64{}
	for _, r := range kafkatest.Drain(t, out, 2*time.Second, 60*time.Second) {
		n, _ := serde.Int64().Deserialize(r.Value)
		last[string(r.Key)] = n
	}
	for k := range 30 {
		if key := fmt.Sprintf("k%02d", k); last[key] != int64(produced/30) {
			t.Errorf("count of %s: %d, want %d", key, last[key], produced/30)
		}
	}
	t.Logf("%d records produced; tasks per pod %v", produced, before)
}

// A static member that stops with LeaveGroupOnClose leaves the group: its tasks move to the
// other member at once (scaling in), not after the session timeout (20 s here) as when it
// stays.
func TestStaticMemberLeavesOnClose(t *testing.T) {
	t.Parallel()
	const parts = 4
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	cfgs := make([]kstream.Config, 2)
	runs := make([]*running, 2)
	for i := range cfgs {
		cfgs[i] = testConfig(t)
		cfgs[i].ApplicationID = app
		cfgs[i].InstanceID = fmt.Sprintf("pod-%d", i)
		cfgs[i].SessionTimeout = 20 * time.Second
		cfgs[i].LeaveGroupOnClose = i == 1
		runs[i] = start(t, newApp(t, countTopology(in, out), cfgs[i]))
	}
	kafkatest.Eventually(t, 60*time.Second, "both running with every task", func() bool {
		return runs[0].app.State() == kstream.StateRunning && runs[1].app.State() == kstream.StateRunning &&
			len(runs[0].app.Tasks())+len(runs[1].app.Tasks()) == parts && len(runs[1].app.Tasks()) > 0
	})
	stopped := time.Now()
	if err := runs[1].stop(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 10*time.Second, "pod-0 holding every task", func() bool {
		return len(runs[0].app.Tasks()) == parts && runs[0].app.State() == kstream.StateRunning
	})
	t.Logf("pod-0 took every task %s after pod-1 stopped", time.Since(stopped).Round(time.Millisecond))
}

// groupMemberIDs lists the member ids of group as the broker describes it.
func groupMemberIDs(t *testing.T, group string) []string {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t))
	described, err := adm.DescribeGroups(kafkatest.Context(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range described[group].Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}
