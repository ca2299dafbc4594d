package embedded

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// SchemaRegistry makes Start also serve a Confluent-compatible Schema Registry API (franz-go's
// in-memory srfake) on 127.0.0.1:port (0 picks a free port), for the registry serdes of
// packages serde/avro, serde/protobuf and serde/jsonschema. Read its URL back with
// [Broker.RegistryURL]. The registry keeps its schemas in memory only, also with a
// [DataDir]: after a restart, schemas are registered again (with new ids) by the first
// serializer that needs them, and records written before cannot be read.
func SchemaRegistry(port int) Option {
	return func(c *config) { c.registry, c.registryPort = true, port }
}

// registry is a running srfake registry served over HTTP.
type registry struct {
	srv  *http.Server
	url  string
	fake *srfake.Registry
	done chan struct{}
}

func startRegistry(port int) (*registry, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("embedded: schema registry on 127.0.0.1:%d: %w", port, err)
	}
	fake := srfake.NewRegistry()
	r := &registry{
		srv:  &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second},
		url:  "http://" + ln.Addr().String(),
		fake: fake,
		done: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		// Serve returns ErrServerClosed after Shutdown; any other error is the listener's,
		// and requests then fail on their own.
		_ = r.srv.Serve(ln)
	}()
	return r, nil
}

func (r *registry) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	<-r.done
	if err != nil {
		return fmt.Errorf("embedded: closing the schema registry: %w", err)
	}
	return nil
}

// RegistryURL returns the URL of the Schema Registry API started with [SchemaRegistry]
// ("http://127.0.0.1:port"), or "" without one.
func (b *Broker) RegistryURL() string {
	if b.registry == nil {
		return ""
	}
	return b.registry.url
}
