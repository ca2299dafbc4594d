package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The streams rebalance protocol (KIP-1071), as Apache Kafka 4.4 and its Java client speak it.
//
// Wire notes (kmsg v1.15.1, broker 4.4: StreamsGroupHeartbeat key 88 v0-1, StreamsGroupDescribe
// key 89 v0-1):
//   - The member id is made by the client (a UUID) and kept for the process's life, also when
//     it rejoins. MemberEpoch 0 joins, -1 leaves, -2 leaves as a static member that comes back.
//     The broker answers with the member's epoch, which OffsetCommit (v9+: Generation is the
//     member epoch) and OffsetFetch (v9+: per-group MemberID and MemberEpoch) carry.
//   - A joining heartbeat carries the topology, RebalanceTimeoutMillis, ProcessID,
//     UserEndpoint, RackID, ClientTags (empty, not null) and empty (not null) task lists. Later
//     heartbeats leave those null and carry the task lists only when the member's reconciled
//     assignment changed since it last sent them (or after a failed heartbeat), as Java does.
//   - Sub-topologies are named by their number as a string ("0", "1"), sorted by that name;
//     their source topics, repartition sink topics, repartition source topics (with partition
//     counts and configs) and changelog topics (configs only: the broker sizes them as the
//     sub-topology's sources) are sorted by name; a co-partition group holds indexes into the
//     sub-topology's SourceTopics and RepartitionSourceTopics arrays.
//   - Kafka 4.4 compares a joining member's topology with the group's with
//     StreamsTopology.equals (every field) and refuses any difference. To share a group with
//     Kafka Streams 4.4 instances, the declaration is Java's to the byte: replication factor
//     -1 by default, a repartition topic's partition count only where the topology fixes it
//     (else 0), Java's default configs (message.timestamp.type=CreateTime; segment.bytes=
//     52428800 for repartition topics), a source table's topic declared as its store's
//     changelog (Java with reuse.ktable.source.topics), and co-partition indexes in the
//     iteration order of Java's HashSet of the topic names (not sorted). Checked against a
//     Java instance: mixed_java_test.go.
//   - A task (sub-topology s, partition p) consumes partition p of every source and
//     repartition source topic of s. The response's three task lists are all null (no new
//     target assignment) or all set (the complete target); the broker hands out a task only
//     once its previous owner has acknowledged giving it up, so a member revokes and assigns in
//     one step and acknowledges with its next heartbeat, sent at once.
//   - Statuses in a successful response: 0 STALE_TOPOLOGY, 1 MISSING_SOURCE_TOPICS,
//     2 INCORRECTLY_PARTITIONED_TOPICS, 3 MISSING_INTERNAL_TOPICS (the broker is creating
//     them), 4 SHUTDOWN_APPLICATION, 5 ASSIGNMENT_DELAYED. While 1, 2, 3 or 5 holds the group
//     is not ready and assigns nothing: the member keeps heartbeating. As in Kafka Streams,
//     2 and 4 stop the application, and 1 does after missingSourceTimeout.
//   - Errors: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID lose every task and rejoin with epoch
//     0 and the same member id; STREAMS_INVALID_TOPOLOGY(_EPOCH), STREAMS_TOPOLOGY_FENCED,
//     INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_VERSION and authorization failures
//     are fatal, as in Java's StreamsGroupHeartbeatRequestManager; coordinator errors are
//     retried (kgo retries them for a group coordinator request).
//   - Session timeout, heartbeat interval, standby replicas and the initial rebalance delay
//     are the group's configs (broker defaults group.streams.*; per group streams.*), not the
//     member's: the member heartbeats at the interval each response names.
//   - Observed on Apache Kafka 4.4 (defaults): heartbeat interval 5000 ms, task offset
//     interval 60000 ms (group config streams.task.offset.interval.ms, at least 15000),
//     acceptable recovery lag 10000. The join is answered with epoch 1 and no tasks, status
//     ASSIGNMENT_DELAYED, for group.streams.initial.rebalance.delay.ms (3 s). A member joining
//     while others still own the tasks it will get is answered with an empty target; they
//     come once the owners acknowledged giving them up. A revoking member's new target comes
//     at its current epoch; the next epoch comes with the acknowledgement.
//   - v1 adds TaskOffsets/TaskEndOffsets (sent every TaskOffsetIntervalMillis: a v0
//     coordinator refuses them) and TopologyDescriptionRequired (KIP-1331, not handled).
//   - kgo v1.22 routes neither StreamsGroupHeartbeat nor StreamsGroupDescribe (Client.Request
//     answers "client is too old"): they go to the coordinator found with FindCoordinator.
//     OffsetCommit v10 names topics by id, which commit fills in; OffsetFetch v10 kgo fills.
//   - A heartbeat to a group that is a classic group with members is refused with
//     GROUP_ID_NOT_FOUND ("Group <id> is not a streams group."); an empty classic group is
//     taken over, with its offsets. A topology other than the group's is refused with
//     INVALID_REQUEST "Topology updates are not supported yet.", also once the group is empty.

// Status codes of a StreamsGroupHeartbeat response.
const (
	streamsStatusStaleTopology          = 0
	streamsStatusMissingSourceTopics    = 1
	streamsStatusIncorrectlyPartitioned = 2
	streamsStatusMissingInternalTopics  = 3
	streamsStatusShutdownApplication    = 4
	streamsStatusAssignmentDelayed      = 5
)

// streamsHeartbeatKey is StreamsGroupHeartbeat's API key.
const streamsHeartbeatKey = 88

