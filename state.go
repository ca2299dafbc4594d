package kstream

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/upgrade"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StoreOption configures a state store created by an operator ([Count], [Aggregate],
// [Reduce], [Table], [Materialized]...) or declared for the Processor API ([KeyValueStore],
// [WindowStore], [SessionStore]...). [Named] is a StoreOption too: it names the operator of
// an aggregation. Each option's doc says where it applies; a misplaced one is a Build error.
type StoreOption interface{ applyStore(*storeDef) }

// storeOpt is a StoreOption named name (for misplaced-option errors).
type storeOpt struct {
	name string
	f    func(*storeDef)
}

func (o storeOpt) applyStore(d *storeDef) { o.f(d); d.used = append(d.used, o.name) }

// applyStoreOpts applies opts to d, skipping nil ones.
func applyStoreOpts(d *storeDef, opts []StoreOption) {
	for _, o := range opts {
		if o != nil {
			o.applyStore(d)
		}
	}
}

// restrictedStoreOptions are the store options that apply to some stores only, with the
// stores they apply to (for the error naming a misplaced one). A store definition lists
// those it takes in storeDef.accepts.
var restrictedStoreOptions = map[string]string{
	"Named":            "the aggregations (Count, Reduce, Aggregate and their windowed, session, cogroup and table forms) and ToTable",
	"RetainDuplicates": "WindowStore",
	"WithRetention":    "the windowed and session aggregations",
}

// checkOptions reports the restricted options given to d that it does not take, and d's
// own definition error, if any.
func (b *Builder) checkStoreOptions(d *storeDef) {
	if d.checked {
		return
	}
	d.checked = true
	if d.err != nil {
		b.errorf("%w", d.err)
	}
	for _, u := range d.used {
		where, restricted := restrictedStoreOptions[u]
		if restricted && !slices.Contains(d.accepts, u) {
			b.errorf("store %q: option %s does not apply to it; it applies to %s", d.name, u, where)
		}
	}
}

// InMemory keeps the store in memory instead of the default persistent Pebble store. It is
// still restored from its changelog on restart.
func InMemory() StoreOption {
	return storeOpt{"InMemory", func(d *storeDef) { d.persistent = false }}
}

// WithoutCaching disables the store's record cache (Config.CacheMaxBytes): every update of
// the table is forwarded, as Kafka Streams' Materialized.withCachingDisabled does.
func WithoutCaching() StoreOption {
	return storeOpt{"WithoutCaching", func(d *storeDef) { d.noCache = true }}
}

// WithoutChangelog disables the changelog of a store: it is not restored after a restart or
// on another instance. This corresponds to Kafka Streams' withLoggingDisabled.
func WithoutChangelog() StoreOption {
	return storeOpt{"WithoutChangelog", func(d *storeDef) { d.logged = false }}
}

// WithChangelogConfig enables the store's changelog (undoing an earlier [WithoutChangelog])
// and sets topic configs of its changelog topic, as Kafka Streams'
// Materialized.withLoggingEnabled(config) does: they are passed to the topic's creation
// over kstream's defaults (cleanup.policy=compact for key-value stores;
// cleanup.policy=compact,delete and retention.ms of the retention plus a day for window and
// session stores), so a key given here replaces the default. Example:
// WithChangelogConfig(map[string]string{"min.insync.replicas": "2", "segment.bytes": "67108864"}).
// Like Kafka Streams, kstream creates a changelog topic that does not exist and leaves the
// configs of one that exists as they are. A table read from a topic ([Table]) uses that
// topic as its changelog and ignores this option. Repeated, the last one wins.
func WithChangelogConfig(configs map[string]string) StoreOption {
	c := maps.Clone(configs)
	return storeOpt{"WithChangelogConfig", func(d *storeDef) { d.logged, d.changelogConfig = true, c }}
}

