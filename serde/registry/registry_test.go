package registry_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

const userSchema = `{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"name","type":"string"}]}`

func TestHeader(t *testing.T) {
	b := registry.AppendHeader([]byte("x"), 0x01020304)
	if want := []byte{'x', 0, 1, 2, 3, 4}; !bytes.Equal(b, want) {
		t.Errorf("AppendHeader = % x, want % x", b, want)
	}
	// The same bytes as franz-go's framing.
	fz, _ := new(sr.ConfluentHeader).AppendEncode(nil, 0x01020304, nil)
	if !bytes.Equal(b[1:], fz) {
		t.Errorf("AppendHeader % x, franz-go % x", b[1:], fz)
	}
	id, rest, err := registry.SplitHeader([]byte{0, 0, 0, 1, 0, 9, 8})
	if id != 256 || !bytes.Equal(rest, []byte{9, 8}) || err != nil {
		t.Errorf("SplitHeader = %d, % x, %v", id, rest, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 1}, {1, 0, 0, 0, 1}, {0, 0, 0, 0, 0}, {0, 0x80, 0, 0, 0}} {
		if _, _, err := registry.SplitHeader(bad); !errors.Is(err, registry.ErrNoMagicByte) {
			t.Errorf("SplitHeader(% x): %v, want ErrNoMagicByte", bad, err)
		}
	}
}

func TestSubjectNameStrategies(t *testing.T) {
	for _, tc := range []struct {
		s     registry.SubjectNameStrategy
		topic string
		isKey bool
		want  string
	}{
		{registry.TopicName, "orders", true, "orders-key"},
		{registry.TopicName, "orders", false, "orders-value"},
		{registry.RecordName, "orders", true, "com.acme.Order"},
		{registry.RecordName, "", false, "com.acme.Order"},
		{registry.TopicRecordName, "orders", true, "orders-com.acme.Order"},
		{registry.TopicRecordName, "orders", false, "orders-com.acme.Order"},
	} {
		if got, err := tc.s.Subject(tc.topic, tc.isKey, "com.acme.Order"); got != tc.want || err != nil {
			t.Errorf("%v.Subject(%q, %v) = %q, %v; want %q", tc.s, tc.topic, tc.isKey, got, err, tc.want)
		}
	}
	for _, s := range []registry.SubjectNameStrategy{registry.TopicName, registry.TopicRecordName} {
		if _, err := s.Subject("", false, "x"); !errors.Is(err, registry.ErrUnbound) {
			t.Errorf("%v without a topic: %v, want ErrUnbound", s, err)
		}
	}
	if _, err := registry.RecordName.Subject("t", false, ""); err == nil {
		t.Error("RecordName without a record name: no error")
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (registry.Options{}).Validate(); err != nil {
		t.Error(err)
	}
	for _, o := range []registry.Options{
		{SchemaID: -1},
		{SchemaID: 3, UseLatestVersion: true},
		{Subject: 7},
		{References: []sr.SchemaReference{{Name: "a"}}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestCachesOneRequestEach(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	schema := sr.Schema{Schema: userSchema}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			id, err := c.Register(t.Context(), "u-value", schema, false)
			if err != nil {
				t.Error(err)
			}
			if _, err := c.SchemaByID(t.Context(), id); err != nil {
				t.Error(err)
			}
			if _, err := c.SchemaByVersion(t.Context(), "u-value", 1); err != nil {
				t.Error(err)
			}
			if _, err := c.LatestSchema(t.Context(), "u-value"); err != nil {
				t.Error(err)
			}
			if _, err := c.Lookup(t.Context(), "u-value", schema, false); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, r := range []struct{ method, path string }{
		{"POST", "/subjects/u-value/versions"},
		{"GET", "/subjects/u-value/versions/1"},
		{"GET", "/subjects/u-value/versions/latest"},
		{"POST", "/subjects/u-value"},
	} {
		if n := reg.Requests(r.method, r.path); n != 1 {
			t.Errorf("%s %s: %d requests, want 1", r.method, r.path, n)
		}
	}
	// The id of a registered schema is known without asking.
	if n := reg.Requests("GET", "/schemas/ids/1"); n != 0 {
		t.Errorf("GET /schemas/ids/1: %d requests, want 0", n)
	}
	// An unknown id is not cached: it may be registered later.
	for range 2 {
		if _, err := c.SchemaByID(t.Context(), 77); !errors.Is(err, registry.ErrUnknownSchemaID) {
			t.Errorf("unknown id: %v", err)
		}
	}
	if n := reg.Requests("GET", "/schemas/ids/77"); n != 2 {
		t.Errorf("unknown id asked %d times, want 2", n)
	}
}

func TestBasicAuth(t *testing.T) {
	reg := srtest.New(t, srfake.WithAuth("Basic "+base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))))
	c := reg.Client(registry.Config{Username: "alice", Password: "s3cret"})
	if _, err := c.Register(t.Context(), "u-value", sr.Schema{Schema: userSchema}, false); err != nil {
		t.Fatal(err)
	}
	wrong := reg.Client(registry.Config{Username: "alice", Password: "guess"})
	_, err := wrong.SchemaByID(t.Context(), 1)
	if !errors.Is(err, registry.ErrRegistryRefused) || errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Errorf("wrong password: %v, want ErrRegistryRefused", err)
	}
	if !strings.Contains(err.Error(), "403") {
		t.Errorf("wrong password: %v does not give the status", err)
	}
}

func TestBearerToken(t *testing.T) {
	var got string
	reg := srtest.New(t, srfake.WithAuth("Bearer tok-123"))
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool { got = r.Header.Get("Authorization"); return false })
	c := reg.Client(registry.Config{BearerToken: "tok-123"})
	if _, err := c.Register(t.Context(), "u-value", sr.Schema{Schema: userSchema}, false); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer tok-123" {
		t.Errorf("Authorization %q", got)
	}
	none := reg.Client(registry.Config{})
	if _, err := none.SchemaByID(t.Context(), 1); !errors.Is(err, registry.ErrRegistryRefused) || !strings.Contains(err.Error(), "401") {
		t.Errorf("no token: %v, want a 401 refusal", err)
	}
	if _, err := registry.NewClient(registry.Config{URLs: []string{"http://x"}, Username: "a", BearerToken: "b"}); err == nil {
		t.Error("NewClient accepted basic auth and a bearer token")
	}
}

