package kstream_test

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logCapture keeps the lines an app logs at warn and above, and logs them to the test too.
type logCapture struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	c.t.Log(line)
	c.mu.Lock()
	c.lines = append(c.lines, line)
	c.mu.Unlock()
	return len(p), nil
}

// has reports whether one line contains every one of subs.
func (c *logCapture) has(subs ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}

func (c *logCapture) logger() *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("KSTREAM_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: lvl}))
}

// countApp counts the records of in per key into the store "counts" and writes each new
// count to out.
func countApp(t *testing.T, cfg kstream.Config, in, out string) *kstream.App {
	t.Helper()
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To(out, nil, serde.Int64())
	return newApp(t, b, cfg)
}

// feedKeys writes one record per key to in, in order.
func feedKeys(t *testing.T, in string, keys ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v")})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
}

// runCount runs the count app over in until it wrote the counts of keys to out (read by
// r), checks them record by record against want, and stops it (which commits and
// checkpoints).
func runCount(t *testing.T, cfg kstream.Config, in, out string, r *reader, keys []string, want ...string) {
	t.Helper()
	app := start(t, countApp(t, cfg, in, out))
	feedKeys(t, in, keys...)
	if got := r.next(len(want)); !slices.Equal(got, want) {
		t.Fatalf("counts: got %v, want %v", got, want)
	}
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
}

// recreate creates topic with partitions (and configs), again after a deletion (which
// Kafka completes in the background), and waits until it is in the metadata with an id
// other than prev. It returns the new id.
func recreate(t *testing.T, topic string, partitions int32, configs map[string]*string, prev kadm.TopicID) kadm.TopicID {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t))
	var id kadm.TopicID
	kafkatest.Eventually(t, 60*time.Second, "topic "+topic+" created", func() bool {
		ctx := kafkatest.Context(t, 10*time.Second)
		_, _ = adm.CreateTopic(ctx, partitions, 1, configs, topic) // fails while the old one is being deleted
		d, err := adm.ListTopics(ctx, topic)
		if err != nil || d[topic].Err != nil || len(d[topic].Partitions) != int(partitions) || d[topic].ID == prev {
			return false
		}
		id = d[topic].ID
		return true
	})
	return id
}

// topicID returns the id of topic.
func topicID(t *testing.T, topic string) kadm.TopicID {
	t.Helper()
	d, err := kadm.NewClient(kafkatest.Client(t)).ListTopics(kafkatest.Context(t, 10*time.Second), topic)
	if err != nil || d[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, d[topic].Err)
	}
	return d[topic].ID
}

// applicationReset does what Kafka's application reset tool (plus recreating the input and
// output topics) does to a stopped application: it deletes the internal topics, and the
// input and output topics, creates the input and output topics again, and deletes the
// consumer group with its committed offsets. The local state directory is left as it is.
func applicationReset(t *testing.T, appID string, internal []string, user ...string) {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t))
	ids := map[string]kadm.TopicID{}
	for _, topic := range append(slices.Clone(user), internal...) {
		ids[topic] = topicID(t, topic)
	}
	ctx := kafkatest.Context(t, 30*time.Second)
	resp, err := adm.DeleteTopics(ctx, append(slices.Clone(user), internal...)...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting topics: %v", err)
	}
	for _, topic := range user {
		recreate(t, topic, 1, nil, ids[topic])
	}
	kafkatest.Eventually(t, 30*time.Second, "group deleted", func() bool {
		r, err := adm.DeleteGroup(ctx, appID)
		return err == nil && (r.Err == nil || errors.Is(r.Err, kerr.GroupIDNotFound))
	})
}

