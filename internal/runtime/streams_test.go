package runtime

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsTestTopology: sub-topology 0 reads "in" and writes the repartition topic
// "app-rep"; sub-topology 1 reads "app-rep" and "tbl" (co-partitioned) into a logged store;
// sub-topology 2 is a global store's (no sources).
func streamsTestTopology() *Topology {
	compact, del, seg := "compact", "delete", "52428800"
	return &Topology{
		SubTopologies: []SubTopology{
			{ID: 0, Sources: []Source{{Topic: "in"}}},
			{ID: 1, Sources: []Source{{Topic: "tbl"}, {Topic: "app-rep", Internal: true}},
				Stores: []StoreSpec{{Name: "store", Changelog: "app-store-changelog"}, {Name: "table", Changelog: "tbl", SourceTopic: true}}},
			{ID: 2},
		},
		InternalTopics: []InternalTopic{
			{Name: "app-rep", Writer: 0, Configs: map[string]*string{"segment.bytes": &seg, "cleanup.policy": &del}},
			{Name: "app-store-changelog", Writer: 1, Configs: map[string]*string{"cleanup.policy": &compact}},
		},
		CopartitionGroups: [][]string{{"app-rep", "tbl"}},
	}
}

// The topology declaration is Kafka Streams 4.4's: global sub-topologies left out, ids as
// strings, external and repartition sources apart, repartition sinks of the writer,
// repartition topics without a partition count (none is fixed here) and changelogs without
// one, Java's default configs (message.timestamp.type CreateTime; segment.bytes of
// repartition topics), replication factor -1, co-partition groups as indexes, all sorted:
// what a Kafka Streams 4.4 instance of the same topology declares, byte for byte (the
// mixed Java and Go tests, mixed_java_test.go, check that the broker takes both).
func TestStreamsTopologyDeclaration(t *testing.T) {
	got := streamsTopology(streamsTestTopology(), -1)
	info := func(name string, partitions int32, kv ...string) kmsg.TopicInfo {
		ti := kmsg.NewTopicInfo()
		ti.Topic, ti.NumPartitions, ti.ReplicationFactor = name, partitions, -1
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewTopicInfoConfig()
			c.Key, c.Value = kv[i], kv[i+1]
			ti.Configs = append(ti.Configs, c)
		}
		return ti
	}
	want := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID, s0.SourceTopics, s0.RepartitionSinkTopics = "0", []string{"in"}, []string{"app-rep"}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s1.SubtopologyID, s1.SourceTopics = "1", []string{"tbl"}
	s1.RepartitionSourceTopics = []kmsg.TopicInfo{info("app-rep", 0, "cleanup.policy", "delete", "message.timestamp.type", "CreateTime", "segment.bytes", "52428800")}
	// The source table's topic is its changelog (Java's reuse.ktable.source.topics).
	s1.StateChangelogTopics = []kmsg.TopicInfo{info("app-store-changelog", 0, "cleanup.policy", "compact", "message.timestamp.type", "CreateTime"),
		info("tbl", 0, "cleanup.policy", "compact", "message.timestamp.type", "CreateTime")}
	s1.CopartitionGroups = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup{{SourceTopics: []int16{0}, RepartitionSourceTopics: []int16{0}}}
	want.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("topology\n got %+v\nwant %+v", *got, want)
	}
}

