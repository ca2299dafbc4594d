package kstream_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Health before Run (CREATED: live, not ready), while running (live and ready, also while
// idle with polls longer than the stall bound), while a
// processor blocks the poll loop past Config.StallTimeout (not live, and Status still
// answers at once from the loop's last snapshot), after the processor returns (live again),
// and after Run returned (NOT_RUNNING: live, not ready).
func TestHealthAndStall(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	release := make(chan struct{})
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.String()), func(v string) string {
		if v == "block" {
			<-release
		}
		return strings.ToUpper(v)
	}).To(out, nil, nil)
	cfg := testConfig(t)
	// A poll waits up to the commit interval: an idle loop is live although it turns only
	// every 2s, more than the stall bound.
	cfg.CommitInterval, cfg.StallTimeout = 2*time.Second, 500*time.Millisecond
	app := newApp(t, b, cfg)
	if h := app.Health(); h != (kstream.Health{Live: true, Reason: "state CREATED"}) {
		t.Fatalf("before Run: %+v", h)
	}
	r := start(t, app)
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("a")})
	kafkatest.Eventually(t, 60*time.Second, "one record processed and the app ready", func() bool {
		return app.Status().ProcessedRecords == 1 && app.Health() == kstream.Health{Live: true, Ready: true}
	})

	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if h := app.Health(); !h.Live {
			t.Fatalf("idle: %+v", h)
		}
	}

	kafkatest.Produce(t, cl, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("block")})
	var h kstream.Health
	kafkatest.Eventually(t, 30*time.Second, "not live while the processor blocks", func() bool {
		h = app.Health()
		return !h.Live
	})
	if h.Ready || !strings.Contains(h.Reason, "the poll loop has not turned for") || !strings.Contains(h.Reason, "(bound 500ms beyond the poll's wait)") {
		t.Errorf("stalled: %+v", h)
	}
	began := time.Now()
	s := app.Status()
	if took := time.Since(began); took > time.Second {
		t.Errorf("Status took %s while the loop was blocked", took)
	}
	if len(s.Active) != 1 || s.Active[0].ID != (kstream.TaskID{SubTopology: 0, Partition: 0}) || s.LoopHeartbeat.IsZero() || time.Since(s.LoopHeartbeat) < 500*time.Millisecond {
		t.Errorf("status while stalled: active %+v heartbeat %v", s.Active, s.LoopHeartbeat)
	}
	close(release)
	kafkatest.Eventually(t, 30*time.Second, "live and ready again, two records processed", func() bool {
		return app.Status().ProcessedRecords == 2 && app.Health() == kstream.Health{Live: true, Ready: true}
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if h := app.Health(); h != (kstream.Health{Live: true, Reason: "state NOT_RUNNING"}) {
		t.Errorf("after Run: %+v", h)
	}
	if s := app.Status(); !s.LoopHeartbeat.IsZero() || s.State != kstream.StateNotRunning {
		t.Errorf("after Run: heartbeat %v state %v", s.LoopHeartbeat, s.State)
	}
}

// statusRestoreListener checks, at every restored batch, what Status says of the
// restoration in progress.
type statusRestoreListener struct {
	app *kstream.App
	reg *prometheus.Registry // Config.Metrics: its restore metrics read the same progress
	mu  sync.Mutex
	got []kstream.RestoreStatus
	bad []string
	sum int64
}

func (l *statusRestoreListener) OnRestoreStart(string, string, int32, int64, int64) {}
func (l *statusRestoreListener) OnRestoreEnd(string, string, int32, int64)          {}
func (l *statusRestoreListener) OnBatchRestored(store, topic string, p int32, batchEnd int64, n int) {
	s := l.app.Status()
	h := l.app.Health()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum += int64(n)
	if len(s.Restores) != 1 {
		l.bad = append(l.bad, fmt.Sprintf("batch to %d: restores %+v", batchEnd, s.Restores))
		return
	}
	r := s.Restores[0]
	if r.Store != store || r.Changelog != topic || r.Partition != p || r.Position != batchEnd || r.Restored != l.sum || r.Remaining != r.EndOffset-batchEnd {
		l.bad = append(l.bad, fmt.Sprintf("batch to %d (%d records, %d in all): %+v", batchEnd, n, l.sum, r))
	}
	if h.Ready || !h.Live {
		l.bad = append(l.bad, fmt.Sprintf("health while restoring: %+v", h))
	}
	if len(s.Active) != 1 || !s.Active[0].Restoring {
		l.bad = append(l.bad, fmt.Sprintf("active tasks while restoring: %+v", s.Active))
	}
	// The state says why it is not RUNNING, and since when.
	if s.State != kstream.StateRebalancing || !strings.Contains(s.StateReason, "restoring the stores of 1 active task(s): 0_0") ||
		s.StateSince.IsZero() || s.StateSince.After(s.Time) {
		l.bad = append(l.bad, fmt.Sprintf("state while restoring: %s since %s, reason %q", s.State, s.StateSince, s.StateReason))
	}
	m, err := gatherMetrics(l.reg)
	if err != nil {
		l.bad = append(l.bad, fmt.Sprintf("batch to %d: gathering the metrics: %v", batchEnd, err))
	}
	restored, _ := m.value("kstream_store_restore_records_total", "task=0_0", "store=counts")
	remaining, _ := m.value("kstream_store_restore_remaining_records", "task=0_0", "store=counts")
	if int64(restored) != l.sum || int64(remaining) != r.Remaining {
		l.bad = append(l.bad, fmt.Sprintf("batch to %d: metrics restored %v remaining %v, want %d and %d", batchEnd, restored, remaining, l.sum, r.Remaining))
	}
	l.got = append(l.got, r)
}

// A store restored from a changelog of 3000 records: at every batch, Status lists the
// restoration with its exact position, records restored and remaining, and the instance is
// live but not ready with its task restoring; once restored, no restoration is listed.
func TestStatusRestoreProgress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	const n = 3000
	prepareChangelog(t, cfg, func(topic string) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%04d", i), Value: count(int64(i))}
		}
		kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	})
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts")
	l := &statusRestoreListener{reg: prometheus.NewRegistry()}
	cfg.RestoreListener, cfg.StateDir, cfg.Metrics = l, t.TempDir(), l.reg
	app := newApp(t, b, cfg)
	l.app = app
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running and ready", func() bool { return app.Health().Ready })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Errorf("during the restoration:\n%s", strings.Join(l.bad, "\n"))
	}
	if len(l.got) == 0 || l.sum != n {
		t.Fatalf("restored %d records in %d batches, want %d", l.sum, len(l.got), n)
	}
	first := l.got[0]
	if first.Task != (kstream.TaskID{}) || first.Store != "counts" || first.StartOffset != 0 || first.EndOffset != n || first.Started.IsZero() {
		t.Errorf("first batch: %+v", first)
	}
	if last := l.got[len(l.got)-1]; last.Remaining != 0 || last.Position != n || last.Rate <= 0 || last.ETA != 0 {
		t.Errorf("last batch: %+v", last)
	}
	if s := app.Status(); len(s.Restores) != 0 || len(s.Active) != 1 || s.Active[0].Restoring {
		t.Errorf("after the restoration: restores %+v active %+v", s.Restores, s.Active)
	}
	m, err := gatherMetrics(l.reg)
	if err != nil {
		t.Fatal(err)
	}
	restored, _ := m.value("kstream_store_restore_records_total", "task=0_0", "store=counts")
	remaining, ok := m.value("kstream_store_restore_remaining_records", "task=0_0", "store=counts")
	if restored != n || remaining != 0 || !ok {
		t.Errorf("metrics after the restoration: restored %v remaining %v (%v), want %d and 0", restored, remaining, ok, n)
	}
}

