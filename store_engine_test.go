package kstream_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/examples/filedb"
)

// lastCounts decodes the int64 counts of recs: the last of each key.
func lastCounts(recs []*kgo.Record) map[string]int64 {
	m := map[string]int64{}
	for _, r := range recs {
		m[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
	}
	return m
}

// Config.StoreEngine replaces Pebble for the persistent stores: the counts live in the
// example engine (store/examples/filedb), in <StateDir>/store-engine, and a restart
// continues from them. WithChangelogConfig's topic configs reach the changelog topics, over
// the defaults (key-value and window stores).
func TestStoreEngineAndChangelogConfig(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		g := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey()
		kstream.Count(g, "counts", kstream.WithChangelogConfig(map[string]string{"segment.bytes": "1048576"})).
			ToStream().To(out, serde.String(), serde.Int64())
		kstream.WindowedCount(g.WindowedBy(kstream.TimeWindowsOf(time.Second)), "wcounts",
			kstream.WithChangelogConfig(map[string]string{"retention.ms": "7200000", "max.message.bytes": "2097152"}))
		return b
	}
	cfg := testConfig(t)
	var opened atomic.Int32
	var engineDir atomic.Value
	cfg.StoreEngine = func(dir string) (store.DB, error) {
		opened.Add(1)
		engineDir.Store(dir)
		return filedb.Open(dir)
	}
	cl := kafkatest.Client(t)
	r := start(t, newApp(t, build(), cfg))
	kafkatest.Produce(t, cl, rec(in, "a", "x", 1), rec(in, "a", "x", 2), rec(in, "b", "x", 3))
	got := lastCounts(kafkatest.Consume(t, out, 3, 60*time.Second))
	if got["a"] != 2 || got["b"] != 1 {
		t.Fatalf("counts %v, want a=2 b=1", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if opened.Load() != 1 {
		t.Fatalf("StoreEngine called %d times, want 1", opened.Load())
	}
	dir, _ := engineDir.Load().(string)
	if want := filepath.Join(cfg.StateDir, "store-engine"); dir != want {
		t.Errorf("engine dir %q, want %q", dir, want)
	}
	fi, err := os.Stat(filepath.Join(dir, "filedb.log"))
	if err != nil || fi.Size() == 0 {
		t.Fatalf("the engine's log: %v, %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "pebble")); !os.IsNotExist(err) {
		t.Errorf("Pebble's directory exists beside the engine (%v)", err)
	}

	// The changelog topics carry the configs, over kstream's defaults.
	adm := kadm.NewClient(cl)
	want := map[string]map[string]string{
		cfg.ApplicationID + "-counts-changelog":  {"segment.bytes": "1048576", "cleanup.policy": "compact"},
		cfg.ApplicationID + "-wcounts-changelog": {"retention.ms": "7200000", "max.message.bytes": "2097152", "cleanup.policy": "compact,delete"},
	}
	for topic, w := range want {
		rcs, err := adm.DescribeTopicConfigs(kafkatest.Context(t, 10*time.Second), topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]string{}
		for _, c := range rc.Configs {
			have[c.Key] = c.MaybeValue()
		}
		for k, v := range w {
			if have[k] != v {
				t.Errorf("%s: %s = %q, want %q", topic, k, have[k], v)
			}
		}
	}

	// A restart with the same engine directory continues the counts.
	start(t, newApp(t, build(), cfg))
	kafkatest.Produce(t, cl, rec(in, "a", "x", 4))
	res := kafkatest.Consume(t, out, 4, 60*time.Second)
	if c := lastCounts(res[3:]); c["a"] != 3 {
		t.Fatalf("after the restart: %v, want a=3", c)
	}
	if opened.Load() != 2 {
		t.Errorf("StoreEngine called %d times in two runs, want 2", opened.Load())
	}
}

// Config.PebbleOptions is called with Pebble's options before the database opens, with
// kstream's own settings in place, and what it sets is used.
func TestPebbleOptionsHook(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").
		ToStream().To(out, serde.String(), serde.Int64())
	cfg := testConfig(t)
	cfg.MemTableBytes = 4 << 20
	var calls atomic.Int32
	var sawMemTable atomic.Uint64
	cfg.PebbleOptions = func(o *pebble.Options) {
		calls.Add(1)
		sawMemTable.Store(o.MemTableSize)
		o.L0CompactionThreshold = 3
		o.DisableWAL = false
	}
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "x", 1))
	kafkatest.Consume(t, out, 1, 60*time.Second)
	if calls.Load() != 1 {
		t.Fatalf("PebbleOptions called %d times, want 1", calls.Load())
	}
	if sawMemTable.Load() != 4<<20 {
		t.Errorf("PebbleOptions saw MemTableSize %d, want kstream's setting %d (Config.MemTableBytes)", sawMemTable.Load(), 4<<20)
	}
	// Pebble writes the options it opened with into its OPTIONS file.
	matches, _ := filepath.Glob(filepath.Join(cfg.StateDir, "pebble", "OPTIONS-*"))
	if len(matches) == 0 {
		t.Fatal("no OPTIONS file in Pebble's directory")
	}
	opts, err := os.ReadFile(matches[len(matches)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !containsLine(string(opts), "l0_compaction_threshold=3") {
		t.Errorf("Pebble's OPTIONS file does not have l0_compaction_threshold=3:\n%s", opts)
	}
}

// containsLine reports whether text has a line that is line, spaces aside.
func containsLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
