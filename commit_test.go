package kstream_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// At-least-once, a commit does not stop processing: while the broker holds a commit's
// OffsetCommit (the tail of the commit, after its cut), the tasks go on and every count of
// the next records comes out; no second commit starts meanwhile (at most one in flight); the
// offsets are committed once the broker answers; and the stores hold what the commits
// covered: an instance started again on the same state directory continues every count
// exactly. With Config.BlockingCommits (Kafka Streams' behaviour) the counts wait for the
// commit instead.
func TestCommitDoesNotStopProcessing(t *testing.T) {
	t.Parallel()
	for _, blocking := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "BlockingCommits"}[blocking], func(t *testing.T) {
			t.Parallel()
			testCommitProcessing(t, blocking)
		})
	}
}

func testCommitProcessing(t *testing.T, blocking bool) {
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("holding a request needs the in-process broker")
	}
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 50 * time.Millisecond
	cfg.BlockingCommits = blocking
	// The broker holds the group's heartbeats too while it holds the commit: a session
	// longer than the hold.
	cfg.SessionTimeout = 30 * time.Second
	cfg.CloseTimeout = 30 * time.Second // nor does a commit give up meanwhile
	outputs := collect(t, out)
	want := map[string]int64{}
	r := start(t, newApp(t, countTopology(in, out), cfg))
	produceCounts(t, in, 2000, 100, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "the first counts", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "the first commit", func() bool { return committedAll(t, cfg.ApplicationID, in) })

	// Hold the next OffsetCommit of the group until release is closed: once the counts are
	// out, or after 8 s in any case (the group's heartbeats wait meanwhile, and its
	// session lasts 30 s; the client's request timeout is about 10 s).
	var held, more atomic.Int64
	release := make(chan struct{})
	var releaseOnce sync.Once
	var timedOut atomic.Bool
	releaseNow := func() { releaseOnce.Do(func() { close(release) }) }
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	c := b.Cluster()
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if done.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		if req.(*kmsg.OffsetCommitRequest).Group != cfg.ApplicationID {
			return nil, nil, false
		}
		if !held.CompareAndSwap(0, 1) {
			more.Add(1)
			return nil, nil, false
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false // answered normally now
	})
	// Another round, into the held commit's interval and past it.
	produceCounts(t, in, 2000, 100, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "a commit held", func() bool { return held.Load() == 1 })
	timer := time.AfterFunc(8*time.Second, func() { timedOut.Store(true); releaseNow() })
	defer timer.Stop()
	produceCounts(t, in, 500, 100, 3, want)
	kafkatest.Eventually(t, 60*time.Second, "every count", func() bool { return outputs.reached(want) })
	switch {
	case blocking && !timedOut.Load():
		t.Fatal("with BlockingCommits, the counts came out while a commit was held")
	case blocking:
		kafkatest.Eventually(t, 30*time.Second, "the offsets committed once released", func() bool { return committedAll(t, cfg.ApplicationID, in) })
		return
	case timedOut.Load():
		t.Fatal("the counts came out only once the held commit was released: the commit stopped processing")
	}
	if n := more.Load(); n != 0 {
		t.Errorf("%d more OffsetCommit request(s) while one was held: more than one commit in flight", n)
	}
	if committedAll(t, cfg.ApplicationID, in) {
		t.Error("every offset committed while the commit was held")
	}
	releaseNow()
	kafkatest.Eventually(t, 30*time.Second, "the offsets committed once released", func() bool { return committedAll(t, cfg.ApplicationID, in) })
	if err := r.stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}

	// The same state directory: the stores continue exactly where the commits left them.
	r = start(t, newApp(t, countTopology(in, out), cfg))
	produceCounts(t, in, 1000, 100, 4, want)
	kafkatest.Eventually(t, 60*time.Second, "every count after a restart", func() bool { return outputs.reached(want) })
	if err := r.stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	outputs.checkExact(t, want)
}
