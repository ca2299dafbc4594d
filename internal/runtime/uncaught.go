package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The uncaught-error policy, Kafka Streams' StreamsUncaughtExceptionHandler. A fatal error
// (r.fail) raised while the instance processes (after it has started, before it shuts down)
// is handled by the action Config.OnUncaught returns for it:
//
//   - UncaughtStop (SHUTDOWN_CLIENT, the default): Run cancels its context, shuts down and
//     returns the error.
//   - UncaughtRestart (REPLACE_THREAD): only the poll loop stops; Run closes the tasks
//     without committing (as after a fence, fence.go), leaves the group, waits
//     Config.RestartBackoff and joins again with a new consumer; the stores stay open and
//     keep their state. More than Config.MaxRestarts restarts within Config.RestartWindow
//     stop the instance with the error.
//   - UncaughtShutdownApplication (SHUTDOWN_APPLICATION): the tasks close the same way and
//     the instance joins again with a shutdown request in its join metadata
//     (memberUserData.Shutdown); the leader that sees one assigns nothing and puts the
//     request in every member's assignment (assignmentUserData.Shutdown), and every member
//     that receives it, this one included, stops with an ApplicationShutdownError.
//
// Errors before the loop runs (the start) and errors of the global stores' consumer under
// UncaughtRestart stop the instance: there is nothing to restart (Kafka Streams likewise
// shuts the client down when the global thread fails with REPLACE_THREAD).

// UncaughtAction is what the runtime does on a fatal error while processing.
type UncaughtAction int

const (
	// UncaughtStop stops this instance: Run returns the error.
	UncaughtStop UncaughtAction = iota
	// UncaughtShutdownApplication stops every instance of the application, through the
	// group.
	UncaughtShutdownApplication
	// UncaughtRestart restarts this instance's processing after a backoff.
	UncaughtRestart
)

// Defaults of the restart bound.
const (
	defaultRestartBackoff = time.Second
	defaultMaxRestarts    = 5
	defaultRestartWindow  = 10 * time.Minute
)

// ErrApplicationShutdown is wrapped by the error every instance of an application stops with
// when one of them asked the group to shut the application down
// (UncaughtShutdownApplication).
var ErrApplicationShutdown = errors.New("kstream: application shut down")

// shutdownRequest is the request to shut the application down that travels through the
// group: from the failing member's join metadata to every member's assignment.
type shutdownRequest struct {
	// Instance names the instance that asked: its client id, and its application server
	// endpoint if it has one.
	Instance string `json:"i"`
	// Cause is the text of the error that made it ask.
	Cause string `json:"c"`
}

// ApplicationShutdownError is the error Run returns when the application was shut down at
// an instance's request. It wraps ErrApplicationShutdown and, on the instance that asked,
// the error that made it ask.
type ApplicationShutdownError struct {
	App string
	// Instance names the instance that asked; Cause is its error's text.
	Instance, Cause string
	// Err is the error itself on the instance that asked, nil on the others.
	Err error
}

func (e *ApplicationShutdownError) Error() string {
	return fmt.Sprintf("kstream: application %q shut down (ShutdownApplication) at the request of instance %s, which failed with: %s", e.App, e.Instance, e.Cause)
}

// Unwrap returns ErrApplicationShutdown and the cause when known.
func (e *ApplicationShutdownError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrApplicationShutdown, e.Err}
	}
	return []error{ErrApplicationShutdown}
}

// uncaught holds the policy's state.
type uncaught struct {
	// processing is set while the poll loop runs: only errors raised then go through the
	// policy.
	processing bool
	// action is the action chosen for the current fatal error; stopLoop cancels the
	// current loop's context.
	action   UncaughtAction
	stopLoop context.CancelFunc
	// restarts are the times of the recent restarts (UncaughtRestart's bound).
	restarts []time.Time
	// request is this instance's shutdown request once it made one; cause its error.
	request *shutdownRequest
	cause   error
	// shutdown is the error of the shutdown an assignment asked for (shutdownRequested).
	shutdown *ApplicationShutdownError
}

// failAs records the first fatal error and stops the loop, or the whole Run, as the
// uncaught-error policy says. global is set for errors of the global stores' consumer.
func (r *Runtime) failAs(err error, global bool) {
	r.fatalMu.Lock()
	first := r.fatalErr == nil
	processing := r.unc.processing && r.unc.request == nil && r.unc.shutdown == nil
	r.fatalMu.Unlock()
	action := UncaughtStop
	if first && processing && r.cfg.OnUncaught != nil {
		// Outside fatalMu: the callback may look at the instance (its state, its status).
		action = r.cfg.OnUncaught(err)
		if action == UncaughtRestart && global {
			action = UncaughtStop
		}
	}
	r.fatalMu.Lock()
	stop := r.stop
	if r.fatalErr == nil {
		r.fatalErr = err
		r.unc.action = action
		r.log.Error("kstream: fatal error", "app", r.cfg.ApplicationID, "err", err, "policy", action.String())
	}
	if r.unc.action != UncaughtStop && r.unc.stopLoop != nil {
		stop = r.unc.stopLoop
	}
	r.fatalMu.Unlock()
	if stop != nil {
		stop()
	}
}

func (a UncaughtAction) String() string {
	switch a {
	case UncaughtStop:
		return "stop"
	case UncaughtShutdownApplication:
		return "shutdown-application"
	case UncaughtRestart:
		return "restart"
	}
	return fmt.Sprintf("UncaughtAction(%d)", int(a))
}

