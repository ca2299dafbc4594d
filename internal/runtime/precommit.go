package runtime

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync"
)

// Context implements TaskEnv: the context of Run, done when the instance shuts down (or a
// fatal error stops it).
func (r *Runtime) Context() context.Context {
	if r.restoreCtx == nil {
		return context.Background()
	}
	return r.restoreCtx
}

// ErrUnfinished, wrapped in an error of Task.PreCommit, says that work the commit must
// cover did not finish within the part of the commit's time the task gave it (an async
// operator's calls, package kstream): as ctx's own error, the commit does not happen, and
// the application goes on.
var ErrUnfinished = errors.New("kstream: work the commit must cover did not finish in time")

// periodicKey marks the context of the loop's periodic at-least-once commits.
type periodicKey struct{}

// PeriodicCommit reports whether ctx, given to Task.PreCommit, is that of a periodic
// at-least-once commit (every CommitInterval), not of a revocation's, a shutdown's or an
// exactly-once one. A task with async operators need not finish its calls for it: the
// commit holds the offsets back below them (Async.HeldOffsets).
func PeriodicCommit(ctx context.Context) bool {
	v, _ := ctx.Value(periodicKey{}).(bool)
	return v
}

// Wake implements TaskEnv: a task has finished async calls to take back (Async), so the
// loop's poll is cut short and the loop launches a turn of the task (processLocked).
func (r *Runtime) Wake() { r.kick.kick() }

// preCommitLocked has every running task finish the work its commit must cover
// (Task.PreCommit: a batch sink's pending batch), before commitLocked or commitTxnLocked
// commits the processed offsets. Tasks run in parallel, each on its own goroutine with its
// pprof labels, as in a turn of the loop, so that slow bulk writes of several tasks overlap.
//
// It returns the first error. An error that is not ctx's (nor ErrUnfinished) also stops
// the application (r.fail): the task's error handler decided that the failure is fatal. A
// ctx error only means this commit cannot happen now.
func (r *Runtime) preCommitLocked(ctx context.Context) error {
	var tasks []*taskRun
	for _, t := range r.tasks {
		if t.task != nil {
			tasks = append(tasks, t)
		}
	}
	errs := make([]error, len(tasks))
	run := func(i int) {
		t := tasks[i]
		pprof.SetGoroutineLabels(t.labels)
		defer pprof.SetGoroutineLabels(t.base)
		errs[i] = t.task.PreCommit(ctx)
	}
	if len(tasks) == 1 {
		run(0)
	} else {
		var wg sync.WaitGroup
		for i := range tasks {
			wg.Go(func() { run(i) })
		}
		wg.Wait()
	}
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if cerr := ctx.Err(); (cerr == nil || !errors.Is(err, cerr)) && !errors.Is(err, ErrUnfinished) {
			r.fail(err)
		}
		if first == nil {
			first = err
		}
	}
	return first
}
