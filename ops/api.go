package ops

import (
	"time"

	"github.com/kstream-go/kstream"
)

// The JSON that [Handler] serves. Field names are snake_case and stable: the kstream CLI
// (kstream describe) and scripts read them. Times are RFC 3339 with nanoseconds, durations
// are milliseconds (fields ending in _ms) or seconds (_seconds), task ids are Kafka
// Streams' "<sub-topology>_<partition>" strings, and -1 means unknown in offset and lag
// fields.

// Describe is the body of GET <base>/api/describe: the application, its topology, every
// instance of its group (from the last rebalance) and this instance's status.
type Describe struct {
	ApplicationID string `json:"application_id"`
	// State is this instance's state: CREATED, REBALANCING, RUNNING, PENDING_SHUTDOWN,
	// NOT_RUNNING or ERROR.
	State    string   `json:"state"`
	Topology Topology `json:"topology"`
	// Instances lists every instance of the application as of the last rebalance, sorted
	// by endpoint (empty before this instance joined its group): App.Metadata.
	Instances []Instance `json:"instances"`
	// Local is this instance's status, as GET <base>/api/status serves it.
	Local Status `json:"local"`
}

// Topology is the application's topology: the text of Topology.Describe (Kafka Streams'
// TopologyDescription.toString) and its graph.
type Topology struct {
	Text          string        `json:"text"`
	Subtopologies []Subtopology `json:"subtopologies"`
}

// Subtopology is one sub-topology and its graph.
type Subtopology struct {
	// ID is the sub-topology's number: its tasks are "<id>_<partition>".
	ID int `json:"id"`
	// GlobalStore names the store of a global table's sub-topology, which has no tasks;
	// absent otherwise.
	GlobalStore string `json:"global_store,omitempty"`
	// Nodes are the sources, processors and sinks, in Describe's order, then the stores.
	Nodes []Node `json:"nodes"`
	// Edges are the record flows between nodes (kind "flow", from a node to its successor)
	// and the uses of stores (kind "store", from a processor to its store).
	Edges []Edge `json:"edges"`
}

// Node is one node of a sub-topology's graph.
type Node struct {
	// Name is the node's name (a store's name for a store). A store may have the same name
	// as a processor: the pair (kind, name) is unique, and edges say which one they mean
	// by their kind.
	Name string `json:"name"`
	// Kind is "source", "processor", "sink" or "store".
	Kind string `json:"kind"`
	// Topics are a source's topics.
	Topics []string `json:"topics,omitempty"`
	// Topic is a sink's fixed topic; Extractor describes the topic name extractor of a sink
	// without one.
	Topic     string `json:"topic,omitempty"`
	Extractor string `json:"extractor,omitempty"`
	// Stores are a processor's stores.
	Stores []string `json:"stores,omitempty"`
}

// Edge is one edge of a sub-topology's graph. From is a source or processor name; To is a
// processor or sink name (kind "flow") or a store name (kind "store").
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// Instance is one instance of the application: Kafka Streams' StreamsMetadata.
type Instance struct {
	// Endpoint is its Config.ApplicationServer ("" if it has none).
	Endpoint string `json:"endpoint"`
	MemberID string `json:"member_id"`
	// Self marks the instance that served the response.
	Self bool `json:"self"`
	// Active and Standby are its task ids, sorted.
	Active  []string `json:"active"`
	Standby []string `json:"standby"`
	// Stores and StandbyStores are the queryable stores of those tasks, sorted.
	Stores        []string `json:"stores"`
	StandbyStores []string `json:"standby_stores"`
}

