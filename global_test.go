package kstream_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyWatch is a string key serde that counts the keys it decodes. A global table decodes
// every record it applies, so a test can tell when the global goroutine has read a record.
type keyWatch struct {
	mu   sync.Mutex
	seen map[string]int
}

func newKeyWatch() *keyWatch { return &keyWatch{seen: map[string]int{}} }

func (w *keyWatch) Serialize(s string) ([]byte, error) { return serde.String().Serialize(s) }
func (w *keyWatch) Deserialize(b []byte) (string, error) {
	s, err := serde.String().Deserialize(b)
	w.mu.Lock()
	w.seen[s]++
	w.mu.Unlock()
	return s, err
}

func (w *keyWatch) saw(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[key] > 0
}

// globalBarrier returns once every record written to topic before the call is applied to
// its global store and visible to tasks. Phase 1 writes a marker to each partition after
// those records, and waits until each marker is decoded: the records before it in its
// partition were decoded in the same or an earlier poll. Phase 2 writes one more marker
// and waits for it: the global goroutine commits a poll's records before its next poll, and
// this marker cannot be in the same poll as the first ones, which it was written after.
func globalBarrier(t *testing.T, topic string, partitions int32, w *keyWatch) {
	t.Helper()
	cl := kafkatest.ManualProducer(t)
	id := kafkatest.Name(t, "marker")
	var keys []string
	for p := range partitions {
		k := fmt.Sprintf("%s-%d", id, p)
		keys = append(keys, k)
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: count(0)})
	}
	kafkatest.Eventually(t, 30*time.Second, "markers applied", func() bool {
		for _, k := range keys {
			if !w.saw(k) {
				return false
			}
		}
		return true
	})
	done := id + "-done"
	kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(done), Value: count(0)})
	kafkatest.Eventually(t, 30*time.Second, "second marker applied", func() bool { return w.saw(done) })
}

// lookupApp builds an app that left-joins the stream in (value: the key to look up) with
// the global table of topic, whose values are int64, and writes the found value, or -1, to
// out under the stream record's key.
func lookupApp(t *testing.T, cfg kstream.Config, in, topic, out string, ks serde.Serde[string], opts ...kstream.StoreOption) *kstream.App {
	t.Helper()
	if ks == nil {
		ks = serde.String()
	}
	b := kstream.NewBuilder()
	g := kstream.GlobalTable(b, topic, ks, serde.Int64(), "lookup", opts...)
	kstream.LeftJoinGlobal(kstream.Stream(b, in, serde.String(), serde.String()), g,
		func(_, k string) string { return k },
		func(_, _ string, v int64, found bool) int64 {
			if !found {
				return -1
			}
			return v
		}).To(out, nil, serde.Int64())
	return newApp(t, b, cfg)
}

// reader reads a topic from its start, keeping its position between calls.
type reader struct {
	t  *testing.T
	cl *kgo.Client
}

func newReader(t *testing.T, topic string) *reader {
	return &reader{t, kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))}
}

// next returns the next n records as "key=value" (int64 values), waiting up to 30s.
func (r *reader) next(n int) []string {
	r.t.Helper()
	ctx := kafkatest.Context(r.t, 30*time.Second)
	var out []string
	for len(out) < n && ctx.Err() == nil {
		f := r.cl.PollRecords(ctx, n-len(out))
		f.EachRecord(func(rec *kgo.Record) {
			v, _ := serde.Int64().Deserialize(rec.Value)
			out = append(out, fmt.Sprintf("%s=%d", rec.Key, v))
		})
	}
	if len(out) < n {
		r.t.Fatalf("got %d records (%v), want %d", len(out), out, n)
	}
	return out
}

// lookups writes one stream record per key (stream key "q-<key>") and returns what the
// app answered, keyed by the looked-up key.
func lookups(t *testing.T, in string, r *reader, keys ...string) map[string]int64 {
	t.Helper()
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("q-" + k), Value: []byte(k)})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	got := map[string]int64{}
	for _, kv := range r.next(len(keys)) {
		k, v, _ := strings.Cut(strings.TrimPrefix(kv, "q-"), "=")
		var n int64
		fmt.Sscan(v, &n)
		got[k] = n
	}
	return got
}