// After an application reset (internal topics deleted, offsets reset), a restart with the
// old state directory finds the store's checkpoint beyond the end of the recreated
// changelog: the store is wiped, with a warning that says why, and counting starts from 1.
// (Before: "store is up to date ... checkpoint=2 end=0", and counting went on from the stale
// state.)
func TestStaleStateCheckpointBeyondChangelogEnd(t *testing.T) {
	t.Parallel()
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.StateDir, cfg.Logger = t.TempDir(), logs.logger()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	changelog := cfg.ApplicationID + "-counts-changelog"

	runCount(t, cfg, in, out, newReader(t, out), []string{"a", "a", "b"}, "a=1", "a=2", "b=1")
	applicationReset(t, cfg.ApplicationID, []string{changelog}, in, out)

	runCount(t, cfg, in, out, newReader(t, out), []string{"a", "b", "c", "a"}, "a=1", "b=1", "c=1", "a=2")
	if !logs.has("local state does not match its changelog", "store=counts", "beyond the end offset") {
		t.Fatal("no warning saying that the checkpoint is beyond the changelog's end")
	}
}

// The changelog was deleted and recreated, and has since grown past the old checkpoint
// (another instance, with another state directory, ran after the reset): only the topic id
// tells. The store is wiped and restored from the new changelog: counts continue from the
// other instance's, and keys of the old state are gone.
func TestStaleStateChangelogRecreated(t *testing.T) {
	t.Parallel()
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.StateDir, cfg.Logger = t.TempDir(), logs.logger()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	changelog := cfg.ApplicationID + "-counts-changelog"

	// Instance A: three keys, three changelog records (checkpoint 3).
	runCount(t, cfg, in, out, newReader(t, out), []string{"a", "b", "c"}, "a=1", "b=1", "c=1")
	if n := sumEnds(t, changelog); n != 3 {
		t.Fatalf("changelog holds %d records, want 3", n)
	}
	oldID := topicID(t, changelog)
	applicationReset(t, cfg.ApplicationID, []string{changelog}, in, out)

	// Instance B, another state directory: four keys, the new changelog ends at 4.
	cfgB := cfg
	cfgB.StateDir = t.TempDir()
	results := newReader(t, out)
	runCount(t, cfgB, in, out, results, []string{"d", "e", "f", "g"}, "d=1", "e=1", "f=1", "g=1")
	if n := sumEnds(t, changelog); n != 4 {
		t.Fatalf("new changelog holds %d records, want 4", n)
	}
	if topicID(t, changelog) == oldID {
		t.Fatal("the recreated changelog has the old topic id")
	}

	// Instance A again, on its old directory.
	runCount(t, cfg, in, out, results, []string{"a", "d"}, "a=1", "d=2")
	if !logs.has("local state does not match its changelog", "store=counts", "was deleted and recreated", "topic id") {
		t.Fatal("no warning saying that the changelog's topic id changed")
	}
}

// A state directory of another application id is wiped at start, with a warning naming
// that application, and the stores are restored from this application's changelogs.
func TestStaleStateForeignApplicationID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgX := testConfig(t)
	cfgX.StateDir = dir
	inX := kafkatest.CreateTopic(t, "in-x", 1, nil)
	outX := kafkatest.CreateTopic(t, "out-x", 1, nil)
	runCount(t, cfgX, inX, outX, newReader(t, outX), []string{"a", "a"}, "a=1", "a=2")

	logs := &logCapture{t: t}
	cfgY := testConfig(t)
	cfgY.StateDir, cfgY.Logger = dir, logs.logger()
	inY := kafkatest.CreateTopic(t, "in-y", 1, nil)
	outY := kafkatest.CreateTopic(t, "out-y", 1, nil)
	runCount(t, cfgY, inY, outY, newReader(t, outY), []string{"a", "b", "a"}, "a=1", "b=1", "a=2")
	if !logs.has("belongs to another application id", "recorded_application_id="+cfgX.ApplicationID) {
		t.Fatal("no warning naming the application the state directory belonged to")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kstream.application-id")); err != nil || strings.TrimSpace(string(b)) != cfgY.ApplicationID {
		t.Fatalf("application id file: %q, %v; want %s", b, err, cfgY.ApplicationID)
	}
}