// errNoStreamsProtocol is the start error on a cluster that does not speak KIP-1071.
var errNoStreamsProtocol = errors.New("the streams rebalance protocol (KIP-1071, StreamsGroupHeartbeat) needs Apache Kafka 4.2 or later with group.coordinator.rebalance.protocols including streams (the default since 4.2); the in-process broker does not speak it")

// streamsMembership is a member of a streams group: the broker assigns the tasks.
type streamsMembership struct {
	r         *Runtime
	memberID  string // made once, kept across rejoins
	processID string

	// mu guards what the heartbeat goroutine shares with the loop's commits.
	mu       sync.Mutex
	epoch    int32
	topicIDs map[string][16]byte
	offsets  map[string]map[int32]kgo.EpochOffset // committed offsets, for Status

	// The heartbeat goroutine's own state.
	owned    TaskSet // the reconciled assignment: what the member runs
	target   TaskSet // the broker's last target assignment
	haveTgt  bool    // target was received since the member (re)joined
	applied  bool    // a target was reconciled since the member (re)joined
	sent     bool    // owned was sent since it last changed
	endpoint int32   // the endpoint information epoch
	interval time.Duration
	topology *kmsg.StreamsGroupHeartbeatRequestTopology
	joinedAt time.Time

	coordinator int32 // the group coordinator's node id, -1 if unknown
	maxVersion  int16 // the cluster's highest StreamsGroupHeartbeat version
	txnV2       bool  // the cluster runs transaction version 2 (streams_eos.go)
	// offsetEvery is how often the broker wants the tasks' changelog offsets (v1,
	// TaskOffsetIntervalMillis; 0: never), offsetsAt when they were last sent.
	offsetEvery   time.Duration
	offsetsAt     time.Time
	describedNote bool      // the broker's request for the topology description was logged
	missingSince  time.Time // since when the broker reports source topics missing

	stop context.CancelFunc
	done chan struct{}
}

func newStreamsMembership(r *Runtime) *streamsMembership {
	return &streamsMembership{r: r, topicIDs: map[string][16]byte{}, offsets: map[string]map[int32]kgo.EpochOffset{}, interval: time.Second, coordinator: -1}
}

// check implements membership: the cluster must offer StreamsGroupHeartbeat.
func (m *streamsMembership) check(ctx context.Context, cl *kgo.Client) error {
	var keys []kmsg.ApiVersionsResponseApiKey
	var features []kmsg.ApiVersionsResponseFinalizedFeature
	err := m.r.retry(ctx, "asking the cluster for its API versions", func(ctx context.Context) error {
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("kstream: asking the cluster for its API versions: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("kstream: asking the cluster for its API versions: %w", err)
		}
		keys, features = resp.ApiKeys, resp.FinalizedFeatures
		return nil
	})
	if err != nil {
		return err
	}
	// Transaction version 2 (KIP-890 part 2) with TxnOffsetCommit v5: the transaction's
	// offset commit adds the group by itself, without AddOffsetsToTxn (streams_eos.go).
	txnOffsetV5 := slices.ContainsFunc(keys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == int16(kmsg.TxnOffsetCommit) && k.MaxVersion >= 5
	})
	m.txnV2 = txnOffsetV5 && slices.ContainsFunc(features, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
		return f.Name == "transaction.version" && f.MaxVersionLevel >= 2
	})
	i := slices.IndexFunc(keys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == streamsHeartbeatKey })
	if i >= 0 {
		m.maxVersion = keys[i].MaxVersion
	}
	if i < 0 {
		return fmt.Errorf("kstream: Config.GroupProtocol is streams, but the cluster at %v does not support it: %w", m.r.cfg.Brokers, errNoStreamsProtocol)
	}
	id, err := newProcessUUID()
	if err != nil {
		return err
	}
	m.memberID = id
	if m.processID, err = processID(m.r.cfg.StateDir); err != nil {
		return err
	}
	if cfg := m.r.cfg; cfg.NumStandbys > 0 {
		m.r.log.Warn("kstream: under the streams protocol the broker assigns standby replicas: set the group's config streams.num.standby.replicas (kafka-configs --entity-type groups); Config.NumStandbys is not used",
			"group", cfg.ApplicationID, "num_standbys", cfg.NumStandbys)
	}
	return nil
}

// groupOpts implements membership: a direct consumer, whose partitions the heartbeat
// goroutine adds and removes.
func (m *streamsMembership) groupOpts() []kgo.Opt {
	return []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{})}
}

// start implements membership: it starts the heartbeat goroutine. After a fence
// (fence.go: the member left, and the runtime dropped every task) it starts again as a new
// member, with the same member id.
func (m *streamsMembership) start() {
	m.topology = streamsTopology(m.r.topo, m.r.cfg.ReplicationFactor)
	m.owned, m.target, m.haveTgt, m.applied, m.sent = TaskSet{}, TaskSet{}, false, false, false
	m.joinedAt, m.coordinator, m.offsetsAt = time.Time{}, -1, time.Time{}
	m.setEpoch(0)
	ctx, cancel := context.WithCancel(m.r.prodCtx)
	m.stop, m.done = cancel, make(chan struct{})
	go m.run(ctx)
}

// probe implements membership: the broker decides when to move warm-ups; nothing to ask.
func (m *streamsMembership) probe(*kgo.Client, string) {}

// currentEpoch is the member epoch the broker gave last (0 while joining).
func (m *streamsMembership) currentEpoch() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

func (m *streamsMembership) setEpoch(e int32) {
	m.mu.Lock()
	m.epoch = e
	m.mu.Unlock()
}