// prepareGlobal creates a compacted topic with fill's records in it.
func prepareGlobal(t *testing.T, partitions int32, fill func(topic string), extra ...string) string {
	t.Helper()
	configs := map[string]*string{"cleanup.policy": kstreamPtr("compact")}
	for i := 0; i+1 < len(extra); i += 2 {
		configs[extra[i]] = kstreamPtr(extra[i+1])
	}
	topic := kafkatest.CreateTopic(t, "global", partitions, configs)
	fill(topic)
	return topic
}

// bootstrapAndCheck starts a lookup app over the prepared global topic with an empty state
// directory, checks how many records the bootstrap applied, then looks up every key of want
// (and one absent key): each answer must be the bootstrapped value.
func bootstrapAndCheck(t *testing.T, topic string, want map[string]int64, minRestored, maxRestored int64) {
	t.Helper()
	cfg := testConfig(t)
	rc := &restoreCounter{}
	cfg.RestoreListener, cfg.StateDir = rc, t.TempDir()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	if got := rc.total("lookup"); got < minRestored || got > maxRestored {
		t.Fatalf("bootstrap applied %d records, want %d to %d", got, minRestored, maxRestored)
	}
	keys := append(slices.Sorted(maps.Keys(want)), "absent")
	got := lookups(t, in, newReader(t, out), keys...)
	want = maps.Clone(want)
	want["absent"] = -1
	if !maps.Equal(got, want) {
		t.Fatalf("lookups after bootstrap: got %v, want %v", got, want)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A global topic with an empty partition (end offset 0) next to a non-empty one bootstraps
// and does not hang.
func TestGlobalBootstrapEmptyPartition(t *testing.T) {
	t.Parallel()
	topic := prepareGlobal(t, 2, func(topic string) {
		kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k"), Value: count(5)})
	})
	bootstrapAndCheck(t, topic, map[string]int64{"k": 5}, 1, 1)
}

// A global topic whose last records are transaction markers (a transactional producer: one
// committed and one aborted transaction) bootstraps the committed data and ends.
func TestGlobalBootstrapEndingInTransactionMarkers(t *testing.T) {
	t.Parallel()
	topic := prepareGlobal(t, 1, func(topic string) {
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
	// read_committed: the aborted values never reach the store.
	bootstrapAndCheck(t, topic, map[string]int64{"k0": 10, "k1": 11, "k2": 12}, 3, 3)
}

// A compacted global topic (offsets missing) bootstraps the surviving records and ends.
func TestGlobalBootstrapCompacted(t *testing.T) {
	t.Parallel()
	broker := kafkatest.Embedded(t)
	lastRec := func(topic string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("last"), Value: count(7)}
	}
	cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := 0
	// As in TestRestoreCompactedChangelog: on Apache Kafka, small time-rolled segments and
	// a low dirty ratio make the cleaner compact within seconds.
	topic := prepareGlobal(t, 1, func(topic string) {
		for v := range int64(5) {
			var recs []*kgo.Record
			for k := range 20 {
				recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: count(v*100 + int64(k))})
			}
			kafkatest.Produce(t, cl, recs...)
			produced += len(recs)
		}
		kafkatest.Produce(t, cl, lastRec(topic))
		produced++
	}, "segment.ms", "100", "min.cleanable.dirty.ratio", "0.01")
	// Drained until 2 s without a record: under load on a real broker, a shorter quiet time
	// once ended the drain before its first fetch answered (0 records counted).
	records := func() int { return len(kafkatest.Drain(t, topic, 2*time.Second, 20*time.Second)) }
	if broker != nil {
		if err := broker.Compact(); err != nil {
			t.Fatal(err)
		}
	} else {
		kafkatest.Eventually(t, 90*time.Second, "Kafka compacting the topic", func() bool {
			kafkatest.Produce(t, cl, lastRec(topic)) // rolls the segment so the cleaner can take it
			produced++
			return records() < produced-1
		})
	}
	remaining := int64(records())
	if remaining >= int64(produced) {
		t.Fatalf("compaction removed nothing (%d of %d records left)", remaining, produced)
	}
	t.Logf("%d of %d records left after compaction", remaining, produced)
	want := map[string]int64{"last": 7}
	for k := range 20 {
		want[fmt.Sprintf("k%d", k)] = 400 + int64(k)
	}
	// Kafka's cleaner may go on compacting during the bootstrap: at least one record per
	// key, at most what was left when counted.
	minRestored := remaining
	if broker == nil {
		minRestored = int64(len(want))
	}
	bootstrapAndCheck(t, topic, want, minRestored, remaining)
}

// A restart with a persistent global store resumes from its positions: the second start
// applies only the records written while the app was stopped.
func TestGlobalRestartResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	const parts = 2
	topic := kafkatest.CreateTopic(t, "global", parts, map[string]*string{"cleanup.policy": kstreamPtr("compact")})
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cl := kafkatest.Client(t)
	want := map[string]int64{}
	write := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%02d", i)
			want[k] = int64(i * 10)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: count(int64(i * 10))})
		}
		kafkatest.Produce(t, cl, recs...)
	}
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	w := newKeyWatch()
	results := newReader(t, out)

	write(0, 5) // before the first start: bootstrapped
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	r := start(t, lookupApp(t, cfg, in, topic, out, w))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	if got := rc.total("lookup"); got != 5 {
		t.Fatalf("first start bootstrapped %d records, want 5", got)
	}
	write(5, 8) // while running: followed
	globalBarrier(t, topic, parts, w)
	if got := lookups(t, in, results, "k00", "k07"); got["k00"] != 0 || got["k07"] != 70 {
		t.Fatalf("lookups while running: %v", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	write(8, 12) // while stopped: the only records the second start applies
	rc = &restoreCounter{}
	cfg.RestoreListener = rc
	r = start(t, lookupApp(t, cfg, in, topic, out, nil))
	kafkatest.Eventually(t, 60*time.Second, "running again", func() bool { return r.app.State() == kstream.StateRunning })
	if got := rc.total("lookup"); got != 4 {
		t.Fatalf("second start applied %d records, want the 4 written while stopped", got)
	}
	got := lookups(t, in, results, slices.Sorted(maps.Keys(want))...)
	if !maps.Equal(got, want) {
		t.Fatalf("lookups after the restart: got %v, want %v", got, want)
	}
}

// A global store whose positions no longer fit its topic (the topic was deleted and
// created again) is rebuilt from scratch: keys of the old topic are gone.
func TestGlobalStoreRebuiltWhenTopicRecreated(t *testing.T) {
	t.Parallel()
	topic := kafkatest.Name(t, "global")
	adm := kadm.NewClient(kafkatest.Client(t))
	var id kadm.TopicID
	// create creates the topic, again after a deletion (which Kafka completes in the
	// background), and waits until the new topic is in the metadata.
	create := func() {
		prev := id
		kafkatest.Eventually(t, 60*time.Second, "topic created", func() bool {
			ctx := kafkatest.Context(t, 10*time.Second)
			_, _ = adm.CreateTopic(ctx, 1, 1, nil, topic) // may fail while the old one is being deleted
			d, err := adm.ListTopics(ctx, topic)
			if err != nil || d[topic].Err != nil || len(d[topic].Partitions) != 1 || d[topic].ID == prev {
				return false
			}
			id = d[topic].ID
			return true
		})
	}
	create()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cl := kafkatest.Client(t)
	var old []*kgo.Record
	for i := range 3 {
		old = append(old, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "old%d", i), Value: count(int64(i))})
	}
	kafkatest.Produce(t, cl, old...)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	if _, err := adm.DeleteTopic(kafkatest.Context(t, 30*time.Second), topic); err != nil {
		t.Fatal(err)
	}
	create()
	// A new client: the old one knows the deleted topic's id.
	kafkatest.Produce(t, kafkatest.Client(t), &kgo.Record{Topic: topic, Key: []byte("new"), Value: count(42)})
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	r = start(t, lookupApp(t, cfg, in, topic, out, nil))
	kafkatest.Eventually(t, 60*time.Second, "running again", func() bool { return r.app.State() == kstream.StateRunning })
	got := lookups(t, in, newReader(t, out), "old0", "new")
	if want := map[string]int64{"old0": -1, "new": 42}; !maps.Equal(got, want) {
		t.Fatalf("after the topic was recreated: got %v, want %v", got, want)
	}
	if rc.total("lookup") != 1 {
		t.Fatalf("rebuild applied %d records, want 1", rc.total("lookup"))
	}
}

