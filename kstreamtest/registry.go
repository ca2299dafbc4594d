package kstreamtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/registry"
)

// Registry is an in-memory Confluent Schema Registry for tests of topologies that use the
// Schema Registry serdes (packages serde/avro, serde/protobuf and serde/jsonschema), the
// counterpart of Confluent's "mock://" registry URLs in Java tests. It is franz-go's srfake
// served in process: its [Registry.Client] talks to it without a socket, so a test needs
// neither a port nor a running service.
//
// Give [Registry.Client] to the serdes of the topology and of the test's input and output
// topics: the driver binds them to each topic as an application does, so that they register
// their schemas under the same subjects ("<topic>-value", "<application.id>-<store>-changelog-key",
// ...). [Registry.Subjects] lists the subjects registered so far.
type Registry struct {
	fake   *srfake.Registry
	client *registry.Client
}

// NewRegistry starts an empty in-memory registry. Close it when the test ends.
func NewRegistry() (*Registry, error) {
	fake := srfake.NewRegistry()
	client, err := registry.NewClient(registry.Config{
		// The host is never resolved: the client's transport serves every request in process.
		URLs:       []string{"http://kstreamtest-registry"},
		HTTPClient: &http.Client{Transport: inProcess{fake.Handler()}},
	})
	if err != nil {
		return nil, fmt.Errorf("kstreamtest: in-memory schema registry: %w", err)
	}
	return &Registry{fake: fake, client: client}, nil
}

// Client returns the client to build the registry serdes with.
func (r *Registry) Client() *registry.Client { return r.client }

// Subjects returns the registered subjects, sorted.
func (r *Registry) Subjects() ([]string, error) {
	subjects, err := r.client.SR().Subjects(context.Background())
	if err != nil {
		return nil, fmt.Errorf("kstreamtest: listing the registry's subjects: %w", err)
	}
	slices.Sort(subjects)
	return subjects, nil
}

// Register registers schema under subject, as another application (a Java producer, say)
// would have, and returns its id.
func (r *Registry) Register(subject string, schema sr.Schema) (int, error) {
	id, _, err := r.fake.RegisterSchema(subject, schema)
	if err != nil {
		return 0, fmt.Errorf("kstreamtest: registering a schema under %q: %w", subject, err)
	}
	return id, nil
}

// Close closes the client; the registry's content is dropped with it.
func (r *Registry) Close() { r.client.Close() }

// inProcess is an http.RoundTripper that serves each request with a handler.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
