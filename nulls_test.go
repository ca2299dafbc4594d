package kstream_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Null keys and values on a broker: the operators drop what Kafka Streams drops, a null key
// reaches the output topic as a null key, and App.Stats counts the dropped records (the
// rules are tested one by one against Kafka Streams on the test driver, in
// kstreamtest/nulls_test.go).
func TestNullsDroppedRecordsStats(t *testing.T) {
	t.Parallel()
	inT := kafkatest.CreateTopic(t, "in", parts, nil)
	tableT := kafkatest.CreateTopic(t, "table", parts, nil)
	globalT := kafkatest.CreateTopic(t, "global", 1, nil)
	countT := kafkatest.CreateTopic(t, "count", parts, nil)
	joinT := kafkatest.CreateTopic(t, "join", parts, nil)

	b := kstream.NewBuilder()
	s := strs(b, inT)
	kstream.TableMapValues(kstream.Count(s.GroupByKey(), "cnt"), func(n int64) string { return string(rune('0' + n)) }).
		ToStream().To(countT, nil, serde.String())
	table := kstream.Table(b, tableT, serde.String(), serde.String(), "tbl")
	kstream.LeftJoin(s, table, func(_, v, _ string, _ bool) string { return v }).To(joinT, nil, serde.String())
	g := kstream.GlobalTable(b, globalT, serde.String(), serde.String(), "glb")
	kstream.LeftJoinGlobal(s, g, func(_, v string) string { return v }, func(_, v, _ string, _ bool) string { return v }).
		Foreach(func(string, string) {})
	r := start(t, newApp(t, b, testConfig(t)))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })

	null := func(topic string, key, value []byte, ms int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: baseTime.Add(time.Duration(ms) * time.Millisecond)}
	}
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl,
		null(tableT, nil, []byte("TN"), 0),     // dropped by the table source
		null(globalT, nil, []byte("GN"), 0),    // dropped by the global table (after its bootstrap)
		null(inT, []byte("a"), []byte("x"), 1), //
		null(inT, nil, []byte("y"), 2),         // dropped by Count; joined by both left joins
		null(inT, []byte("a"), nil, 3),         // dropped by Count and both left joins
		null(inT, nil, nil, 4),                 // dropped by Count and both left joins
		null(inT, []byte("a"), []byte("z"), 5),
	)

	counts := kafkatest.Consume(t, countT, 2, 30*time.Second)
	var got []string
	for _, rec := range counts {
		got = append(got, string(rec.Key)+"="+string(rec.Value))
	}
	if want := []string{"a=1", "a=2"}; !slices.Equal(got, want) {
		t.Errorf("counts: got %q, want %q", got, want)
	}
	joined := kafkatest.Consume(t, joinT, 3, 30*time.Second)
	got = nil
	for _, rec := range joined {
		k := "<null>"
		if rec.Key != nil {
			k = string(rec.Key)
		}
		got = append(got, k+"="+string(rec.Value))
	}
	slices.Sort(got)
	if want := []string{"<null>=y", "a=x", "a=z"}; !slices.Equal(got, want) {
		t.Errorf("left join: got %q, want %q (a null key stays null on the output topic)", got, want)
	}
	// 3 by Count, 2 by each left join, 1 by the table source, 1 by the global table.
	const want = 9
	kafkatest.Eventually(t, 30*time.Second, "9 dropped records", func() bool { return r.app.Stats().DroppedRecords >= want })
	if n := r.app.Stats().DroppedRecords; n != want {
		t.Errorf("Stats().DroppedRecords = %d, want %d", n, want)
	}
}

// Restoration skips changelog records with a null key, as Kafka Streams'
// StoreChangelogReader does: a source table's topic (its changelog) may hold some when it is
// not compacted (Kafka refuses null keys on compacted topics), and none may land in the
// store as the empty key.
func TestRestoreSkipsNullKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	prepareChangelog(t, cfg, func(topic string) {
		kafkatest.Produce(t, kafkatest.Client(t),
			&kgo.Record{Topic: topic, Key: []byte("a"), Value: count(2)},
			&kgo.Record{Topic: topic, Key: nil, Value: count(5)},
		)
	}, "cleanup.policy", "delete") // Kafka refuses null keys on a compacted topic
	// "" is an empty key, not a null one: its count starts from nothing.
	restoreAndCheck(t, cfg, in, map[string]int64{"a": 2, "": 0}, 1, 1)
}
