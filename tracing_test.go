package kstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTracing produces records with a traced producer (kotel) and runs an app with
// Config.TracerProvider: each record gets a process span in its producer's trace, under
// the receive span whose parent is the producer's publish span, and the records the app
// produces carry the process span's context in their traceparent header.
func TestTracing(t *testing.T) {
	const n = 3
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())

	producer := kotel.NewKotel(kotel.WithTracer(kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(propagation.TraceContext{}))))
	cl := kafkatest.Client(t, kgo.WithHooks(producer.Hooks()...))
	for i := range n {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
	}

	cfg := testConfig(t)
	cfg.TracerProvider = tp
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.String()), strings.ToUpper).To(out, nil, nil)
	r := start(t, newApp(t, b, cfg))
	outs := kafkatest.Consume(t, out, n, 60*time.Second)

	byName := func(suffix string) map[trace.SpanID]sdktrace.ReadOnlySpan {
		m := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.Name() == in+" "+suffix {
				m[s.SpanContext().SpanID()] = s
			}
		}
		return m
	}
	kafkatest.Eventually(t, 30*time.Second, "3 process spans ended", func() bool { return len(byName("process")) == n })
	publish, receive, process := byName("publish"), byName("receive"), byName("process")
	if len(publish) != n || len(receive) < n {
		t.Fatalf("%d publish and %d receive spans, want %d and at least %d", len(publish), len(receive), n, n)
	}
	traces := map[trace.TraceID]trace.SpanID{} // trace -> process span
	for _, p := range process {
		rcv, ok := receive[p.Parent().SpanID()]
		if !ok {
			t.Fatalf("process span %s: parent %s is not a receive span", p.SpanContext().SpanID(), p.Parent().SpanID())
		}
		pub, ok := publish[rcv.Parent().SpanID()]
		if !ok {
			t.Fatalf("receive span %s: parent %s is not a publish span", rcv.SpanContext().SpanID(), rcv.Parent().SpanID())
		}
		if p.SpanContext().TraceID() != pub.SpanContext().TraceID() {
			t.Errorf("process span in trace %s, its producer's in %s", p.SpanContext().TraceID(), pub.SpanContext().TraceID())
		}
		if p.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("process span kind %v, want consumer", p.SpanKind())
		}
		traces[p.SpanContext().TraceID()] = p.SpanContext().SpanID()
	}
	if len(traces) != n {
		t.Errorf("process spans in %d traces, want %d (one per produced record)", len(traces), n)
	}
	// The outputs continue the traces: their traceparent names the process span.
	for _, o := range outs {
		var tparent string
		for _, h := range o.Headers {
			if h.Key == "traceparent" {
				tparent = string(h.Value)
			}
		}
		parts := strings.Split(tparent, "-")
		if len(parts) != 4 {
			t.Fatalf("output %s: traceparent %q", o.Key, tparent)
		}
		tid, _ := trace.TraceIDFromHex(parts[1])
		sid, _ := trace.SpanIDFromHex(parts[2])
		if want, ok := traces[tid]; !ok || want != sid {
			t.Errorf("output %s: traceparent %q names span %s of trace %s, want the process span %s", o.Key, tparent, sid, tid, want)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
