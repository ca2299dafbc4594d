package kstream

import "github.com/kstream-go/kstream/internal/runtime"

// Metrics: Config.Metrics turns them on; docs/metrics.md lists them. The typed side of the
// runtime reports here what only it knows: why an operator dropped a record, and the
// records that error handlers skipped or sent to a dead-letter topic.

// taskMetrics returns the metrics of task id from its environment, nil without
// Config.Metrics (or in the test driver).
func taskMetrics(env runtime.TaskEnv, id runtime.TaskID) *runtime.TaskMetrics {
	if p, ok := env.(interface {
		TaskMetrics(runtime.TaskID) *runtime.TaskMetrics
	}); ok {
		return p.TaskMetrics(id)
	}
	return nil
}

// dropReason is the metric reason of a record dropped for a null why (see dropRecord).
func dropReason(why string) string {
	switch why {
	case "key", "join key", "foreign key":
		return runtime.DropNullKey
	case "value":
		return runtime.DropNullValue
	case "key or value", "join key or value":
		return runtime.DropNullKeyOrValue
	}
	return runtime.DropOther
}

// droppedFor counts a dropped record for reason (a runtime.Drop constant).
func (t *task) droppedFor(reason string) {
	if t.met != nil {
		t.met.Dropped(reason)
	}
}

// skipped counts an input record that an error handler skipped, or sent to a dead-letter
// topic (deadLetter), after an error of kind in operator n: in the task's dropped-records
// metric and in the operator's losses ([Stats].Losses, kept without Config.Metrics too),
// with the reason skipped_<kind>_error. [Stats].DroppedRecords does not count it.
func (t *task) skipped(n *node, kind ErrorKind, deadLetter bool) {
	var reason string
	switch kind {
	case DeserializationError:
		reason = runtime.DropDeserialization
	case ProcessingError:
		reason = runtime.DropProcessing
	case ProductionError:
		reason = runtime.DropProduction
	}
	if reason != "" && n != nil {
		t.lossFor(n, false, reason).n.Add(1)
	}
	if t.met == nil {
		return
	}
	if reason != "" {
		t.met.Dropped(reason)
	}
	if deadLetter {
		t.met.DeadLettered(kind.String())
	}
}

// Reasons of dropped records counted from the operators' files.
const (
	dropExpiredWindow  = runtime.DropExpiredWindow
	dropExpiredHistory = runtime.DropExpiredHistory
	dropStaleResponse  = runtime.DropStaleResponse
	dropOutOfOrder     = runtime.DropOutOfOrder
)