func TestTLS(t *testing.T) {
	fake := srfake.NewRegistry()
	srv := httptest.NewTLSServer(fake.Handler())
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	c, err := registry.NewClient(registry.Config{URLs: []string{srv.URL}, TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Register(t.Context(), "u-value", sr.Schema{Schema: userSchema}, false); err != nil {
		t.Fatal(err)
	}

	// With its own roots only.
	c2, _ := registry.NewClient(registry.Config{URLs: []string{srv.URL}, TLS: tlsConfig(pool)})
	defer c2.Close()
	if _, err := c2.SchemaByID(t.Context(), 1); err != nil {
		t.Fatal(err)
	}

	// A client that does not trust the server's certificate never gets through: that is
	// retried as weather, within its bound.
	c3, _ := registry.NewClient(registry.Config{URLs: []string{srv.URL}, Retry: registry.Retry{Clock: srtest.NewClock(), For: time.Second}})
	defer c3.Close()
	if _, err := c3.SchemaByID(t.Context(), 1); !errors.Is(err, registry.ErrRegistryUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

func TestRetriesOnlyWeather(t *testing.T) {
	for _, tc := range []struct {
		status int
		retry  bool
	}{
		{500, true}, {502, true}, {503, true}, {504, true}, {429, true}, {408, true},
		{400, false}, {401, false}, {403, false}, {422, false},
	} {
		reg := srtest.New(t)
		calls := 0
		reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			calls++
			if calls > 2 {
				return false
			}
			w.WriteHeader(tc.status)
			fmt.Fprintf(w, `{"error_code":%d,"message":"nope"}`, tc.status)
			return true
		})
		clock := srtest.NewClock()
		c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
		_, err := c.Register(t.Context(), "u-value", sr.Schema{Schema: userSchema}, false)
		if tc.retry {
			if err != nil || len(clock.Slept()) != 2 {
				t.Errorf("%d: %v after %d retries; want success after 2", tc.status, err, len(clock.Slept()))
			}
			continue
		}
		if err == nil || errors.Is(err, registry.ErrRegistryUnavailable) || len(clock.Slept()) != 0 {
			t.Errorf("%d: %v after %d retries; want a refusal at once", tc.status, err, len(clock.Slept()))
		}
	}
}

func TestErrorMessage(t *testing.T) {
	err := &registry.Error{Format: "avro", Op: "deserialize", Subject: "orders-value", SchemaID: 7, Err: registry.ErrCorrupt}
	if got, want := err.Error(), `serde: avro: deserialize (subject "orders-value", schema id 7): payload does not decode`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, registry.ErrCorrupt) {
		t.Error("does not unwrap")
	}
	err = &registry.Error{Format: "protobuf", Op: "deserialize", Err: registry.ErrNoMagicByte}
	if got := err.Error(); !strings.Contains(got, "(subject none, schema id none)") {
		t.Errorf("Error() = %q", got)
	}
}

func tlsConfig(pool *x509.CertPool) *tls.Config { return &tls.Config{RootCAs: pool} }

// A registration refused with 409 (TestRetriesOnlyWeather leaves the code out) is looked up
// and tried again, a few times: Apicurio's compatibility API answers 409 "already exists"
// to the second of two concurrent creates of a new subject, before the first one's version
// can be looked up. Registered after all: its id. Refused by the first try only: the second
// try's id. Refused every time: ErrIncompatible after three tries, as Confluent's registry
// refuses a schema incompatible with the subject's versions.
func TestRegisterConflict(t *testing.T) {
	schema := sr.Schema{Schema: userSchema}
	t.Run("registered-after-all", func(t *testing.T) {
		reg := srtest.New(t)
		want := reg.Seed("u-value", schema)
		reg.RefuseIncompatible("u-value", "An artifact with ID 'u-value' in group 'null' already exists.")
		clock := srtest.NewClock()
		c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
		id, err := c.Register(t.Context(), "u-value", schema, false)
		if err != nil || id != want || len(clock.Slept()) != 0 {
			t.Fatalf("Register: id %d, %v, %d waits; want %d at once", id, err, len(clock.Slept()), want)
		}
	})
	t.Run("first-try-only", func(t *testing.T) {
		reg := srtest.New(t)
		refusals := 0
		reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost || r.URL.Path != "/subjects/u-value/versions" || refusals > 0 {
				return false
			}
			refusals++
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error_code":409,"message":"An artifact with ID 'u-value' in group 'null' already exists."}`)
			return true
		})
		clock := srtest.NewClock()
		c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
		id, err := c.Register(t.Context(), "u-value", schema, false)
		if err != nil || id <= 0 || len(clock.Slept()) != 1 {
			t.Fatalf("Register: id %d, %v, %d waits; want an id after one wait", id, err, len(clock.Slept()))
		}
	})
	t.Run("refused", func(t *testing.T) {
		reg := srtest.New(t)
		reg.RefuseIncompatible("u-value", "Schema being registered is incompatible with an earlier schema")
		clock := srtest.NewClock()
		c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
		_, err := c.Register(t.Context(), "u-value", schema, false)
		if !errors.Is(err, registry.ErrIncompatible) || !strings.Contains(err.Error(), "incompatible with an earlier schema") {
			t.Errorf("Register: %v, want ErrIncompatible with the registry's message", err)
		}
		if n, m := reg.Requests("POST", "/subjects/u-value/versions"), reg.Requests("POST", "/subjects/u-value"); n != 3 || m != 3 || len(clock.Slept()) != 2 {
			t.Errorf("%d registrations, %d lookups, %d waits; want 3, 3, 2", n, m, len(clock.Slept()))
		}
	})
}