// A joining heartbeat carries the topology, the process id, the endpoint and empty (not
// null) task lists; a later one carries the task lists only when they were not sent yet.
// Checked on the wire: encoded and decoded again.
func TestStreamsHeartbeatRequest(t *testing.T) {
	r := &Runtime{cfg: Config{ApplicationID: "app", ApplicationServer: "10.0.0.1:8080", InstanceID: "pod-0", RebalanceTimeout: 30 * time.Second}, topo: streamsTestTopology()}
	m := newStreamsMembership(r)
	m.memberID, m.processID = "member-1", "process-1"
	m.topology = streamsTopology(r.topo, 0)
	wire := func(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatRequest {
		t.Helper()
		req.Version = 1
		out := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		out.Version = 1
		if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("decoding a heartbeat: %v", err)
		}
		return out
	}

	join := wire(m.request(0))
	if join.Topology == nil || len(join.Topology.Subtopologies) != 2 || join.ProcessID == nil || *join.ProcessID != "process-1" {
		t.Errorf("join: topology %+v, process id %v", join.Topology, join.ProcessID)
	}
	if join.UserEndpoint == nil || join.UserEndpoint.Host != "10.0.0.1" || join.UserEndpoint.Port != 8080 {
		t.Errorf("join: endpoint %+v, want 10.0.0.1:8080", join.UserEndpoint)
	}
	if join.InstanceID == nil || *join.InstanceID != "pod-0" || join.RebalanceTimeoutMillis != 30000 || join.MemberID != "member-1" || join.MemberEpoch != 0 {
		t.Errorf("join: instance %v, rebalance timeout %d, member %s epoch %d", join.InstanceID, join.RebalanceTimeoutMillis, join.MemberID, join.MemberEpoch)
	}
	if join.ActiveTasks == nil || join.StandbyTasks == nil || join.WarmupTasks == nil || join.ClientTags == nil ||
		len(join.ActiveTasks)+len(join.StandbyTasks)+len(join.WarmupTasks) != 0 {
		t.Errorf("join: task lists %v %v %v, client tags %v: want empty, not null", join.ActiveTasks, join.StandbyTasks, join.WarmupTasks, join.ClientTags)
	}

	m.owned = TaskSet{Active: []TaskID{{1, 2}, {0, 2}, {1, 0}}, Standby: []TaskID{{1, 1}}}
	ack := wire(m.request(5))
	if ack.Topology != nil || ack.ProcessID != nil || ack.UserEndpoint != nil || ack.RebalanceTimeoutMillis != -1 {
		t.Errorf("ack: carries join fields: topology %v, process %v, endpoint %v, rebalance timeout %d", ack.Topology, ack.ProcessID, ack.UserEndpoint, ack.RebalanceTimeoutMillis)
	}
	if got, want := fromTaskIDs(ack.ActiveTasks), []TaskID{{0, 2}, {1, 0}, {1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ack: active %v, want %v", got, want)
	}
	if got := fromTaskIDs(ack.StandbyTasks); !reflect.DeepEqual(got, []TaskID{{1, 1}}) || ack.WarmupTasks == nil {
		t.Errorf("ack: standby %v, warm-up %v", got, ack.WarmupTasks)
	}
	if len(ack.ActiveTasks) != 2 || ack.ActiveTasks[0].SubtopologyID != "0" || ack.ActiveTasks[1].SubtopologyID != "1" {
		t.Errorf("ack: active tasks not grouped by sub-topology: %+v", ack.ActiveTasks)
	}

	// Warm-up tasks (none from Apache Kafka 4.4.0, whose coordinator does not compute them
	// yet) are acknowledged in their own list, apart from the standbys.
	m.owned.Warmup = []TaskID{{0, 1}, {1, 3}}
	warm := wire(m.request(6))
	if got, want := fromTaskIDs(warm.WarmupTasks), []TaskID{{0, 1}, {1, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ack: warm-up %v, want %v", got, want)
	}
	if got := fromTaskIDs(warm.StandbyTasks); !reflect.DeepEqual(got, []TaskID{{1, 1}}) {
		t.Errorf("ack with warm-ups: standby %v, want [1_1]", got)
	}

	m.sent = true
	steady := wire(m.request(5))
	if steady.ActiveTasks != nil || steady.StandbyTasks != nil || steady.WarmupTasks != nil {
		t.Errorf("steady heartbeat: task lists %v %v %v, want null (unchanged)", steady.ActiveTasks, steady.StandbyTasks, steady.WarmupTasks)
	}
}

func TestStreamsHelpers(t *testing.T) {
	if ep := userEndpoint("[::1]:9000"); ep == nil || ep.Host != "::1" || ep.Port != 9000 {
		t.Errorf("userEndpoint([::1]:9000) = %+v", ep)
	}
	for _, bad := range []string{"", "host", "host:port", "host:70000"} {
		if ep := userEndpoint(bad); ep != nil {
			t.Errorf("userEndpoint(%q) = %+v, want nil", bad, ep)
		}
	}
	status := func(codes ...int8) []kmsg.StreamsGroupHeartbeatResponseStatus {
		var ss []kmsg.StreamsGroupHeartbeatResponseStatus
		for _, c := range codes {
			ss = append(ss, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: c})
		}
		return ss
	}
	for _, c := range []struct {
		codes []int8
		ready bool
	}{{nil, true}, {[]int8{streamsStatusStaleTopology}, true}, {[]int8{streamsStatusAssignmentDelayed}, false},
		{[]int8{streamsStatusMissingInternalTopics}, false}, {[]int8{streamsStatusMissingSourceTopics}, false},
		{[]int8{streamsStatusIncorrectlyPartitioned}, false}} {
		if got := groupReady(status(c.codes...)); got != c.ready {
			t.Errorf("groupReady(%v) = %v, want %v", c.codes, got, c.ready)
		}
	}
	if got := fromTaskIDs([]kmsg.TaskIDs{{SubtopologyID: "x", Partitions: []int32{1}}, {SubtopologyID: "3", Partitions: []int32{1, 0}}}); !reflect.DeepEqual(got, []TaskID{{3, 0}, {3, 1}}) {
		t.Errorf("fromTaskIDs = %v", got)
	}
	if !sameTasks(TaskSet{Active: []TaskID{{0, 1}, {0, 0}}}, TaskSet{Active: []TaskID{{0, 0}, {0, 1}}}) || sameTasks(TaskSet{Active: []TaskID{{0, 0}}}, TaskSet{Standby: []TaskID{{0, 0}}}) {
		t.Error("sameTasks compares the wrong things")
	}
}

// The tasks' changelog offsets go sorted, each task's end offset only when its lag is known.
func TestStreamsTaskOffsets(t *testing.T) {
	offsets, ends := taskOffsets(map[TaskID]taskState{{1, 2}: {Offset: 50, Lag: -1}, {1, 0}: {Offset: 100, Lag: 0}, {0, 3}: {Offset: 7, Lag: 3}})
	o := func(sub string, p int32, off int64) kmsg.TaskOffset {
		return kmsg.TaskOffset{SubtopologyID: sub, Partition: p, Offset: off}
	}
	if want := []kmsg.TaskOffset{o("0", 3, 7), o("1", 0, 100), o("1", 2, 50)}; !reflect.DeepEqual(offsets, want) {
		t.Errorf("offsets %v, want %v", offsets, want)
	}
	if want := []kmsg.TaskOffset{o("0", 3, 10), o("1", 0, 100)}; !reflect.DeepEqual(ends, want) {
		t.Errorf("end offsets %v, want %v", ends, want)
	}
	if offsets, ends := taskOffsets(nil); offsets == nil || ends == nil || len(offsets)+len(ends) != 0 {
		t.Errorf("no state: %v %v, want empty lists, not null", offsets, ends)
	}
}

// The group's statuses are handled as Kafka Streams handles them: incorrectly partitioned
// topics stop the instance and a shutdown request the application, at once; missing source topics after
// missingSourceTimeout (the wait starting over once they are no longer reported), the
// others are waited out.
func TestStreamsStatuses(t *testing.T) {
	newM := func() (*streamsMembership, *Runtime) {
		r := &Runtime{cfg: Config{ApplicationID: "app"}, log: slog.New(slog.DiscardHandler)}
		return newStreamsMembership(r), r
	}
	st := func(code int8, detail string) []kmsg.StreamsGroupHeartbeatResponseStatus {
		return []kmsg.StreamsGroupHeartbeatResponseStatus{{StatusCode: code, StatusDetail: detail}}
	}
	t0 := time.Now()
	m, r := newM()
	m.statuses(st(streamsStatusIncorrectlyPartitioned, "detail"), t0)
	if err := r.fatal(); err == nil || !strings.Contains(err.Error(), "detail") {
		t.Errorf("incorrectly partitioned: fatal %v, want an error with the broker's detail", err)
	}
	// A shutdown request stops the instance as one in a classic assignment does: Run then
	// returns an ApplicationShutdownError quoting the broker's detail (uncaught.go).
	m, r = newM()
	m.statuses(st(streamsStatusShutdownApplication, "detail"), t0)
	if e := r.unc.shutdown; e == nil || !errors.Is(e, ErrApplicationShutdown) || !strings.Contains(e.Error(), "detail") {
		t.Errorf("shutdown application: %v, want an ApplicationShutdownError with the broker's detail", e)
	}
	for _, code := range []int8{streamsStatusStaleTopology, streamsStatusMissingInternalTopics, streamsStatusAssignmentDelayed} {
		m, r := newM()
		m.statuses(st(code, "detail"), t0)
		if err := r.fatal(); err != nil {
			t.Errorf("status %d: fatal %v, want none", code, err)
		}
	}
	m, r = newM()
	m.statuses(st(streamsStatusMissingSourceTopics, "Source topics in are missing."), t0)
	m.statuses(st(streamsStatusMissingSourceTopics, "Source topics in are missing."), t0.Add(missingSourceTimeout-time.Second))
	m.statuses(nil, t0.Add(missingSourceTimeout)) // they exist again: the wait starts over
	m.statuses(st(streamsStatusMissingSourceTopics, "Source topics in are missing."), t0.Add(missingSourceTimeout+time.Second))
	if err := r.fatal(); err != nil {
		t.Fatalf("missing source topics, not for long: fatal %v", err)
	}
	m.statuses(st(streamsStatusMissingSourceTopics, "Source topics in are missing."), t0.Add(2*missingSourceTimeout+time.Second))
	if err := r.fatal(); err == nil || !strings.Contains(err.Error(), "Source topics in are missing.") {
		t.Errorf("missing source topics for %s: fatal %v, want the broker's detail", missingSourceTimeout, err)
	}
}

// javaHashSetOrder iterates as Java's HashSet does: the expected order is what jshell
// printed for new HashSet<String>() with these names added in this order (Java 17).
func TestJavaHashSetOrder(t *testing.T) {
	in := []string{"orders", "customers", "app-KSTREAM-JOIN-repartition", "in-1", "table-3", "a", "b"}
	want := []string{"app-KSTREAM-JOIN-repartition", "a", "b", "table-3", "in-1", "orders", "customers"}
	if got := javaHashSetOrder(in); !reflect.DeepEqual(got, want) {
		t.Errorf("javaHashSetOrder(%v) = %v, want %v", in, got, want)
	}
}