// Status is the body of GET <base>/api/status: kstream.Status of this instance, with its
// health.
type Status struct {
	ApplicationID string `json:"application_id"`
	State         string `json:"state"`
	// StateSince is when the state began; StateReason why the instance is in it when it
	// is not RUNNING (a start step, the rebalance it waits for, restoring tasks, an error).
	StateSince  time.Time `json:"state_since,omitzero"`
	StateReason string    `json:"state_reason,omitempty"`
	Endpoint    string    `json:"endpoint"`
	MemberID    string    `json:"member_id"`
	// Time is when the status was taken; TasksAsOf when its active tasks were.
	Time      time.Time `json:"time"`
	TasksAsOf time.Time `json:"tasks_as_of,omitzero"`
	// LoopHeartbeat is when the poll loop last began a turn; absent when no loop runs.
	LoopHeartbeat time.Time     `json:"loop_heartbeat,omitzero"`
	Health        Health        `json:"health"`
	Active        []Task        `json:"active"`
	Standby       []StandbyTask `json:"standby"`
	Restores      []Restore     `json:"restores"`
	// DeadLetters are the last dead-letter records written (at most 100), oldest first.
	DeadLetters      []DeadLetter `json:"dead_letters"`
	DeadLettersTotal int          `json:"dead_letters_total"`
	// ProcessedRecords counts the records processed since the instance started.
	ProcessedRecords int64 `json:"processed_records"`
	Stats            Stats `json:"stats"`
	// Losses are the records the operators dropped and the final results they lost, by
	// operator and reason (kstream.Stats.Losses), since the instance started.
	Losses []Loss `json:"losses"`
	// Async are the async operators' counters (kstream.Stats.Async), all tasks of the
	// instance together.
	Async []AsyncOperator `json:"async"`
}

// AsyncOperator is what an async operator (kstream.MapValuesAsync, FlatMapValuesAsync) of
// the instance does (see kstream.AsyncOperatorStats): the calls running now, the records
// it holds, the calls, retries and failures since start, and the call latency and queue
// wait (time from a record's arrival to its first call) in milliseconds.
type AsyncOperator struct {
	Operator       string  `json:"operator"`
	InFlight       int64   `json:"in_flight"`
	Held           int64   `json:"held"`
	Calls          int64   `json:"calls"`
	Retries        int64   `json:"retries"`
	Failures       int64   `json:"failures"`
	CallLatencyAvg float64 `json:"call_latency_avg_ms"`
	CallLatencyP99 float64 `json:"call_latency_p99_ms"`
	QueueWaitAvg   float64 `json:"queue_wait_avg_ms"`
	QueueWaitP99   float64 `json:"queue_wait_p99_ms"`
}

// Loss is what one operator lost for one reason (see kstream.OperatorLoss): Kind is
// "dropped_records" (input records dropped, as late or for a null key or value, or skipped
// by an error handler: the reasons skipped_*_error) or
// "lost_results" (final results never emitted: windows that expired before they closed).
type Loss struct {
	Operator string `json:"operator"`
	Kind     string `json:"kind"`
	Reason   string `json:"reason"`
	Count    int64  `json:"count"`
}

// Task is one active task.
type Task struct {
	ID               string      `json:"id"`
	Restoring        bool        `json:"restoring"`
	ProcessedRecords int64       `json:"processed_records"`
	Partitions       []Partition `json:"partitions"`
}

// Partition is one input partition of an active task (see kstream.PartitionStatus).
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Position  int64  `json:"position"`
	Committed int64  `json:"committed"`
	EndOffset int64  `json:"end_offset"`
	Lag       int64  `json:"lag"`
	Buffered  int    `json:"buffered"`
	Paused    bool   `json:"paused"`
}

// StandbyTask is one standby task.
type StandbyTask struct {
	ID        string `json:"id"`
	Following bool   `json:"following"`
	// Warmup marks a warm-up replica: the task moves here once it caught up.
	Warmup bool           `json:"warmup"`
	Stores []StandbyStore `json:"stores"`
}

// StandbyStore is one store partition of a standby task.
type StandbyStore struct {
	Store     string `json:"store"`
	Changelog string `json:"changelog"`
	Partition int32  `json:"partition"`
	Position  int64  `json:"position"`
	EndOffset int64  `json:"end_offset"`
	Lag       int64  `json:"lag"`
}

// Restore is one store partition being restored (see kstream.RestoreStatus).
type Restore struct {
	Task        string    `json:"task"`
	Store       string    `json:"store"`
	Changelog   string    `json:"changelog"`
	Partition   int32     `json:"partition"`
	StartOffset int64     `json:"start_offset"`
	EndOffset   int64     `json:"end_offset"`
	Position    int64     `json:"position"`
	Restored    int64     `json:"restored"`
	Remaining   int64     `json:"remaining"`
	Started     time.Time `json:"started"`
	// RatePerSecond is in offsets per second; ETASeconds is -1 while unknown.
	RatePerSecond float64 `json:"rate_per_second"`
	ETASeconds    float64 `json:"eta_seconds"`
}