// storeDef is a store of the topology.
type storeDef struct {
	name       string
	persistent bool
	logged     bool
	// changelogConfig holds the changelog topic's configs given by [WithChangelogConfig],
	// over the defaults.
	changelogConfig map[string]string
	noCache         bool // WithoutCaching
	noReadCache     bool // no read cache in its write buffer (runtime.StoreSpec.NoReadCache)
	users           []*node
	// sourceTopic is the topic of a source table: its changelog, never written by us.
	sourceTopic string
	// timestamped stores keep a timestamp with each value (the stores of KTables); see
	// runtime.StoreSpec.Timestamped for the format.
	timestamped bool
	// typed wraps a backend in the store's typed view.
	typed func(b store.Backend) any
	// key and value are the store's serdes (serde.Serde[K] and [V]) as its typed view uses
	// them, bound to its changelog topic (storeSerde); binds bind them, called when the
	// application is built.
	key, value any
	binds      []func(topic string)
	// checks prepare the store's serdes at start, once bound (startChecks).
	checks []startCheck
	// global marks a global table's store; accept builds its record filter (decoding and
	// the deserialization handler) for the runtime.
	global bool
	accept func(h *handlers) func(env runtime.TaskEnv, rec *kgo.Record) (bool, error)
	// extractor is the timestamp extractor of a table's source topic
	// (TableTimestampExtractor); extractorSet says the option was given, which applies to
	// Table only.
	extractor    TimestampExtractor
	extractorSet bool
	// retention is the retention period of a window or session store ([WithRetention]);
	// codec relates such a store's keys to its changelog's (runtime.StoreSpec.Codec).
	retention    time.Duration
	retentionSet bool
	codec        store.ChangelogCodec
	// versioned asks for a versioned store with historyRetention ([Versioned]).
	versioned        bool
	historyRetention time.Duration
	// query tells interactive queries the store's kind and serdes; nil for stores that
	// cannot be queried (internal ones).
	query *queryCodec
	// opName is the operator name given by [Named] among the store's options (used by the
	// aggregations, which take it); retainDups is [RetainDuplicates]'s.
	opName     string
	retainDups bool
	// used names the options applied, accepts the restricted ones (restrictedStoreOptions)
	// the store takes, err an error in its definition; addStore reports them, once
	// (checked).
	used    []string
	accepts []string
	err     error
	checked bool
	// window is the window definition of a windowed aggregation's or a join's store, and
	// keyID and valueID identify serdes that key and value do not hold (a store whose typed
	// view wraps them), for the topology's fingerprint (Topology.Fingerprint).
	window         *upgrade.WindowDef
	keyID, valueID string
}

// StoreBuilder declares a state store for [Process]; create one with [KeyValueStore],
// [VersionedKeyValueStore], [WindowStore] or [SessionStore].
type StoreBuilder interface {
	def() *storeDef
}

type storeBuilder struct{ d *storeDef }

func (s storeBuilder) def() *storeDef { return s.d }

// KeyValueStore declares a typed key-value store named name for the Processor API: pass it
// to [Process] with [WithStores], and reach it in the processor with [GetKeyValueStore].
// The store is persistent (Pebble, under Config.StateDir) and logged to the compacted topic
// "<application.id>-<name>-changelog" unless options say otherwise.
func KeyValueStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StoreOption) StoreBuilder {
	d := &storeDef{name: name, persistent: true, logged: true}
	applyStoreOpts(d, opts)
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.typed = func(b store.Backend) any { return store.NewKeyValueStore(name, b, ks, vs) }
	d.query = newQueryCodec(KeyValueKind, ks, vs, false)
	return storeBuilder{d}
}

// WithStores connects stores to a [Process] operator.
func WithStores(stores ...StoreBuilder) Option {
	return optFunc{"WithStores", func(c *opConfig) {
		for _, s := range stores {
			c.stores = append(c.stores, s.def())
		}
	}}
}

// addStore registers d as used by n.
func (b *Builder) addStore(d *storeDef, n *node) {
	if d.name == "" {
		b.errorf("operator %s: a store needs a name", n.name)
		return
	}
	if prev, ok := b.stores[d.name]; ok {
		if prev != d {
			b.errorf("store name %q is used by two different stores", d.name)
			return
		}
	} else {
		b.stores[d.name] = d
		b.storeOrder = append(b.storeOrder, d)
	}
	b.checkStoreOptions(d)
	d.users = append(d.users, n)
	n.stores = append(n.stores, d)
	if d.extractorSet && (d.sourceTopic == "" || d.global) {
		b.errorf("store %q: option TableTimestampExtractor applies to Table only", d.name)
		d.extractorSet = false // reported once
	}
}

// GetKeyValueStore returns the typed store named name, which must have been connected to the
// processor with [WithStores] (with the same key and value types).
func GetKeyValueStore[K, V any](ctx interface {
	Store(name string) (any, error)
}, name string) (*store.KeyValueStore[K, V], error) {
	s, err := ctx.Store(name)
	if err != nil {
		return nil, err
	}
	kv, ok := s.(*store.KeyValueStore[K, V])
	if !ok {
		return nil, fmt.Errorf("kstream: store %q is a %T, not a KeyValueStore of these key and value types", name, s)
	}
	return kv, nil
}