// run heartbeats until ctx ends: at the broker's interval, at once to join or to
// acknowledge an assignment, with a backoff after a failure.
func (m *streamsMembership) run(ctx context.Context) {
	defer close(m.done)
	backoff := 100 * time.Millisecond
	for {
		again, err := m.beat(ctx)
		wait := m.interval
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			m.sent = false // send the assignment again, as Java does after a failure
			// As a classic member that cannot reach its group: wait, warn at most once per
			// interval, and give up after Config.GiveUpAfter (fetchError).
			now := time.Now().UnixNano()
			m.r.sessionLost.CompareAndSwap(0, now)
			since := time.Duration(now - m.r.sessionLost.Load())
			if g := m.r.cfg.GiveUpAfter; g > 0 && since > g && m.r.fatal() == nil {
				m.r.fail(fmt.Errorf("kstream: streams group %q: no heartbeat answered for %s (Config.GiveUpAfter %s): %w", m.r.cfg.ApplicationID, since.Round(time.Millisecond), g, err))
			}
			m.r.warnEvery("streams heartbeat", "kstream: streams group heartbeat failed; retrying", "group", m.r.cfg.ApplicationID, "waited", since.Round(time.Millisecond), "err", err)
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		case again:
			wait, backoff = 0, 100*time.Millisecond
		default:
			backoff = 100 * time.Millisecond
		}
		if err == nil && m.r.sessionLost.Swap(0) != 0 {
			m.r.log.Info("kstream: the streams group answers again", "group", m.r.cfg.ApplicationID)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// request builds the next heartbeat.
func (m *streamsMembership) request(epoch int32) *kmsg.StreamsGroupHeartbeatRequest {
	cfg := m.r.cfg
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group = cfg.ApplicationID
	req.MemberID = m.memberID
	req.MemberEpoch = epoch
	req.EndpointInformationEpoch = m.endpoint
	// This instance's request to shut the application down (UncaughtShutdownApplication,
	// uncaught.go), Kafka Streams' shutdownApplication: the broker answers every member
	// with the status SHUTDOWN_APPLICATION.
	req.ShutdownApplication = m.r.shutdownRequest() != nil
	if cfg.InstanceID != "" {
		req.InstanceID = kmsg.StringPtr(cfg.InstanceID)
	}
	if epoch == 0 {
		req.Topology = m.topology
		req.RebalanceTimeoutMillis = int32(cmp.Or(cfg.RebalanceTimeout, 60*time.Second) / time.Millisecond)
		req.ProcessID = kmsg.StringPtr(m.processID)
		if ep := userEndpoint(cfg.ApplicationServer); ep != nil {
			req.UserEndpoint = ep
		}
		if cfg.Rack != "" {
			req.RackID = kmsg.StringPtr(cfg.Rack)
		}
		req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return req
	}
	if !m.sent {
		req.ActiveTasks = toTaskIDs(m.owned.Active)
		req.StandbyTasks = toTaskIDs(m.owned.Standby)
		req.WarmupTasks = toTaskIDs(m.owned.Warmup)
	}
	if epoch > 0 && m.maxVersion >= 1 && m.offsetEvery > 0 && time.Since(m.offsetsAt) >= m.offsetEvery {
		// v1 only: a v0 coordinator refuses them ("TaskOffsets are not supported yet").
		req.TaskOffsets, req.TaskEndOffsets = taskOffsets(m.r.taskStates())
	}
	return req
}

// taskOffsets turns the local state of the stateful tasks into the heartbeat's task offsets
// (the sum of each task's changelog positions) and end offsets (position plus lag, for the
// tasks whose lag is known), sorted.
func taskOffsets(states map[TaskID]taskState) (offsets, ends []kmsg.TaskOffset) {
	ids := slices.SortedFunc(maps.Keys(states), compareTasks)
	offsets, ends = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
	for _, id := range ids {
		st := states[id]
		o := kmsg.NewTaskOffset()
		o.SubtopologyID, o.Partition, o.Offset = strconv.Itoa(id.SubTopology), id.Partition, st.Offset
		offsets = append(offsets, o)
		if st.Lag >= 0 {
			o.Offset = st.Offset + st.Lag
			ends = append(ends, o)
		}
	}
	return offsets, ends
}

// beat sends one heartbeat and acts on its answer. It reports whether the next one should
// go at once (to join again or to acknowledge a reconciled assignment).
func (m *streamsMembership) beat(ctx context.Context) (again bool, err error) {
	r := m.r
	epoch := m.currentEpoch()
	req := m.request(epoch)
	resp, err := m.heartbeat(ctx, req)
	if err != nil {
		return false, fmt.Errorf("kstream: streams group %q: heartbeat: %w", r.cfg.ApplicationID, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		err = fmt.Errorf("kstream: streams group %q: heartbeat of member %s epoch %d%s: %w", r.cfg.ApplicationID, m.memberID, epoch, msg, err)
		switch {
		case errors.Is(err, kerr.FencedMemberEpoch), errors.Is(err, kerr.UnknownMemberID):
			r.log.Info("kstream: fenced from the streams group; giving up every task and rejoining", "group", r.cfg.ApplicationID, "member", m.memberID, "err", err)
			m.lose(ctx)
			return true, nil
		case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator):
			m.coordinator = -1 // look it up again
			return false, err
		case errors.Is(err, kerr.CoordinatorLoadInProgress):
			return false, err
		case errors.Is(err, kerr.GroupIDNotFound):
			// Kafka 4.4 answers so while the group is a classic (or consumer) group with
			// members: "Group <id> is not a streams group."
			err = fmt.Errorf("%w (is a classic instance of the application still running? a streams group takes over only an empty group; see docs/streams-protocol.md)", err)
			r.fail(err)
			return false, err
		case errors.Is(err, kerr.InvalidRequest) && strings.Contains(msg, "Topology updates are not supported"):
			// Kafka 4.4 keeps the first topology a streams group was given, also once the
			// group is empty: an instance with another topology is refused so.
			err = fmt.Errorf("%w (the group was created with another topology, and Kafka does not update a streams group's topology yet; see docs/streams-protocol.md)", err)
			r.fail(err)
			return false, err
		default:
			// Authorization, an invalid topology or topology epoch, a full group, an
			// unsupported version: no retry heals them (Java fails too).
			r.fail(err)
			return false, err
		}
	}
	if resp.HeartbeatIntervalMillis > 0 {
		m.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	m.offsetEvery = time.Duration(resp.TaskOffsetIntervalMillis) * time.Millisecond
	if req.TaskOffsets != nil {
		m.offsetsAt = time.Now()
	}
	if epoch < 0 {
		return false, nil // a leave's answer
	}
	if epoch == 0 {
		if r.log.Enabled(ctx, slog.LevelDebug) {
			r.log.Debug("kstream: the topology declared to the streams group", "group", r.cfg.ApplicationID, "topology", fmt.Sprintf("%+v", *req.Topology))
		}
		m.joinedAt = time.Now()
		r.log.Info("kstream: joined the streams group", "group", r.cfg.ApplicationID, "member", m.memberID, "epoch", resp.MemberEpoch,
			"heartbeat_interval_ms", resp.HeartbeatIntervalMillis, "task_offset_interval_ms", resp.TaskOffsetIntervalMillis, "acceptable_recovery_lag", resp.AcceptableRecoveryLag)
	}
	m.setEpoch(resp.MemberEpoch)
	m.endpoint = resp.EndpointInformationEpoch
	if req.ActiveTasks != nil {
		m.sent = true // what the member runs is acknowledged (a join's empty lists too: it runs nothing)
	}
	m.statuses(resp.Status, time.Now())
	if resp.TopologyDescriptionRequired && !m.describedNote {
		// v1 (KIP-1331): the broker wants the topology's description through
		// StreamsGroupTopologyDescriptionUpdate (key 93), which kstream does not send yet.
		m.describedNote = true
		r.log.Info("kstream: the broker asks for the topology description; not sent (not supported yet)", "group", r.cfg.ApplicationID)
	}
	if resp.PartitionsByUserEndpoint != nil {
		r.setMetadata(m.hosts(resp.PartitionsByUserEndpoint))
	}
	if resp.ActiveTasks != nil || resp.StandbyTasks != nil || resp.WarmupTasks != nil {
		m.target = TaskSet{Active: fromTaskIDs(resp.ActiveTasks), Standby: fromTaskIDs(resp.StandbyTasks), Warmup: fromTaskIDs(resp.WarmupTasks)}
		m.haveTgt = true
	}
	// While the group is not ready (topics missing or being created, the initial delay) the
	// broker's target is empty: an empty first assignment is not applied then, so that the
	// instance stays REBALANCING rather than run with no task (as Java's isGroupReady).
	if r.closing.Load() {
		return false, nil // shutting down: the tasks are being dropped, and the member leaves
	}
	if m.haveTgt && (!sameTasks(m.target, m.owned) || (!m.applied && groupReady(resp.Status))) {
		if err := m.reconcile(ctx); err != nil {
			if errors.Is(err, errOffsetsPending) {
				return !m.sent, nil // acknowledge what was revoked; try the new tasks again at the next heartbeat
			}
			return false, err
		}
		return true, nil
	}
	return !m.sent, nil
}

// heartbeat sends req to the group's coordinator. kgo does not route StreamsGroupHeartbeat
// (its Client.Request answers "client is too old"), so the membership finds the coordinator
// itself (FindCoordinator, which kgo does route) and sends to that broker, without retries:
// the heartbeat loop retries, with the state of the moment.
func (m *streamsMembership) heartbeat(ctx context.Context, req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, error) {
	if m.coordinator < 0 {
		id, err := findCoordinator(ctx, m.r.consumer, m.r.cfg.ApplicationID)
		if err != nil {
			return nil, err
		}
		m.coordinator = id
	}
	kresp, err := m.r.consumer.Broker(int(m.coordinator)).Request(ctx, req)
	if err != nil {
		id := m.coordinator
		m.coordinator = -1 // look it up again: it may have moved
		return nil, fmt.Errorf("coordinator %d: %w", id, err)
	}
	resp, ok := kresp.(*kmsg.StreamsGroupHeartbeatResponse)
	if !ok {
		return nil, fmt.Errorf("coordinator answered a StreamsGroupHeartbeat with %T", kresp)
	}
	return resp, nil
}

// findCoordinator returns the node id of group's coordinator.
func findCoordinator(ctx context.Context, cl *kgo.Client, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, fmt.Errorf("finding the coordinator of group %q: %w", group, err)
	}
	if len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
			return -1, fmt.Errorf("finding the coordinator of group %q: %w", group, err)
		}
		return c.NodeID, nil
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("finding the coordinator of group %q: %w", group, err)
	}
	return resp.NodeID, nil
}

