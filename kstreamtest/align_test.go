package kstreamtest_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/hook"
	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// shopRevenue is the shop's revenue topology: orders (key: order id, value:
// "<customer>:<amount>") re-keyed by customer, revenue per customer per minute with 10 s of
// grace, final results only, written to "revenue" as "<customer>@<window start ms>=<sum>".
func shopRevenue(suppress bool) *kstream.Builder {
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	w := kstream.GroupBy(orders, func(_ string, v string) string { c, _, _ := strings.Cut(v, ":"); return c }, serde.String(), kstream.Named("by-customer")).
		WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(10 * time.Second))
	if !suppress {
		w = w.EmitOnWindowClose()
	}
	revenue := kstream.WindowedAggregate(w, func() int64 { return 0 }, func(_ string, v string, acc int64) int64 {
		_, amount, _ := strings.Cut(v, ":")
		n, _ := strconv.ParseInt(amount, 10, 64)
		return acc + n
	}, serde.Int64(), "revenue-store")
	if suppress {
		revenue = revenue.Suppress(kstream.UntilWindowCloses(kstream.Unbounded()))
	}
	kstream.Map(revenue.ToStream(), func(k serde.Windowed[string], v int64) (string, string) {
		return fmt.Sprintf("%s@%d", k.Key, k.StartMs()), strconv.FormatInt(v, 10)
	}).To("revenue", serde.String(), serde.String())
	return b
}

// shopOrder is one order of the scenario.
type shopOrder struct {
	id, value string
	ts        time.Time
	partition int32 // of "orders", 2 partitions
}

// shopOrders are 120 orders of 5 customers over 10 minutes, one every 5 s, spread over both
// partitions of "orders", and last two orders at 10:10 (one per partition) that
// close every window.
func shopOrders(base time.Time) []shopOrder {
	var out []shopOrder
	add := func(i int, ts time.Time) {
		id := fmt.Sprintf("order-%03d", i)
		out = append(out, shopOrder{id: id, value: fmt.Sprintf("c%d:%d", i%5, i+1), ts: ts, partition: partition.ForKey([]byte(id), 2)})
	}
	for i := range 120 {
		add(i, base.Add(time.Duration(i)*5*time.Second))
	}
	seen := map[int32]bool{}
	for i := 120; len(seen) < 2; i++ {
		if p := partition.ForKey([]byte(fmt.Sprintf("order-%03d", i)), 2); !seen[p] {
			seen[p] = true
			add(i, base.Add(610*time.Second))
		}
	}
	return out
}

// revenueOf runs the scenario and returns the final results, sorted, and the records
// dropped. live pipes the orders in time order; otherwise the orders of partition 1 are
// held back after its first few, while those of partition 0 run ahead by the whole
// 10 minutes (as when the upstream tasks replay their input at different speeds after a
// reset), then released.
func revenueOf(t *testing.T, live, suppress bool, align time.Duration) ([]string, int64) {
	t.Helper()
	base := time.UnixMilli(1_700_000_000_000).Truncate(time.Minute)
	d := driverWith(t, shopRevenue(suppress), kstream.Config{ApplicationID: "shop", EventTimeAlignment: align},
		kstreamtest.Partitions(2), kstreamtest.WallClock(base))
	in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "revenue", serde.String(), serde.String())
	pipe := func(o shopOrder) {
		t.Helper()
		if err := in.PipeAt(o.id, o.value, o.ts); err != nil {
			t.Fatal(err)
		}
	}
	tick := func() {
		t.Helper()
		if err := d.AdvanceWallClockTime(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	orders := shopOrders(base)
	last := orders[len(orders)-2:]
	orders = orders[:len(orders)-2]
	if live {
		for i, o := range orders {
			pipe(o)
			if i%10 == 9 {
				tick()
			}
		}
	} else {
		started := 0
		for i, o := range orders {
			if started == 3 && o.partition == 1 {
				hook.HoldBackPartition(d, "orders", 1)
				started++
			}
			if o.partition == 1 && started < 3 {
				started++
			}
			pipe(o)
			if i%10 == 9 {
				tick()
			}
		}
		if err := hook.Release(d, "orders"); err != nil {
			t.Fatal(err)
		}
		tick()
	}
	for _, o := range last {
		pipe(o)
	}
	tick()
	tick()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Key+"="+r.Value)
	}
	slices.Sort(got)
	return got, d.DroppedRecords()
}

