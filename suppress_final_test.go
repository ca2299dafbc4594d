package kstream_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A suppressed final result under at-least-once is not emitted again below the window's
// count after a crash, while the window is in its store's retention (here 5 minutes). The
// state a crash can leave is made here by hand: the window store holds a@1s, a@2s and
// c@61s (count 2 for a's window [0, 1m), stream time 61 s, a's final result 2 emitted),
// while the committed offset is back after a@1s and the suppression buffer's changelog
// ends with its entry of a@1s alone (as if the later ones had been lost, and the store had
// been written out early). The records replayed from the committed offset must reach the
// buffer again: judged by the store's stream time, a@2s would be late and dropped, and
// c@61s would close a's window with the buffer's count 1; judged by the stream time of the
// last commit (docs/windows.md), a@2s is aggregated a second time and the final result
// emitted again is 3, a duplicate at-least-once allows.
func TestSuppressFinalNotBelowCountAfterCrashAtLeastOnce(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	processed := make(chan struct{}, 16)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		seen := kstream.Stream(b, in, serde.String(), serde.String()).Peek(func(string, string) { processed <- struct{}{} })
		counts := kstream.WindowedCount(seen.GroupByKey().
			WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(0)), "counts", kstream.WithRetention(5*time.Minute))
		kstream.Map(counts.Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("final")).ToStream(),
			func(k serde.Windowed[string], n int64) (string, string) {
				return fmt.Sprintf("%s@%d", k.Key, k.StartMs()), strconv.FormatInt(n, 10)
			}).To(out, serde.String(), serde.String())
		return b
	}
	cfg := testConfig(t)
	cfg.CommitInterval = time.Hour // commits only when an instance stops
	base := baseTime.Truncate(time.Minute)
	rec := func(k string, at time.Duration) *kgo.Record {
		return &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v"), Timestamp: base.Add(at)}
	}
	buffer := cfg.ApplicationID + "-final-store-changelog"
	run := func(recs ...*kgo.Record) {
		t.Helper()
		r := start(t, newApp(t, build(), cfg))
		kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
		for range recs {
			select {
			case <-processed:
			case <-time.After(60 * time.Second):
				t.Fatal("a record was not processed within 60s")
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	run(rec("a", time.Second))
	run(rec("a", 2*time.Second), rec("c", 61*time.Second))

	adm := kadm.NewClient(kafkatest.Client(t))
	back := kadm.Offsets{}
	back.AddOffset(in, 0, 1, -1)
	if resp, err := adm.CommitOffsets(context.Background(), cfg.ApplicationID, back); err != nil || resp.Error() != nil {
		t.Fatalf("committing the offset back after a@1s: %v %v", err, resp.Error())
	}
	first := kafkatest.Consume(t, buffer, 1, 10*time.Second)[0]
	kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: buffer, Partition: first.Partition, Key: first.Key, Value: first.Value,
		Headers: first.Headers, Timestamp: first.Timestamp})

	start(t, newApp(t, build(), cfg))
	key := fmt.Sprintf("a@%d", base.UnixMilli())
	var finals []string
	for _, r := range kafkatest.Consume(t, out, 2, 60*time.Second) {
		if string(r.Key) == key {
			finals = append(finals, string(r.Value))
		}
	}
	if len(finals) != 2 || finals[0] != "2" || finals[1] != "3" {
		t.Errorf("final results of %s: %v, want [2 3] (emitted again after the crash, never below the count 2)", key, finals)
	}
}
