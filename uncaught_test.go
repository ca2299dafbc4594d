package kstream_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
)

// failing builds in -> MapValues -> out, where the value "boom" panics while fail says so
// (the default ProcessingErrorHandler, LogAndFail, makes that a fatal RecordError).
func failing(in, out string, fail func() bool) *kstream.Builder {
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.String()), func(v string) string {
		if v == "boom" && fail() {
			panic("boom")
		}
		return strings.ToUpper(v)
	}, kstream.Named("shout")).To(out, serde.String(), serde.String())
	return b
}

// values returns the values of out's records, sorted.
func outValues(t *testing.T, out string, n int) []string {
	var vs []string
	for _, r := range kafkatest.Consume(t, out, n, 60*time.Second) {
		vs = append(vs, string(r.Value))
	}
	slices.Sort(vs)
	return vs
}

// RestartProcessing: the record fails twice, the instance restarts twice (tasks closed,
// the group joined again after the backoff) and goes on; Run does not return, and the
// third attempt processes the record.
func TestUncaughtRestartProcessing(t *testing.T) {
	t.Parallel()
	uncaughtRestartProcessing(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka: the member leaves the group and
// joins again as a new member.
func TestUncaughtRestartProcessingStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	uncaughtRestartProcessing(t, kstream.GroupProtocolStreams)
}

func uncaughtRestartProcessing(t *testing.T, p kstream.GroupProtocol) {
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var attempts atomic.Int32
	cfg := testConfig(t)
	cfg.GroupProtocol = p
	cfg.UncaughtErrorPolicy = kstream.RestartProcessing
	cfg.RestartBackoff = 50 * time.Millisecond
	r := start(t, newApp(t, failing(in, out, func() bool { return attempts.Add(1) <= 2 }), cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "ok", 1), rec(in, "b", "boom", 2), rec(in, "c", "fine", 3))
	got := outValues(t, out, 3)
	// "ok" may come twice: at least once, a record processed before a failure and not
	// committed is processed again after the restart.
	got = slices.Compact(got)
	if want := []string{"BOOM", "FINE", "OK"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("boom processed %d times, want 3 (two failures, one success)", n)
	}
	if n := r.app.Stats().Restarts; n != 2 {
		t.Errorf("Stats.Restarts = %d, want 2", n)
	}
	if err, done := r.wait(0); done {
		t.Fatalf("Run returned %v; the instance should have restarted", err)
	}
	kafkatest.Eventually(t, 30*time.Second, "RUNNING after the restarts", func() bool { return r.app.State() == kstream.StateRunning })
}

// RestartProcessing gives up after MaxRestarts restarts within RestartWindow: Run returns
// an error that says so and wraps the record's error.
func TestUncaughtRestartBound(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	cfg.UncaughtErrorPolicy = kstream.RestartProcessing
	cfg.RestartBackoff = 10 * time.Millisecond
	cfg.MaxRestarts = 2
	r := start(t, newApp(t, failing(in, out, func() bool { return true }), cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "b", "boom", 2))
	err, done := r.wait(60 * time.Second)
	if !done {
		t.Fatal("Run did not return")
	}
	var re *kstream.RecordError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "gave up restarting (Config.MaxRestarts: 2 restarts within 10m0s)") {
		t.Fatalf("Run returned %v; want the bound's error wrapping a RecordError", err)
	}
	if n := r.app.Stats().Restarts; n != 2 {
		t.Errorf("Stats.Restarts = %d, want 2", n)
	}
	if s := r.app.State(); s != kstream.StateError {
		t.Errorf("state %v, want ERROR", s)
	}
}

// UncaughtErrorHandler chooses per error: here a restart for the first failure, a stop for
// the second; it sees the record's error.
func TestUncaughtErrorHandler(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	cfg.RestartBackoff = 10 * time.Millisecond
	var mu sync.Mutex
	var seen []error
	cfg.UncaughtErrorHandler = func(err error) kstream.UncaughtErrorPolicy {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, err)
		if len(seen) == 1 {
			return kstream.RestartProcessing
		}
		return kstream.StopInstance
	}
	r := start(t, newApp(t, failing(in, out, func() bool { return true }), cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "b", "boom", 2))
	err, done := r.wait(60 * time.Second)
	var re *kstream.RecordError
	if !done || !errors.As(err, &re) || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("Run returned %v (done %v); want the RecordError itself", err, done)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !errors.As(seen[0], &re) || re.Topic != in {
		t.Fatalf("handler saw %v, want two RecordErrors of %s", seen, in)
	}
	if n := r.app.Stats().Restarts; n != 1 {
		t.Errorf("Stats.Restarts = %d, want 1", n)
	}
}

// ShutdownApplication: one of three instances fails; it asks the group, and every instance
// stops with an error that wraps ErrApplicationShutdown and names the instance that asked
// and its error. The one that asked also wraps its own error.
func TestUncaughtShutdownApplication(t *testing.T) {
	t.Parallel()
	t.Run("dynamic", func(t *testing.T) {
		t.Parallel()
		testUncaughtShutdownApplication(t, false, kstream.GroupProtocolClassic)
	})
	t.Run("static", func(t *testing.T) {
		t.Parallel()
		testUncaughtShutdownApplication(t, true, kstream.GroupProtocolClassic)
	})
}