// groupReady reports whether the statuses let the group assign tasks (Java's
// StreamsMembershipManager.isGroupReady).
func groupReady(ss []kmsg.StreamsGroupHeartbeatResponseStatus) bool {
	for _, s := range ss {
		switch s.StatusCode {
		case streamsStatusMissingSourceTopics, streamsStatusMissingInternalTopics, streamsStatusIncorrectlyPartitioned, streamsStatusAssignmentDelayed:
			return false
		}
	}
	return true
}

// missingSourceTimeout is how long the member waits for source topics the broker reports
// missing before it fails, as Kafka Streams waits max.poll.interval.ms (5 minutes).
const missingSourceTimeout = 5 * time.Minute

// statuses acts on the group's statuses as Kafka Streams does (StreamThread
// .handleStreamsRebalanceData): a shutdown request or incorrectly partitioned topics stop
// the application, source topics missing for missingSourceTimeout too; the others are
// logged and waited out.
func (m *streamsMembership) statuses(ss []kmsg.StreamsGroupHeartbeatResponseStatus, now time.Time) {
	r := m.r
	missing := false
	for _, s := range ss {
		switch s.StatusCode {
		case streamsStatusShutdownApplication:
			// Every member stops, as on a shutdown request in a classic assignment; the
			// broker names the member that asked in the detail, not its cause, which only
			// that member's own error carries.
			req := shutdownRequest{Instance: "(streams group: " + s.StatusDetail + ")", Cause: s.StatusDetail}
			if own := r.shutdownRequest(); own != nil {
				req = *own
			}
			r.shutdownRequested(req)
		case streamsStatusIncorrectlyPartitioned:
			r.fail(fmt.Errorf("kstream: streams group %q: topics are not partitioned as the topology needs: %s", r.cfg.ApplicationID, s.StatusDetail))
		case streamsStatusMissingSourceTopics:
			missing = true
			if m.missingSince.IsZero() {
				m.missingSince = now
			}
			if waited := now.Sub(m.missingSince); waited >= missingSourceTimeout {
				r.fail(fmt.Errorf("kstream: streams group %q: source topics missing for %s: %s", r.cfg.ApplicationID, waited.Round(time.Second), s.StatusDetail))
			} else {
				r.warnEvery("streams missing sources", "kstream: the streams group reports missing source topics; no tasks are assigned until they exist", "group", r.cfg.ApplicationID, "detail", s.StatusDetail, "waited", waited.Round(time.Second), "fail_after", missingSourceTimeout)
			}
		case streamsStatusMissingInternalTopics, streamsStatusAssignmentDelayed:
			r.log.Info("kstream: the streams group is not ready; waiting", "group", r.cfg.ApplicationID, "status", s.StatusCode, "detail", s.StatusDetail)
		case streamsStatusStaleTopology:
			r.warnEvery("streams stale topology", "kstream: the streams group reports a stale topology", "group", r.cfg.ApplicationID, "detail", s.StatusDetail)
		default:
			r.log.Info("kstream: streams group status", "group", r.cfg.ApplicationID, "status", s.StatusCode, "detail", s.StatusDetail)
		}
	}
	if !missing {
		m.missingSince = time.Time{}
	}
}

