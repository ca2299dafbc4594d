package kstream_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reprocessing with aligned event time gives the live run's results, on a broker, with 1, 2
// and 3 instances: the shop's orders are all in the input topic before the application
// starts (as after `kstream reset`), the task re-keying the orders of partition 1 is slowed
// down so that the other runs the whole 10 minutes of orders ahead, and the revenue per
// customer per minute (10 s of grace, final results only) is exactly what the orders sum
// to, every window once (exactly-once). Without alignment the same run drops the slow
// task's orders as late (shown by the test driver's TestAlignedEventTimeReprocessingGivesLiveResults).
//
// The orders are about two days old, older than the default retention.ms of the window
// store's changelog (the store's retention plus a day): the broker deletes such records
// within seconds of their writing (Apache Kafka's cleaner applies the retention of a
// compact,delete topic every log.cleaner.backoff.ms). So the store keeps its changelog's
// records (retention.ms -1, as docs/windows.md advises for reprocessing old input). Before
// it did, the 3-instance form gave wrong results on Apache Kafka in about 1 run in 10 to
// 30: a downstream task that moved in the first second was restored from a changelog whose
// first 28 records were gone, and the windows of the upstream records it had processed
// before it moved came out without them, or never. Each instance counts such records
// (Stats.ExpiringChangelogRecords, TestWindowedChangelogOlderThanRetention), which the
// test requires to be none.
func TestAlignedEventTimeReprocessingOnBroker(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d-instances", instances), func(t *testing.T) {
			t.Parallel()
			alignedReprocessing(t, instances, nil)
		})
	}
}

// The same reprocessing, one instance, with transactions aborted along the way: the
// in-process broker refuses every third committing EndTxn of the application (with
// TRANSACTION_ABORTABLE, so the transaction aborts and its records are processed again).
// The downstream task processes its records again with the alignment it had at the last
// commit. Before that was so, it kept the slow task's later reports, heard in the aborted
// transaction, and dropped as late the slow task's orders that it read again: in the run
// that showed it, one of the 50 windows never came out.
func TestAlignedEventTimeThroughAbortedTransactions(t *testing.T) {
	t.Parallel()
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("request injection needs the in-process broker")
	}
	var refused atomic.Int64
	alignedReprocessing(t, 1, func(app string) {
		var commits atomic.Int64
		controlKey(t, b, int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			r := req.(*kmsg.EndTxnRequest)
			if !r.Commit || !strings.HasPrefix(r.TransactionalID, app) || commits.Add(1)%3 != 0 || refused.Load() >= 10 {
				return nil, nil, false
			}
			refused.Add(1)
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = kerr.TransactionAbortable.Code
			return resp, nil, true
		})
	})
	if refused.Load() == 0 {
		t.Fatal("no transaction was aborted")
	}
	t.Logf("%d transactions aborted", refused.Load())
}

