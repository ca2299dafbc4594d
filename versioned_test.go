package kstream_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestVersionedTableRestoredOnBroker runs a stream-table join with a grace period against
// a versioned table on the in-process broker, then starts it again with an empty state
// directory: the versioned store, restored from its changelog (one record per version,
// timestamped with it), must answer as-of lookups as before, out-of-order versions and
// tombstones included, and the join's buffer, restored from its own changelog, must still
// hold the stream record buffered before the restart.
func TestVersionedTableRestoredOnBroker(t *testing.T) {
	t.Parallel()
	for _, g := range []kstream.Guarantee{kstream.AtLeastOnce, kstream.ExactlyOnce} {
		t.Run(fmt.Sprint(g), func(t *testing.T) {
			t.Parallel()
			versionedRestore(t, g)
		})
	}
}

func versionedRestore(t *testing.T, g kstream.Guarantee) {
	cfg := testConfig(t)
	cfg.Guarantee = g
	var opts []kgo.Opt
	if g == kstream.ExactlyOnce {
		opts = append(opts, readCommitted)
	}
	tableIn := kafkatest.CreateTopic(t, "vt", 1, nil)
	streamIn := kafkatest.CreateTopic(t, "vs", 1, nil)
	out := kafkatest.CreateTopic(t, "vout", 1, nil)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		tbl := kstream.Stream(b, tableIn, serde.String(), serde.String()).ToTable("vt-store", kstream.Versioned(time.Hour))
		s := kstream.Stream(b, streamIn, serde.String(), serde.String())
		kstream.LeftJoin(s, tbl, func(_ string, v, vt string, found bool) string {
			if !found {
				return v + "+none"
			}
			return v + "+" + vt
		}, kstream.Named("vjoin"), kstream.JoinGrace(10*time.Second)).To(out, serde.String(), serde.String())
		return b
	}
	cl := kafkatest.Client(t)

	// First run: the table's versions, out of order, with a tombstone; one stream record
	// that stays in the buffer (stream time 5000 - grace 10000 evicts nothing).
	cfg.StateDir = t.TempDir()
	r := start(t, newApp(t, build(), cfg))
	tomb := rec(tableIn, "b", "", 2500)
	tomb.Value = nil
	kafkatest.Produce(t, cl,
		rec(tableIn, "a", "A1", 1000), rec(tableIn, "a", "A3", 3000), rec(tableIn, "a", "A2", 2000),
		rec(tableIn, "b", "B1", 1000), tomb)
	changelog := cfg.ApplicationID + "-vt-store-changelog"
	got := kafkatest.Consume(t, changelog, 5, 60*time.Second, opts...)
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s=%s@%d/null:%v", r.Key, r.Value, r.Timestamp.Sub(baseTime).Milliseconds(), r.Value == nil))
	}
	slices.Sort(lines)
	want := []string{"a=A1@1000/null:false", "a=A2@2000/null:false", "a=A3@3000/null:false", "b=@2500/null:true", "b=B1@1000/null:false"}
	if !slices.Equal(lines, want) {
		t.Fatalf("changelog %s: %v, want %v", changelog, lines, want)
	}
	kafkatest.Produce(t, cl, rec(streamIn, "a", "s5000", 5000))
	bufferLog := cfg.ApplicationID + "-vjoin-Buffer-changelog"
	kafkatest.Consume(t, bufferLog, 2, 60*time.Second, opts...) // the record and the buffer's stream time
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// The changelog's topic configuration is Java's.
	adm := kadm.NewClient(cl)
	rcs, err := adm.DescribeTopicConfigs(kafkatest.Context(t, 10*time.Second), changelog)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(changelog, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.compaction.lag.ms" && (c.Value == nil || *c.Value != "90000000") {
			t.Errorf("min.compaction.lag.ms = %v, want 90000000 (history retention + 1 day)", c.MaybeValue())
		}
		if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "compact") {
			t.Errorf("cleanup.policy = %v, want compact", c.MaybeValue())
		}
	}

	// Second run from an empty state directory: everything comes from the changelogs.
	cfg.StateDir = t.TempDir()
	start(t, newApp(t, build(), cfg))
	kafkatest.Produce(t, cl,
		rec(streamIn, "a", "s1500", 1500), rec(streamIn, "a", "s2500", 2500), rec(streamIn, "a", "s3500", 3500),
		rec(streamIn, "b", "s1200", 1200), rec(streamIn, "b", "s2600", 2600), rec(streamIn, "a", "s500", 500),
		rec(streamIn, "c", "s100000", 100_000)) // evicts everything up to 90000
	res := kafkatest.Consume(t, out, 7, 60*time.Second, opts...)
	lines = lines[:0]
	for _, r := range res {
		lines = append(lines, fmt.Sprintf("%s:%s@%d", r.Key, r.Value, r.Timestamp.Sub(baseTime).Milliseconds()))
	}
	// Joined in timestamp order as they leave the buffer, each as of its own time.
	want = []string{"a:s500+none@500", "b:s1200+B1@1200", "a:s1500+A1@1500", "a:s2500+A2@2500", "b:s2600+none@2600", "a:s3500+A3@3500", "a:s5000+A3@5000"}
	if !slices.Equal(lines, want) {
		t.Fatalf("join output after the restart: %v, want %v", lines, want)
	}
	if extra := kafkatest.Drain(t, out, time.Second, 60*time.Second, opts...); len(extra) != 7 {
		t.Fatalf("%d output records, want 7 (s100000 stays buffered)", len(extra))
	}
}