// reconcile makes the owned assignment the target: it revokes the active tasks the target
// no longer holds (committing them first, in onRevoked), then fetches the committed offsets
// of the new ones and assigns them. The caller acknowledges with the next heartbeat.
func (m *streamsMembership) reconcile(ctx context.Context) error {
	r, cl := m.r, m.r.consumer
	var revoked, added []TaskID
	for _, id := range m.owned.Active {
		if !slices.Contains(m.target.Active, id) {
			revoked = append(revoked, id)
		}
	}
	for _, id := range m.target.Active {
		if !slices.Contains(m.owned.Active, id) {
			added = append(added, id)
		}
	}
	if len(revoked) > 0 {
		parts := m.partitions(revoked)
		r.onRevoked(ctx, cl, parts)
		cl.RemoveConsumePartitions(parts)
		m.owned.Active = slices.DeleteFunc(slices.Clone(m.owned.Active), func(id TaskID) bool { return slices.Contains(revoked, id) })
		m.sent = false
	}
	var offsets map[string]map[int32]kgo.Offset
	parts := m.partitions(added)
	if len(added) > 0 {
		var err error
		if offsets, err = m.fetchOffsets(ctx, parts); err != nil {
			if errors.Is(err, errOffsetsPending) {
				r.warnEvery("streams unstable offsets", "kstream: a transaction that committed offsets of tasks assigned here has not ended yet; taking them once it has",
					"group", r.cfg.ApplicationID, "tasks", taskStrings(added))
			}
			return err
		}
	}
	r.assignedTasks(m.memberID, m.target, nil)
	// onAssigned pauses the partitions of tasks that restore before they are consumed.
	r.onAssigned(ctx, cl, parts)
	if len(offsets) > 0 {
		cl.AddConsumePartitions(offsets)
	}
	m.owned = TaskSet{Active: slices.Clone(m.target.Active), Standby: slices.Clone(m.target.Standby), Warmup: slices.Clone(m.target.Warmup)}
	m.sent, m.applied = false, true
	m.offsetsAt = time.Time{} // the tasks' offsets go with the acknowledgement
	r.log.Info("kstream: streams group assignment", "group", r.cfg.ApplicationID, "epoch", m.currentEpoch(),
		"active", taskStrings(m.owned.Active), "standby", taskStrings(m.owned.Standby), "warmup", taskStrings(m.owned.Warmup),
		"revoked", taskStrings(revoked), "added", taskStrings(added))
	return nil
}

// lose gives up every task without committing (the member was fenced) and makes the next
// heartbeat a join.
func (m *streamsMembership) lose(ctx context.Context) {
	if len(m.owned.Active) > 0 {
		parts := m.partitions(m.owned.Active)
		m.r.onLost(ctx, m.r.consumer, parts)
		m.r.consumer.RemoveConsumePartitions(parts)
	}
	m.owned, m.target, m.haveTgt, m.applied, m.sent = TaskSet{}, TaskSet{}, false, false, false
	m.setEpoch(0)
}

