package kstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Non-matches that wait across a restart come out on time too: a left join of orders with
// payments (5 minutes) stops with o9 (10:01:05), o17 (10:01:40) and o31 (10:05:50) unpaid
// and waiting, and starts again with an empty state directory, restoring its stores from
// their changelogs and its clock from them. Each non-match then comes out with the first
// order past its window's close, whose header "at" it carries: o9 with the order at
// 10:06:10, o17 with the one at 10:06:50 (with Kafka Streams' timing, which also a
// clock left at the last record read would give, o17 would wait for the order at 10:30,
// as its minTime would be o31's 10:05:50 after the pass at 10:06:10), the rest at 10:30.
func TestStreamLeftJoinNonMatchesOnTimeAfterRestore(t *testing.T) {
	t.Parallel()
	orders := kafkatest.CreateTopic(t, "orders", 1, nil)
	payments := kafkatest.CreateTopic(t, "payments", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	at := func(topic, key, value, hms string) *kgo.Record {
		c, err := time.Parse(time.TimeOnly, hms)
		if err != nil {
			t.Fatal(err)
		}
		ts := baseTime.Add(c.Sub(time.Date(0, 1, 1, 10, 0, 0, 0, time.UTC)))
		return &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "at", Value: []byte(hms)}}}
	}
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.LeftJoinWindowed(kstream.Stream(b, orders, serde.String(), serde.String()), kstream.Stream(b, payments, serde.String(), serde.String()),
			func(_ string, order, payment string, paid bool) string {
				if !paid {
					return order + ": unpaid"
				}
				return order + ": paid by " + payment
			}, kstream.JoinWindowsOf(5*time.Minute), kstream.Named("order-payments")).To(out, serde.String(), serde.String())
		return b
	}
	lines := func(recs []*kgo.Record) []string {
		var ls []string
		for _, r := range recs {
			var hdr string
			for _, h := range r.Headers {
				if h.Key == "at" {
					hdr = string(h.Value)
				}
			}
			ls = append(ls, fmt.Sprintf("%s %s (at %s)", r.Key, r.Value, hdr))
		}
		return ls
	}

	// The payment of o29 comes before its order, which follows o31 in topic orders: its
	// match shows that o31 has been processed.
	oneByOne(t, at(payments, "o29", "cash", "10:04:10"), at(payments, "o11", "card", "10:02:00"),
		at(orders, "o4", "book", "09:56:30"), at(orders, "o9", "pen", "10:01:05"), at(orders, "o11", "lamp", "10:01:20"),
		at(orders, "o17", "cup", "10:01:40"), at(orders, "o31", "mug", "10:05:50"), at(orders, "o29", "desk", "10:05:55"))
	cfg := testConfig(t)
	first := start(t, newApp(t, build(), cfg))
	got := lines(kafkatest.Consume(t, out, 3, 60*time.Second))
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"o4 book: unpaid (at 10:01:40)", "o11 lamp: paid by card (at 10:02:00)", "o29 desk: paid by cash (at 10:05:55)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("before the restart:\n got %q\nwant %q", got, want)
	}

	cfg.StateDir = t.TempDir()
	start(t, newApp(t, build(), cfg))
	oneByOne(t, at(orders, "o36", "chair", "10:06:10"), at(orders, "o42", "vase", "10:06:50"), at(orders, "o70", "clock", "10:30:00"))
	got = lines(kafkatest.Consume(t, out, 3+5, 60*time.Second))[3:]
	want = []string{
		"o9 pen: unpaid (at 10:06:10)",
		"o17 cup: unpaid (at 10:06:50)",
		"o31 mug: unpaid (at 10:30:00)",
		"o36 chair: unpaid (at 10:30:00)",
		"o42 vase: unpaid (at 10:30:00)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after the restart:\n got %q\nwant %q", got, want)
	}
}