// Stream-globaltable joins on a broker, record by record. The global topic has more
// partitions than the stream (no co-partitioning, no repartition). Everything written to
// the global topic before the start is visible to the first stream records, even those
// already waiting in the input topic; later updates and tombstones are seen by later stream
// records: the inner join drops a deleted key, the left join gets found=false.
func TestGlobalJoinOnBroker(t *testing.T) {
	t.Parallel()
	const globalParts = 3
	users := kafkatest.CreateTopic(t, "users", globalParts, map[string]*string{"cleanup.policy": kstreamPtr("compact")})
	orders := kafkatest.CreateTopic(t, "orders", 2, nil)
	innerOut := kafkatest.CreateTopic(t, "inner", 1, nil)
	leftOut := kafkatest.CreateTopic(t, "left", 1, nil)
	w := newKeyWatch()
	b := kstream.NewBuilder()
	g := kstream.GlobalTable(b, users, serde.Serde[string](w), serde.Int64(), "users-global")
	// orders: key = order id, value = user id.
	s := kstream.Stream(b, orders, serde.String(), serde.String())
	byUser := func(_, user string) string { return user }
	kstream.JoinGlobal(s, g, byUser, func(_, _ string, v int64) int64 { return v }).To(innerOut, nil, serde.Int64())
	kstream.LeftJoinGlobal(s, g, byUser, func(_, _ string, v int64, found bool) int64 {
		if !found {
			return -1
		}
		return v
	}).To(leftOut, nil, serde.Int64())

	cl := kafkatest.Client(t)
	const n = 30
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: users, Key: fmt.Appendf(nil, "u%d", i), Value: count(int64(100 + i))})
	}
	kafkatest.Produce(t, cl, recs...)
	recs = nil
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: orders, Key: fmt.Appendf(nil, "first%d", i), Value: fmt.Appendf(nil, "u%d", i)})
	}
	kafkatest.Produce(t, cl, recs...)

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	start(t, newApp(t, b, cfg))
	inner, left := newReader(t, innerOut), newReader(t, leftOut)
	var wantFirst []string
	for i := range n {
		wantFirst = append(wantFirst, fmt.Sprintf("first%d=%d", i, 100+i))
	}
	slices.Sort(wantFirst)
	for name, rd := range map[string]*reader{"inner": inner, "left": left} {
		got := rd.next(n)
		slices.Sort(got)
		if !slices.Equal(got, wantFirst) {
			t.Fatalf("%s join of the records waiting at start:\n got %v\nwant %v", name, got, wantFirst)
		}
	}

	order := func(id, user string) {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: orders, Key: []byte(id), Value: []byte(user)})
	}
	user := func(id string, v []byte) {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: users, Key: []byte(id), Value: v})
		globalBarrier(t, users, globalParts, w)
	}
	expect := func(rd *reader, name string, want string) {
		t.Helper()
		if got := rd.next(1)[0]; got != want {
			t.Fatalf("%s join: got %s, want %s", name, got, want)
		}
	}
	user("u1", count(1001)) // update
	order("o1", "u1")
	expect(inner, "inner", "o1=1001")
	expect(left, "left", "o1=1001")
	user("u1", nil) // tombstone
	order("o2", "u1")
	expect(left, "left", "o2=-1") // processed; the inner join dropped it:
	order("o3", "u2")
	expect(inner, "inner", "o3=102")
	expect(left, "left", "o3=102")
	order("o4", "nobody")
	expect(left, "left", "o4=-1")
	user("u1", count(7)) // back
	order("o5", "u1")
	expect(inner, "inner", "o5=7")
	expect(left, "left", "o5=7")
}

