package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// committedOffsets returns the group's committed offset per partition of topic.
func committedOffsets(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t))
	resp, err := adm.FetchOffsets(kafkatest.Context(t, 10*time.Second), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{} // the group has not formed yet: nothing committed
	}
	if err != nil {
		t.Fatalf("fetching offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// After a cancel, Run returns within the commit interval plus one second, and the committed
// offsets are exactly the processed positions.
func TestShutdownCommitsProcessedPositions(t *testing.T) {
	t.Parallel()
	const n = 3000
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	strs(b, in).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 2 * time.Second
	r := start(t, newApp(t, b, cfg))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, rec(in, fmt.Sprint("k", i), "v", i))
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	got := kafkatest.Consume(t, out, n, 30*time.Second)
	perPartition := map[int32]int64{}
	adm := kadm.NewClient(kafkatest.Client(t))
	ends, err := adm.ListEndOffsets(kafkatest.Context(t, 10*time.Second), in)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) { perPartition[o.Partition] = o.Offset })

	began := time.Now()
	r.cancel()
	err, done := r.wait(cfg.CommitInterval + time.Second)
	took := time.Since(began)
	if !done {
		t.Fatalf("Run did not return within commit interval + 1s")
	}
	if err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
	t.Logf("Run returned %s after cancel; %d outputs", took, len(got))
	committed := committedOffsets(t, cfg.ApplicationID, in)
	for p, end := range perPartition {
		if committed[p] != end {
			t.Errorf("partition %d: committed %d, processed up to %d", p, committed[p], end)
		}
	}
}

// Run may be called once; a second call says so.
func TestRunTwice(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	b := kstream.NewBuilder()
	strs(b, in).Foreach(func(string, string) {})
	app := newApp(t, b, testConfig(t))
	r := start(t, app)
	kafkatest.Eventually(t, 30*time.Second, "RUNNING", func() bool { return app.State() == kstream.StateRunning })
	if err := app.Run(context.Background()); err != kstream.ErrAlreadyRun {
		t.Fatalf("second Run: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if app.State() != kstream.StateNotRunning {
		t.Fatalf("state after stop: %v", app.State())
	}
}

func TestBuildErrors(t *testing.T) {
	b := kstream.NewBuilder()
	s := strs(b, "t1")
	strs(b, "t1").To("x", nil, nil)
	kstream.Map(s, func(k, v string) (int, int) { return 1, 1 }).To("y", nil, nil)
	s.Filter(func(string, string) bool { return true }, kstream.NumPartitions(3))
	_, err := kstream.New(b, kstream.Config{ApplicationID: "x", Brokers: []string{"127.0.0.1:1"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, wantText := range []string{`topic "t1" is read by two sources`, "no key or value serde", "option NumPartitions does not apply to Filter"} {
		if !strings.Contains(err.Error(), wantText) {
			t.Errorf("error %q lacks %q", err, wantText)
		}
	}
	if _, err := kstream.New(kstream.NewBuilder(), kstream.Config{ApplicationID: "x"}); err == nil {
		t.Error("empty topology accepted")
	}
	b2 := kstream.NewBuilder()
	kstream.Stream(b2, "t", serde.String(), serde.String()).To("o", nil, nil)
	if _, err := kstream.New(b2, kstream.Config{Brokers: []string{"x:1"}}); err == nil {
		t.Error("missing application id accepted")
	}
}

// An instance that has no new input still commits what it processed within a commit
// interval (the poll wakes up for the commit).
func TestIdleInstanceCommits(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	strs(b, in).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 300 * time.Millisecond
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), input(in)...)
	kafkatest.Consume(t, out, 4, 30*time.Second)
	kafkatest.Eventually(t, 10*time.Second, "all 4 input offsets committed while running", func() bool {
		var sum int64
		for _, o := range committedOffsets(t, cfg.ApplicationID, in) {
			sum += o
		}
		return sum == 4
	})
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ends, err := kadm.NewClient(kafkatest.Client(t)).ListEndOffsets(kafkatest.Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
