package kstream_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker restarts (issue 9, items 1 and 7): the broker goes away in the middle of a run and
// comes back with its data; the app must ride through by itself (Run never returns) with
// exact (exactly-once) or complete (at-least-once) output, and the test prints how long
// processing was interrupted.

// brokerOutage takes the broker of brokers down and brings it back.
type brokerOutage struct {
	brokers []string
	down    func() error  // stop the broker (gracefully or kill -9)
	up      func() error  // start it again with its data, on the same address
	pause   time.Duration // how long the broker stays down
}

// runBrokerRestart runs the counting pipeline against o.brokers, feeds input all along,
// takes the broker down mid-run and back up, then checks the output.
func runBrokerRestart(t *testing.T, o brokerOutage, eos bool) {
	in := createTopicOn(t, o.brokers, "in", 4)
	out := createTopicOn(t, o.brokers, "out", 4)
	cfg := testConfig(t)
	cfg.Brokers = o.brokers
	cfg.StateDir = t.TempDir()
	var opts []kgo.Opt
	if eos {
		cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
		opts = append(opts, readCommitted)
	}
	app := newApp(t, faultCountTopology(in, out), cfg)
	r := start(t, app)
	outputs, prog := collectOn(t, o.brokers, out, opts...)
	feed := feedOn(t, o.brokers, in, 300, 50, 50*time.Millisecond, 3)
	outN := func() int {
		outputs.mu.Lock()
		defer outputs.mu.Unlock()
		return outputs.n
	}
	eventuallyAlive(t, r, 90*time.Second, "2,000 outputs before the outage", func() bool {
		return outN() >= 2000 && app.State() == kstream.StateRunning
	})

	downAt := time.Now()
	if err := o.down(); err != nil {
		t.Fatalf("stopping the broker: %v", err)
	}
	stoppedAt := time.Now()
	t.Logf("broker down (took %s to stop)", stoppedAt.Sub(downAt).Round(time.Millisecond))
	// The broker stays down for o.pause, then starts (which may take a while); Run must not
	// return meanwhile.
	upDone := make(chan error, 1)
	go func() {
		time.Sleep(o.pause) // the length of the outage
		upDone <- o.up()
	}()
	select {
	case <-r.done:
		err := r.err
		<-upDone
		t.Fatalf("Run returned %s after the broker stopped (the app did not ride through): %v",
			time.Since(stoppedAt).Round(time.Millisecond), err)
	case err := <-upDone:
		if err != nil {
			t.Fatalf("starting the broker again: %v", err)
		}
	}
	upAt := time.Now()
	t.Logf("broker back after %s down (took %s to start); app state %v",
		upAt.Sub(stoppedAt).Round(time.Millisecond), upAt.Sub(stoppedAt.Add(o.pause)).Round(time.Millisecond), app.State())

	eventuallyAlive(t, r, 120*time.Second, "output after the broker came back", func() bool {
		_, ok := prog.after(upAt)
		return ok
	})
	resumed, _ := prog.after(upAt)
	lastBefore, _ := prog.last(downAt)
	t.Logf("processing interrupted: %s from the broker's return to the next output (%s from the last output before the outage)",
		resumed.Sub(upAt).Round(time.Millisecond), resumed.Sub(lastBefore).Round(time.Millisecond))

	// Some more input after the outage, then every count.
	base := outN()
	eventuallyAlive(t, r, 120*time.Second, "2,000 more outputs after the outage", func() bool { return outN() >= base+2000 })
	feed.halt()
	want := feed.counts()
	eventuallyAlive(t, r, 120*time.Second, "every key's count", func() bool { return outputs.reachedAtLeast(want, !eos) })
	r.alive(t, "after the outage")
	if eos {
		outputs.checkExact(t, want)
	} else {
		over, back, deepest := outputs.checkComplete(t, want)
		t.Logf("%d of %d keys counted some records twice (at-least-once replays); %d stepped back to counts already emitted (by up to %d)",
			over, len(want), back, deepest)
	}
	if s := app.State(); s != kstream.StateRunning {
		t.Errorf("state after the outage: %v, want RUNNING", s)
	}
	t.Logf("%d input records; stats: %+v", feed.sent.Load(), app.Stats())
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// restartableBroker is an in-process broker with a data directory and a fixed port, which
// a test can close and start again; the last one is closed when the test ends.
type restartableBroker struct {
	mu   sync.Mutex
	b    *embedded.Broker
	port int
	dir  string
}

func newRestartableBroker(t *testing.T) *restartableBroker {
	t.Helper()
	rb := &restartableBroker{port: freePort(t), dir: t.TempDir()}
	if err := rb.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		if rb.b != nil {
			if err := rb.b.Close(); err != nil {
				t.Logf("closing the test's broker: %v", err)
			}
		}
	})
	return rb
}