// alignedReprocessing runs the reprocessing with instances instances; setup, if set, is
// called with the application id before they start.
func alignedReprocessing(t *testing.T, instances int, setup func(app string)) {
	in := kafkatest.CreateTopic(t, "orders", 2, nil)
	out := kafkatest.CreateTopic(t, "revenue", 2, nil)
	base := baseTime.Add(-48 * time.Hour).Truncate(time.Minute)
	type order struct {
		id, customer string
		amount       int64
		ts           time.Time
	}
	var orders []order
	add := func(i int, ts time.Time) {
		orders = append(orders, order{id: fmt.Sprintf("order-%03d", i), customer: fmt.Sprintf("c%d", i%5), amount: int64(i + 1), ts: ts})
	}
	for i := range 120 {
		add(i, base.Add(time.Duration(i)*5*time.Second))
	}
	want := map[string]int64{} // "<customer>@<window start ms>" -> revenue
	for _, o := range orders {
		start := o.ts.UnixMilli() - o.ts.UnixMilli()%60_000
		want[fmt.Sprintf("%s@%d", o.customer, start)] += o.amount
	}
	// Two last orders at 10:10, one per partition, close every window of the 10 minutes.
	for i, seen := 120, map[int32]bool{}; len(seen) < 2; i++ {
		if p := partition.ForKey(fmt.Appendf(nil, "order-%03d", i), 2); !seen[p] {
			seen[p] = true
			add(i, base.Add(610*time.Second))
		}
	}
	slow := map[string]bool{}
	recs := make([]*kgo.Record, len(orders))
	for i, o := range orders {
		p := partition.ForKey([]byte(o.id), 2)
		recs[i] = &kgo.Record{Topic: in, Partition: p, Key: []byte(o.id), Value: fmt.Appendf(nil, "%s:%d", o.customer, o.amount), Timestamp: o.ts}
		slow[o.id] = p == 1
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		// The task of partition 1 re-keys slowly: 50 ms an order, 6 s for its 60, while the
		// other re-keys its 60 at once.
		paced := kstream.Stream(b, in, serde.String(), serde.String()).Peek(func(id, _ string) {
			if slow[id] {
				time.Sleep(50 * time.Millisecond) // a slow task, not a wait for a condition
			}
		})
		w := kstream.GroupBy(paced, func(_ string, v string) string { c, _, _ := strings.Cut(v, ":"); return c }, serde.String(), kstream.Named("by-customer")).
			WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(10 * time.Second)).EmitOnWindowClose()
		revenue := kstream.WindowedAggregate(w, func() int64 { return 0 }, func(_ string, v string, acc int64) int64 {
			_, amount, _ := strings.Cut(v, ":")
			n, _ := strconv.ParseInt(amount, 10, 64)
			return acc + n
		}, serde.Int64(), "revenue-store", kstream.WithChangelogConfig(map[string]string{"retention.ms": "-1"}))
		kstream.Map(revenue.ToStream(), func(k serde.Windowed[string], v int64) (string, string) {
			return fmt.Sprintf("%s@%d", k.Key, k.StartMs()), strconv.FormatInt(v, 10)
		}).To(out, serde.String(), serde.String())
		return b
	}
	app := kafkatest.Name(t, "app")
	if setup != nil {
		setup(app)
	}
	var apps []*kstream.App
	for range instances {
		cfg := testConfig(t)
		cfg.ApplicationID = app
		cfg.Guarantee = kstream.ExactlyOnce
		cfg.EventTimeAlignment = time.Hour
		a := newApp(t, build(), cfg)
		apps = append(apps, a)
		start(t, a)
	}
	// Every window's result is out, and nothing more; on a timeout, the check below names the
	// windows missing.
	var got []*kgo.Record
	if first := kafkatest.ConsumeAtMost(t, out, len(want), 120*time.Second, readCommitted); len(first) < len(want) {
		t.Errorf("topic %s: got %d records within 2m0s, want %d", out, len(first), len(want))
		got = first
	} else {
		got = kafkatest.Drain(t, out, 2*time.Second, 30*time.Second, readCommitted)
	}
	results := map[string]int64{}
	var problems []string
	for _, r := range got {
		n, _ := strconv.ParseInt(string(r.Value), 10, 64)
		k := string(r.Key)
		if prev, dup := results[k]; dup {
			problems = append(problems, fmt.Sprintf("%s emitted twice (%d, then %d)", k, prev, n))
		}
		results[k] = n
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if results[k] != want[k] {
			problems = append(problems, fmt.Sprintf("%s = %d, want %d", k, results[k], want[k]))
		}
	}
	if len(results) != len(want) {
		problems = append(problems, fmt.Sprintf("%d windows, want %d", len(results), len(want)))
	}
	if len(problems) > 0 {
		t.Errorf("revenue per customer per minute, reprocessed with a task 10 minutes behind the other:\n%s", strings.Join(problems, "\n"))
		// What each instance dropped or lost, and its aborts: a late record's drop and a
		// lost window are counted by operator.
		for i, a := range apps {
			st := a.Stats()
			t.Logf("instance %d: %d transactions committed, %d aborted, %d fences, %d dropped, %d lost, %d changelog records past its retention, losses %+v",
				i, st.Commits, st.TransactionsAborted, st.ProducerFences, st.DroppedRecords, st.LostResults, st.ExpiringChangelogRecords, st.Losses)
		}
	}
	for i, a := range apps {
		if n := a.Stats().ExpiringChangelogRecords; n > 0 {
			t.Errorf("instance %d wrote %d changelog records older than their topic's retention.ms", i, n)
		}
	}
}
