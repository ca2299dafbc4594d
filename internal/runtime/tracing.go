package runtime

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
)

// Tracing (Config.Tracer) goes through franz-go's kotel plugin. The main consumer gets its
// fetch hooks only: each fetched record gets a "receive" span, a child of the span whose
// context its headers carry (its producer's), and processing starts a "process" span under
// it (taskRun.process). The records that processing produces carry the process span's
// context in their headers (injectTrace), so that the next consumer, another sub-topology
// of this application or a downstream service, continues the trace. kotel's produce hooks
// are not installed: they replace a record's Context, which the runtime's produce callback
// needs (OutRecord), and under exactly-once the consumer is the producer too.

// fetchTracing is the consuming half of a kotel.Tracer.
type fetchTracing struct{ t *kotel.Tracer }

var (
	_ kgo.HookFetchRecordBuffered   = fetchTracing{}
	_ kgo.HookFetchRecordUnbuffered = fetchTracing{}
)

// OnFetchRecordBuffered implements kgo.HookFetchRecordBuffered.
func (f fetchTracing) OnFetchRecordBuffered(r *kgo.Record) { f.t.OnFetchRecordBuffered(r) }

// OnFetchRecordUnbuffered implements kgo.HookFetchRecordUnbuffered.
func (f fetchTracing) OnFetchRecordUnbuffered(r *kgo.Record, polled bool) {
	f.t.OnFetchRecordUnbuffered(r, polled)
}

// traceOpts are the main consumer's tracing hooks; nil without Config.Tracer.
func (r *Runtime) traceOpts() []kgo.Opt {
	if r.cfg.Tracer == nil {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(fetchTracing{r.cfg.Tracer})}
}

// injectTrace writes the context of the span of the record whose processing produced o (its
// process span) into o's headers. Changelog records are left as they are.
func (r *Runtime) injectTrace(o *OutRecord) {
	if o.changelog != nil || o.Source == nil || o.Source.Context == nil {
		return
	}
	r.cfg.Propagator.Inject(o.Source.Context, kotel.NewRecordCarrier(&o.Record))
}