// gatherMetrics gathers reg as a scrape (metrics_test.go).
func gatherMetrics(reg *prometheus.Registry) (scrape, error) {
	fams, err := reg.Gather()
	s := scrape{}
	for _, f := range fams {
		s[f.GetName()] = f
	}
	return s, err
}

// Two instances with one standby each over 2 partitions: each one's Status lists the other's
// task as its standby, following the changelog of "counts" with lag 0 once the outputs are
// committed; its active task's partition is at its end.
func TestStatusStandby(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	b := func() *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts")
		return b
	}
	cfg := testConfig(t)
	cfg.NumStandbys = 1
	var apps []*kstream.App
	for range 2 {
		c := cfg
		c.StateDir = t.TempDir()
		app := newApp(t, b(), c)
		start(t, app)
		apps = append(apps, app)
	}
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 5 + p {
			recs = append(recs, &kgo.Record{Topic: in, Partition: p, Key: fmt.Appendf(nil, "k%d-%d", p, i%3), Value: []byte("x")})
		}
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	changelog := cfg.ApplicationID + "-counts-changelog"
	var last string
	defer func() {
		if t.Failed() {
			t.Log("last seen: " + last)
		}
	}()
	kafkatest.Eventually(t, 90*time.Second, "each instance a standby of the other's task, caught up", func() bool {
		for i, app := range apps {
			s := app.Status()
			if len(s.Active) != 1 || len(s.Standby) != 1 || s.Standby[0].ID == s.Active[0].ID {
				last = fmt.Sprintf("instance %d: active %+v standby %+v", i, s.Active, s.Standby)
				return false
			}
			p := s.Active[0].Partitions
			end := int64(5 + s.Active[0].ID.Partition)
			if len(p) != 1 || p[0].Position != end || p[0].EndOffset != end || p[0].Lag != 0 || p[0].Committed != end {
				last = fmt.Sprintf("instance %d: partitions %+v", i, p)
				return false
			}
			sb := s.Standby[0]
			// Keys per partition: 3; the changelog holds one record per key and commit.
			if !sb.Following || len(sb.Stores) != 1 || sb.Stores[0].Store != "counts" || sb.Stores[0].Changelog != changelog ||
				sb.Stores[0].Partition != sb.ID.Partition || sb.Stores[0].Lag != 0 || sb.Stores[0].Position < 3 || sb.Stores[0].EndOffset != sb.Stores[0].Position {
				last = fmt.Sprintf("instance %d: standby %+v", i, sb)
				return false
			}
		}
		return true
	})
}
