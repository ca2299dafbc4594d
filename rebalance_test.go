package kstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// 100k records through a 3-operator pipeline on 6 partitions with two members, one of which
// is closed mid-run: every input record reaches the output at least once, and the survivor
// owns every task afterwards.
func TestAtLeastOnceAcrossRebalance(t *testing.T) {
	t.Parallel()
	const n, partitions = 100_000, 6
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 100 * time.Millisecond
	var processed [2]atomic.Int64
	build := func(member int) *kstream.App {
		b := kstream.NewBuilder()
		s := kstream.MapValues(strs(b, in), strings.ToUpper)
		s = s.Filter(func(_, v string) bool { return strings.HasPrefix(v, "V") })
		s.Peek(func(string, string) { processed[member].Add(1) }).To(out, nil, serde.String())
		return newApp(t, b, cfg)
	}
	app1, app2 := build(0), build(1)
	r1 := start(t, app1)
	kafkatest.Eventually(t, 30*time.Second, "member 1 running", func() bool { return len(app1.Tasks()) == partitions })

	// Produce in the background, in chunks, so that the rebalances happen mid-stream.
	prodDone := make(chan error, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(t)...))
		if err != nil {
			prodDone <- err
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := 0; i < n; i += 5000 {
			batch := make([]*kgo.Record, 0, 5000)
			for j := i; j < i+5000; j++ {
				batch = append(batch, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", j%997), Value: fmt.Appendf(nil, "v%06d", j)})
			}
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				prodDone <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		prodDone <- nil
	}()

	r2 := start(t, app2)
	kafkatest.Eventually(t, 60*time.Second, "tasks split between the members", func() bool {
		a, b := len(app1.Tasks()), len(app2.Tasks())
		return a > 0 && b > 0 && a+b == partitions
	})
	t.Logf("split: member1 %v member2 %v", app1.Tasks(), app2.Tasks())
	kafkatest.Eventually(t, 60*time.Second, "member 2 processing", func() bool { return processed[1].Load() > 5000 })
	if err := r2.stop(); err != nil {
		t.Fatalf("member 2 stopped with %v", err)
	}
	kafkatest.Eventually(t, 60*time.Second, "survivor owns all tasks", func() bool { return len(app1.Tasks()) == partitions })
	if err := <-prodDone; err != nil {
		t.Fatalf("producing: %v", err)
	}

	// Every input value must be in the output (duplicates are allowed: at-least-once).
	seen := make(map[string]bool, n)
	recs := kafkatest.Consume(t, out, n, 2*time.Minute)
	for _, r := range recs {
		seen[string(r.Value)] = true
	}
	kafkatest.Eventually(t, 60*time.Second, "all values", func() bool {
		if len(seen) == n {
			return true
		}
		for _, r := range kafkatest.ConsumeAtMost(t, out, n+len(recs), 2*time.Second) {
			seen[string(r.Value)] = true
		}
		return len(seen) == n
	})
	for i := range n {
		if v := fmt.Sprintf("V%06d", i); !seen[v] {
			t.Fatalf("value %s missing from the output", v)
		}
	}
	if len(app1.Tasks()) != partitions {
		t.Fatalf("survivor tasks %v", app1.Tasks())
	}
	t.Logf("processed by member1 %d, member2 %d, outputs %d (duplicates %d)", processed[0].Load(), processed[1].Load(), len(recs), len(recs)-n)
	// Both hand-overs were graceful (a commit before revocation, a commit before leaving), so
	// nothing may have been processed twice.
	if total := processed[0].Load() + processed[1].Load(); total != n {
		t.Errorf("processed %d records in all, want exactly %d: a hand-over did not commit first", total, n)
	}
	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
}
