package kstream

import "time"

// Status is a snapshot of one running instance for operators: its state and endpoint, its
// active tasks with the position, end offset and lag of each input partition, its standby
// tasks with their lag, the restorations in progress, the dead-letter records it wrote
// last, and its commit figures. It gathers what Kafka Streams spreads over
// KafkaStreams.metadataForLocalThreads (ThreadMetadata, TaskMetadata with its committed and
// end offsets), allLocalStorePartitionLags and the restore and DLQ metrics. Package ops
// serves it as JSON and draws it.
type Status struct {
	ApplicationID string
	State         State
	// StateSince is when the instance entered State. StateReason says why it is in it when
	// it is not RUNNING: the step of the start it is at (bootstrapping global stores,
	// initializing the transactional producer), the rebalance it waits for (partitions
	// revoked, the group session lost, a fenced producer), the active tasks whose stores
	// restore, or the error that stopped it.
	StateSince  time.Time
	StateReason string
	// Endpoint is this instance's Config.ApplicationServer ("" if none); MemberID its group
	// member id as the broker knows it now ("" before it joined). A static member that came
	// back without a rebalance has a new member id, while the group's metadata (Metadata,
	// KeyMetadata) names it by its previous one until the next rebalance.
	Endpoint string
	MemberID string
	// Time is when the snapshot was taken. Active is as of TasksAsOf: the snapshot never
	// waits for a batch of records being processed, and takes the figures the poll loop
	// last published (at most half a second old while it is busy) when one is.
	Time      time.Time
	TasksAsOf time.Time
	// LoopHeartbeat is when the poll loop last began a turn; zero when no loop runs (before
	// the instance joined its group, after it stopped). See [App.Health].
	LoopHeartbeat time.Time

	Active   []TaskStatus        // sorted by task id
	Standby  []StandbyTaskStatus // sorted by task id
	Restores []RestoreStatus     // restorations in progress, sorted by store and partition
	// DeadLetters are the last dead-letter records this instance wrote (at most 100),
	// oldest first; DeadLettersTotal counts those it wrote since it started.
	DeadLetters      []DeadLetterStatus
	DeadLettersTotal int
	// ProcessedRecords counts the records processed since the instance started, all tasks
	// together (records processed again after a failure or an aborted transaction count
	// again).
	ProcessedRecords int64
	Stats            Stats
}

// TaskStatus is one active task of this instance: Kafka Streams' TaskMetadata.
type TaskStatus struct {
	ID TaskID
	// Restoring says the task's stores are still restoring from their changelogs: it
	// processes nothing yet.
	Restoring bool
	// ProcessedRecords counts the records the task processed since it was assigned here.
	ProcessedRecords int64
	Partitions       []PartitionStatus // sorted by topic and partition
}

// PartitionStatus is one input partition of an active task.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// Position is the offset of the next record to process: after the last one processed,
	// or the first one fetched, or the committed offset; -1 if unknown.
	Position int64
	// Committed is the offset last committed for the partition, -1 if none is known
	// (TaskMetadata.committedOffsets).
	Committed int64
	// EndOffset is the partition's end offset (its last stable offset under exactly-once) as
	// of the last fetch that returned records (TaskMetadata.endOffsets); -1 if unknown.
	EndOffset int64
	// Lag is the number of records not processed yet: EndOffset minus Position, or the
	// broker's answer for a partition nothing was fetched from when the task asked it (see
	// Config.MaxTaskIdle); -1 if unknown.
	Lag int64
	// Buffered is the number of records fetched and waiting in the task's buffer.
	Buffered int
	// Paused says fetching is paused: the buffer is full, or the task restores.
	Paused bool
}

// StandbyTaskStatus is one standby task of this instance.
type StandbyTaskStatus struct {
	ID TaskID
	// Following says the standby follows its changelogs; it does once its local stores
	// were checked against them.
	Following bool
	// Warmup says it is a warm-up replica (Kafka Streams' warm-up task, KIP-441): the
	// group is to move the task here once this copy is within Config.AcceptableRecoveryLag
	// of the changelogs' ends; meanwhile the task runs on its current owner.
	Warmup bool
	Stores []StandbyStoreStatus // sorted by store
}

// StandbyStoreStatus is one store partition of a standby task: Kafka Streams' LagInfo of a
// standby.
type StandbyStoreStatus struct {
	Store     string
	Changelog string
	Partition int32
	// Position is the next changelog offset to apply; EndOffset the changelog's end as last
	// seen (-1 unknown); Lag the records between them (-1 unknown).
	Position, EndOffset, Lag int64
}

