package kstream

import (
	"context"
	"runtime/pprof"

	"github.com/kstream-go/kstream/internal/runtime"
)

// Operator pprof labels (Config.ProfileOperators). The runtime labels a task's goroutine
// with task and subtopology for the whole of its turn; with ProfileOperators, each
// operator's input function is wrapped so that the operator and what it calls run under
// the label operator=<node name>, and its caller's labels come back when it returns (an
// operator forwards to its children from inside its own call, so labels nest like the
// calls). A panic that escapes an operator is recovered by a parent's input, whose
// wrapper then restores the parent's caller's labels.

// labeled wraps the input f of operator n of task t with n's operator label; f itself
// if operator profiling is off.
func labeled[K, V any](t *task, n *node, f func(Record[K, V])) func(Record[K, V]) {
	if t.labels == nil {
		return f
	}
	ctx := operatorLabels(t, n)
	return func(r Record[K, V]) {
		prev := t.labelCur
		t.labelCur = ctx
		pprof.SetGoroutineLabels(ctx)
		f(r)
		t.labelCur = prev
		pprof.SetGoroutineLabels(prev)
	}
}

// labeledSource is labeled for the input of a source.
func labeledSource(t *task, n *node, f sourceFn) sourceFn {
	if t.labels == nil {
		return f
	}
	ctx := operatorLabels(t, n)
	return func(raw *rawRecord) {
		prev := t.labelCur
		t.labelCur = ctx
		pprof.SetGoroutineLabels(ctx)
		f(raw)
		t.labelCur = prev
		pprof.SetGoroutineLabels(prev)
	}
}

func operatorLabels(t *task, n *node) context.Context {
	return pprof.WithLabels(t.labels, pprof.Labels(runtime.LabelOperator, n.name))
}
