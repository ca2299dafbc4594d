package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func noTask(TaskEnv, TaskID, map[string]store.Backend) (Task, error) {
	return nil, errors.New("no task expected")
}

func runPrepare(t *testing.T, topo *Topology) error {
	t.Helper()
	r, err := New(topo, Config{ApplicationID: kafkatest.Name(t, "app"), Brokers: kafkatest.Brokers(t), Logger: quiet(), ReplicationFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestCopartitionMismatch(t *testing.T) {
	a := kafkatest.CreateTopic(t, "a", 3, nil)
	b := kafkatest.CreateTopic(t, "b", 4, nil)
	err := runPrepare(t, &Topology{
		SubTopologies:     []SubTopology{{ID: 0, Sources: []Source{{Topic: a}, {Topic: b}}, NewTask: noTask}},
		CopartitionGroups: [][]string{{a, b}},
	})
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") || !strings.Contains(err.Error(), a+"=3") || !strings.Contains(err.Error(), b+"=4") {
		t.Fatalf("got %v, want a co-partitioning error naming both counts", err)
	}
}

func TestInternalTopicPartitionMismatch(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	existing := kafkatest.CreateTopic(t, "x-repartition", 2, nil)
	err := runPrepare(t, &Topology{
		SubTopologies: []SubTopology{
			{ID: 0, Sources: []Source{{Topic: in}}, NewTask: noTask},
			{ID: 1, Sources: []Source{{Topic: existing, Internal: true}}, NewTask: noTask},
		},
		InternalTopics: []InternalTopic{{Name: existing, Writer: 0}},
	})
	if err == nil || !strings.Contains(err.Error(), existing) || !strings.Contains(err.Error(), "2 partitions, want 3") {
		t.Fatalf("got %v, want an error about %s's partition count", err, existing)
	}
}

// A repartition topic inherits the partition count of its writer's inputs, through a chain.
func TestInternalTopicPartitionInference(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 5, nil)
	first, second := kafkatest.Name(t, "first-repartition"), kafkatest.Name(t, "second-repartition")
	topo := &Topology{
		SubTopologies: []SubTopology{
			{ID: 0, Sources: []Source{{Topic: in}}},
			{ID: 1, Sources: []Source{{Topic: first, Internal: true}}},
			{ID: 2, Sources: []Source{{Topic: second, Internal: true}}},
		},
		// Listed in reverse so that one pass cannot resolve both.
		InternalTopics: []InternalTopic{{Name: second, Writer: 1}, {Name: first, Writer: 0}},
	}
	r, err := New(topo, Config{ApplicationID: kafkatest.Name(t, "app"), Brokers: kafkatest.Brokers(t), Logger: quiet(), ReplicationFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.openProducer(); err != nil {
		t.Fatal(err)
	}
	defer r.producer.Close()
	ctx := kafkatest.Context(t, 30*time.Second)
	if err := r.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	details, err := r.admin.ListTopics(ctx, first, second)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{first, second} {
		if n := len(details[name].Partitions); n != 5 {
			t.Errorf("%s has %d partitions, want 5", name, n)
		}
	}
}

// Per-source reset policies replace the client-wide reset only for partitions without a
// committed offset, whatever the application default is.
func TestAdjustOffsets(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{
		{Topic: "dflt"}, {Topic: "early", Reset: ResetEarliest}, {Topic: "late", Reset: ResetLatest},
	}}}}
	for _, def := range []Reset{ResetDefault, ResetEarliest, ResetLatest} {
		r, err := New(topo, Config{ApplicationID: "a", Brokers: []string{"x:1"}, DefaultReset: def})
		if err != nil {
			t.Fatal(err)
		}
		client := kgo.NewOffset().AtStart()
		if def == ResetLatest {
			client = kgo.NewOffset().AtEnd()
		}
		in := map[string]map[int32]kgo.Offset{
			"dflt":  {0: client},
			"early": {0: client, 1: kgo.NewOffset().At(7)},
			"late":  {0: client, 1: kgo.NewOffset().At(9)},
		}
		out, _ := r.adjustOffsets(context.Background(), in)
		at := func(topic string, p int32) int64 { return out[topic][p].EpochOffset().Offset }
		if at("dflt", 0) != client.EpochOffset().Offset || at("early", 0) != -2 || at("late", 0) != -1 || at("early", 1) != 7 || at("late", 1) != 9 {
			t.Errorf("default %v: got %v", def, out)
		}
	}
}

// A by-duration policy (a source's own or the application's) starts a partition without a
// committed offset at the first record stamped at or after now minus its duration; a
// repartition topic starts at the earliest offset under a by-duration default.
func TestAdjustOffsetsByDuration(t *testing.T) {
	topo := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{
		{Topic: "dflt"}, {Topic: "recent", Reset: ResetByDuration, ResetDuration: 2 * time.Hour},
		{Topic: "late", Reset: ResetLatest}, {Topic: "app-x-repartition", Internal: true},
	}}}}
	for _, def := range []Reset{ResetEarliest, ResetByDuration} {
		r, err := New(topo, Config{ApplicationID: "a", Brokers: []string{"x:1"}, DefaultReset: def, DefaultResetDuration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		client := kgo.NewOffset().AtStart()
		in := map[string]map[int32]kgo.Offset{
			"dflt":              {0: client},
			"recent":            {0: client, 1: kgo.NewOffset().At(7)},
			"late":              {0: client},
			"app-x-repartition": {0: client},
		}
		before := time.Now()
		out, _ := r.adjustOffsets(context.Background(), in)
		after := time.Now()
		at := func(topic string, p int32) int64 { return out[topic][p].EpochOffset().Offset }
		// An AfterMilli offset carries its timestamp where an offset would be.
		within := func(topic string, d time.Duration) bool {
			ms := at(topic, 0)
			return ms >= before.Add(-d).UnixMilli() && ms <= after.Add(-d).UnixMilli()
		}
		if !within("recent", 2*time.Hour) || at("recent", 1) != 7 || at("late", 0) != -1 || at("app-x-repartition", 0) != -2 {
			t.Errorf("default %v: got %v", def, out)
		}
		if def == ResetByDuration && !within("dflt", time.Hour) || def == ResetEarliest && at("dflt", 0) != -2 {
			t.Errorf("default %v: the default source starts at %d", def, at("dflt", 0))
		}
	}
}
