package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A count app runs, is stopped, is reset with kstream reset (local state included), and
// restarts on the same state directory: it recomputes from scratch, so counts start over
// instead of adding to the old state. kstream reset refuses while the app runs.
func TestResetRecomputesFromScratch(t *testing.T) {
	t.Parallel()
	logs := &logLines{t: t}
	cfg := testConfig(t, logs)
	root := t.TempDir()
	cfg.StateDir = filepath.Join(root, cfg.ApplicationID) // the layout of the default
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	changelog := cfg.ApplicationID + "-counts-changelog"

	r := startApp(t, countBuilder(in, out), cfg)
	produceKeys(t, in, "a", "a", "b")
	if got := counts(t, out, 0, 3); !slices.Equal(got, []string{"a=1", "a=2", "b=1"}) {
		t.Fatalf("first run: %v", got)
	}
	// While it runs, reset refuses and names the member.
	_, _, err := cli(t, "reset", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-input-topics", in)
	if err == nil || !strings.Contains(err.Error(), "still active") || !strings.Contains(err.Error(), "member(s)") {
		t.Fatalf("reset while running: got %v, want a refusal naming the members", err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "pebble")); err != nil {
		t.Fatalf("no local state after the first run: %v", err)
	}

	// A dry run changes nothing.
	got := mustCLI(t, "reset", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-input-topics", in, "-state-dir", root, "-dry-run")
	for _, want := range []string{"Dry run", in + " partition 0: 3 -> 0", "Deleting internal topics:\n  " + changelog + "\n", "Deleting the local state directory " + cfg.StateDir} {
		if !strings.Contains(got, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	if c := committed(t, cfg.ApplicationID)[in+"/0"]; c != 3 {
		t.Fatalf("after the dry run the committed offset is %d, want 3 (unchanged)", c)
	}
	if _, err := os.Stat(cfg.StateDir); err != nil {
		t.Fatalf("the dry run deleted the state directory: %v", err)
	}

	got = mustCLI(t, "reset", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-input-topics", in, "-state-dir", root)
	want := "Consumer group " + cfg.ApplicationID + " has no active member.\n" +
		"Input topic offsets of group " + cfg.ApplicationID + ", reset to the earliest offset:\n" +
		"  " + in + " partition 0: 3 -> 0\n" +
		"Deleting internal topics:\n" +
		"  " + changelog + "\n" +
		"Deleting the local state directory " + cfg.StateDir + "\n" +
		"Done.\n"
	if got != want {
		t.Fatalf("reset printed:\n%s\nwant:\n%s", got, want)
	}
	if c := committed(t, cfg.ApplicationID)[in+"/0"]; c != 0 {
		t.Fatalf("after the reset the committed offset is %d, want 0", c)
	}
	if _, err := os.Stat(cfg.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state directory is still there after the reset: %v", err)
	}
	topics, err := kadm.NewClient(kafkatest.Client(t)).ListTopics(kafkatest.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(changelog) {
		t.Fatalf("the changelog %s is still there after the reset", changelog)
	}

	// The restart on the same state directory recomputes from scratch.
	from := endOffset(t, out, 0)
	startApp(t, countBuilder(in, out), cfg)
	produceKeys(t, in, "c", "a")
	if got := counts(t, out, from, 5); !slices.Equal(got, []string{"a=1", "a=2", "b=1", "c=1", "a=3"}) {
		t.Fatalf("after the reset and restart: %v, want a=1 a=2 b=1 c=1 a=3 (counts start over)", got)
	}
	if logs.has("local state does not match") {
		t.Fatal("the restarted app found stale local state: reset -state-dir did not delete it")
	}
}

// Without -state-dir, the restarted instance finds its checkpoint beyond the end of the
// recreated changelog: it wipes the store, with a warning, and recomputes from scratch
// (Kafka Streams does the same on an out-of-range changelog offset).
func TestResetWithoutStateDirStaleStateDetected(t *testing.T) {
	t.Parallel()
	logs := &logLines{t: t}
	cfg := testConfig(t, logs)
	cfg.StateDir = t.TempDir()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)

	r := startApp(t, countBuilder(in, out), cfg)
	produceKeys(t, in, "a", "a", "b")
	if got := counts(t, out, 0, 3); !slices.Equal(got, []string{"a=1", "a=2", "b=1"}) {
		t.Fatalf("first run: %v", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	got := mustCLI(t, "reset", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-input-topics", in)
	if strings.Contains(got, "local state") || !strings.Contains(got, cfg.ApplicationID+"-counts-changelog") {
		t.Fatalf("reset without -state-dir printed:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "pebble")); err != nil {
		t.Fatalf("the local state is gone though -state-dir was not given: %v", err)
	}

	from := endOffset(t, out, 0)
	startApp(t, countBuilder(in, out), cfg)
	produceKeys(t, in, "b")
	if got := counts(t, out, from, 4); !slices.Equal(got, []string{"a=1", "a=2", "b=1", "b=2"}) {
		t.Fatalf("after the reset and restart on the stale state directory: %v, want a=1 a=2 b=1 b=2", got)
	}
	if !logs.has("local state does not match its changelog", "store=counts") {
		t.Fatal("no warning that the local state was stale")
	}
}

// The offset options of kstream reset on a plain group: each sets the committed offsets
// Kafka's StreamsResetter would (clamped to the partition), and intermediate topics go to
// their end.
func TestResetOffsetOptions(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	mid := kafkatest.CreateTopic(t, "mid", 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 10 {
		ts := base.Add(time.Duration(i) * time.Second)
		recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Value: []byte("x"), Timestamp: ts})
		if i < 4 {
			recs = append(recs, &kgo.Record{Topic: in, Partition: 1, Value: []byte("x"), Timestamp: ts})
		}
		if i < 7 {
			recs = append(recs, &kgo.Record{Topic: mid, Value: []byte("x"), Timestamp: ts})
		}
	}
	kafkatest.Produce(t, kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs...)

	for _, tc := range []struct {
		name string
		args []string
		want map[string]int64 // in/0, in/1
	}{
		{"earliest (default)", nil, map[string]int64{"in/0": 0, "in/1": 0}},
		{"to-earliest", []string{"-to-earliest"}, map[string]int64{"in/0": 0, "in/1": 0}},
		{"to-latest", []string{"-to-latest"}, map[string]int64{"in/0": 10, "in/1": 4}},
		{"to-offset", []string{"-to-offset", "6"}, map[string]int64{"in/0": 6, "in/1": 4}},
		{"shift-by back", []string{"-shift-by", "-2"}, map[string]int64{"in/0": 3, "in/1": 0}},
		{"shift-by forward", []string{"-shift-by", "3"}, map[string]int64{"in/0": 8, "in/1": 4}},
		{"to-datetime", []string{"-to-datetime", base.Add(2500 * time.Millisecond).UTC().Format(time.RFC3339Nano)}, map[string]int64{"in/0": 3, "in/1": 3}},
		{"to-datetime after the end", []string{"-to-datetime", base.Add(time.Minute).UTC().Format(time.RFC3339)}, map[string]int64{"in/0": 10, "in/1": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := kafkatest.Name(t, "group")
			adm := kadm.NewClient(kafkatest.Client(t))
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: in, Partition: 0, At: 5, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: in, Partition: 1, At: 1, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: mid, Partition: 0, At: 2, LeaderEpoch: -1})
			if resp, err := adm.CommitOffsets(kafkatest.Context(t, 10*time.Second), group, offs); err != nil || resp.Error() != nil {
				t.Fatalf("committing: %v %v", err, resp.Error())
			}
			args := append([]string{"reset", "-brokers", brokers(t), "-app", group, "-input-topics", in, "-intermediate-topics", mid}, tc.args...)
			mustCLI(t, args...)
			got := committed(t, group)
			want := map[string]int64{in + "/0": tc.want["in/0"], in + "/1": tc.want["in/1"], mid + "/0": 7}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: committed %d, want %d (all: %v)", k, got[k], v, got)
				}
			}
		})
	}

	// Bad command lines.
	for _, args := range [][]string{
		{"reset", "-brokers", brokers(t)},
		{"reset", "-brokers", brokers(t), "-app", "x", "-to-latest", "-shift-by", "1", "-input-topics", in},
		{"reset", "-brokers", brokers(t), "-app", "x", "-to-latest"},
		{"reset", "-brokers", brokers(t), "-app", "x", "-to-datetime", "yesterday", "-input-topics", in},
	} {
		if _, _, err := cli(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: err %v, want a usage error", args, err)
		}
	}
	// A missing input topic is reported, the rest is done.
	group := kafkatest.Name(t, "group")
	out, _, err := cli(t, "reset", "-brokers", brokers(t), "-app", group, "-input-topics", in+",nope-"+group)
	if err == nil || !strings.Contains(err.Error(), "topics not found: nope-"+group) || !strings.Contains(out, in+" partition 1: none -> 0") {
		t.Fatalf("reset with a missing topic: err %v, output:\n%s", err, out)
	}
	// -internal-topics must name internal topics of the application.
	if _, _, err := cli(t, "reset", "-brokers", brokers(t), "-app", group, "-internal-topics", in); err == nil || !strings.Contains(err.Error(), "not an internal topic") {
		t.Fatalf("-internal-topics with a user topic: %v", err)
	}
}

func TestIsInternalTopic(t *testing.T) {
	for topic, want := range map[string]bool{
		"app-counts-changelog": true,
		"app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog":        true,
		"app-by-key-repartition":                                        true,
		"app-fk-subscription-registration-topic":                        true,
		"app-fk-subscription-response-topic":                            true,
		"app-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic": true,
		"app-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic":     true,
		"app-input":                    false,
		"other-counts-changelog":       false,
		"app2-counts-changelog":        false,
		"app-counts-changelog-archive": false,
	} {
		if got := isInternalTopic("app", topic); got != want {
			t.Errorf("isInternalTopic(app, %s) = %v, want %v", topic, got, want)
		}
	}
}