// A global topic deleted and recreated, and filled past the store's positions: only the
// topic id tells. The global store is rebuilt from the new topic: keys of the old topic are
// gone, every record of the new one is there.
func TestStaleGlobalStoreTopicRecreated(t *testing.T) {
	t.Parallel()
	logs := &logCapture{t: t}
	topic := kafkatest.Name(t, "global")
	id := recreate(t, topic, 1, nil, kadm.TopicID{})
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var old []*kgo.Record
	for i := range 3 {
		old = append(old, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "old%d", i), Value: count(int64(i))})
	}
	kafkatest.Produce(t, kafkatest.Client(t), old...)
	cfg := testConfig(t)
	cfg.StateDir, cfg.Logger = t.TempDir(), logs.logger()
	results := newReader(t, out)
	r := start(t, lookupApp(t, cfg, in, topic, out, nil))
	if got := lookups(t, in, results, "old0", "old2"); !maps.Equal(got, map[string]int64{"old0": 0, "old2": 2}) {
		t.Fatalf("lookups before the topic was recreated: %v", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	if _, err := kadm.NewClient(kafkatest.Client(t)).DeleteTopic(kafkatest.Context(t, 30*time.Second), topic); err != nil {
		t.Fatal(err)
	}
	recreate(t, topic, 1, nil, id)
	// Four records: the new topic ends past the old position (3).
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "new%d", i), Value: count(int64(40 + i))})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...) // a new client: the old one knows the deleted topic's id
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	start(t, lookupApp(t, cfg, in, topic, out, nil))
	got := lookups(t, in, results, "old0", "new0", "new1", "new2", "new3")
	if want := map[string]int64{"old0": -1, "new0": 40, "new1": 41, "new2": 42, "new3": 43}; !maps.Equal(got, want) {
		t.Fatalf("after the topic was recreated: got %v, want %v", got, want)
	}
	if rc.total("lookup") != 4 {
		t.Fatalf("rebuild applied %d records, want 4", rc.total("lookup"))
	}
	if !logs.has("global store does not match its topic", "was deleted and recreated", "topic id") {
		t.Fatal("no warning saying that the global topic's id changed")
	}
}

// A second instance on a state directory in use fails at once, before it joins the group
// (the first instance never rebalances), with an error that says another instance, and
// which, holds the directory.
func TestStateDirInUse(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	var mu sync.Mutex
	var states []kstream.State
	cfg.StateListener = func(_, s kstream.State) {
		mu.Lock()
		states = append(states, s)
		mu.Unlock()
	}
	first := start(t, countApp(t, cfg, in, out))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return first.app.State() == kstream.StateRunning })
	mu.Lock()
	before := len(states)
	mu.Unlock()

	cfg2 := cfg
	cfg2.StateListener = nil
	began := time.Now()
	second := start(t, countApp(t, cfg2, in, out))
	err, done := second.wait(10 * time.Second)
	if !done {
		t.Fatal("the second instance did not fail within 10s")
	}
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "is in use") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) ||
		!strings.Contains(err.Error(), cfg.StateDir) {
		t.Fatalf("second instance: got %v, want an error saying that pid %d holds %s", err, os.Getpid(), cfg.StateDir)
	}
	if took > 2*time.Second {
		t.Fatalf("the second instance took %s to fail, want at once", took)
	}
	t.Logf("second instance failed after %s: %v", took.Round(time.Millisecond), err)
	// The first one never rebalanced, and goes on counting.
	feedKeys(t, in, "a", "a")
	if got := newReader(t, out).next(2); !slices.Equal(got, []string{"a=1", "a=2"}) {
		t.Fatalf("counts: %v", got)
	}
	mu.Lock()
	after := slices.Clone(states[before:])
	mu.Unlock()
	if len(after) != 0 {
		t.Fatalf("the first instance changed state %v while the second one tried to start", after)
	}
}

