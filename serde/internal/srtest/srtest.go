// Package srtest runs franz-go's in-memory schema registry (pkg/sr/srfake) for the tests
// of the Schema Registry serdes, with what those tests need on top: a count of the
// requests, an outage (503 answers, or refused connections) that tests end without
// sleeping, the refusal of incompatible schemas, and a clock that does not wait.
package srtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/registry"
)

// Registry is a fake schema registry served on a loopback port.
type Registry struct {
	*srfake.Registry
	t    testing.TB
	addr string

	mu           sync.Mutex
	requests     map[string]int // "GET /schemas/ids/1" -> count
	unavailable  bool
	incompatible map[string]string // subject -> message
	ln           net.Listener
	srv          *http.Server
}

// New starts a fake registry that the test's cleanup stops.
func New(t testing.TB, opts ...srfake.Option) *Registry {
	t.Helper()
	r := &Registry{
		Registry:     srfake.NewRegistry(opts...),
		t:            t,
		requests:     make(map[string]int),
		incompatible: make(map[string]string),
	}
	r.Intercept(r.intercept)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.srv != nil {
			r.srv.Close()
		}
	})
	return r
}

func (r *Registry) serve(ln net.Listener) {
	r.ln = ln
	r.srv = &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln) //nolint:errcheck // ends with Close
}

// URL returns the registry's base URL.
func (r *Registry) URL() string { return "http://" + r.addr }

func (r *Registry) intercept(w http.ResponseWriter, req *http.Request) bool {
	r.mu.Lock()
	r.requests[req.Method+" "+req.URL.Path]++
	unavailable := r.unavailable
	var refuse string
	var refused bool
	if req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/subjects/") && strings.HasSuffix(req.URL.Path, "/versions") {
		subject := strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/subjects/"), "/versions")
		refuse, refused = r.incompatible[subject]
	}
	r.mu.Unlock()
	switch {
	case unavailable:
		writeError(w, http.StatusServiceUnavailable, 50003, "registry is restarting")
		return true
	case refused:
		writeError(w, http.StatusConflict, 409, refuse)
		return true
	}
	return false
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

// Requests returns how many requests of method for path the registry got.
func (r *Registry) Requests(method, path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[method+" "+path]
}

// TotalRequests returns how many requests the registry got.
func (r *Registry) TotalRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.requests {
		n += c
	}
	return n
}

// SetUnavailable makes the registry answer every request with 503, or stop doing so.
func (r *Registry) SetUnavailable(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavailable = down
}

// Disconnect closes the registry's listener: connections to it are refused until
// Reconnect.
func (r *Registry) Disconnect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv.Close()
	r.srv = nil
}

// Reconnect listens again on the registry's address.
func (r *Registry) Reconnect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Errorf("srtest: listen again on %s: %v", r.addr, err)
		return
	}
	r.serve(ln)
}

// RefuseIncompatible makes the registry refuse every registration under subject with 409
// and message, as Confluent's registry refuses a schema incompatible with earlier versions.
func (r *Registry) RefuseIncompatible(subject, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.incompatible[subject] = message
}

// Seed registers schema under subject and returns its id.
func (r *Registry) Seed(subject string, schema sr.Schema) int {
	r.t.Helper()
	id, _, err := r.RegisterSchema(subject, schema)
	if err != nil {
		r.t.Fatalf("srtest: seed %s: %v", subject, err)
	}
	return id
}

// Client returns a registry client of r, with cfg's other settings, that the test's
// cleanup closes. Its logs go to the test log.
func (r *Registry) Client(cfg registry.Config) *registry.Client {
	r.t.Helper()
	if len(cfg.URLs) == 0 {
		cfg.URLs = []string{r.URL()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{r.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c, err := registry.NewClient(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(c.Close)
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Clock is a registry.Clock that does not wait: Sleep advances Now by its duration at once
// and calls OnSleep, if set, with the number of sleeps so far.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  int
	slept   []time.Duration
	OnSleep func(n int)
}

// NewClock returns a Clock at a fixed time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep advances the clock by d.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.sleeps++
	c.slept = append(c.slept, d)
	n, f := c.sleeps, c.OnSleep
	c.mu.Unlock()
	if f != nil {
		f(n)
	}
	return nil
}

// Slept returns the durations slept so far.
func (c *Clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// WantError fails the test unless err wraps want, is a *registry.Error naming subject and
// schema id, and does not wrap registry.ErrRegistryUnavailable.
func WantError(t testing.TB, err, want error, subject string, id int) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Errorf("error %q does not wrap %q", err, want)
	}
	if errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Errorf("error %q wraps ErrRegistryUnavailable", err)
	}
	var re *registry.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %q is no *registry.Error", err)
	}
	if re.Subject != subject || re.SchemaID != id {
		t.Errorf("error names subject %q and schema id %d, want %q and %d", re.Subject, re.SchemaID, subject, id)
	}
	msg := err.Error()
	if subject != "" && !strings.Contains(msg, fmt.Sprintf("%q", subject)) {
		t.Errorf("error %q does not name subject %q", msg, subject)
	}
	if id != 0 && !strings.Contains(msg, fmt.Sprintf("schema id %d", id)) {
		t.Errorf("error %q does not name schema id %d", msg, id)
	}
}
