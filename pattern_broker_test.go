package kstream_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// patternOf returns a pattern matching the topics kafkatest.CreateTopic makes for this test
// with a base in bases ("patA", "patB"...), and no other topic.
func patternOf(t *testing.T, sample, base string) *regexp.Regexp {
	t.Helper()
	mid := sample[len(base):strings.LastIndex(sample, "-")]
	return regexp.MustCompile(`pat[A-Z]` + regexp.QuoteMeta(mid) + `-[0-9]+`)
}

// TestPatternSourceOnBroker reads two topics through one pattern source: the records of
// both are processed, by two tasks (partition p of both topics in task 0_p).
func TestPatternSourceOnBroker(t *testing.T) {
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	b2 := kafkatest.CreateTopic(t, "patB", 2, nil)
	other := kafkatest.CreateTopic(t, "other", 2, nil) // does not match
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	re := patternOf(t, a, "patA")

	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, re, serde.String(), serde.String())
	kstream.MapValues(s, func(v string) string { return "P" + v }).To(out, nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "(topics: "+re.String()+")") {
		t.Fatalf("Describe does not print the pattern:\n%s", d)
	}
	app := newApp(t, b, testConfig(t))
	r := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running with 2 tasks", func() bool {
		return r.app.State() == kstream.StateRunning && len(r.app.Tasks()) == 2
	})
	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for i := range 6 {
		topic := []string{a, b2, other}[i%3]
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	kafkatest.Produce(t, cl, recs...)
	got := kafkatest.Drain(t, out, 3*time.Second, 60*time.Second)
	var lines []string
	for _, rec := range got {
		lines = append(lines, string(rec.Key)+"="+string(rec.Value))
	}
	slices.Sort(lines)
	want := []string{"k0=Pv0", "k1=Pv1", "k3=Pv3", "k4=Pv4"}
	if !slices.Equal(lines, want) {
		t.Fatalf("out = %v, want %v (the records of the two matching topics)", lines, want)
	}
}

// TestPatternSourceCopartitioned joins a pattern source with a table: a matching topic
// with another partition count than the table's fails at start, naming the topics.
func TestPatternSourceCopartitioned(t *testing.T) {
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	kafkatest.CreateTopic(t, "patB", 3, nil)
	tbl := kafkatest.CreateTopic(t, "table", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, patternOf(t, a, "patA"), serde.String(), serde.String())
	tab := kstream.Table(b, tbl, serde.String(), serde.String(), "table-store")
	kstream.Join(s, tab, func(_, v, w string) string { return v + w }).To(out, serde.String(), serde.String())
	app := newApp(t, b, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := app.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") || !strings.Contains(err.Error(), tbl) {
		t.Fatalf("Run = %v, want a co-partitioning error naming %s", err, tbl)
	}
}
