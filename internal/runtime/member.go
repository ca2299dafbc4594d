package runtime

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The membership seam. The runtime runs the tasks a membership gives it and does not know the
// protocol that decided them. A membership:
//   - makes the consumer a member of the application's group (groupOpts), and calls the
//     runtime's partition callbacks (onAssigned, onRevoked, onLost) with the source partitions
//     of the active tasks it gains and loses;
//   - reads the runtime's local state of each task (memberHost.taskStates: offsets and lags)
//     and carries it to whoever assigns, with the instance's endpoint, instance id and rack;
//   - tells the runtime, for each assignment, this member's id, its standby and warm-up tasks
//     and the group's hosts (memberHost.assignedTasks);
//   - asks for a rebalance when the runtime wants one (probe: warm-up replicas caught up, or a
//     probing interval passed).
//
// classicMembership is the classic consumer group with kstream's own task balancer
// (balancer.go), which the group's leader runs. A membership for Kafka 4.x's streams group
// (KIP-1071), where the broker assigns, fits the same seam: it reports the same task states,
// and feeds the same callbacks from its heartbeat responses.

// TaskSet is what an assignment gives this instance: the tasks it runs (Active), the ones it
// keeps an up-to-date copy of (Standby), and the ones it restores so as to take them over at a
// later rebalance (Warmup, Kafka Streams' warm-up replicas, KIP-441).
type TaskSet struct {
	Active, Standby, Warmup []TaskID
}

// taskState is a stateful task's local state as this instance reports it when it joins.
type taskState struct {
	// Offset is the sum of its stores' changelog positions (checkpointed, or applied by a
	// standby): the leader prefers the member with the most state.
	Offset int64
	// Lag is how many changelog records the instance is behind the changelogs' ends: 0 for a
	// running active task, unknown (-1) for state on disk that nothing follows.
	Lag int64
}

// memberHost is the runtime as a membership sees it.
type memberHost interface {
	// taskStates reports the local state of each stateful task this instance has state for.
	// It is called on the group's goroutine when the member joins.
	taskStates() map[TaskID]taskState
	// assignedTasks receives each new assignment: this member's id, its task set (the active
	// tasks also come as partitions, through onAssigned), and the whole group's assignment.
	assignedTasks(self string, set TaskSet, hosts []hostAssignment)
	// fixedCount returns the partition count a source topic of keyed state had at start;
	// sourceGrown is told when the group's metadata shows more (watch.go).
	fixedCount(topic string) (int32, bool)
	sourceGrown(topic string, was, now int32)
	// transactionalID is the instance's transactional id under exactly-once ("" otherwise);
	// fenceTransactions aborts the open transactions of members that are gone (eos.go).
	transactionalID() string
	fenceTransactions(ids []string)
	// shutdownRequest is this instance's request to shut the application down, nil if it
	// made none; shutdownRequested is told of the request an assignment carries
	// (uncaught.go).
	shutdownRequest() *shutdownRequest
	shutdownRequested(req shutdownRequest)
	// rejoinForShutdown asks the group for a rebalance, so that the leader reads this
	// member's shutdown request.
	rejoinForShutdown()
}

// membership makes the runtime a member of its application's group.
type membership interface {
	// check verifies, before anything is created, that the cluster speaks the membership's
	// protocol (cl is the runtime's admin client).
	check(ctx context.Context, cl *kgo.Client) error
	// groupOpts returns the consumer options that make the consumer a member (and say what
	// it consumes).
	groupOpts() []kgo.Opt
	// start is called once the consumer exists (r.consumer is set).
	start()
	// commit commits offsets of the active tasks' partitions and calls onDone with the
	// request and its response or error, as kgo.Client.CommitOffsetsSync does.
	commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, onDone func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error))
	// committed returns the offsets last committed (or fetched as committed) of the
	// partitions assigned, for Status.
	committed() map[string]map[int32]kgo.EpochOffset
	// leave leaves the group (a static member only when final and Config.LeaveOnClose).
	leave(ctx context.Context, final bool) error
	// probe asks the group for a rebalance without leaving it; why is logged.
	probe(cl *kgo.Client, why string)
}

// classicMembership is the classic consumer group protocol with kstream's task balancer.
type classicMembership struct {
	r  *Runtime
	tb *taskBalancer
}

func newClassicMembership(r *Runtime) *classicMembership {
	tb := newTaskBalancer(r.topo)
	tb.host = r
	tb.src = r.sources
	tb.numStandbys = r.cfg.NumStandbys
	tb.endpoint = r.cfg.ApplicationServer
	tb.rack = r.cfg.Rack
	tb.acceptableLag = r.cfg.AcceptableRecoveryLag
	tb.maxWarmups = r.cfg.MaxWarmupReplicas
	return &classicMembership{r: r, tb: tb}
}

// check implements membership: every cluster speaks the classic protocol.
func (m *classicMembership) check(context.Context, *kgo.Client) error { return nil }

// start implements membership: kgo's group management runs by itself.
func (m *classicMembership) start() {}

// commit implements membership with kgo's group commit.
func (m *classicMembership) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, onDone func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error)) {
	m.r.consumer.CommitOffsetsSync(ctx, offsets, onDone)
}

// committed implements membership with kgo's record of the group's commits.
func (m *classicMembership) committed() map[string]map[int32]kgo.EpochOffset {
	return m.r.consumer.CommittedOffsets()
}

// leave implements membership with kgo's LeaveGroup (a static member leaves through the
// admin client in leaveAndCloseAs).
func (m *classicMembership) leave(ctx context.Context, _ bool) error {
	return m.r.consumer.LeaveGroupContext(ctx)
}

func (m *classicMembership) groupOpts() []kgo.Opt {
	r := m.r
	opts := []kgo.Opt{
		kgo.ConsumeTopics(r.sourceTopics()...),
		kgo.ConsumerGroup(r.cfg.ApplicationID),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(m.tb),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
		kgo.OnPartitionsCallbackBlocked(r.onBlocked),
	}
	if r.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(r.cfg.SessionTimeout))
	}
	if r.cfg.HeartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(r.cfg.HeartbeatInterval))
	}
	if r.cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(r.cfg.RebalanceTimeout))
	}
	if r.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(r.cfg.InstanceID)) // a static member (fence.go, leaveAndCloseAs)
	}
	return opts
}

// probe rejoins the group. The broker rebalances when the member's join metadata changed
// (its task lags did: that is why it probes) or when the member is the leader.
func (m *classicMembership) probe(cl *kgo.Client, why string) {
	m.r.log.Info("kstream: asking the group for a probing rebalance", "app", m.r.cfg.ApplicationID, "why", why)
	cl.ForceRebalance()
}

// Defaults of the warm-up settings, as Kafka Streams' (KIP-441).
const (
	defaultAcceptableRecoveryLag = 10000
	defaultMaxWarmupReplicas     = 2
	defaultProbingInterval       = 10 * time.Minute
)
