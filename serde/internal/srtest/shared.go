package srtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/registry"
)

// EnvRegistry names the environment variable that points the tests written with [Open] at
// a real Confluent-compatible registry: its base URL, as Config.URLs takes it (for Apicurio
// Registry, http://host:port/apis/ccompat/v7). testing/registry/registry.sh starts one.
const EnvRegistry = "KSTREAM_TEST_REGISTRY"

// RealURL returns the real registry's URL that EnvRegistry names, or "".
func RealURL() string { return os.Getenv(EnvRegistry) }

// Shared is a registry for the tests that run on a real registry too: the one EnvRegistry
// names, shared by every test of the run (and by earlier runs, if it kept its data), or
// else a fake of the test's own. Such a test names its topics, subjects and record names
// with [Shared.Name] and [Shared.Token], so that they collide with no other test's, and
// asks nothing of the registry but what its HTTP API answers: no request counts, no fixed
// schema ids, no outage of the fake's making.
type Shared struct {
	t     testing.TB
	url   string
	fake  *Registry // nil on a real registry
	admin *sr.Client
	token string
	n     atomic.Int64
}

var runToken = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

var tests atomic.Int64

// Open returns the real registry that EnvRegistry names or, without it, a new fake (see
// [New]) that the test's cleanup stops.
func Open(t testing.TB) *Shared {
	t.Helper()
	s := &Shared{t: t, url: RealURL(), token: fmt.Sprintf("t%s%d", runToken, tests.Add(1))}
	if s.url == "" {
		s.fake = New(t)
		s.url = s.fake.URL()
	}
	admin, err := sr.NewClient(sr.URLs(s.url), sr.HTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = admin
	return s
}

// Real reports whether s is a real registry.
func (s *Shared) Real() bool { return s.fake == nil }

// Fake returns the fake registry, or nil on a real one.
func (s *Shared) Fake() *Registry { return s.fake }

// URL returns the registry's base URL.
func (s *Shared) URL() string { return s.url }

// Token returns a string of letters and digits unique to the test and run, fit for an Avro
// or Protobuf name: "t" then hex.
func (s *Shared) Token() string { return s.token }

// Name returns base with a suffix unique to the test, the run and the call: a topic name
// whose TopicNameStrategy subjects no other test uses.
func (s *Shared) Name(base string) string {
	return fmt.Sprintf("%s-%s-%d", base, s.token, s.n.Add(1))
}

// Client returns a registry client of s, with cfg's other settings, that the test's
// cleanup closes. Its logs go to the test log.
func (s *Shared) Client(cfg registry.Config) *registry.Client {
	s.t.Helper()
	if len(cfg.URLs) == 0 {
		cfg.URLs = []string{s.url}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{s.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c, err := registry.NewClient(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(c.Close)
	return c
}

func (s *Shared) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Seed registers schema under subject through the registry's API (as another process
// would) and returns its id.
func (s *Shared) Seed(subject string, schema sr.Schema) int {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	ss, err := s.admin.CreateSchema(ctx, subject, schema)
	if err != nil {
		s.t.Fatalf("srtest: seed %s: %v", subject, err)
	}
	return ss.ID
}

// SubjectExists reports whether subject has a version, as the registry's API answers.
func (s *Shared) SubjectExists(subject string) bool {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	_, err := s.admin.SubjectVersions(ctx, subject)
	var re *sr.ResponseError
	switch {
	case err == nil:
		return true
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		return false
	}
	s.t.Fatalf("srtest: versions of %s: %v", subject, err)
	return false
}

// Versions returns subject's versions, as the registry's API answers.
func (s *Shared) Versions(subject string) []int {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	vs, err := s.admin.SubjectVersions(ctx, subject)
	if err != nil {
		s.t.Fatalf("srtest: versions of %s: %v", subject, err)
	}
	return vs
}

// Schema returns version of subject, as the registry's API answers.
func (s *Shared) Schema(subject string, version int) sr.SubjectSchema {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	ss, err := s.admin.SchemaByVersion(ctx, subject, version)
	if err != nil {
		s.t.Fatalf("srtest: version %d of %s: %v", version, subject, err)
	}
	return ss
}

// SetCompatibility sets subject's compatibility level, as a test on a real registry must
// to be sure of it (Confluent's default is BACKWARD, Apicurio's NONE). The fake stores the
// level but checks nothing: see [Registry.RefuseIncompatible].
func (s *Shared) SetCompatibility(subject string, level sr.CompatibilityLevel) {
	s.t.Helper()
	ctx, cancel := s.ctx()
	defer cancel()
	for _, r := range s.admin.SetCompatibility(ctx, sr.SetCompatibility{Level: level}, subject) {
		if r.Err != nil {
			s.t.Fatalf("srtest: compatibility of %s: %v", subject, r.Err)
		}
	}
}