// Processing starts only once the global stores are bootstrapped: the instance stays
// REBALANCING and processes nothing while the bootstrap is held, then the first stream
// record sees the global record written before the start.
func TestGlobalBootstrapBeforeProcessing(t *testing.T) {
	t.Parallel()
	topic := kafkatest.CreateTopic(t, "global", 2, nil)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Key: []byte("k"), Value: count(9)},
		&kgo.Record{Topic: in, Key: []byte("q-k"), Value: []byte("k")})
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	br := &blockingRestore{started: make(chan struct{}), release: make(chan struct{})}
	cfg.RestoreListener = br
	var states syncList
	cfg.StateListener = func(_, s kstream.State) { states.add(s.String()) }
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	released := false
	defer func() {
		if !released {
			close(br.release)
		}
	}()
	select {
	case <-br.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the bootstrap did not start")
	}
	if s := r.app.State(); s != kstream.StateRebalancing {
		t.Fatalf("state %s while bootstrapping, want REBALANCING", s)
	}
	if got := kafkatest.ConsumeAtMost(t, out, 1, time.Second); len(got) != 0 {
		t.Fatalf("a record was processed while the global store was bootstrapping: %v", got)
	}
	if s := r.app.State(); s != kstream.StateRebalancing {
		t.Fatalf("state %s while bootstrapping, want REBALANCING", s)
	}
	close(br.release)
	released = true
	kafkatest.Eventually(t, 60*time.Second, "RUNNING after the bootstrap", func() bool { return r.app.State() == kstream.StateRunning })
	if got := newReader(t, out).next(1)[0]; got != "q-k=9" {
		t.Fatalf("first stream record got %s, want q-k=9", got)
	}
	if l := states.list(); len(l) < 2 || l[0] != "REBALANCING" || l[1] != "RUNNING" {
		t.Fatalf("state changes %v, want REBALANCING, then RUNNING", l)
	}
}