// partitions returns the source partitions of tasks: partition p of every source topic
// (repartition topics included) of the task's sub-topology.
func (m *streamsMembership) partitions(ids []TaskID) map[string][]int32 {
	parts := map[string][]int32{}
	for _, id := range ids {
		if id.SubTopology < 0 || id.SubTopology >= len(m.r.topo.SubTopologies) {
			continue
		}
		for _, src := range m.r.topo.SubTopologies[id.SubTopology].Sources {
			parts[src.Topic] = append(parts[src.Topic], id.Partition)
		}
	}
	return parts
}

// fetchOffsets reads the group's committed offsets of parts, as this member (its id and
// epoch), and returns where to consume each from: the committed offset, or the source's
// reset policy where none is committed.
func (m *streamsMembership) fetchOffsets(ctx context.Context, parts map[string][]int32) (map[string]map[int32]kgo.Offset, error) {
	r := m.r
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = r.cfg.ApplicationID
	g.MemberID = kmsg.StringPtr(m.memberID)
	g.MemberEpoch = m.currentEpoch()
	for topic, ps := range parts {
		t := kmsg.NewOffsetFetchRequestGroupTopic()
		t.Topic = topic
		t.Partitions = slices.Clone(ps)
		g.Topics = append(g.Topics, t)
	}
	req.Groups = append(req.Groups, g)
	// Under exactly-once, offsets that a transaction committed but has not ended yet are
	// not read (KIP-447's require_stable: the broker answers UNSTABLE_OFFSET_COMMIT until
	// it ends): a task moved here goes on from where that transaction leaves it.
	req.RequireStable = r.cfg.ExactlyOnce
	resp, err := req.RequestWith(ctx, r.consumer)
	if err != nil {
		return nil, fmt.Errorf("kstream: streams group %q: fetching committed offsets: %w", r.cfg.ApplicationID, err)
	}
	if unstableOffsets(resp) {
		return nil, errOffsetsPending
	}
	out := map[string]map[int32]kgo.Offset{}
	for topic, ps := range parts {
		out[topic] = map[int32]kgo.Offset{}
		for _, p := range ps {
			out[topic][p] = m.resetOffset(topic)
		}
	}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			return nil, fmt.Errorf("kstream: streams group %q: fetching committed offsets: %w", r.cfg.ApplicationID, err)
		}
		for _, t := range rg.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("kstream: streams group %q: fetching the committed offset of topic %q partition %d: %w", r.cfg.ApplicationID, t.Topic, p.Partition, err)
				}
				if _, ok := out[t.Topic][p.Partition]; ok && p.Offset >= 0 {
					out[t.Topic][p.Partition] = kgo.NewOffset().At(p.Offset).WithEpoch(p.LeaderEpoch)
					m.noteCommitted(t.Topic, p.Partition, kgo.EpochOffset{Epoch: p.LeaderEpoch, Offset: p.Offset})
				}
			}
		}
	}
	return out, nil
}

// errOffsetsPending says that a transaction which committed offsets of tasks being
// assigned has not ended yet (UNSTABLE_OFFSET_COMMIT): typically the open transaction of an
// instance that was killed, which its transaction timeout (or a restart with its
// transactional id) ends. The member takes those tasks at a later heartbeat; it does not
// wait for them, or its heartbeats would stop and the group fence it.
var errOffsetsPending = errors.New("a transaction that committed offsets of the tasks assigned has not ended yet")

// unstableOffsets reports whether resp holds UNSTABLE_OFFSET_COMMIT for a partition.
func unstableOffsets(resp *kmsg.OffsetFetchResponse) bool {
	for _, g := range resp.Groups {
		if g.ErrorCode == kerr.UnstableOffsetCommit.Code {
			return true
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.UnstableOffsetCommit.Code {
					return true
				}
			}
		}
	}
	return false
}