// DeadLetter is one dead-letter record written (see kstream.DeadLetterStatus).
type DeadLetter struct {
	Time                time.Time `json:"time"`
	Kind                string    `json:"kind"`
	Operator            string    `json:"operator"`
	Topic               string    `json:"topic"`
	Partition           int32     `json:"partition"`
	Offset              int64     `json:"offset"`
	Error               string    `json:"error"`
	DeadLetterTopic     string    `json:"dead_letter_topic"`
	DeadLetterPartition int32     `json:"dead_letter_partition"`
	DeadLetterOffset    int64     `json:"dead_letter_offset"`
}

// Stats are kstream.Stats: commit figures, latencies in milliseconds.
type Stats struct {
	Commits               int64   `json:"commits"`
	TransactionsAborted   int64   `json:"transactions_aborted"`
	CommitLatencyAvgMs    float64 `json:"commit_latency_avg_ms"`
	CommitLatencyP99Ms    float64 `json:"commit_latency_p99_ms"`
	CommitLatencyMaxMs    float64 `json:"commit_latency_max_ms"`
	LastCommitLatencyMs   float64 `json:"last_commit_latency_ms"`
	ExactlyOnce           bool    `json:"exactly_once"`
	TransactionalID       string  `json:"transactional_id,omitempty"`
	RecordsInLastCommit   int64   `json:"records_in_last_commit"`
	ChangelogRecordsTotal int64   `json:"changelog_records_total"`
	ProducerFences        int64   `json:"producer_fences"`
	DroppedRecords        int64   `json:"dropped_records"`
	EnforcedProcessing    int64   `json:"enforced_processing"`
	LostResults           int64   `json:"lost_results"`
	// ExpiringChangelogRecords is kstream.Stats.ExpiringChangelogRecords.
	ExpiringChangelogRecords int64 `json:"expiring_changelog_records"`
}

