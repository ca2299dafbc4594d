package runtime

import (
	"context"
	"runtime/pprof"
	"strconv"
)

// The pprof labels of processing: while a task processes records or punctuates, its
// goroutine carries the labels task (Kafka Streams' task id, "<sub-topology>_<partition>")
// and subtopology, so that a CPU profile splits by task (go tool pprof -tagfocus
// task=0_1, or -tags to list them). The kstream package adds an operator label around
// each operator when Config.ProfileOperators is set. The labels are set once per task
// turn (two pointer stores), not per record.
const (
	LabelTask        = "task"
	LabelSubTopology = "subtopology"
	LabelOperator    = "operator"
)

// TaskLabels returns ctx (nil: context.Background()) with the pprof labels of task id
// added.
func TaskLabels(ctx context.Context, id TaskID) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return pprof.WithLabels(ctx, pprof.Labels(LabelTask, id.String(), LabelSubTopology, strconv.Itoa(id.SubTopology)))
}
