package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupRec is a record of topic t at offset o with timestamp ts (ms).
func groupRec(t string, o, ts int64) *kgo.Record {
	return &kgo.Record{Topic: t, Offset: o, Timestamp: time.UnixMilli(ts)}
}

type lagMap map[string]struct {
	lag   int64
	known bool
}

func testGroup(idle time.Duration, lags lagMap, dropped *[]string) *PartitionGroup {
	g := NewPartitionGroup(GroupConfig{
		MaxTaskIdle: idle,
		Extract: func(r *kgo.Record, partitionTime int64) (int64, error) {
			if r.Timestamp.UnixMilli() == -2 {
				return 0, errors.New("bad record")
			}
			return r.Timestamp.UnixMilli(), nil
		},
		Dropped: func(r *kgo.Record, ts int64) { *dropped = append(*dropped, fmt.Sprintf("%s@%d", r.Topic, r.Offset)) },
		Lag: func(topic string, _ int32, _ time.Time) (int64, bool) {
			l, ok := lags[topic]
			if !ok {
				return 0, true
			}
			return l.lag, l.known
		},
	})
	g.AddPartition("a", 0)
	g.AddPartition("b", 0)
	return g
}

// drain takes every record the group hands out while it is ready at now.
func drain(t *testing.T, g *PartitionGroup, now time.Time) string {
	t.Helper()
	var out []string
	for {
		if ready, _, _ := g.Ready(now); !ready {
			return strings.Join(out, " ")
		}
		r, ts, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s%d@%d", r.Topic, r.Offset, ts))
	}
}