// resetOffset is where a partition of topic with no committed offset is consumed from: its
// source's reset policy, or the application's.
func (m *streamsMembership) resetOffset(topic string) kgo.Offset {
	reset := m.r.cfg.DefaultReset
	for _, st := range m.r.topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Topic == topic && src.Reset != ResetDefault {
				reset = src.Reset
			}
		}
	}
	if reset == ResetLatest {
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

// commit implements membership: OffsetCommit with the member's id and epoch (v9+ carries
// the epoch in Generation). The topics go with their ids, which v10 needs.
func (m *streamsMembership) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, onDone func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error)) {
	r := m.r
	var topics []string
	for t := range offsets {
		topics = append(topics, t)
	}
	ids, err := m.ids(ctx, topics)
	if err != nil {
		onDone(r.consumer, nil, nil, err)
		return
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = r.cfg.ApplicationID
	req.MemberID = m.memberID
	req.Generation = m.currentEpoch()
	if r.cfg.InstanceID != "" {
		req.InstanceID = kmsg.StringPtr(r.cfg.InstanceID)
	}
	byID := map[[16]byte]string{}
	for _, topic := range topics {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, ids[topic]
		byID[t.TopicID] = topic
		for p, eo := range offsets[topic] {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, eo.Offset, eo.Epoch
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, r.consumer)
	if err == nil {
		for i := range resp.Topics {
			if resp.Topics[i].Topic == "" {
				resp.Topics[i].Topic = byID[resp.Topics[i].TopicID]
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("streams group %q, member %s epoch %d: %w", r.cfg.ApplicationID, m.memberID, req.Generation, err)
	} else {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					m.noteCommitted(t.Topic, p.Partition, offsets[t.Topic][p.Partition])
				}
			}
		}
	}
	onDone(r.consumer, req, resp, err)
}

// noteCommitted records a committed offset for Status.
func (m *streamsMembership) noteCommitted(topic string, p int32, eo kgo.EpochOffset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.offsets[topic] == nil {
		m.offsets[topic] = map[int32]kgo.EpochOffset{}
	}
	m.offsets[topic][p] = eo
}

// committed implements membership: the offsets this member committed, or fetched as
// committed when it was assigned their partitions (Status reads those of its partitions).
func (m *streamsMembership) committed() map[string]map[int32]kgo.EpochOffset {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range m.offsets {
		out[t] = maps.Clone(ps)
	}
	return out
}

// ids returns the topic ids of topics, asking the cluster for those it does not know yet.
func (m *streamsMembership) ids(ctx context.Context, topics []string) (map[string][16]byte, error) {
	out := map[string][16]byte{}
	var missing []string
	m.mu.Lock()
	for _, t := range topics {
		if id, ok := m.topicIDs[t]; ok {
			out[t] = id
		} else {
			missing = append(missing, t)
		}
	}
	m.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	details, err := m.r.admin.ListTopics(ctx, missing...)
	if err != nil {
		return nil, fmt.Errorf("kstream: reading the topic ids of %v: %w", missing, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range missing {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("kstream: reading the topic id of %q: %w", t, cmp.Or(d.Err, error(kerr.UnknownTopicOrPartition)))
		}
		m.topicIDs[t] = d.ID
		out[t] = d.ID
	}
	return out, nil
}

// leave implements membership: it stops heartbeating and leaves with epoch -1, or -2 for a
// static member that comes back (unless final with Config.LeaveOnClose).
func (m *streamsMembership) leave(ctx context.Context, final bool) error {
	if m.stop == nil {
		return nil
	}
	m.stop()
	<-m.done
	epoch := m.currentEpoch()
	if epoch <= 0 && m.joinedAt.IsZero() {
		return nil // never joined
	}
	leave := int32(-1)
	if m.r.cfg.InstanceID != "" && !(final && m.r.cfg.LeaveOnClose) {
		leave = -2
	}
	req := m.request(leave)
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = nil, nil, nil
	resp, err := m.heartbeat(ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.FencedMemberEpoch) {
		return fmt.Errorf("kstream: leaving streams group %q (member %s, epoch %d): %w", m.r.cfg.ApplicationID, m.memberID, leave, err)
	}
	m.setEpoch(leave)
	m.r.log.Info("kstream: left the streams group", "group", m.r.cfg.ApplicationID, "member", m.memberID, "epoch", leave)
	return nil
}

// hosts turns the broker's partitions by endpoint into the group's hosts, for queries:
// each endpoint's active and standby tasks (by their source partitions).
func (m *streamsMembership) hosts(eps []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint) []hostAssignment {
	var hosts []hostAssignment
	self := userEndpoint(m.r.cfg.ApplicationServer)
	for _, ep := range eps {
		addr := net.JoinHostPort(ep.UserEndpoint.Host, strconv.Itoa(int(ep.UserEndpoint.Port)))
		// The broker names endpoints, not members: this instance is the one with its own
		// endpoint (App.Metadata's Self), the others are named by theirs.
		h := hostAssignment{Member: "endpoint " + addr, Endpoint: addr}
		if self != nil && self.Host == ep.UserEndpoint.Host && self.Port == ep.UserEndpoint.Port {
			h.Member = m.memberID
		}
		seen := map[string]bool{}
		for _, tp := range ep.ActivePartitions {
			sub, ok := m.r.subOf(tp.Topic)
			if !ok {
				continue
			}
			for _, p := range tp.Partitions {
				if id := (TaskID{sub, p}).String(); !seen[id] {
					seen[id] = true
					h.Active = append(h.Active, id)
				}
			}
		}
		for _, tp := range ep.StandbyPartitions {
			sub, ok := m.r.subOf(tp.Topic)
			if !ok {
				continue
			}
			for _, p := range tp.Partitions {
				if id := (TaskID{sub, p}).String(); !seen[id] {
					seen[id] = true
					h.Standby = append(h.Standby, id)
				}
			}
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// streamsTopology is the topology declaration of a joining heartbeat, as Kafka Streams 4.4
// builds it (StreamsGroupHeartbeatRequestManager): global sub-topologies (no sources) are left
// out; internal topics carry a partition count only where the topology fixes one, and Java's
// default configs where kstream sets none (a streams group refuses a second instance whose
// declaration differs in any byte).
func streamsTopology(topo *Topology, replication int16) *kmsg.StreamsGroupHeartbeatRequestTopology {
	internal := map[string]*InternalTopic{}
	for i := range topo.InternalTopics {
		internal[topo.InternalTopics[i].Name] = &topo.InternalTopics[i]
	}
	if replication <= 0 {
		replication = -1 // the broker's default, as Kafka Streams' replication.factor -1
	}
	// The topic configs Kafka Streams 4.4 declares that kstream does not set itself
	// (InternalTopicConfig's defaults): a streams group keeps the first topology it was
	// given and refuses any other, so a Java and a Go instance of one application must
	// declare the same bytes (docs/streams-protocol.md, mixed Java and Go instances).
	javaDefaults := func(repartition bool) map[string]string {
		d := map[string]string{"message.timestamp.type": "CreateTime"}
		if repartition {
			d["segment.bytes"] = "52428800"
		}
		return d
	}
	info := func(it *InternalTopic, partitions int32, repartition bool) kmsg.TopicInfo {
		ti := kmsg.NewTopicInfo()
		ti.Topic, ti.NumPartitions, ti.ReplicationFactor = it.Name, partitions, replication
		configs := javaDefaults(repartition)
		for k, v := range it.Configs {
			if v != nil {
				configs[k] = *v
			}
		}
		for k, v := range configs {
			c := kmsg.NewTopicInfoConfig()
			c.Key, c.Value = k, v
			ti.Configs = append(ti.Configs, c)
		}
		slices.SortFunc(ti.Configs, func(a, b kmsg.TopicInfoConfig) int { return strings.Compare(a.Key, b.Key) })
		return ti
	}
	readBy := map[string]bool{}
	for _, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			readBy[src.Topic] = true
		}
	}
	out := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	for _, st := range topo.SubTopologies {
		if len(st.Sources) == 0 {
			continue // a global store's: no tasks
		}
		s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		s.SubtopologyID = strconv.Itoa(st.ID)
		for _, src := range st.Sources {
			if it := internal[src.Topic]; it != nil {
				// A partition count only where the topology fixes one (Repartition with a
				// count): otherwise 0, and the broker derives it, as Java declares it.
				s.RepartitionSourceTopics = append(s.RepartitionSourceTopics, info(it, max(it.Partitions, 0), true))
			} else {
				s.SourceTopics = append(s.SourceTopics, src.Topic)
			}
		}
		declared := map[string]bool{}
		for _, spec := range st.Stores {
			switch it := internal[spec.Changelog]; {
			case declared[spec.Changelog]:
			case it != nil && !spec.SourceTopic:
				s.StateChangelogTopics = append(s.StateChangelogTopics, info(it, 0, false))
				declared[spec.Changelog] = true
			case spec.SourceTopic && spec.Changelog != "":
				// A source table's topic is its changelog: Kafka Streams with
				// reuse.ktable.source.topics (what kstream always does) declares it so,
				// with a key-value changelog's configs.
				compact := "compact"
				src := InternalTopic{Name: spec.Changelog, Configs: map[string]*string{"cleanup.policy": &compact}}
				s.StateChangelogTopics = append(s.StateChangelogTopics, info(&src, 0, false))
				declared[spec.Changelog] = true
			}
		}
		for i := range topo.InternalTopics {
			it := &topo.InternalTopics[i]
			if it.Writer == st.ID && readBy[it.Name] {
				s.RepartitionSinkTopics = append(s.RepartitionSinkTopics, it.Name)
			}
		}
		slices.Sort(s.SourceTopics)
		slices.Sort(s.RepartitionSinkTopics)
		slices.SortFunc(s.RepartitionSourceTopics, func(a, b kmsg.TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
		slices.SortFunc(s.StateChangelogTopics, func(a, b kmsg.TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
		for _, group := range topo.CopartitionGroups {
			var cg kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup
			all := true
			// The indexes in the order of the group's topics, which is Kafka Streams' order
			// for a compiled topology (JavaCopartitionGroups).
			for _, t := range group {
				if i := slices.Index(s.SourceTopics, t); i >= 0 {
					cg.SourceTopics = append(cg.SourceTopics, int16(i))
				} else if i := slices.IndexFunc(s.RepartitionSourceTopics, func(ti kmsg.TopicInfo) bool { return ti.Topic == t }); i >= 0 {
					cg.RepartitionSourceTopics = append(cg.RepartitionSourceTopics, int16(i))
				} else {
					all = false
				}
			}
			if all && len(group) > 0 {
				s.CopartitionGroups = append(s.CopartitionGroups, cg)
			}
		}
		out.Subtopologies = append(out.Subtopologies, s)
	}
	slices.SortFunc(out.Subtopologies, func(a, b kmsg.StreamsGroupHeartbeatRequestTopologySubtopology) int {
		return strings.Compare(a.SubtopologyID, b.SubtopologyID)
	})
	return &out
}

// userEndpoint parses Config.ApplicationServer ("host:port") for the heartbeat; nil if unset
// or not parsable.
func userEndpoint(server string) *kmsg.StreamsGroupHeartbeatRequestUserEndpoint {
	if server == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil
	}
	ep := kmsg.NewStreamsGroupHeartbeatRequestUserEndpoint()
	ep.Host, ep.Port = host, uint16(n)
	return &ep
}

// toTaskIDs groups tasks by sub-topology, as the heartbeat carries them (never nil).
func toTaskIDs(ids []TaskID) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	by := map[int][]int32{}
	var subs []int
	for _, id := range ids {
		if _, ok := by[id.SubTopology]; !ok {
			subs = append(subs, id.SubTopology)
		}
		by[id.SubTopology] = append(by[id.SubTopology], id.Partition)
	}
	slices.Sort(subs)
	for _, s := range subs {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID = strconv.Itoa(s)
		t.Partitions = by[s]
		slices.Sort(t.Partitions)
		out = append(out, t)
	}
	return out
}

// fromTaskIDs reads the broker's task lists (sub-topology ids that are not numbers, which
// kstream never declares, are skipped).
func fromTaskIDs(ts []kmsg.TaskIDs) []TaskID {
	var out []TaskID
	for _, t := range ts {
		sub, err := strconv.Atoi(t.SubtopologyID)
		if err != nil {
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, TaskID{sub, p})
		}
	}
	slices.SortFunc(out, compareTasks)
	return out
}

func compareTasks(a, b TaskID) int {
	if a.SubTopology != b.SubTopology {
		return a.SubTopology - b.SubTopology
	}
	return int(a.Partition - b.Partition)
}

// sameTasks reports whether a and b hold the same tasks.
func sameTasks(a, b TaskSet) bool {
	eq := func(x, y []TaskID) bool {
		x, y = slices.Clone(x), slices.Clone(y)
		slices.SortFunc(x, compareTasks)
		slices.SortFunc(y, compareTasks)
		return slices.Equal(x, y)
	}
	return eq(a.Active, b.Active) && eq(a.Standby, b.Standby) && eq(a.Warmup, b.Warmup)
}

func taskStrings(ids []TaskID) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id.String())
	}
	return out
}
