package kstream

import (
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
)

// observability sets the runtime's metrics and tracing from c (Config.Metrics,
// Config.TracerProvider).
func (c Config) observability(rc *runtime.Config) {
	rc.Metrics = c.Metrics
	if c.TracerProvider == nil {
		return
	}
	prop := c.TracePropagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	rc.Propagator = prop
	rc.Tracer = kotel.NewTracer(kotel.TracerProvider(c.TracerProvider), kotel.TracerPropagator(prop), kotel.ConsumerGroup(c.ApplicationID))
}
