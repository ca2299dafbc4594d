package registry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
)

// ErrRegistryUnavailable is wrapped by the errors of requests that failed because the
// registry could not be reached or answered 5xx, 408 or 429, once the retries that
// [Retry.For] allows are spent or the client is closed. It is weather, not bad input: a
// runtime that sees it should retry the record or stop, never drop it or dead-letter it.
// It matches [serde.ErrUnavailable] (with errors.Is), which kstream's runtime acts on.
var ErrRegistryUnavailable error = unavailable{}

type unavailable struct{}

func (unavailable) Error() string { return "schema registry unavailable" }

// Is makes ErrRegistryUnavailable match serde.ErrUnavailable.
func (unavailable) Is(target error) bool { return target == serde.ErrUnavailable }

// The errors below are wrapped by the serdes' errors, which [errors.Is] tells apart.
var (
	// ErrNoMagicByte: the payload does not start with the Confluent wire format's header
	// (the magic byte 0 and a 4-byte schema id), or is too short to hold it.
	ErrNoMagicByte = errors.New("payload does not start with the magic byte 0 and a 4-byte schema id")
	// ErrUnknownSchemaID: the payload's schema id is not known to the registry.
	ErrUnknownSchemaID = errors.New("schema id unknown to the registry")
	// ErrCorrupt: the payload does not decode with its schema, or its schema cannot be
	// read as the serde's own.
	ErrCorrupt = errors.New("payload does not decode")
	// ErrInvalidValue: the value to serialize does not fit the schema.
	ErrInvalidValue = errors.New("value does not fit the schema")
	// ErrUnbound: the serde needs a topic to name its subject and has none; bind it with
	// ForTopic (serde.TopicBound), or use the RecordName strategy.
	ErrUnbound = errors.New("serde used without a topic")
	// ErrNotRegistered: with auto-registration off, the serde's schema is not registered
	// under its subject (or the subject does not exist).
	ErrNotRegistered = errors.New("schema not registered under the subject")
	// ErrIncompatible: the registry refused to register the schema as incompatible with the
	// subject's earlier versions. The error carries the registry's message.
	ErrIncompatible = errors.New("the registry refused the schema as incompatible")
	// ErrRegistryRefused: the registry answered a request with another client error (4xx),
	// such as 401 or 403 for bad credentials, or 422 for an invalid schema. The error
	// carries the registry's answer as an *sr.ResponseError.
	ErrRegistryRefused = errors.New("the registry refused the request")
)

// Error is the error of a serde: what it was doing, the subject and the schema id involved
// when they are known, and the cause, which wraps one of this package's sentinels.
// The runtime adds the topic, partition and offset of the record.
type Error struct {
	// Format is the serde's format: "avro", "protobuf" or "json schema".
	Format string
	// Op is what the serde was doing: "serialize", "deserialize" or "check".
	Op string
	// Subject is the subject of the serde's schema, or "" if the serde has none (an unbound
	// serde with a topic-naming strategy, reading).
	Subject string
	// SchemaID is the schema id of the payload or of the schema being written, or 0 if
	// none is known (a payload without the header; a schema not registered).
	SchemaID int
	// Err is the cause.
	Err error
}

// Error returns "serde: <format>: <op> (subject "<subject>", schema id <id>): <cause>".
func (e *Error) Error() string {
	subject := "none"
	if e.Subject != "" {
		subject = strconv.Quote(e.Subject)
	}
	id := "none"
	if e.SchemaID != 0 {
		id = strconv.Itoa(e.SchemaID)
	}
	return fmt.Sprintf("serde: %s: %s (subject %s, schema id %s): %v", e.Format, e.Op, subject, id, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// transient reports whether err is weather: the registry could not be reached or answered
// 5xx, 408 or 429.
func transient(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests ||
			re.StatusCode == http.StatusRequestTimeout
	}
	return true // transport errors, truncated or garbled answers
}

// notFound reports whether err is the registry's 404.
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// conflict reports whether err is the registry's 409.
func conflict(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}

// refused wraps a registry's 4xx answer.
func refused(err error) error {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	if re.StatusCode == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
	return fmt.Errorf("%w (HTTP %d, error code %d): %w", ErrRegistryRefused, re.StatusCode, re.ErrorCode, err)
}