// Reprocessing with aligned event time gives the live run's results: with
// Config.EventTimeAlignment, the revenue per customer per minute (final results, with
// EmitOnWindowClose and with Suppress) of orders whose re-keying tasks ran 10 minutes apart
// is exactly that of the live run, with a grace of 10 s; nothing is dropped; the live run's
// results are the same with and without alignment. Without it,
// Kafka Streams' rule (stream time is the largest timestamp seen) drops the slow task's
// orders as late, and windows come out too low or not at all.
func TestAlignedEventTimeReprocessingGivesLiveResults(t *testing.T) {
	for _, suppress := range []bool{false, true} {
		t.Run(map[bool]string{false: "emit-on-close", true: "suppress"}[suppress], func(t *testing.T) {
			want, drops := revenueOf(t, true, suppress, 0)
			if drops != 0 || len(want) != 10*5 {
				t.Fatalf("live run: %d results (want 50: 10 minutes of 5 customers), %d dropped:\n%s", len(want), drops, strings.Join(want, "\n"))
			}
			if got, drops := revenueOf(t, true, suppress, time.Hour); drops != 0 || !slices.Equal(got, want) {
				t.Errorf("live run with alignment: %d dropped; results:\n%s\nwant those without:\n%s", drops, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			got, drops := revenueOf(t, false, suppress, time.Hour)
			if drops != 0 || !slices.Equal(got, want) {
				t.Errorf("reprocessing with alignment: %d dropped; results:\n%s\nwant the live run's:\n%s", drops, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			got, drops = revenueOf(t, false, suppress, 0)
			if drops == 0 || slices.Equal(got, want) {
				t.Errorf("reprocessing without alignment: %d dropped, results equal to the live run's: the scenario does not show the problem", drops)
			}
			t.Logf("without alignment: %d dropped, %d of %d windows", drops, len(got), len(want))
		})
	}
}

// A task that does not align event time skips the control records of alignment that a
// repartition topic may hold from a run that did (they are not records of the stream), and
// a malformed one stops the task with an error that names where it is.
func TestAlignmentControlRecordsSkippedWithoutAlignment(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	d := driverWith(t, shopRevenue(false), kstream.Config{ApplicationID: "shop"}, kstreamtest.WallClock(base))
	rep := kstreamtest.CreateInputTopic(d, "shop-by-customer-repartition", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "revenue", serde.String(), serde.String())
	v := make([]byte, 26)
	v[0] = 2 // version 2, upstream task 0_0, stream time 0, not caught up, written at 0
	if err := rep.PipeRaw([]byte("kstream-watermark-0"), v, base, kstream.Header{Key: "kstream.watermark"}); err != nil {
		t.Fatalf("a control record: %v", err)
	}
	if err := rep.PipeAt("c0", "c0:5", base); err != nil {
		t.Fatal(err)
	}
	if err := rep.PipeAt("c0", "c0:7", base.Add(80*time.Second)); err != nil {
		t.Fatal(err)
	}
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Value != "5" || d.DroppedRecords() != 0 {
		t.Errorf("outputs %v, %d dropped: want the one window of the order of 5 (the control record skipped)", recs, d.DroppedRecords())
	}
	err = rep.PipeRaw([]byte("kstream-watermark-0"), []byte{9}, base, kstream.Header{Key: "kstream.watermark"})
	if err == nil || !strings.Contains(err.Error(), `malformed event-time alignment record at topic "shop-by-customer-repartition" partition 0 offset 3`) {
		t.Errorf("a malformed control record: %v", err)
	}
}
