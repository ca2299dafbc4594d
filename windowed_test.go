package kstream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store/pebble"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Expired windows leave the Pebble store: over a long run whose event time moves on (2000
// seconds of 1-second windows over 100 keys), the window store keeps only the windows of its
// live segments (retention plus up to two segments of 60s), not every window ever created.
// The key count of the store is read from Pebble itself after the app stopped.
func TestWindowStoreStaysBounded(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	s := kstream.Stream(b, in, serde.String(), serde.String())
	kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Second)), "wcounts").
		ToStream().To(out, nil, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	app := newApp(t, b, cfg)
	r := start(t, app)

	const n, keys, stepMs = 200_000, 100, 10 // 2000s of event time
	windows := map[string]bool{}
	cl := kafkatest.Client(t)
	recs := make([]*kgo.Record, 0, 5000)
	for i := range n {
		k := fmt.Sprintf("k%03d", (i*7919)%keys)
		ts := int64(i * stepMs)
		windows[fmt.Sprintf("%s@%d", k, ts/1000)] = true
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v"), Timestamp: baseTime.Add(time.Duration(ts) * time.Millisecond)})
		if len(recs) == cap(recs) {
			kafkatest.Produce(t, cl, recs...)
			recs = recs[:0]
		}
	}
	kafkatest.Eventually(t, 120*time.Second, "every record processed", func() bool { return committedAll(t, cfg.ApplicationID, in) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	db, err := pebble.Open(cfg.StateDir+"/pebble", pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bk, err := db.Open("wcounts", 0)
	if err != nil {
		t.Fatal(err)
	}
	it, err := bk.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for it.Next() {
		stored++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	// Live: the windows of at most retention (1s) plus two segments (60s each) of event
	// time, each with at most one window per key, plus a few metadata keys.
	bound := keys*(1+2*60) + 10
	t.Logf("%d windows created, %d keys in the Pebble store (bound %d)", len(windows), stored, bound)
	if stored > bound || stored >= len(windows)/5 {
		t.Fatalf("the window store holds %d keys after %d windows were created; want at most %d", stored, len(windows), bound)
	}
}