// CleanUp deletes the local state: a restart then restores every store from its changelog
// and counts on exactly. CleanUp fails while the app runs, and while another instance holds
// the directory.
func TestCleanUp(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	results := newReader(t, out)

	app := countApp(t, cfg, in, out)
	if err := app.CleanUp(); err != nil { // nothing to delete yet
		t.Fatalf("CleanUp before the first run: %v", err)
	}
	r := start(t, app)
	feedKeys(t, in, "a", "b", "a")
	if got := results.next(3); !slices.Equal(got, []string{"a=1", "b=1", "a=2"}) {
		t.Fatalf("counts: %v", got)
	}
	if err := app.CleanUp(); !errors.Is(err, kstream.ErrRunning) {
		t.Fatalf("CleanUp while running: got %v, want ErrRunning", err)
	}
	// Another App on the same directory is refused too: the directory is locked.
	if err := countApp(t, cfg, in, out).CleanUp(); err == nil || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("CleanUp of another instance while the first runs: got %v, want an error saying the directory is in use", err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "pebble")); err != nil {
		t.Fatalf("no Pebble database after the run: %v", err)
	}
	if err := app.CleanUp(); err != nil {
		t.Fatalf("CleanUp after the run: %v", err)
	}
	if _, err := os.Stat(cfg.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state directory is still there after CleanUp: %v", err)
	}

	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	r = start(t, countApp(t, cfg, in, out))
	feedKeys(t, in, "a", "c", "b")
	if got := results.next(3); !slices.Equal(got, []string{"a=3", "c=1", "b=2"}) {
		t.Fatalf("counts after CleanUp and restart: %v", got)
	}
	if n := sumEnds(t, cfg.ApplicationID+"-counts-changelog"); rc.total("counts") < 2 || rc.total("counts") > n {
		t.Fatalf("restored %d records, want every key of the changelog (%d records)", rc.total("counts"), n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A standby whose local state lies beyond its (recreated) changelog's end wipes it before it
// follows the changelog: when it is promoted, counts start from the changelog's, not from
// the stale state.
func TestStaleStateStandby(t *testing.T) {
	t.Parallel()
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.NumStandbys = 1
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	changelog := cfg.ApplicationID + "-counts-changelog"
	cfgA, cfgB := cfg, cfg
	cfgA.StateDir = t.TempDir()
	cfgB.StateDir, cfgB.Logger = t.TempDir(), logs.logger()

	// B alone: a=2, b=1 in its state.
	runCount(t, cfgB, in, out, newReader(t, out), []string{"a", "a", "b"}, "a=1", "a=2", "b=1")
	applicationReset(t, cfg.ApplicationID, []string{changelog}, in, out)

	// A takes the task; B, started second, keeps its standby.
	results := newReader(t, out)
	a := start(t, countApp(t, cfgA, in, out))
	kafkatest.Eventually(t, 60*time.Second, "A running", func() bool { return a.app.State() == kstream.StateRunning })
	b := start(t, countApp(t, cfgB, in, out))
	kafkatest.Eventually(t, 60*time.Second, "B keeping the standby", func() bool {
		return b.app.State() == kstream.StateRunning && len(b.app.StandbyTasks()) == 1 && len(a.app.Tasks()) == 1
	})
	feedKeys(t, in, "c", "b")
	if got := results.next(2); !slices.Equal(got, []string{"c=1", "b=1"}) {
		t.Fatalf("counts of A: %v", got)
	}
	kafkatest.Eventually(t, 30*time.Second, "the standby wiped", func() bool {
		return logs.has("local state does not match its changelog", "task_role=standby", "beyond the end offset")
	})
	// A leaves: B is promoted.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 60*time.Second, "B active", func() bool { return len(b.app.Tasks()) == 1 && b.app.State() == kstream.StateRunning })
	feedKeys(t, in, "a", "b", "c")
	if got := results.next(3); !slices.Equal(got, []string{"a=1", "b=2", "c=2"}) {
		t.Fatalf("counts after the standby was promoted: %v", got)
	}
}