// The lowest head first, across Adds; ties to the record buffered first; offsets in order
// within a partition whatever their timestamps; negative timestamps dropped.
func TestPartitionGroupOrder(t *testing.T) {
	var dropped []string
	g := testGroup(-1, nil, &dropped)
	now := time.Now()
	if _, err := g.Add("a", 0, []*kgo.Record{groupRec("a", 0, 5), groupRec("a", 1, 1), groupRec("a", 2, -1), groupRec("a", 3, 7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Add("b", 0, []*kgo.Record{groupRec("b", 0, 5), groupRec("b", 1, 6)}); err != nil {
		t.Fatal(err)
	}
	if got, want := drain(t, g, now), "a0@5 a1@1 b0@5 b1@6 a3@7"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	if fmt.Sprint(dropped) != "[a@2]" || g.Buffered() != 0 {
		t.Fatalf("dropped %v, buffered %d", dropped, g.Buffered())
	}
	if _, err := g.Add("a", 0, []*kgo.Record{groupRec("a", 4, -2)}); err == nil || !strings.Contains(err.Error(), "bad record") {
		t.Fatalf("an extractor error: %v", err)
	}
}

// Ready waits for an empty partition whose lag is unknown or positive; for a caught-up one,
// until MaxTaskIdle passed (then enforced, and counted); never with MaxTaskIdle < 0.
func TestPartitionGroupReady(t *testing.T) {
	var dropped []string
	now := time.UnixMilli(1_000_000)
	lags := lagMap{}
	g := testGroup(time.Second, lags, &dropped)
	if _, err := g.Add("a", 0, []*kgo.Record{groupRec("a", 0, 1), groupRec("a", 1, 2)}); err != nil {
		t.Fatal(err)
	}
	lags["b"] = struct {
		lag   int64
		known bool
	}{0, false}
	if ready, wake, wait := g.Ready(now); ready || !wake.IsZero() || !wait {
		t.Fatalf("lag unknown: ready %v wake %v wait %v", ready, wake, wait)
	}
	lags["b"] = struct {
		lag   int64
		known bool
	}{3, true}
	if ready, _, wait := g.Ready(now); ready || !wait {
		t.Fatal("lag positive: ready")
	}
	lags["b"] = struct {
		lag   int64
		known bool
	}{0, true}
	if ready, wake, wait := g.Ready(now); ready || wait || !wake.Equal(now.Add(time.Second)) {
		t.Fatalf("caught up: ready %v wake %v wait %v, want a wait until %v", ready, wake, wait, now.Add(time.Second))
	}
	if ready, wake, _ := g.Ready(now.Add(999 * time.Millisecond)); ready || !wake.Equal(now.Add(time.Second)) {
		t.Fatal("the idle deadline moved")
	}
	// Every poll asks an idle task whether it is ready: a record is counted once, when it
	// is taken, however often Ready said so before.
	for range 3 {
		if ready, _, _ := g.Ready(now.Add(time.Second)); !ready {
			t.Fatal("not ready after the idle time")
		}
	}
	if g.Enforced() != 0 {
		t.Fatalf("enforced %d before a record was taken", g.Enforced())
	}
	if got := drain(t, g, now.Add(time.Second)); got != "a0@1 a1@2" || g.Enforced() != 2 {
		t.Fatalf("after the idle time: %q, enforced %d", got, g.Enforced())
	}
	// A record in b clears the deadline; both buffered: ready without enforcing.
	_, _ = g.Add("a", 0, []*kgo.Record{groupRec("a", 2, 9)})
	_, _ = g.Add("b", 0, []*kgo.Record{groupRec("b", 0, 8)})
	if got := drain(t, g, now.Add(time.Second)); got != "b0@8" || g.Enforced() != 2 {
		t.Fatalf("both buffered: %q, enforced %d", got, g.Enforced())
	}
	// b is empty again: a new idle wait started when drain found it so.
	if ready, wake, _ := g.Ready(now.Add(1500 * time.Millisecond)); ready || !wake.Equal(now.Add(2*time.Second)) {
		t.Fatalf("a new idle wait: ready %v wake %v", ready, wake)
	}

	never := testGroup(-1, lagMap{"b": {0, false}}, &dropped)
	_, _ = never.Add("a", 0, []*kgo.Record{groupRec("a", 0, 1)})
	if ready, _, _ := never.Ready(now); !ready {
		t.Fatal("MaxTaskIdle < 0 waits")
	}
}

// Save and Restore bring partition times back (the extractor's partitionTime); Clear drops
// the buffered records.
func TestPartitionGroupSaveRestore(t *testing.T) {
	var times []int64
	g := NewPartitionGroup(GroupConfig{
		MaxTaskIdle: -1,
		Extract: func(r *kgo.Record, partitionTime int64) (int64, error) {
			times = append(times, partitionTime)
			return r.Timestamp.UnixMilli(), nil
		},
		Lag: func(string, int32, time.Time) (int64, bool) { return 0, true },
	})
	g.AddPartition("a", 0)
	_, _ = g.Add("a", 0, []*kgo.Record{groupRec("a", 0, 5)})
	_, _, _ = g.Next()
	g.Cut()
	g.Save()
	_, _ = g.Add("a", 0, []*kgo.Record{groupRec("a", 1, 9), groupRec("a", 2, 3)})
	_, _, _ = g.Next()
	g.Restore()
	g.Clear()
	if g.Buffered() != 0 {
		t.Fatalf("buffered %d after Clear", g.Buffered())
	}
	_, _ = g.Add("a", 0, []*kgo.Record{groupRec("a", 1, 9)})
	if fmt.Sprint(times) != "[-1 5 9 5]" {
		t.Fatalf("partition times seen by the extractor %v, want [-1 5 9 5]", times)
	}
}

// Save keeps the partition times of the last Cut, not those of when it is called: under
// exactly-once a task goes on processing while the transaction of its cut ends. Without a
// Cut it keeps nothing, and a Restore forgets a Cut that was not saved.
func TestPartitionGroupSavesTheCut(t *testing.T) {
	var times []int64
	g := NewPartitionGroup(GroupConfig{
		MaxTaskIdle: -1,
		Extract: func(r *kgo.Record, partitionTime int64) (int64, error) {
			times = append(times, partitionTime)
			return r.Timestamp.UnixMilli(), nil
		},
		Lag: func(string, int32, time.Time) (int64, bool) { return 0, true },
	})
	g.AddPartition("a", 0)
	next := func(offset, ts int64) {
		t.Helper()
		_, _ = g.Add("a", 0, []*kgo.Record{groupRec("a", offset, ts)})
		if r, _, err := g.Next(); r == nil || err != nil {
			t.Fatalf("Next: %v, %v", r, err)
		}
	}
	next(0, 5)
	g.Cut()     // the transaction covers partition time 5
	next(1, 9)  // processed while it ends
	g.Save()    // it committed
	g.Restore() // the next one aborts: back to 5
	next(1, 9)
	g.Save() // no Cut since: nothing saved
	next(2, 12)
	g.Cut()
	g.Restore() // aborted before its Save: back to 5, the Cut forgotten
	g.Save()
	g.Restore()
	next(2, 12)
	if fmt.Sprint(times) != "[-1 5 5 9 5]" {
		t.Fatalf("partition times seen by the extractor %v, want [-1 5 5 9 5]", times)
	}
}
