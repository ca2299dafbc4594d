package kstream_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A stream-table join on a broker: updates and deletes of the table topic are seen by later
// stream records; after a restart the table is restored from its own topic.
func TestStreamTableJoinOnBroker(t *testing.T) {
	t.Parallel()
	users := kafkatest.CreateTopic(t, "users", 2, nil)
	clicks := kafkatest.CreateTopic(t, "clicks", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		tbl := kstream.Table(b, users, serde.String(), serde.Nullable(serde.String()), "users-store")
		kstream.LeftJoin(kstream.Stream(b, clicks, serde.String(), serde.String()), tbl,
			func(_ string, page string, name *string, found bool) string {
				if !found {
					return "anonymous@" + page
				}
				return *name + "@" + page
			}).To(out, serde.String(), serde.String())
		return b
	}
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	r := start(t, newApp(t, build(), cfg))
	cl := kafkatest.Client(t)
	wait := func(n int) []string {
		var vals []string
		for _, rec := range kafkatest.Consume(t, out, n, 30*time.Second) {
			vals = append(vals, string(rec.Key)+"="+string(rec.Value))
		}
		slices.Sort(vals)
		return vals
	}
	kafkatest.Produce(t, cl, &kgo.Record{Topic: users, Key: []byte("u1"), Value: []byte("ann")}, &kgo.Record{Topic: users, Key: []byte("u2"), Value: []byte("bob")})
	// The table records must be processed before the clicks: wait until they are committed.
	kafkatest.Eventually(t, 30*time.Second, "table loaded", func() bool {
		var sum int64
		for _, o := range committedOffsets(t, cfg.ApplicationID, users) {
			sum += o
		}
		return sum == 2
	})
	kafkatest.Produce(t, cl, &kgo.Record{Topic: clicks, Key: []byte("u1"), Value: []byte("home")}, &kgo.Record{Topic: clicks, Key: []byte("u3"), Value: []byte("home")})
	if got, want := wait(2), []string{"u1=ann@home", "u3=anonymous@home"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	kafkatest.Produce(t, cl, &kgo.Record{Topic: users, Key: []byte("u1"), Value: nil})
	kafkatest.Eventually(t, 30*time.Second, "delete processed", func() bool {
		var sum int64
		for _, o := range committedOffsets(t, cfg.ApplicationID, users) {
			sum += o
		}
		return sum == 3
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	// Restart on an empty directory: the table comes back from the users topic.
	rc := &restoreCounter{}
	cfg.StateDir, cfg.RestoreListener = t.TempDir(), rc
	start(t, newApp(t, build(), cfg))
	kafkatest.Produce(t, cl, &kgo.Record{Topic: clicks, Key: []byte("u1"), Value: []byte("again")}, &kgo.Record{Topic: clicks, Key: []byte("u2"), Value: []byte("again")})
	got := wait(4)
	if want := []string{"u1=ann@home", "u1=anonymous@again", "u2=bob@again", "u3=anonymous@home"}; !slices.Equal(got, want) {
		t.Fatalf("after restart: got %v, want %v", got, want)
	}
	if rc.total("users-store") != 3 {
		t.Fatalf("restored %d table records, want the 3 of the users topic", rc.total("users-store"))
	}
}

// The stream and the table of a join must be co-partitioned.
func TestJoinCopartitioning(t *testing.T) {
	t.Parallel()
	users := kafkatest.CreateTopic(t, "users", 2, nil)
	clicks := kafkatest.CreateTopic(t, "clicks", 3, nil)
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, users, serde.String(), serde.String(), "users-store")
	kstream.Join(kstream.Stream(b, clicks, serde.String(), serde.String()), tbl, func(_, a, b string) string { return a + b }).Foreach(func(string, string) {})
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	err, done := start(t, newApp(t, b, cfg)).wait(30 * time.Second)
	if !done || err == nil || !strings.Contains(err.Error(), "co-partitioned") {
		t.Fatalf("got %v, want a co-partitioning error", err)
	}
}
