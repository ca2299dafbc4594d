package kstream_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The in-process broker does not speak the streams rebalance protocol: an application that
// asks for it fails at start with an error naming the protocol and the broker it needs.
func TestStreamsProtocolNeedsKafka42(t *testing.T) {
	if kafkatest.Tier() != "embedded" {
		t.Skip("the in-process broker's refusal; Apache Kafka 4.4 speaks the protocol")
	}
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	app := newApp(t, countTopology(in, out), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := app.Run(ctx)
	if err == nil {
		t.Fatal("Run returned nil, want an error naming the streams protocol")
	}
	for _, want := range []string{"GroupProtocol is streams", "KIP-1071", "Apache Kafka 4.2 or later"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if app.State() != kstream.StateError {
		t.Errorf("state %v, want ERROR", app.State())
	}
}

// On Apache Kafka (4.2 or later), two instances of a count after a re-key in one streams
// group: the broker splits the tasks between them, the group is a streams group with the
// topology kstream declared, the counts are exact, and when one instance stops the other
// takes its tasks and the counts stay exact.
func TestStreamsProtocolCountOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	const partitions = 4
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	cfg.CommitInterval = 100 * time.Millisecond
	// The members report their tasks' changelog offsets every 15 s (60 s by default, 15 s at least).
	setGroupConfigs(t, cfg.ApplicationID, "streams.task.offset.interval.ms", "15000")
	build := func(cfg kstream.Config) *kstream.App {
		b := kstream.NewBuilder()
		// A re-key (to the same key) makes two sub-topologies joined by a repartition topic.
		grouped := kstream.GroupBy(kstream.Stream(b, in, serde.String(), serde.String()),
			func(k, _ string) string { return k }, serde.String())
		kstream.Count(grouped, "counts").ToStream().To(out, nil, nil)
		return newApp(t, b, cfg)
	}
	cfg.ApplicationServer = "127.0.0.1:7001"
	cfg2 := cfg
	cfg2.StateDir, cfg2.ApplicationServer = t.TempDir(), "127.0.0.1:7002"
	app1, app2 := build(cfg), build(cfg2)
	outputs := collect(t, out)

	r1 := start(t, app1)
	kafkatest.Eventually(t, 60*time.Second, "instance 1 runs every task", func() bool {
		return len(app1.Tasks()) == 2*partitions && app1.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 10000, 500, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 10000 records", func() bool { return outputs.reached(want) })

	r2 := start(t, app2)
	kafkatest.Eventually(t, 90*time.Second, "tasks split between the instances", func() bool {
		a, b := app1.Tasks(), app2.Tasks()
		return len(a) > 0 && len(b) > 0 && len(a)+len(b) == 2*partitions &&
			app1.State() == kstream.StateRunning && app2.State() == kstream.StateRunning
	})
	t.Logf("split: instance 1 %v, instance 2 %v", app1.Tasks(), app2.Tasks())
	for _, id := range app1.Tasks() {
		if slices.Contains(app2.Tasks(), id) {
			t.Errorf("task %v runs on both instances", id)
		}
	}
	produceCounts(t, in, 10000, 500, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of 20000 records", func() bool { return outputs.reached(want) })

	kafkatest.Eventually(t, 45*time.Second, "the group described, with the members' task offsets", func() bool {
		return describeStreamsGroup(t, cfg.ApplicationID, in)
	})

	// The broker's partitions by endpoint are the group's metadata: every instance knows
	// which one runs each task (KeyMetadata, package query).
	kafkatest.Eventually(t, 30*time.Second, "both instances in the metadata of instance 1", func() bool {
		md := app1.Metadata()
		if len(md) != 2 {
			return false
		}
		hosts := map[string][]kstream.TaskID{}
		for _, m := range md {
			hosts[m.Host] = m.Active
			if m.Self != (m.Host == "127.0.0.1:7001") {
				return false
			}
		}
		return slices.Equal(hosts["127.0.0.1:7001"], app1.Tasks()) && slices.Equal(hosts["127.0.0.1:7002"], app2.Tasks())
	})
	t.Logf("metadata of instance 1: %+v", app1.Metadata())

	// Status shows the offsets committed with the member epoch, and the member id.
	kafkatest.Eventually(t, 30*time.Second, "Status shows committed offsets of instance 2's source partitions", func() bool {
		st := app2.Status()
		n := 0
		for _, ts := range st.Active {
			for _, ps := range ts.Partitions {
				if ps.Topic == in && ps.Committed > 0 {
					n++
				}
			}
		}
		return n == partitions/2 && st.MemberID != ""
	})
	if err := r2.stop(); err != nil {
		t.Fatalf("instance 2 stopped with %v", err)
	}
	kafkatest.Eventually(t, 60*time.Second, "instance 1 runs every task again", func() bool {
		return len(app1.Tasks()) == 2*partitions && app1.State() == kstream.StateRunning
	})
	produceCounts(t, in, 10000, 500, 3, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of all 30000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	if err := r1.stop(); err != nil {
		t.Fatalf("instance 1 stopped with %v", err)
	}
}

// describeStreamsGroup checks with StreamsGroupDescribe that group is a streams group of
// two members, with the sub-topologies kstream declared and every task assigned once. It
// reports whether both members reported the changelog offsets of their stateful tasks.
func describeStreamsGroup(t *testing.T, group, source string) bool {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{group}
	// kgo does not route StreamsGroupDescribe: ask the group's coordinator directly.
	ctx, cl := kafkatest.Context(t, 10*time.Second), kafkatest.Client(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil || len(fresp.Coordinators) != 1 || fresp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator of %s: %v %+v", group, err, fresp)
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(fresp.Coordinators[0].NodeID)))
	if err != nil {
		t.Fatalf("StreamsGroupDescribe: %v", err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("StreamsGroupDescribe answered %d groups", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		t.Fatalf("StreamsGroupDescribe of %s: %v", group, err)
	}
	if g.Topology == nil || len(g.Topology.Subtopologies) != 2 {
		t.Fatalf("group %s topology %+v, want two sub-topologies", group, g.Topology)
	}
	if st := g.Topology.Subtopologies[0]; st.SubtopologyID != "0" || !slices.Equal(st.SourceTopics, []string{source}) || len(st.RepartitionSinkTopics) != 1 {
		t.Errorf("sub-topology 0: %+v, want source %s and one repartition sink", st, source)
	}
	if st := g.Topology.Subtopologies[1]; len(st.RepartitionSourceTopics) != 1 || len(st.StateChangelogTopics) != 1 {
		t.Errorf("sub-topology 1: %+v, want one repartition source and one changelog", st)
	}
	assignor := ""
	if g.AssignorName != nil {
		assignor = *g.AssignorName
	}
	t.Logf("group %s: state %s, epoch %d, assignor %q", group, g.State, g.Epoch, assignor)
	if len(g.Members) != 2 {
		t.Fatalf("group %s has %d members, want 2", group, len(g.Members))
	}
	tasks := map[string]int{}
	offsets := true
	for _, m := range g.Members {
		t.Logf("member %s (process %s, epoch %d): active %v, task offsets %v, end offsets %v", m.MemberID, m.ProcessID, m.MemberEpoch, m.Assignment.ActiveTasks, m.TaskOffsets, m.TaskEndOffsets)
		// Its active stateful tasks (sub-topology 1) have offsets; state it has on disk of
		// other tasks may be reported too (without an end offset: its lag is unknown).
		for _, ts := range m.Assignment.ActiveTasks {
			if ts.SubtopologyID != "1" {
				continue
			}
			for _, p := range ts.Partitions {
				offsets = offsets && slices.ContainsFunc(m.TaskOffsets, func(o kmsg.TaskOffset) bool {
					return o.SubtopologyID == "1" && o.Partition == p && o.Offset > 0
				}) && slices.ContainsFunc(m.TaskEndOffsets, func(o kmsg.TaskOffset) bool {
					return o.SubtopologyID == "1" && o.Partition == p && o.Offset > 0
				})
			}
		}
		for _, ts := range m.Assignment.ActiveTasks {
			for _, p := range ts.Partitions {
				tasks[fmt.Sprintf("%s_%d", ts.SubtopologyID, p)]++
			}
		}
	}
	if len(tasks) != 8 {
		t.Errorf("described active tasks %v, want 8", tasks)
	}
	for id, n := range tasks {
		if n != 1 {
			t.Errorf("task %s is assigned %d times", id, n)
		}
	}
	return offsets
}

// setGroupConfigs sets configs of group (streams.num.standby.replicas,
// streams.session.timeout.ms, ...): under the streams protocol they are the group's, not
// the members'.
func setGroupConfigs(t *testing.T, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(kafkatest.Context(t, 10*time.Second), kafkatest.Client(t))
	if err != nil {
		t.Fatalf("setting configs %v of group %s: %v", kv, group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("setting configs %v of group %s: %v %s", kv, group, err, msg)
		}
	}
}

// Standby replicas under the streams protocol are the group's config
// (streams.num.standby.replicas): the broker assigns them, and each instance keeps a standby
// of the other's stateful tasks; when one stops, the other's standbys become its active
// tasks and the counts stay exact.
func TestStreamsProtocolStandbysOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	const partitions = 4
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	cfg.CommitInterval = 100 * time.Millisecond
	setGroupConfigs(t, cfg.ApplicationID, "streams.num.standby.replicas", "1")
	cfg2 := cfg
	cfg2.StateDir = t.TempDir()
	app1, app2 := newApp(t, countTopology(in, out), cfg), newApp(t, countTopology(in, out), cfg2)
	outputs := collect(t, out)
	start(t, app1)
	r2 := start(t, app2)
	kafkatest.Eventually(t, 90*time.Second, "two active and two standby tasks on each instance", func() bool {
		return len(app1.Tasks()) == 2 && len(app2.Tasks()) == 2 && len(app1.StandbyTasks()) == 2 && len(app2.StandbyTasks()) == 2 &&
			app1.State() == kstream.StateRunning && app2.State() == kstream.StateRunning
	})
	t.Logf("instance 1: active %v standby %v; instance 2: active %v standby %v", app1.Tasks(), app1.StandbyTasks(), app2.Tasks(), app2.StandbyTasks())
	if !slices.Equal(app1.StandbyTasks(), app2.Tasks()) || !slices.Equal(app2.StandbyTasks(), app1.Tasks()) {
		t.Errorf("each instance's standbys should be the other's active tasks")
	}
	want := map[string]int64{}
	produceCounts(t, in, 10000, 500, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 10000 records", func() bool { return outputs.reached(want) })
	if err := r2.stop(); err != nil {
		t.Fatalf("instance 2 stopped with %v", err)
	}
	kafkatest.Eventually(t, 60*time.Second, "instance 1 runs all four tasks", func() bool {
		return len(app1.Tasks()) == partitions && app1.State() == kstream.StateRunning
	})
	produceCounts(t, in, 10000, 500, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of all 20000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
}

// A static member (InstanceID) that stops leaves with epoch -2: the broker keeps its tasks
// for it, and when it comes back within the group's session timeout it gets them back,
// while the other instance's tasks never move.
func TestStreamsProtocolStaticMemberOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	const partitions = 4
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	cfg.CommitInterval = 100 * time.Millisecond
	setGroupConfigs(t, cfg.ApplicationID, "streams.session.timeout.ms", "20000")
	cfg.InstanceID = "pod-0"
	cfg2 := cfg
	cfg2.StateDir, cfg2.InstanceID = t.TempDir(), "pod-1"
	app1 := newApp(t, countTopology(in, out), cfg)
	outputs := collect(t, out)
	start(t, app1)
	r2 := start(t, newApp(t, countTopology(in, out), cfg2))
	app2 := r2.app
	kafkatest.Eventually(t, 90*time.Second, "tasks split", func() bool {
		return len(app1.Tasks()) == 2 && len(app2.Tasks()) == 2 && app1.State() == kstream.StateRunning && app2.State() == kstream.StateRunning
	})
	tasks1, tasks2 := app1.Tasks(), app2.Tasks()
	want := map[string]int64{}
	produceCounts(t, in, 5000, 500, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 5000 records", func() bool { return outputs.reached(want) })

	if err := r2.stop(); err != nil {
		t.Fatalf("instance 2 stopped with %v", err)
	}
	// Within the session timeout nothing moves to instance 1.
	for range 20 {
		if got := app1.Tasks(); !slices.Equal(got, tasks1) {
			t.Fatalf("instance 1 runs %v while the static member is away, want %v", got, tasks1)
		}
		time.Sleep(200 * time.Millisecond)
	}
	app2 = newApp(t, countTopology(in, out), cfg2)
	start(t, app2)
	kafkatest.Eventually(t, 60*time.Second, "the static member has its tasks back", func() bool {
		return slices.Equal(app2.Tasks(), tasks2) && app2.State() == kstream.StateRunning
	})
	if got := app1.Tasks(); !slices.Equal(got, tasks1) {
		t.Errorf("instance 1 runs %v, want %v", got, tasks1)
	}
	produceCounts(t, in, 5000, 500, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of all 10000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
}

// Kafka's own tool for streams groups (kafka-streams-groups.sh, the class
// org.apache.kafka.tools.streams.StreamsGroupCommand from the jars testing/kafka fetches)
// describes a running kstream application: its members, their tasks, and the offsets.
func TestStreamsProtocolJavaToolOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	java, err := exec.LookPath("java")
	if env := os.Getenv("KSTREAM_KAFKA_JAVA"); env != "" {
		java, err = env, nil
	}
	cache := cmp.Or(os.Getenv("KSTREAM_KAFKA_CACHE"), filepath.Join("testing", "kafka", ".cache"))
	lib, _ := filepath.Abs(filepath.Join(cache, "lib"))
	jars, _ := filepath.Glob(filepath.Join(lib, "kafka-tools-*.jar"))
	if err != nil || len(jars) == 0 {
		msg := fmt.Sprintf("needs java and the Kafka jars in %s (bash testing/kafka/kafka.sh fetch, or set KSTREAM_KAFKA_CACHE)", lib)
		if os.Getenv("KSTREAM_TEST_JAVA_TOOLS") == "required" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	tool := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, java, append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
			"-Dlog4j2.configurationFile=" + filepath.Join("testing", "kafka", "log4j2.properties"),
			"-Dkstream.kafka.log.level=WARN", "-Dkstream.kafka.log.target=SYSTEM_ERR",
			"-cp", filepath.Join(lib, "*"), "org.apache.kafka.tools.streams.StreamsGroupCommand",
			"--bootstrap-server", strings.Join(kafkatest.Brokers(t), ",")}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("kafka-streams-groups %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String()
	}

	const partitions = 3
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	cfg.CommitInterval = 100 * time.Millisecond
	app := newApp(t, countTopology(in, out), cfg)
	outputs := collect(t, out)
	r := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running every task", func() bool {
		return len(app.Tasks()) == partitions && app.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 3000, 100, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "every input offset committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })

	list := tool("--list")
	if !strings.Contains(list, cfg.ApplicationID) {
		t.Errorf("--list does not name %s:\n%s", cfg.ApplicationID, list)
	}
	members := tool("--describe", "--group", cfg.ApplicationID, "--members", "--verbose")
	t.Logf("--describe --members --verbose:\n%s", members)
	if !strings.Contains(members, cfg.ApplicationID) || !strings.Contains(members, "0:[0,1,2]") {
		t.Errorf("--describe --members does not show the member with tasks 0:[0,1,2]")
	}
	offsets := tool("--describe", "--group", cfg.ApplicationID, "--offsets")
	t.Logf("--describe --offsets:\n%s", offsets)
	if !strings.Contains(offsets, in) {
		t.Errorf("--describe --offsets does not show topic %s", in)
	}
	state := tool("--describe", "--group", cfg.ApplicationID, "--state")
	t.Logf("--describe --state:\n%s", state)
	if !strings.Contains(state, "Stable") && !strings.Contains(state, "STABLE") {
		t.Errorf("--describe --state does not show a stable group")
	}

	// With the application stopped (its member left the group), the tool resets the group's
	// input offsets to the earliest, and deletes the group.
	if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping: %v", err)
	}
	reset := tool("--reset-offsets", "--group", cfg.ApplicationID, "--input-topic", in, "--to-earliest", "--execute")
	t.Logf("--reset-offsets --to-earliest --execute:\n%s", reset)
	adm := kadm.NewClient(kafkatest.Client(t))
	committed, err := adm.FetchOffsets(kafkatest.Context(t, 10*time.Second), cfg.ApplicationID)
	if err != nil {
		t.Fatalf("fetching the group's offsets after the reset: %v", err)
	}
	for p := range int32(partitions) {
		if o, ok := committed.Lookup(in, p); !ok || o.At != 0 {
			t.Errorf("partition %d of %s: committed %+v after --reset-offsets --to-earliest, want 0", p, in, o)
		}
	}
	tool("--delete", "--group", cfg.ApplicationID)
	if list := tool("--list"); strings.Contains(list, cfg.ApplicationID) {
		t.Errorf("--list still names %s after --delete:\n%s", cfg.ApplicationID, list)
	}
}

// An instance frozen (SIGSTOP) for longer than the group's session timeout is removed from
// the streams group; the other takes its tasks. Thawed, its next heartbeat is refused
// (UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH): it gives up every task without committing,
// rejoins with epoch 0 and the same member id, and gets tasks again; counts stay exact.
func TestStreamsProtocolFencedMemberRejoinsOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	const partitions = 4
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	cfg.CommitInterval = 100 * time.Millisecond
	setGroupConfigs(t, cfg.ApplicationID, "streams.session.timeout.ms", "3000", "streams.heartbeat.interval.ms", "500")
	child := kafkatest.StartChild(t, "count-app", "APP_ID="+cfg.ApplicationID, "STATE_DIR="+t.TempDir(),
		"IN="+in, "OUT="+out, "COMMIT_MS=100", "GROUP_PROTOCOL=streams")
	app := newApp(t, countTopology(in, out), cfg)
	outputs := collect(t, out)
	start(t, app)
	kafkatest.Eventually(t, 90*time.Second, "two tasks here, two in the child", func() bool {
		return len(app.Tasks()) == 2 && app.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 8000, 400, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 8000 records", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "every input offset committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })

	child.Stop(t)
	kafkatest.Eventually(t, 60*time.Second, "this instance runs all four tasks", func() bool {
		return len(app.Tasks()) == partitions && app.State() == kstream.StateRunning
	})
	child.Cont(t)
	kafkatest.Eventually(t, 60*time.Second, "the child fenced, rejoined and running two tasks again", func() bool {
		return len(app.Tasks()) == 2 && app.State() == kstream.StateRunning && strings.Contains(child.Output(), "fenced from the streams group")
	})
	produceCounts(t, in, 8000, 400, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of all 16000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	for _, line := range strings.Split(child.Output(), "\n") {
		if strings.Contains(line, "fenced") || strings.Contains(line, "joined the streams group") {
			t.Logf("child: %s", line)
		}
	}
}

// Moving an application from the classic protocol to the streams protocol: while a classic
// member is in the group, a streams member is refused (a fatal start error naming the
// cause); once every classic instance has stopped, a streams instance takes the group over
// and goes on from the classic instances' committed offsets (no record counted twice).
func TestStreamsProtocolFromClassicOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	const partitions = 2
	in := kafkatest.CreateTopic(t, "in", partitions, nil)
	out := kafkatest.CreateTopic(t, "out", partitions, nil)
	cfg := testConfig(t)
	cfg.CommitInterval = 100 * time.Millisecond
	classic := newApp(t, countTopology(in, out), cfg)
	outputs := collect(t, out)
	rc := start(t, classic)
	kafkatest.Eventually(t, 60*time.Second, "the classic instance runs", func() bool {
		return len(classic.Tasks()) == partitions && classic.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 4000, 200, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 4000 records", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "every input offset committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })

	scfg := cfg
	scfg.StateDir, scfg.GroupProtocol = t.TempDir(), kstream.GroupProtocolStreams
	refused := newApp(t, countTopology(in, out), scfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err := refused.Run(ctx)
	cancel()
	t.Logf("a streams instance beside a classic one: %v", err)
	if err == nil {
		t.Errorf("a streams instance joined a group with a classic member")
	}
	if got := classic.Tasks(); len(got) != partitions {
		t.Errorf("the classic instance runs %v after the refused streams instance", got)
	}

	if err := rc.stop(); err != nil {
		t.Fatalf("the classic instance stopped with %v", err)
	}
	streams := newApp(t, countTopology(in, out), scfg)
	start(t, streams)
	kafkatest.Eventually(t, 60*time.Second, "the streams instance runs", func() bool {
		return len(streams.Tasks()) == partitions && streams.State() == kstream.StateRunning
	})
	produceCounts(t, in, 4000, 200, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of all 8000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
}

// Kafka 4.4 does not update a streams group's topology: an instance whose topology differs
// from the group's is refused at its first heartbeat, with an error that says so.
func TestStreamsProtocolTopologyChangeRefusedOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 2, nil)
	cfg := testConfig(t)
	cfg.GroupProtocol = kstream.GroupProtocolStreams
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return len(app.Tasks()) == 2 && app.State() == kstream.StateRunning })
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).To(out, nil, nil)
	cfg2 := cfg
	cfg2.StateDir = t.TempDir()
	other := newApp(t, b, cfg2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := other.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "Topology updates are not supported") || !strings.Contains(err.Error(), "another topology") {
		t.Fatalf("an instance with another topology: %v, want the broker's refusal explained", err)
	}
	if got := app.Tasks(); len(got) != 2 || app.State() != kstream.StateRunning {
		t.Errorf("the first instance runs %v in state %v after the refusal", got, app.State())
	}
}
