package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Config says how to reach a schema registry. Only URLs is required; every other zero value
// means the documented default.
type Config struct {
	// URLs are the registry's base URLs, such as "https://registry:8081". A request that
	// cannot reach one URL goes to the next.
	URLs []string
	// Username and Password, if Username is set, authenticate every request with HTTP basic
	// authentication (Confluent's basic.auth.user.info).
	Username, Password string
	// BearerToken, if set, authenticates every request with "Authorization: Bearer <token>"
	// (Confluent's bearer.auth.token).
	BearerToken string
	// TLS, if set, is the TLS configuration of the connections to the registry: its root
	// CAs, and a client certificate for mutual TLS.
	TLS *tls.Config
	// HTTPClient, if set, is the HTTP client of the requests, overriding the default client
	// with a 5s timeout per request. TLS, if set too, is applied to its transport, which
	// must then be an *http.Transport without custom dial functions.
	HTTPClient *http.Client
	// Logger receives the warnings about an unavailable registry, overriding the default
	// slog.Default().
	Logger *slog.Logger
	// Retry is how requests that fail because the registry is unavailable are retried.
	Retry Retry
	// ClientOptions are further options of franz-go's registry client, applied after the
	// ones above (for example sr.UserAgent or sr.DefaultSchemaContext).
	ClientOptions []sr.ClientOpt
}

// Retry says how a request is retried while the registry is unavailable: it cannot be
// reached, or answers 5xx, 408 or 429. The n-th retry waits min(Initial*2^(n-1), Max), give
// or take a fifth at random so that instances do not retry in step.
type Retry struct {
	// Initial is the wait before the first retry, overriding the default 100ms.
	Initial time.Duration
	// Max caps the wait between retries, overriding the default 10s.
	Max time.Duration
	// For bounds how long a request is retried, counted from its first attempt; after that
	// the caller gets an error that wraps ErrRegistryUnavailable. Zero (the default) retries
	// until the request succeeds or the client is closed: a record is never given up
	// because the registry is down.
	For time.Duration
	// Clock, if set, replaces the real clock in the retry loop. Tests use it to run the
	// retry path without waiting.
	Clock Clock
}

// Clock is the time source of the retry loop.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, in which case it returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r Retry) withDefaults() Retry {
	if r.Initial <= 0 {
		r.Initial = 100 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 10 * time.Second
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	if r.Clock == nil {
		r.Clock = realClock{}
	}
	return r
}

// SubjectNameStrategy says how the subject of a serde's schema is named. The names are
// those of Confluent's serdes, so that Go and Java applications share subjects.
type SubjectNameStrategy int

const (
	// TopicName names the subject "<topic>-key" or "<topic>-value": one schema (and its
	// versions) per topic and role. It is the default, as in Confluent's serdes
	// (TopicNameStrategy). A serde with this strategy needs its topic: see
	// serde.TopicBound.
	TopicName SubjectNameStrategy = iota
	// RecordName names the subject after the fully-qualified name of the record (Avro's
	// namespace and name, Protobuf's package and message name, JSON Schema's title), so
	// that several record types can share a topic and a record type several topics
	// (RecordNameStrategy). It needs no topic.
	RecordName
	// TopicRecordName names the subject "<topic>-<fully-qualified record name>"
	// (TopicRecordNameStrategy).
	TopicRecordName
)

// String returns the strategy's name, as Confluent's class name without "Strategy".
func (s SubjectNameStrategy) String() string {
	switch s {
	case TopicName:
		return "TopicName"
	case RecordName:
		return "RecordName"
	case TopicRecordName:
		return "TopicRecordName"
	}
	return fmt.Sprintf("SubjectNameStrategy(%d)", int(s))
}

// NeedsTopic reports whether the strategy names subjects after the topic.
func (s SubjectNameStrategy) NeedsTopic() bool { return s == TopicName || s == TopicRecordName }

// Subject returns the subject that the strategy names for the keys (isKey) or values of
// topic, for a record named recordName (fully qualified). TopicName ignores recordName;
// RecordName ignores topic and isKey. It fails if a name it needs is empty.
func (s SubjectNameStrategy) Subject(topic string, isKey bool, recordName string) (string, error) {
	switch s {
	case TopicName:
		if topic == "" {
			return "", fmt.Errorf("%w: the %v subject name strategy names the subject after it", ErrUnbound, s)
		}
		if isKey {
			return topic + "-key", nil
		}
		return topic + "-value", nil
	case RecordName, TopicRecordName:
		if s == TopicRecordName && topic == "" {
			return "", fmt.Errorf("%w: the %v subject name strategy names the subject after it", ErrUnbound, s)
		}
		if recordName == "" {
			return "", fmt.Errorf("registry: the %v subject name strategy needs a record name, and the schema has none", s)
		}
		if s == RecordName {
			return recordName, nil
		}
		return topic + "-" + recordName, nil
	}
	return "", fmt.Errorf("registry: unknown subject name strategy %d", int(s))
}

// Options say how a serde names its subject and picks the schema it writes with. The zero
// value is Confluent's default: the TopicName strategy, and the serde registers its own
// schema under its subject (or finds it registered) on first use.
type Options struct {
	// Subject is the subject name strategy, TopicName by default.
	Subject SubjectNameStrategy
	// DisableAutoRegister makes the serde look its schema up under its subject instead of
	// registering it (Confluent's auto.register.schemas=false): a schema that is not
	// registered there is an error wrapping ErrNotRegistered.
	DisableAutoRegister bool
	// UseLatestVersion makes the serde write with the latest version of its subject's
	// schema, fetched once per process, instead of its own (Confluent's
	// use.latest.version). It registers nothing. The serde's own schema, if any, remains
	// the one it reads with.
	UseLatestVersion bool
	// SchemaID, if not zero, pins the schema the serde writes with to this id (Confluent's
	// use.schema.id). It registers and looks up nothing but that schema.
	SchemaID int
	// Normalize asks the registry to normalize the schema before registering or looking it
	// up (Confluent's normalize.schemas).
	Normalize bool
	// References are the schemas that the serde's own schema references, each a name (an
	// Avro named type's full name, or a JSON Schema $ref URL), a subject and a version. The
	// Protobuf serde ignores them: it derives its references from the imports of the
	// message's file.
	References []sr.SchemaReference
}

// Validate reports options that contradict each other.
func (o Options) Validate() error {
	var errs []string
	if o.SchemaID < 0 {
		errs = append(errs, fmt.Sprintf("SchemaID %d is negative", o.SchemaID))
	}
	if o.SchemaID != 0 && o.UseLatestVersion {
		errs = append(errs, "SchemaID and UseLatestVersion both pick the schema to write with: set one")
	}
	if o.Subject < TopicName || o.Subject > TopicRecordName {
		errs = append(errs, fmt.Sprintf("unknown subject name strategy %d", int(o.Subject)))
	}
	for _, r := range o.References {
		if r.Name == "" || r.Subject == "" || r.Version <= 0 {
			errs = append(errs, fmt.Sprintf("reference %+v needs a name, a subject and a positive version", r))
		}
	}
	if len(errs) > 0 {
		return errors.New("registry: options: " + strings.Join(errs, "; "))
	}
	return nil
}