// Health is the body of the health endpoints (kstream.Health, with the state).
type Health struct {
	Live   bool   `json:"live"`
	Ready  bool   `json:"ready"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// DescribeOf returns what GET <base>/api/describe serves for app.
func DescribeOf(app *kstream.App) Describe {
	d := Describe{
		ApplicationID: "",
		State:         app.State().String(),
		Topology:      topologyOf(app.Topology()),
		Instances:     []Instance{},
		Local:         StatusOf(app),
	}
	d.ApplicationID = d.Local.ApplicationID
	for _, m := range app.Metadata() {
		d.Instances = append(d.Instances, Instance{
			Endpoint: m.Host, MemberID: m.MemberID, Self: m.Self,
			Active: taskIDs(m.Active), Standby: taskIDs(m.Standby),
			Stores: nonNil(m.Stores), StandbyStores: nonNil(m.StandbyStores),
		})
	}
	return d
}

func topologyOf(t *kstream.Topology) Topology {
	out := Topology{Text: t.Describe(), Subtopologies: []Subtopology{}}
	for _, sd := range t.Description().Subtopologies {
		sub := Subtopology{ID: sd.ID, GlobalStore: sd.GlobalStore, Nodes: []Node{}, Edges: []Edge{}}
		seen := map[string]bool{}
		var stores []string
		for _, n := range sd.Nodes {
			sub.Nodes = append(sub.Nodes, Node{Name: n.Name, Kind: string(n.Kind), Topics: n.Topics, Topic: n.Topic, Extractor: n.Extractor, Stores: n.Stores})
			for _, s := range n.Successors {
				sub.Edges = append(sub.Edges, Edge{From: n.Name, To: s, Kind: "flow"})
			}
			for _, s := range n.Stores {
				sub.Edges = append(sub.Edges, Edge{From: n.Name, To: s, Kind: "store"})
				if !seen[s] {
					seen[s] = true
					stores = append(stores, s)
				}
			}
		}
		for _, s := range stores {
			sub.Nodes = append(sub.Nodes, Node{Name: s, Kind: "store"})
		}
		out.Subtopologies = append(out.Subtopologies, sub)
	}
	return out
}

// StatusOf returns what GET <base>/api/status serves for app.
func StatusOf(app *kstream.App) Status {
	s := app.Status()
	h := app.Health()
	out := Status{
		ApplicationID: s.ApplicationID, State: s.State.String(), StateSince: s.StateSince, StateReason: s.StateReason,
		Endpoint: s.Endpoint, MemberID: s.MemberID, Time: s.Time, TasksAsOf: s.TasksAsOf, LoopHeartbeat: s.LoopHeartbeat,
		Health:           Health{Live: h.Live, Ready: h.Ready, State: s.State.String(), Reason: h.Reason},
		Active:           []Task{},
		Standby:          []StandbyTask{},
		Restores:         []Restore{},
		DeadLetters:      []DeadLetter{},
		DeadLettersTotal: s.DeadLettersTotal, ProcessedRecords: s.ProcessedRecords,
		Stats: Stats{
			Commits: s.Stats.Commits, TransactionsAborted: s.Stats.TransactionsAborted,
			CommitLatencyAvgMs: ms(s.Stats.CommitLatencyAvg), CommitLatencyP99Ms: ms(s.Stats.CommitLatencyP99),
			CommitLatencyMaxMs: ms(s.Stats.CommitLatencyMax), LastCommitLatencyMs: ms(s.Stats.LastCommitLatency),
			ExactlyOnce: s.Stats.ExactlyOnce, TransactionalID: s.Stats.TransactionalID,
			RecordsInLastCommit: s.Stats.RecordsInLastCommit, ChangelogRecordsTotal: s.Stats.ChangelogRecordsTotal,
			ProducerFences: s.Stats.ProducerFences, DroppedRecords: s.Stats.DroppedRecords, EnforcedProcessing: s.Stats.EnforcedProcessing,
			LostResults: s.Stats.LostResults, ExpiringChangelogRecords: s.Stats.ExpiringChangelogRecords,
		},
		Losses: []Loss{},
		Async:  []AsyncOperator{},
	}
	for _, a := range s.Stats.Async {
		out.Async = append(out.Async, AsyncOperator{Operator: a.Operator, InFlight: a.InFlight, Held: a.Held, Calls: a.Calls,
			Retries: a.Retries, Failures: a.Failures, CallLatencyAvg: ms(a.CallLatencyAvg), CallLatencyP99: ms(a.CallLatencyP99),
			QueueWaitAvg: ms(a.QueueWaitAvg), QueueWaitP99: ms(a.QueueWaitP99)})
	}
	for _, l := range s.Stats.Losses {
		kind := "dropped_records"
		if l.LostResults {
			kind = "lost_results"
		}
		out.Losses = append(out.Losses, Loss{Operator: l.Operator, Kind: kind, Reason: l.Reason, Count: l.Count})
	}
	for _, t := range s.Active {
		task := Task{ID: t.ID.String(), Restoring: t.Restoring, ProcessedRecords: t.ProcessedRecords, Partitions: []Partition{}}
		for _, p := range t.Partitions {
			task.Partitions = append(task.Partitions, Partition{Topic: p.Topic, Partition: p.Partition, Position: p.Position,
				Committed: p.Committed, EndOffset: p.EndOffset, Lag: p.Lag, Buffered: p.Buffered, Paused: p.Paused})
		}
		out.Active = append(out.Active, task)
	}
	for _, t := range s.Standby {
		st := StandbyTask{ID: t.ID.String(), Following: t.Following, Warmup: t.Warmup, Stores: []StandbyStore{}}
		for _, x := range t.Stores {
			st.Stores = append(st.Stores, StandbyStore{Store: x.Store, Changelog: x.Changelog, Partition: x.Partition, Position: x.Position, EndOffset: x.EndOffset, Lag: x.Lag})
		}
		out.Standby = append(out.Standby, st)
	}
	for _, r := range s.Restores {
		eta := -1.0
		if r.ETA >= 0 {
			eta = r.ETA.Seconds()
		}
		out.Restores = append(out.Restores, Restore{Task: r.Task.String(), Store: r.Store, Changelog: r.Changelog, Partition: r.Partition,
			StartOffset: r.StartOffset, EndOffset: r.EndOffset, Position: r.Position, Restored: r.Restored, Remaining: r.Remaining,
			Started: r.Started, RatePerSecond: r.Rate, ETASeconds: eta})
	}
	for _, d := range s.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, DeadLetter{Time: d.Time, Kind: d.Kind, Operator: d.Operator, Topic: d.Topic,
			Partition: d.Partition, Offset: d.Offset, Error: d.Error, DeadLetterTopic: d.DeadLetterTopic,
			DeadLetterPartition: d.DeadLetterPartition, DeadLetterOffset: d.DeadLetterOffset})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func taskIDs(ids []kstream.TaskID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