// The same as a streams group (KIP-1071) on Apache Kafka: the failing member's heartbeat
// asks for the shutdown (ShutdownApplication), and the broker answers every member with
// the status SHUTDOWN_APPLICATION. The others' error names the member the broker names;
// only the one that asked knows the cause.
func TestUncaughtShutdownApplicationStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	testUncaughtShutdownApplication(t, false, kstream.GroupProtocolStreams)
}

// testUncaughtShutdownApplication is TestUncaughtShutdownApplication with dynamic or
// static members (Config.InstanceID: the failing member rejoins under the same id), under
// group protocol p.
func testUncaughtShutdownApplication(t *testing.T, static bool, p kstream.GroupProtocol) {
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	appID := kafkatest.Name(t, "app")
	var rs []*running
	for i := range 3 {
		cfg := testConfig(t)
		cfg.ApplicationID = appID
		cfg.ClientID = fmt.Sprintf("%s-inst-%d", appID, i)
		cfg.UncaughtErrorPolicy = kstream.ShutdownApplication
		cfg.GroupProtocol = p
		if static {
			cfg.InstanceID = fmt.Sprintf("member-%d", i)
		}
		rs = append(rs, start(t, newApp(t, failing(in, out, func() bool { return true }), cfg)))
	}
	kafkatest.Eventually(t, 60*time.Second, "three instances RUNNING with a task each", func() bool {
		for _, r := range rs {
			if r.app.State() != kstream.StateRunning || len(r.app.Tasks()) != 1 {
				return false
			}
		}
		return true
	})
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "b", "boom", 2))
	asked := -1
	for i, r := range rs {
		err, done := r.wait(60 * time.Second)
		if !done {
			t.Fatalf("instance %d did not stop", i)
		}
		var se *kstream.ApplicationShutdownError
		if !errors.Is(err, kstream.ErrApplicationShutdown) || !errors.As(err, &se) {
			t.Fatalf("instance %d: Run returned %v; want an ApplicationShutdownError", i, err)
		}
		if se.Instance != fmt.Sprintf("%q", fmt.Sprintf("%s-inst-%d", appID, i)) {
			if p == kstream.GroupProtocolStreams {
				// The broker names the member that asked, not its instance or its cause.
				if !strings.Contains(err.Error(), fmt.Sprintf("application %q shut down (ShutdownApplication) at the request of instance (streams group: ", appID)) {
					t.Errorf("instance %d: error %q does not name the application and the streams group's detail", i, err)
				}
				continue
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("application %q shut down (ShutdownApplication) at the request of instance %q", appID, se.Instance[1:len(se.Instance)-1])) ||
				!strings.Contains(se.Cause, "boom") {
				t.Errorf("instance %d: error %q does not name the application, the instance and the cause", i, err)
			}
			continue
		}
		if !strings.Contains(se.Cause, "boom") {
			t.Errorf("instance %d asked: cause %q does not name its error", i, se.Cause)
		}
		asked = i
		var re *kstream.RecordError
		if !errors.As(err, &re) {
			t.Errorf("instance %d asked, but its error %v does not wrap its RecordError", i, err)
		}
		if r.app.State() != kstream.StateError {
			t.Errorf("instance %d: state %v, want ERROR", i, r.app.State())
		}
	}
	if asked < 0 {
		t.Fatal("no instance's error names itself as the one that asked")
	}
}

// RestartProcessing under exactly-once, with a store: the failure aborts the transaction
// (the count written before it with it), the stores stay open, and after the restart every
// count is committed exactly once.
func TestUncaughtRestartExactlyOnce(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var attempts atomic.Int32
	b := kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").ToStream()
	kstream.MapValues(counts, func(n int64) string {
		if n == 2 && attempts.Add(1) == 1 {
			panic("second count")
		}
		return fmt.Sprint(n)
	}, kstream.Named("check")).To(out, serde.String(), serde.String())
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.UncaughtErrorPolicy = kstream.RestartProcessing
	cfg.RestartBackoff = 50 * time.Millisecond
	r := start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "x", 1), rec(in, "a", "x", 2), rec(in, "a", "x", 3), rec(in, "b", "x", 4))
	var got []string
	for _, rc := range kafkatest.Consume(t, out, 4, 60*time.Second, readCommitted) {
		got = append(got, string(rc.Key)+"="+string(rc.Value))
	}
	if want := []string{"a=1", "a=2", "a=3", "b=1"}; !slices.Equal(got, want) {
		t.Fatalf("committed outputs %v, want %v", got, want)
	}
	if extra := kafkatest.Drain(t, out, 2*time.Second, 60*time.Second, readCommitted); len(extra) != 4 {
		t.Fatalf("%d committed outputs, want 4 (exactly once)", len(extra))
	}
	if n := r.app.Stats().Restarts; n != 1 {
		t.Errorf("Stats.Restarts = %d, want 1", n)
	}
}
