package kstream_test

import (
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readCommitted is the option of a consumer that sees only committed transactions.
var readCommitted = kgo.FetchIsolationLevel(kgo.ReadCommitted())

// Exactly-once without crashes: counts are exact, every commit is a transaction, and a
// read_committed reader sees each count once.
func TestExactlyOnceCounts(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.CommitInterval = 0 // the exactly-once default, 100ms
	cfg.StateDir = t.TempDir()
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	produceCounts(t, in, 20000, 500, 3, want)
	kafkatest.Eventually(t, 60*time.Second, "exact counts", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	st := app.Stats()
	if !st.ExactlyOnce || st.Commits == 0 || st.TransactionalID == "" {
		t.Fatalf("stats %+v: want exactly-once commits and a transactional id", st)
	}
	t.Logf("stats: %+v", st)
}