// RestoreStatus is one store partition being restored from its changelog, as a
// [RestoreListener] would follow it.
type RestoreStatus struct {
	Task      TaskID
	Store     string
	Changelog string
	Partition int32
	// StartOffset is where restoration started, EndOffset the changelog's end it restores
	// to (measured when it started), Position the next offset to read.
	StartOffset, EndOffset, Position int64
	// Restored counts the records applied so far; Remaining is EndOffset minus Position
	// (offsets: transaction markers and offsets removed by compaction count too).
	Restored, Remaining int64
	Started             time.Time
	// Rate is the offsets restored per second since Started, and ETA the time left at that
	// rate; ETA is -1 while nothing was restored yet.
	Rate float64
	ETA  time.Duration
}

// DeadLetterStatus is one dead-letter record this instance wrote (see [DeadLetterQueue]),
// as its headers describe it.
type DeadLetterStatus struct {
	// Time is when its write was acknowledged.
	Time time.Time
	// Kind is "deserialization", "processing" or "production"; Operator the operator that
	// failed.
	Kind     string
	Operator string
	// Topic, Partition and Offset locate the failed input record (Offset -1 when there was
	// none, as in a punctuator).
	Topic     string
	Partition int32
	Offset    int64
	// Error is the error's text.
	Error string
	// DeadLetterTopic, DeadLetterPartition and DeadLetterOffset locate the dead-letter
	// record.
	DeadLetterTopic     string
	DeadLetterPartition int32
	DeadLetterOffset    int64
}

// Status returns a snapshot of this instance (see [Status]). It is cheap, never waits for
// records being processed, and may be called at any time, before Run too.
func (a *App) Status() Status {
	rs := a.rt.Status()
	s := Status{
		ApplicationID: rs.ApplicationID, State: a.State(), StateSince: rs.StateSince, StateReason: rs.StateReason, Endpoint: rs.Endpoint, MemberID: rs.MemberID,
		Time: rs.At, TasksAsOf: rs.TasksAsOf, LoopHeartbeat: rs.LoopHeartbeat,
		DeadLettersTotal: rs.DeadLettersN, ProcessedRecords: rs.Processed, Stats: a.statsOf(rs.Stats),
		Active: make([]TaskStatus, len(rs.Active)), Standby: make([]StandbyTaskStatus, len(rs.Standby)),
		Restores: make([]RestoreStatus, len(rs.Restores)), DeadLetters: make([]DeadLetterStatus, len(rs.DeadLetters)),
	}
	for i, t := range rs.Active {
		ts := TaskStatus{ID: TaskID(t.ID), Restoring: t.Restoring, ProcessedRecords: t.Processed, Partitions: make([]PartitionStatus, len(t.Partitions))}
		for j, p := range t.Partitions {
			ts.Partitions[j] = PartitionStatus{Topic: p.Topic, Partition: p.Partition, Position: p.Position, Committed: p.Committed,
				EndOffset: p.End, Lag: p.Lag, Buffered: p.Buffered, Paused: p.Paused}
		}
		s.Active[i] = ts
	}
	for i, t := range rs.Standby {
		ss := StandbyTaskStatus{ID: TaskID(t.ID), Following: t.Following, Warmup: t.Warmup, Stores: make([]StandbyStoreStatus, len(t.Stores))}
		for j, st := range t.Stores {
			ss.Stores[j] = StandbyStoreStatus{Store: st.Store, Changelog: st.Changelog, Partition: st.Partition, Position: st.Position, EndOffset: st.End, Lag: st.Lag}
		}
		s.Standby[i] = ss
	}
	for i, r := range rs.Restores {
		s.Restores[i] = RestoreStatus{Task: TaskID(r.Task), Store: r.Store, Changelog: r.Changelog, Partition: r.Partition,
			StartOffset: r.From, EndOffset: r.End, Position: r.Position, Restored: r.Restored, Remaining: r.Remaining,
			Started: r.Started, Rate: r.Rate, ETA: r.ETA}
	}
	for i, d := range rs.DeadLetters {
		s.DeadLetters[i] = DeadLetterStatus(d)
	}
	return s
}

// Health says whether an instance is alive and ready, for liveness and readiness probes
// (package ops serves both over HTTP).
type Health struct {
	// Live is false once a fatal error stopped the instance (state ERROR), or while its
	// poll loop has not begun a turn for longer than Config.StallTimeout. A stopped
	// instance (NOT_RUNNING after Run returned nil) is still live: nothing failed.
	Live bool
	// Ready is true when the instance is RUNNING and every one of its active tasks is
	// restored: it processes all it was assigned.
	Ready bool
	// Reason says why the instance is not live or not ready; empty when it is both.
	Reason string
}

// Health returns whether the instance is live and ready (see [Health]).
func (a *App) Health() Health {
	h := a.rt.Health()
	return Health{Live: h.Live, Ready: h.Ready, Reason: h.Reason}
}
