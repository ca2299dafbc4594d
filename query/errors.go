package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kstream-go/kstream"
)

// Reasons of an [Error], as the JSON error bodies of the server spell them.
const (
	ReasonUnknownStore    = "unknown_store"    // 404: no queryable store of that name
	ReasonNotFound        = "not_found"        // 404: the key is absent
	ReasonBadRequest      = "bad_request"      // 400: a malformed parameter or body
	ReasonUnauthenticated = "unauthenticated"  // 401: the Auth hook refused the request
	ReasonNotRunning      = "not_running"      // 503: the instance is not running
	ReasonNotHosted       = "not_hosted"       // 503: the partition has no (reachable) owner now
	ReasonRestoring       = "restoring"        // 503: the partition's store is restoring
	ReasonRebalancing     = "rebalancing"      // 503: not hosted here while the group rebalances
	ReasonStale           = "stale"            // 503: a standby lags beyond stale_lag
	ReasonPeerUnavailable = "peer_unavailable" // 503: the owning instance could not be reached
	ReasonTimeout         = "timeout"          // 504: the request's time ran out
	ReasonInternal        = "internal"         // 500: anything else
)

// Error is an error answer of the query API: the JSON body
// {"error": Message, "reason": Reason, "retryable": Retryable} with its HTTP status. A
// retryable error (a store restoring, a partition moving in a rebalance, a peer down) may
// succeed if the same request is sent again a little later, at any instance; the server
// then also sets Retry-After. It mirrors Kafka Streams' InvalidStateStoreException family
// on the wire.
type Error struct {
	Status    int    `json:"-"`
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
	Message   string `json:"error"`
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("query: %d %s: %s", e.Status, e.Reason, e.Message)
}

// errorf returns an *Error.
func errorf(status int, reason string, format string, args ...any) *Error {
	return &Error{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...),
		Retryable: status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout}
}

// badRequest is a 400 error.
func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, ReasonBadRequest, format, args...)
}

// toError converts an error of a read to an *Error.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var su *kstream.StoreUnavailableError
	if errors.As(err, &su) {
		reason := ReasonInternal
		switch su.Reason {
		case kstream.UnknownStore:
			return errorf(http.StatusNotFound, ReasonUnknownStore, "%s", err)
		case kstream.NotRunning:
			reason = ReasonNotRunning
		case kstream.NotHosted:
			reason = ReasonNotHosted
		case kstream.Restoring:
			reason = ReasonRestoring
		case kstream.TooStale:
			reason = ReasonStale
		case kstream.Rebalancing:
			reason = ReasonRebalancing
		}
		return errorf(http.StatusServiceUnavailable, reason, "%s", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf(http.StatusGatewayTimeout, ReasonTimeout, "%s", err)
	}
	if errors.Is(err, context.Canceled) {
		return errorf(http.StatusServiceUnavailable, ReasonTimeout, "%s", err)
	}
	return errorf(http.StatusInternalServerError, ReasonInternal, "%s", err)
}

// writeError writes err as a JSON error body.
func writeError(w http.ResponseWriter, err error) {
	e := toError(err)
	if e.Retryable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	writeJSON(w, e.Status, e)
}

// retryAfterSeconds is the Retry-After of retryable errors.
const retryAfterSeconds = 1

// writeJSON writes v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(&Error{Reason: ReasonInternal, Message: fmt.Sprintf("encoding the answer: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