func (rb *restartableBroker) start() error {
	b, err := embedded.Start(embedded.DataDir(rb.dir), embedded.Port(rb.port))
	if err != nil {
		return fmt.Errorf("starting the in-process broker on port %d with data in %s: %w", rb.port, rb.dir, err)
	}
	rb.mu.Lock()
	rb.b = b
	rb.mu.Unlock()
	return nil
}

// stop closes the broker. Close reports client connections still open after 10s as an
// error, though the broker is closed: that is not a failure to stop.
func (rb *restartableBroker) stop() error {
	rb.mu.Lock()
	b := rb.b
	rb.b = nil
	rb.mu.Unlock()
	if err := b.Close(); err != nil && !strings.Contains(err.Error(), "connections still open") {
		return err
	}
	return nil
}

func (rb *restartableBroker) brokers() []string {
	return []string{fmt.Sprintf("127.0.0.1:%d", rb.port)}
}

// The in-process broker is closed in the middle of a run and started again 4s later on the
// same port with the same data directory: under both guarantees the app rides through
// (Run never returns) and its output is exact (exactly-once) or complete (at-least-once).
func TestBrokerRestart(t *testing.T) {
	if kafkatest.Tier() == "kafka" {
		t.Skip("restarts an in-process broker; TestRealBrokerKillRestart covers the real one")
	}
	t.Parallel()
	for _, g := range []struct {
		name string
		eos  bool
	}{{"exactly-once", true}, {"at-least-once", false}} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			rb := newRestartableBroker(t)
			runBrokerRestart(t, brokerOutage{
				brokers: rb.brokers(),
				down:    rb.stop,
				up:      rb.start,
				pause:   4 * time.Second,
			}, g.eos)
		})
	}
}

// EnvKafkaScript names testing/kafka/kafka.sh for the test that kills and restarts the real
// broker. It is set only where that broker may be restarted: not while other tests use it
// (.ci/run runs this test in a go test invocation of its own, after the real-Kafka tier).
const EnvKafkaScript = "KSTREAM_TEST_KAFKA_SH"

// The real broker (KSTREAM_TEST_BROKERS, started by testing/kafka/kafka.sh, named by
// KSTREAM_TEST_KAFKA_SH) is killed with SIGKILL in the middle of a run and restarted with
// its data: under both guarantees the app recovers by itself (Run never returns), output is
// exact (exactly-once) or complete (at-least-once), and the test prints how long processing
// was interrupted. The two runs go one after the other: they restart the same broker.
func TestRealBrokerKillRestart(t *testing.T) {
	script := os.Getenv(EnvKafkaScript)
	if kafkatest.Tier() != "kafka" || script == "" {
		t.Skipf("needs a real broker started by testing/kafka/kafka.sh: set %s and %s=testing/kafka/kafka.sh (run alone: it restarts the broker)",
			kafkatest.EnvBrokers, EnvKafkaScript)
	}
	if abs, err := filepath.Abs(script); err == nil {
		script = abs
	}
	kafkaSh := func(t *testing.T, cmd string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		out, err := exec.CommandContext(ctx, "bash", script, cmd).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kafka.sh %s: %w\n%s", cmd, err, out)
		}
		t.Logf("kafka.sh %s (%s): %s", cmd, time.Since(began).Round(time.Millisecond), strings.TrimSpace(string(out)))
		return nil
	}
	for _, g := range []struct {
		name string
		eos  bool
	}{{"exactly-once", true}, {"at-least-once", false}} {
		t.Run(g.name, func(t *testing.T) {
			runBrokerRestart(t, brokerOutage{
				brokers: kafkatest.Brokers(t),
				down:    func() error { return kafkaSh(t, "kill") },
				up:      func() error { return kafkaSh(t, "restart") },
				pause:   4 * time.Second,
			}, g.eos)
		})
	}
}
