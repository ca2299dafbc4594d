package kstream_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A window store logs each window with its timestamp, and the broker deletes a record of
// its compact,delete changelog once the wall clock is retention.ms (the store's retention
// plus a day) past it. Input older than that (a reprocessing of old data) writes records
// the broker deletes at its next retention check, while the store still holds their
// windows: a restore elsewhere would lack them (on Apache Kafka, the 3-instance form of
// TestAlignedEventTimeReprocessingOnBroker lost windows so, reprocessing two-day-old
// orders, until it kept its changelog's records). The instance counts such records
// (Stats.ExpiringChangelogRecords) and warns, naming the store and topic; the same input
// with retention.ms -1 on the changelog (WithChangelogConfig), or recent input, counts none.
// After the broker's retention, an instance with no local state restores the window whole
// in those cases, and without it where records were counted (as Kafka Streams would). A
// session store logs with the time of writing: nothing counted, nothing deleted.
func TestWindowedChangelogOlderThanRetention(t *testing.T) {
	t.Parallel()
	keep := kstream.WithChangelogConfig(map[string]string{"retention.ms": "-1"})
	for _, c := range []struct {
		name     string
		age      time.Duration
		opts     []kstream.StoreOption
		expiring bool
		sessions bool // a session count, whose changelog records carry the time of writing
	}{
		{"three-days-old", 72 * time.Hour, nil, true, false},
		{"three-days-old-kept", 72 * time.Hour, []kstream.StoreOption{keep}, false, false},
		{"recent", 0, nil, false, false},
		{"sessions-three-days-old", 72 * time.Hour, nil, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 1, nil)
			out := kafkatest.CreateTopic(t, "out", 1, nil)
			build := func() *kstream.Builder {
				b := kstream.NewBuilder()
				g := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey()
				var counts kstream.KTable[serde.Windowed[string], int64]
				if c.sessions {
					counts = kstream.SessionCount(g.WindowedBySession(kstream.SessionWindowsOf(time.Minute)), "counts", c.opts...)
				} else {
					counts = kstream.WindowedCount(g.WindowedBy(kstream.TimeWindowsOf(time.Minute)), "counts", c.opts...)
				}
				kstream.Map(counts.ToStream(), func(k serde.Windowed[string], n int64) (string, string) {
					return k.Key, strconv.FormatInt(n, 10)
				}).To(out, serde.String(), serde.String())
				return b
			}
			cfg := testConfig(t)
			var logs lockedBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			app := newApp(t, build(), cfg)
			r := start(t, app)
			at := time.Now().Add(-c.age).Truncate(time.Minute)
			var recs []*kgo.Record
			for i := range 10 { // k0 gets 4 records, k1 and k2 3 each, all in one window
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte("v"), Timestamp: at.Add(time.Duration(i) * time.Second)})
			}
			kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
			kafkatest.Consume(t, out, len(recs), 60*time.Second)
			// Every update was processed; its changelog records go out at the next commit.
			kafkatest.Eventually(t, 30*time.Second, "the counts' changelog records", func() bool {
				return app.Stats().ChangelogRecordsTotal >= 3
			})
			st := app.Stats()
			switch {
			case !c.expiring && st.ExpiringChangelogRecords != 0:
				t.Fatalf("%d changelog records counted as older than the retention, want none:\n%s", st.ExpiringChangelogRecords, logs.String())
			case c.expiring && (st.ExpiringChangelogRecords == 0 || st.ExpiringChangelogRecords > st.ChangelogRecordsTotal):
				t.Fatalf("%d changelog records counted as older than the retention (of %d written), want some", st.ExpiringChangelogRecords, st.ChangelogRecordsTotal)
			case c.expiring:
				l := logs.String()
				if !strings.Contains(l, "older than its changelog topic's retention.ms") || !strings.Contains(l, "store=counts") || !strings.Contains(l, "-counts-changelog") {
					t.Fatalf("no warning naming the store and its changelog topic:\n%s", l)
				}
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			// The broker's retention, then a restore on an instance with no local state (a
			// failover to a new machine): the window's count goes on from 4 where the
			// changelog kept it, from nothing where the broker deleted it.
			changelog := cfg.ApplicationID + "-counts-changelog"
			if b := kafkatest.Embedded(t); b != nil {
				if err := b.ApplyRetention(); err != nil {
					t.Fatal(err)
				}
			} else if c.expiring {
				kafkatest.Eventually(t, 60*time.Second, "Apache Kafka deleting the changelog's records", func() bool {
					return logStart(t, changelog) > 0
				})
			}
			deleted := logStart(t, changelog) > 0
			if deleted != c.expiring {
				t.Fatalf("the broker deleted the changelog's records: %v, want %v", deleted, c.expiring)
			}
			if c.sessions {
				return // a merged session's outputs include tombstones; the changelog is whole
			}
			cfg2 := cfg
			cfg2.StateDir = t.TempDir()
			start(t, newApp(t, build(), cfg2))
			kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Key: []byte("k0"), Value: []byte("v"), Timestamp: at.Add(30 * time.Second)})
			got := kafkatest.Consume(t, out, len(recs)+1, 60*time.Second)
			last := string(got[len(got)-1].Value)
			want := "5"
			if c.expiring {
				want = "1" // what Kafka Streams gives too: the window restarts empty
			}
			if last != want {
				t.Fatalf("k0's window after the restore: count %s, want %s", last, want)
			}
			t.Logf("%d of %d changelog records older than the retention; after the restore, k0's window counts %s", st.ExpiringChangelogRecords, st.ChangelogRecordsTotal, last)
		})
	}
}

// logStart is the log start offset of partition 0 of topic.
func logStart(t *testing.T, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(kafkatest.Client(t)).ListStartOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("the log start offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// Under EventTimeAlignment, the window stores behind a repartition topic keep windows that
// much longer, and so does their changelog topic: its retention.ms is the store's retention
// (size and grace), the alignment and Kafka Streams' additional day; a retention.ms given
// with WithChangelogConfig stays as given.
func TestAlignedChangelogRetention(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []kstream.StoreOption
		want string
	}{
		{"default", nil, strconv.Itoa(70_000 + 3_600_000 + 86_400_000)},
		{"given", []kstream.StoreOption{kstream.WithChangelogConfig(map[string]string{"retention.ms": "-1"})}, "-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 1, nil)
			b := kstream.NewBuilder()
			w := kstream.GroupBy(kstream.Stream(b, in, serde.String(), serde.String()), func(_, v string) string { return v }, serde.String()).
				WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(10 * time.Second))
			kstream.WindowedCount(w, "counts", c.opts...)
			cfg := testConfig(t)
			cfg.EventTimeAlignment = time.Hour
			start(t, newApp(t, b, cfg))
			topic := cfg.ApplicationID + "-counts-changelog"
			adm := kadm.NewClient(kafkatest.Client(t))
			var got string
			kafkatest.Eventually(t, 30*time.Second, "the changelog topic "+topic, func() bool {
				rcs, err := adm.DescribeTopicConfigs(kafkatest.Context(t, 10*time.Second), topic)
				if err != nil || len(rcs) == 0 || rcs[0].Err != nil {
					return false
				}
				for _, cf := range rcs[0].Configs {
					if cf.Key == "retention.ms" {
						got = cf.MaybeValue()
					}
				}
				return true
			})
			if got != c.want {
				t.Fatalf("changelog %s: retention.ms %q, want %q", topic, got, c.want)
			}
		})
	}
}