// A global table over a topic that does not exist fails at start, naming the topic.
func TestGlobalTopicMissing(t *testing.T) {
	t.Parallel()
	missing := kafkatest.Name(t, "missing")
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	r := start(t, lookupApp(t, cfg, in, missing, out, nil))
	err, done := r.wait(30 * time.Second)
	if !done || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("topic %q of global store lookup does not exist", missing)) {
		t.Fatalf("got %v (returned %v), want an error naming global topic %s", err, done, missing)
	}
	if s := r.app.State(); s != kstream.StateError {
		t.Fatalf("state %s, want ERROR", s)
	}
}

// A global table record that cannot be decoded stops the app under the default handler,
// with the record's coordinates; under LogAndContinue the bootstrap skips it.
func TestGlobalDeserializationError(t *testing.T) {
	t.Parallel()
	topic := prepareGlobal(t, 1, func(topic string) {
		kafkatest.Produce(t, kafkatest.Client(t),
			&kgo.Record{Topic: topic, Key: []byte("a"), Value: count(1)},
			&kgo.Record{Topic: topic, Key: []byte("b"), Value: []byte("xyz")}, // offset 1: not an int64
			&kgo.Record{Topic: topic, Key: []byte("c"), Value: count(3)})
	})
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	err, done := r.wait(30 * time.Second)
	var re *kstream.RecordError
	if !done || !errors.As(err, &re) || re.Kind != kstream.DeserializationError || re.Topic != topic || re.Partition != 0 || re.Offset != 1 {
		t.Fatalf("got %v, want a deserialization RecordError at %s/0/1", err, topic)
	}

	cfg = testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.DeserializationErrorHandler = kstream.LogAndContinue()
	r = start(t, lookupApp(t, cfg, in, topic, out, nil))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	got := lookups(t, in, newReader(t, out), "a", "b", "c")
	if want := map[string]int64{"a": 1, "b": -1, "c": 3}; !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Stopping the app while a global store bootstraps is a graceful stop: Run returns nil.
func TestGlobalStopDuringBootstrap(t *testing.T) {
	t.Parallel()
	topic := kafkatest.CreateTopic(t, "global", 1, nil)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	kafkatest.Produce(t, kafkatest.Client(t), &kgo.Record{Topic: topic, Key: []byte("k"), Value: count(1)})
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	br := &blockingRestore{started: make(chan struct{}), release: make(chan struct{})}
	cfg.RestoreListener = br
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	select {
	case <-br.started:
	case <-time.After(30 * time.Second):
		close(br.release)
		t.Fatal("the bootstrap did not start")
	}
	r.once.Do(r.cancel)
	close(br.release)
	err, done := r.wait(30 * time.Second)
	if !done || err != nil {
		t.Fatalf("Run returned %v (done %v), want nil", err, done)
	}
	if s := r.app.State(); s != kstream.StateNotRunning {
		t.Fatalf("state %s, want NOT_RUNNING", s)
	}
}
