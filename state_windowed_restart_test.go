package kstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
)

// windowHistory is the processor of TestProcessorWindowStoreSurvivesRestart: it puts each
// record into the window store "visits" (10s windows) and the session store "sessions"
// (one session per record), then forwards the key's values of every window so far, in
// window order, and the number of its sessions: "x,y,w|3".
func windowHistory() kstream.Processor[string, string, string, string] {
	return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
		w, err := kstream.GetWindowStore[string, string](ctx, "visits")
		if err != nil {
			return err
		}
		s, err := kstream.GetSessionStore[string, string](ctx, "sessions")
		if err != nil {
			return err
		}
		if err := w.Put(r.Key, r.Value, r.Timestamp.Truncate(10*time.Second)); err != nil {
			return err
		}
		if err := s.Put(serde.Windowed[string]{Key: r.Key, Start: r.Timestamp, End: r.Timestamp}, r.Value); err != nil {
			return err
		}
		it, err := w.FetchRange(r.Key, time.UnixMilli(0), r.Timestamp)
		if err != nil {
			return err
		}
		var vals []string
		for it.Next() {
			vals = append(vals, it.Value())
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return err
		}
		sit, err := s.Fetch(r.Key)
		if err != nil {
			return err
		}
		n := 0
		for sit.Next() {
			n++
		}
		if err := errors.Join(sit.Err(), sit.Close()); err != nil {
			return err
		}
		ctx.Forward(kstream.Record[string, string]{Key: r.Key, Value: strings.Join(vals, ",") + "|" + string(rune('0'+n))})
		return nil
	})
}

// A Processor API window store and session store are logged to their changelogs and
// restored from them: an application restarted on an empty state directory sees what the
// first run put. The changelogs are compact,delete topics retained for the stores'
// retention plus a day, as the DSL's. InMemory stores are restored too; stores
// WithoutChangelog start empty and have no changelog topic.
func TestProcessorWindowStoreSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		opts   []kstream.StoreOption
		logged bool
	}{
		{"persistent", nil, true},
		{"in-memory", []kstream.StoreOption{kstream.InMemory()}, true},
		{"without-changelog", []kstream.StoreOption{kstream.WithoutChangelog()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 2, nil)
			out := kafkatest.CreateTopic(t, "out", 1, nil)
			build := func() *kstream.Builder {
				b := kstream.NewBuilder()
				kstream.Process(kstream.Stream(b, in, serde.String(), serde.String()), windowHistory,
					kstream.WithStores(
						kstream.WindowStore("visits", serde.String(), serde.String(), time.Hour, 10*time.Second, c.opts...),
						kstream.SessionStore("sessions", serde.String(), serde.String(), time.Hour, c.opts...))).
					To(out, serde.String(), serde.String())
				return b
			}
			cfg := testConfig(t)
			cl := kafkatest.Client(t)

			first := start(t, newApp(t, build(), cfg))
			kafkatest.Produce(t, cl, rec(in, "a", "x", 0), rec(in, "b", "z", 5000), rec(in, "a", "y", 10000))
			got := outRecords(kafkatest.Consume(t, out, 3, 60*time.Second))
			byKey := map[string][]string{}
			for _, r := range got {
				byKey[r.K] = append(byKey[r.K], r.V)
			}
			if strings.Join(byKey["a"], " ") != "x|1 x,y|2" || strings.Join(byKey["b"], " ") != "z|1" {
				t.Fatalf("first run: outputs %v", byKey)
			}
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}

			// A second instance of the application on an empty state directory.
			rc := &restoreCounter{}
			cfg.StateDir, cfg.RestoreListener = t.TempDir(), rc
			second := start(t, newApp(t, build(), cfg))
			kafkatest.Produce(t, cl, rec(in, "a", "w", 20000), rec(in, "b", "v", 21000))
			got = outRecords(kafkatest.Consume(t, out, 5, 60*time.Second)[3:])
			byKey = map[string][]string{}
			for _, r := range got {
				byKey[r.K] = append(byKey[r.K], r.V)
			}
			wantA, wantB := "x,y,w|3", "z,v|2"
			if !c.logged {
				wantA, wantB = "w|1", "v|1"
			}
			if byKey["a"][0] != wantA || byKey["b"][0] != wantB {
				t.Fatalf("after the restart: outputs %v, want a=%s b=%s", byKey, wantA, wantB)
			}

			// Interactive queries read the store too.
			if c.logged {
				ws, err := kstream.QueryWindowStore[string, string](second.app, "visits")
				if err != nil {
					t.Fatal(err)
				}
				// A query reads what was committed: poll until the last put is.
				kafkatest.Eventually(t, 30*time.Second, "the query to see every window of a", func() bool {
					var seen []string
					if err := ws.Fetch("a", baseTime, baseTime.Add(time.Minute), func(w serde.Windowed[string], v string) bool {
						seen = append(seen, fmt.Sprintf("%s@%d", v, w.Start.Sub(baseTime).Milliseconds()))
						return true
					}); err != nil {
						t.Fatal(err)
					}
					return strings.Join(seen, " ") == "x@0 y@10000 w@20000"
				})
			}

			adm := kadm.NewClient(kafkatest.Client(t))
			ctx := kafkatest.Context(t, 30*time.Second)
			for _, store := range []string{"visits", "sessions"} {
				topic := cfg.ApplicationID + "-" + store + "-changelog"
				rcs, err := adm.DescribeTopicConfigs(ctx, topic)
				if !c.logged {
					if err == nil && rcs[0].Err == nil {
						t.Errorf("store %s without changelog: topic %s exists", store, topic)
					}
					if n := rc.total(store); n != 0 {
						t.Errorf("store %s without changelog: %d records restored", store, n)
					}
					continue
				}
				if err == nil {
					err = rcs[0].Err
				}
				if err != nil {
					t.Fatalf("describing %s: %v", topic, err)
				}
				configs := map[string]string{}
				for _, cf := range rcs[0].Configs {
					configs[cf.Key] = cf.MaybeValue()
				}
				// Retention one hour plus Kafka Streams' additional day.
				if configs["cleanup.policy"] != "compact,delete" || configs["retention.ms"] != "90000000" {
					t.Errorf("changelog %s: cleanup.policy %q retention.ms %q, want compact,delete and 90000000", topic, configs["cleanup.policy"], configs["retention.ms"])
				}
				if n := rc.total(store); n < 3 {
					t.Errorf("store %s: %d records restored, want the first run's 3", store, n)
				}
			}
		})
	}
}
