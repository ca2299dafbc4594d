package kstream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// prepareChangelog creates the changelog topic of the counting app with fill's records in it, so
// that the app restores it on start.
func prepareChangelog(t *testing.T, cfg kstream.Config, fill func(topic string)) string {
	t.Helper()
	topic := cfg.ApplicationID + "-counts-changelog"
	adm := kadm.NewClient(kafkatest.Client(t))
	resp, err := adm.CreateTopic(kafkatest.Context(t, 10*time.Second), 1, 1, map[string]*string{"cleanup.policy": kstreamPtr("compact")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	fill(topic)
	return topic
}

func kstreamPtr(s string) *string { return &s }

func count(n int64) []byte { b, _ := serde.Int64().Serialize(n); return b }

// restoreAndCheck starts a counting app with an empty state directory over the prepared
// changelog, checks how many records it restored, then feeds one record per key of want:
// each emitted count must continue from the restored value.
func restoreAndCheck(t *testing.T, cfg kstream.Config, in string, want map[string]int64, wantRestored int64) {
	t.Helper()
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	cfg.StateDir = t.TempDir()
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	counts := kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts")
	counts.ToStream().To(out, nil, nil)
	app := newApp(t, b, cfg)
	r := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return app.State() == kstream.StateRunning })
	if got := rc.total("counts"); got != wantRestored {
		t.Fatalf("restored %d records, want %d", got, wantRestored)
	}
	// One more record per key: the emitted count must be the restored value plus one.
	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for k := range want {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("x")})
	}
	kafkatest.Produce(t, cl, recs...)
	got := map[string]int64{}
	for _, rec := range kafkatest.Consume(t, out, len(want), 30*time.Second) {
		n, _ := serde.Int64().Deserialize(rec.Value)
		got[string(rec.Key)] = n
	}
	for k, n := range want {
		if got[k] != n+1 {
			t.Errorf("key %s: count after restore %d, want %d", k, got[k], n+1)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// An empty changelog partition (end offset 0) restores nothing and does not hang.
func TestRestoreEmptyChangelog(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	prepareChangelog(t, cfg, func(string) {})
	restoreAndCheck(t, cfg, in, map[string]int64{"a": 0}, 0)
}

// A changelog whose last records are transaction markers (written by a transactional
// producer, one committed and one aborted transaction) restores the committed data and ends.
func TestRestoreChangelogEndingInTransactionMarkers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	prepareChangelog(t, cfg, func(topic string) {
		txn := kafkatest.Client(t, kgo.TransactionalID(kafkatest.Name(t, "txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx := kafkatest.Context(t, 30*time.Second)
		for i, commit := range []bool{true, false} {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				v := int64(10*(i+1) + k)
				if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: count(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
	})
	// Restoration reads read_committed: the aborted values never reach the store.
	restoreAndCheck(t, cfg, in, map[string]int64{"k0": 10, "k1": 11, "k2": 12}, 3)
}

// A compacted changelog (offsets missing) restores the surviving records and ends.
func TestRestoreCompactedChangelog(t *testing.T) {
	t.Parallel()
	broker := kafkatest.Embedded(t)
	if broker == nil {
		t.Skip("compaction on demand needs the in-process broker (Apache Kafka compacts on its own schedule)")
	}
	cfg := testConfig(t)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	topic := prepareChangelog(t, cfg, func(topic string) {
		cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for v := range int64(5) {
			var recs []*kgo.Record
			for k := range 20 {
				recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: count(v*100 + int64(k))})
			}
			kafkatest.Produce(t, cl, recs...)
		}
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Key: []byte("last"), Value: count(7)})
	})
	if err := broker.Compact(); err != nil {
		t.Fatal(err)
	}
	remaining := int64(len(kafkatest.Drain(t, topic, 300*time.Millisecond, 10*time.Second)))
	if remaining >= 101 {
		t.Fatalf("compaction removed nothing (%d records left)", remaining)
	}
	want := map[string]int64{"last": 7}
	for k := range 20 {
		want[fmt.Sprintf("k%d", k)] = 400 + int64(k)
	}
	restoreAndCheck(t, cfg, in, want, remaining)
}

// blockingRestore holds every restoration at its start until released.
type blockingRestore struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingRestore) OnRestoreStart(string, string, int32, int64, int64) {
	b.once.Do(func() { close(b.started) })
	<-b.release
}
func (b *blockingRestore) OnBatchRestored(string, string, int32, int64, int) {}
func (b *blockingRestore) OnRestoreEnd(string, string, int32, int64)         {}

// A task whose store is restoring does not hold up the other tasks: a stateless
// sub-topology keeps processing while the stateful one restores.
func TestRestoreDoesNotBlockOtherTasks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	in1 := kafkatest.CreateTopic(t, "in1", 1, nil)
	in2 := kafkatest.CreateTopic(t, "in2", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	prepareChangelog(t, cfg, func(topic string) {
		cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Key: []byte("k"), Value: count(41)})
	})
	b := kstream.NewBuilder()
	kstream.Stream(b, in1, serde.String(), serde.String()).To(out, nil, nil)
	kstream.Count(kstream.Stream(b, in2, serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To(out, nil, serde.Int64())
	br := &blockingRestore{started: make(chan struct{}), release: make(chan struct{})}
	cfg.RestoreListener = br
	cfg.StateDir = t.TempDir()
	app := newApp(t, b, cfg)
	start(t, app)
	defer func() {
		select {
		case <-br.release:
		default:
			close(br.release)
		}
	}()
	select {
	case <-br.started:
	case <-time.After(30 * time.Second):
		t.Fatal("restoration did not start")
	}
	kafkatest.Produce(t, kafkatest.Client(t), &kgo.Record{Topic: in1, Key: []byte("s"), Value: []byte("stateless")},
		&kgo.Record{Topic: in2, Key: []byte("k"), Value: []byte("x")})
	got := kafkatest.Consume(t, out, 1, 30*time.Second)
	if string(got[0].Value) != "stateless" {
		t.Fatalf("first output %q, want the stateless record", got[0].Value)
	}
	if app.State() == kstream.StateRunning {
		t.Fatal("state is RUNNING while a store is restoring")
	}
	close(br.release)
	kafkatest.Eventually(t, 30*time.Second, "RUNNING after the restore", func() bool { return app.State() == kstream.StateRunning })
	recs := kafkatest.Consume(t, out, 2, 30*time.Second)
	if n, _ := serde.Int64().Deserialize(recs[1].Value); n != 42 {
		t.Fatalf("count after restore %d, want 42", n)
	}
}