// loopContext returns the context of one run of the poll loop: a fatal error handled by
// UncaughtRestart or UncaughtShutdownApplication cancels it, not Run's.
func (r *Runtime) loopContext(runCtx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(runCtx)
	r.fatalMu.Lock()
	r.unc.processing = true
	r.unc.stopLoop = cancel
	r.fatalMu.Unlock()
	return ctx, cancel
}

// loopEnded notes that the poll loop is not running; it returns the fatal error and the
// action chosen for it.
func (r *Runtime) loopEnded() (error, UncaughtAction) {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	r.unc.processing = false
	r.unc.stopLoop = nil
	return r.fatalErr, r.unc.action
}

// recoverFrom handles the fatal error err of the loop that ended by action (not
// UncaughtStop): it closes the tasks, and joins the group again, after the backoff
// (UncaughtRestart) or with a shutdown request (UncaughtShutdownApplication). An error
// returned stops the instance.
func (r *Runtime) recoverFrom(ctx context.Context, err error, action UncaughtAction) error {
	switch action {
	case UncaughtRestart:
		backoff, maxN, window := r.cfg.RestartBackoff, r.cfg.MaxRestarts, r.cfg.RestartWindow
		if backoff <= 0 {
			backoff = defaultRestartBackoff
		}
		if maxN == 0 {
			maxN = defaultMaxRestarts
		}
		if window <= 0 {
			window = defaultRestartWindow
		}
		now := time.Now()
		kept := r.unc.restarts[:0]
		for _, at := range r.unc.restarts {
			if now.Sub(at) < window {
				kept = append(kept, at)
			}
		}
		r.unc.restarts = append(kept, now)
		if maxN > 0 && len(r.unc.restarts) > maxN {
			return fmt.Errorf("kstream: gave up restarting (Config.MaxRestarts: %d restarts within %s): %w", maxN, window, err)
		}
		r.stats.restarts.Add(1)
		r.log.Error("kstream: restarting processing after a fatal error (UncaughtErrorPolicy RestartProcessing)", "app", r.cfg.ApplicationID,
			"err", err, "backoff", backoff, "restarts_recently", len(r.unc.restarts))
		r.closeForRejoin(fmt.Sprintf("restarting after a fatal error (in %s): %v", backoff, err))
		select {
		case <-ctx.Done():
			// Stopped meanwhile: Run shuts down cleanly.
			r.fatalMu.Lock()
			r.fatalErr, r.unc.action = nil, UncaughtStop
			r.fatalMu.Unlock()
			return nil
		case <-time.After(backoff):
		}
	case UncaughtShutdownApplication:
		req := &shutdownRequest{Instance: r.instanceName(), Cause: err.Error()}
		r.log.Error("kstream: asking every instance of the application to shut down (UncaughtErrorPolicy ShutdownApplication)", "app", r.cfg.ApplicationID, "err", err)
		r.closeForRejoin(fmt.Sprintf("asking the group to shut the application down after a fatal error: %v", err))
		r.fatalMu.Lock()
		r.unc.request, r.unc.cause = req, err
		r.fatalMu.Unlock()
	default:
		return err
	}
	r.fatalMu.Lock()
	r.fatalErr, r.unc.action = nil, UncaughtStop
	r.fatalMu.Unlock()
	return r.reopenConsumer(ctx)
}

// instanceName names this instance in a shutdown request.
func (r *Runtime) instanceName() string {
	name := fmt.Sprintf("%q", r.clientID)
	if r.cfg.ApplicationServer != "" {
		name += fmt.Sprintf(" (endpoint %s)", r.cfg.ApplicationServer)
	}
	return name
}

// shutdownRequest returns this instance's shutdown request, nil if it made none; the group
// membership puts it in the join metadata.
func (r *Runtime) shutdownRequest() *shutdownRequest {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	return r.unc.request
}

// shutdownRequested is told that the group's assignment carries a shutdown request. The
// instance stops as when its context is cancelled (committing what it processed, as Kafka
// Streams' members do on SHUTDOWN_REQUESTED), and Run returns an ApplicationShutdownError
// (appShutdown).
func (r *Runtime) shutdownRequested(req shutdownRequest) {
	r.fatalMu.Lock()
	if r.unc.shutdown == nil {
		e := &ApplicationShutdownError{App: r.cfg.ApplicationID, Instance: req.Instance, Cause: req.Cause}
		if own := r.unc.request; own != nil && *own == req {
			e.Err = r.unc.cause
		}
		r.unc.shutdown = e
		r.log.Error("kstream: shutting down at an instance's request (UncaughtErrorPolicy ShutdownApplication)", "app", r.cfg.ApplicationID, "err", e)
	}
	stop := r.stop
	r.fatalMu.Unlock()
	if stop != nil {
		stop()
	}
}

// appShutdown returns the error of a shutdown the group asked for, nil if none.
func (r *Runtime) appShutdown() error {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	if r.unc.shutdown == nil {
		return nil
	}
	if r.fatalErr == nil {
		r.fatalErr = r.unc.shutdown // StateInfo's reason
	}
	return r.unc.shutdown
}

// rejoinForShutdown asks the group for a rebalance (from a goroutine: it is called on the
// group's goroutine, which the loop may be waiting for while it holds r.mu).
func (r *Runtime) rejoinForShutdown() {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.mu.Lock()
		cl := r.consumer
		r.mu.Unlock()
		if cl != nil {
			r.member.probe(cl, "this instance asks the group to shut the application down")
		}
	}()
}
