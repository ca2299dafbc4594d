package kstream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// Interactive queries: read the state stores of a running application. Kafka Streams'
// KafkaStreams.store, queryMetadataForKey, metadataForAllStreamsClients and
// allLocalStorePartitionLags. The HTTP layer that routes a query to the instance owning a
// key is package query.
//
// A query reads what a store's engine holds: a store as of its task's last commit (a
// task buffers its writes until then, and they reach Pebble or the memory engine in one
// atomic batch, so a read never sees half a commit), except a memory store without a
// changelog, which is written directly and read as of its last write. Under exactly-once
// only committed state is ever visible. Kafka Streams reads through its record
// cache instead, so it sees writes up to a commit interval sooner; lower
// Config.CommitInterval for fresher reads.

// StoreKind is the kind of a state store, for queries.
type StoreKind int

const (
	// KeyValueKind is a key-value store: tables, aggregations and counts, KeyValueStore.
	KeyValueKind StoreKind = iota + 1
	// WindowKind is a window store: windowed aggregations.
	WindowKind
	// SessionKind is a session store: session-windowed aggregations.
	SessionKind
	// VersionedKind is a versioned key-value store; queries read each key's latest value.
	VersionedKind
)

// String returns "key-value", "window", "session" or "versioned".
func (k StoreKind) String() string {
	switch k {
	case KeyValueKind:
		return "key-value"
	case WindowKind:
		return "window"
	case SessionKind:
		return "session"
	case VersionedKind:
		return "versioned"
	}
	return fmt.Sprintf("StoreKind(%d)", int(k))
}

// queryCodec is what a store definition tells queries: its kind, serdes, and how its keys
// and values render as JSON.
type queryCodec struct {
	kind        StoreKind
	keySerde    any // serde.Serde[K]
	valueSerde  any // serde.Serde[V]
	timestamped bool
	keyFromJSON func([]byte) ([]byte, error)
	keyToJSON   func([]byte) (json.RawMessage, error)
	valueToJSON func([]byte) (json.RawMessage, error)
}

// newQueryCodec returns the query codec of a store of kind with serdes ks and vs; value
// bytes have an 8-byte timestamp prefix when timestamped.
func newQueryCodec[K, V any](kind StoreKind, ks serde.Serde[K], vs serde.Serde[V], timestamped bool) *queryCodec {
	if ks == nil || vs == nil {
		return nil
	}
	return &queryCodec{
		kind: kind, keySerde: typedSerde[K]{ks}, valueSerde: typedSerde[V]{vs}, timestamped: timestamped,
		keyFromJSON: func(b []byte) ([]byte, error) {
			var k K
			if err := json.Unmarshal(b, &k); err != nil {
				return nil, fmt.Errorf("decoding the key %s as JSON: %w", truncate(b), err)
			}
			return ks.Serialize(k)
		},
		keyToJSON: func(b []byte) (json.RawMessage, error) {
			k, err := ks.Deserialize(b)
			if err != nil {
				return nil, err
			}
			return json.Marshal(k)
		},
		valueToJSON: func(b []byte) (json.RawMessage, error) {
			v, err := vs.Deserialize(b)
			if err != nil {
				return nil, err
			}
			return json.Marshal(v)
		},
	}
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q...", b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// StoreInfo describes a queryable store.
type StoreInfo struct {
	Name string
	Kind StoreKind
	// Partitions is the store's partition count (its tasks' input partitions), 0 until the
	// application has started, and 0 for a global store.
	Partitions int32
	// Global marks a global table's store: every instance holds all of it.
	Global bool
}

// QueryableStores lists the stores that can be queried, sorted by name: the stores of
// tables, aggregations, windowed and session aggregations, and Processor API stores.
// Internal stores (join windows, suppression buffers, foreign-key subscriptions) are not.
func (a *App) QueryableStores() []StoreInfo {
	var out []StoreInfo
	for _, d := range a.topo.stores {
		if d.query == nil || !a.rt.HasStore(d.name) {
			continue
		}
		n, _ := a.rt.StorePartitionCount(d.name)
		out = append(out, StoreInfo{Name: d.name, Kind: d.query.kind, Partitions: n, Global: d.global})
	}
	slices.SortFunc(out, func(x, y StoreInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// storeDefOf returns the queryable definition of the store named name.
func (a *App) storeDefOf(name string) (*storeDef, error) {
	for _, d := range a.topo.stores {
		if d.name == name && d.query != nil && a.rt.HasStore(name) {
			return d, nil
		}
	}
	return nil, &StoreUnavailableError{Store: name, Partition: -1, Reason: UnknownStore}
}

// UnavailableReason says why a store partition cannot be queried.
type UnavailableReason int

const (
	// UnknownStore: the topology has no queryable store of that name. Not retryable.
	UnknownStore UnavailableReason = iota + 1
	// NotRunning: the instance is not running (not started yet, or stopped).
	NotRunning
	// NotHosted: the partition is not active here (nor a standby, when stale stores are
	// allowed): ask its owner ([App.KeyMetadata]), or retry after a rebalance.
	NotHosted
	// Restoring: the partition is assigned here but its store is still restoring (or its
	// standby has not caught up with its changelog yet).
	Restoring
	// TooStale: the partition is a standby here whose lag exceeds the bound of
	// [StaleStores].
	TooStale
	// Rebalancing: the partition is not hosted here while the group rebalances (Kafka
	// Streams' StreamsRebalancingException): it may come here, or its owner change, when
	// the rebalance ends.
	Rebalancing
)

// The values above are the runtime's: each line fails to compile if one differs.
var (
	_ = [1]int{}[UnknownStore-UnavailableReason(runtime.QueryUnknownStore)]
	_ = [1]int{}[NotRunning-UnavailableReason(runtime.QueryNotRunning)]
	_ = [1]int{}[NotHosted-UnavailableReason(runtime.QueryNotOwned)]
	_ = [1]int{}[Restoring-UnavailableReason(runtime.QueryRestoring)]
	_ = [1]int{}[TooStale-UnavailableReason(runtime.QueryStale)]
	_ = [1]int{}[Rebalancing-UnavailableReason(runtime.QueryRebalancing)]
)

// String names the reason ("restoring", "unknown store", ...).
func (r UnavailableReason) String() string { return runtime.QueryReason(r).String() }

// ErrStoreUnavailable is matched (with errors.Is) by every [StoreUnavailableError].
var ErrStoreUnavailable = errors.New("kstream: store not available")

// StoreUnavailableError says that a store, or one of its partitions, cannot be queried
// here now, and why: Kafka Streams' InvalidStateStoreException and its subclasses
// (StreamsNotStartedException, StateStoreMigratedException, StateStoreNotAvailableException,
// UnknownStateStoreException).
type StoreUnavailableError struct {
	Store     string
	Partition int32 // -1 when not about one partition
	Reason    UnavailableReason
	Lag       int64 // the standby's lag, for TooStale
	MaxLag    int64 // the bound asked for, for TooStale
}

// Error implements error.
func (e *StoreUnavailableError) Error() string {
	q := runtime.QueryError{Store: e.Store, Partition: e.Partition, Reason: runtime.QueryReason(e.Reason), Lag: e.Lag, MaxLag: e.MaxLag}
	return q.Error()
}

// Is matches [ErrStoreUnavailable].
func (e *StoreUnavailableError) Is(target error) bool { return target == ErrStoreUnavailable }

// Retryable reports whether the same query may succeed later (here or, after a rebalance,
// at the instance that [App.KeyMetadata] names): every reason but UnknownStore.
func (e *StoreUnavailableError) Retryable() bool { return e.Reason != UnknownStore }

// toStoreError converts the runtime's query errors.
func toStoreError(err error) error {
	var q *runtime.QueryError
	if errors.As(err, &q) {
		return &StoreUnavailableError{Store: q.Store, Partition: q.Partition, Reason: UnavailableReason(q.Reason), Lag: q.Lag, MaxLag: q.MaxLag}
	}
	return err
}

// QueryOption adjusts a query.
type QueryOption func(*queryOptions)

type queryOptions struct {
	standby    bool
	maxLag     int64
	partitions []int32
}

// StaleStores lets a query read standby replicas too, when their lag (changelog records
// not yet applied, as last fetched) is at most maxLag; a negative maxLag is no bound. Kafka
// Streams' StoreQueryParameters.enableStaleStores, with the bound that its users check
// by hand against allLocalStorePartitionLags.
func StaleStores(maxLag int64) QueryOption {
	return func(o *queryOptions) { o.standby, o.maxLag = true, maxLag }
}

// QueryPartitions restricts a query to the given partitions: a range or full scan reads
// only them (and fails if one is not available here), Kafka Streams'
// StoreQueryParameters.withPartition. By default a scan reads every partition hosted here.
// With exactly one partition, a key lookup (a get, a window or session fetch) reads that
// partition too, as Java's does, instead of the key's partition by the default
// partitioner: the way to read a store partitioned by a [Partitioner] (see
// [KeyMetadataWith]).
func QueryPartitions(ps ...int32) QueryOption {
	return func(o *queryOptions) { o.partitions = append(o.partitions, ps...) }
}

// KeyMetadata locates a key: Kafka Streams' KeyQueryMetadata.
type KeyMetadata struct {
	Store     string
	Partition int32
	// Active is the ApplicationServer of the instance running the key's partition, "" if
	// that instance has none or the partition is unassigned.
	Active string
	// ActiveMember is the group member id of that instance.
	ActiveMember string
	// Standbys are the ApplicationServers of the instances keeping standby replicas.
	Standbys []string
}

// RawKey is a key already serialized with its store's key serde, for [App.KeyMetadata].
type RawKey []byte

// KeyMetadata returns the partition of key in the store named name, and the instances
// that host it as of the last rebalance. key is a value of the store's key type, serialized
// with the store's key serde, or a [RawKey]. The partition is the one the Java producer
// (and franz-go's default partitioner) chooses for the serialized key: murmur2, as Kafka
// Streams' default StreamPartitioner.
func (a *App) KeyMetadata(name string, key any) (KeyMetadata, error) {
	d, err := a.storeDefOf(name)
	if err != nil {
		return KeyMetadata{}, err
	}
	kb, err := serializeKeyAny(d.query, key)
	if err != nil {
		return KeyMetadata{}, fmt.Errorf("kstream: key metadata of store %q: %w", name, err)
	}
	if d.global {
		// Every instance holds all of a global store: this one answers.
		return KeyMetadata{Store: name, Partition: runtime.GlobalDataPartition, Active: a.rt.ApplicationServer(), ActiveMember: a.rt.MemberID()}, nil
	}
	n, ok := a.rt.StorePartitionCount(name)
	if !ok {
		return KeyMetadata{}, &StoreUnavailableError{Store: name, Partition: -1, Reason: NotRunning}
	}
	return a.keyMetadataAt(name, partition.ForKey(kb, n)), nil
}

// KeyMetadataWith is [App.KeyMetadata] for a store whose input is partitioned by p (a
// topic written with [WithPartitioner], or a [KStream.Repartition] with it): Kafka
// Streams' KafkaStreams.queryMetadataForKey(store, key, partitioner). key is a K or a
// [RawKey] (deserialized with the store's key serde). p is called, as Java calls it, with
// the store's input topic of the most partitions, key, the zero value and that topic's
// partition count; it must choose one partition or [DefaultPartition] (the murmur2 hash of
// the serialized key), else KeyMetadataWith fails. For a global store p is not called.
func KeyMetadataWith[K, V any](a *App, name string, key any, p Partitioner[K, V]) (KeyMetadata, error) {
	if p == nil {
		return a.KeyMetadata(name, key)
	}
	d, err := a.storeDefOf(name)
	if err != nil {
		return KeyMetadata{}, err
	}
	if d.global {
		return a.KeyMetadata(name, key)
	}
	var k K
	switch v := key.(type) {
	case K:
		k = v
	case RawKey:
		ks, ok := d.query.keySerde.(typedSerde[K])
		if !ok {
			return KeyMetadata{}, fmt.Errorf("kstream: key metadata of store %q: the partitioner's key type %T is not the store's", name, k)
		}
		if k, err = ks.Deserialize(v); err != nil {
			return KeyMetadata{}, fmt.Errorf("kstream: key metadata of store %q: deserializing the key: %w", name, err)
		}
	default:
		return KeyMetadata{}, fmt.Errorf("kstream: key metadata of store %q: the key is a %T; the partitioner takes a %T", name, key, k)
	}
	topic, n, ok := a.rt.StoreSourceTopic(name)
	if !ok {
		return KeyMetadata{}, &StoreUnavailableError{Store: name, Partition: -1, Reason: NotRunning}
	}
	var zero V
	ps := p(topic, k, zero, n)
	if ps.IsDefault() {
		return a.KeyMetadata(name, key)
	}
	l := ps.List()
	if len(l) != 1 || l[0] < 0 || l[0] >= n {
		return KeyMetadata{}, fmt.Errorf("kstream: key metadata of store %q: the partitioner must choose one partition in [0, %d) for a key, but chose %v", name, n, l)
	}
	return a.keyMetadataAt(name, l[0]), nil
}

// keyMetadataAt returns the metadata of partition p of the store named name.
func (a *App) keyMetadataAt(name string, p int32) KeyMetadata {
	km := KeyMetadata{Store: name, Partition: p}
	sub, _ := a.rt.StoreSubTopology(name)
	id := runtime.TaskID{SubTopology: sub, Partition: p}
	if md := a.rt.Metadata(); md != nil {
		for _, m := range md.Members {
			if slices.Contains(m.Active, id) {
				km.Active, km.ActiveMember = m.Endpoint, m.MemberID
			}
			if slices.Contains(m.Standby, id) && m.Endpoint != "" {
				km.Standbys = append(km.Standbys, m.Endpoint)
			}
		}
	}
	return km
}

// serializeKeyAny serializes key with the codec's key serde (a RawKey is taken as is).
func serializeKeyAny(c *queryCodec, key any) ([]byte, error) {
	if rk, ok := key.(RawKey); ok {
		return rk, nil
	}
	kb, err := serializeWith(c.keySerde, key)
	if err != nil {
		return nil, err
	}
	if kb == nil {
		return nil, errors.New("a null key has no partition")
	}
	return kb, nil
}

// serializeWith serializes v with s, a serde.Serde[K], when v is a K.
func serializeWith(s any, v any) ([]byte, error) {
	if s, ok := s.(anySerializer); ok {
		return s.serializeAny(v)
	}
	return nil, fmt.Errorf("the key is a %T, not the store's key type", v)
}

// anySerializer is implemented by the serde wrappers of query codecs.
type anySerializer interface{ serializeAny(any) ([]byte, error) }

// typedSerde wraps a serde.Serde[T] so that a value of unknown static type can be
// serialized with it.
type typedSerde[T any] struct{ serde.Serde[T] }

func (s typedSerde[T]) serializeAny(v any) ([]byte, error) {
	t, ok := v.(T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("the key is a %T, not the store's key type %T", v, zero)
	}
	return s.Serialize(t)
}

// InstanceMetadata describes one instance of the application as of the last rebalance:
// Kafka Streams' StreamsMetadata.
type InstanceMetadata struct {
	// Host is the instance's Config.ApplicationServer, "" if it has none.
	Host string
	// MemberID is its group member id; Self marks this instance.
	MemberID string
	Self     bool
	// Active and Standby are its tasks.
	Active  []TaskID
	Standby []TaskID
	// Stores and StandbyStores are the queryable stores of those tasks, sorted.
	Stores        []string
	StandbyStores []string
}

// Partitions returns the partitions of the store named name that the instance runs
// (active), sorted.
func (m InstanceMetadata) Partitions(a *App, name string) []int32 {
	return storePartitions(a, name, m.Active)
}

// StandbyPartitions returns the partitions of the store named name of which the instance
// keeps standby replicas, sorted.
func (m InstanceMetadata) StandbyPartitions(a *App, name string) []int32 {
	return storePartitions(a, name, m.Standby)
}

// storePartitions returns the partitions of the tasks ids that hold the store named name.
func storePartitions(a *App, name string, ids []TaskID) []int32 {
	sub, ok := a.rt.StoreSubTopology(name)
	if !ok {
		return nil
	}
	var out []int32
	for _, id := range ids {
		if id.SubTopology == sub {
			out = append(out, id.Partition)
		}
	}
	slices.Sort(out)
	return out
}

// Metadata lists every instance of the application, with its tasks and stores, as the
// last rebalance assigned them (the group leader sends the whole assignment to every
// member). It is empty before this instance has joined the group.
func (a *App) Metadata() []InstanceMetadata {
	md := a.rt.Metadata()
	if md == nil {
		return nil
	}
	self := a.rt.MemberID()
	subStores := map[int][]string{}
	for _, s := range a.QueryableStores() {
		sub, _ := a.rt.StoreSubTopology(s.Name)
		subStores[sub] = append(subStores[sub], s.Name)
	}
	storesOf := func(ids []TaskID) []string {
		seen := map[string]bool{}
		var out []string
		for _, id := range ids {
			for _, s := range subStores[id.SubTopology] {
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	out := make([]InstanceMetadata, 0, len(md.Members))
	for _, m := range md.Members {
		out = append(out, InstanceMetadata{
			Host: m.Endpoint, MemberID: m.MemberID, Self: m.MemberID == self,
			Active: taskIDs(m.Active), Standby: taskIDs(m.Standby),
			Stores: storesOf(taskIDs(m.Active)), StandbyStores: storesOf(taskIDs(m.Standby)),
		})
	}
	return out
}

// LocalStorePartition is the status of one store partition held by this instance: Kafka
// Streams' LagInfo, per store and partition.
type LocalStorePartition struct {
	Store     string
	Partition int32
	// Standby says the partition is a standby replica here (else it is an active task's).
	Standby bool
	// Restoring says its store is still restoring (an active task), or the standby has not
	// started following its changelog yet.
	Restoring bool
	// Position is the changelog offset the store's data is complete up to, -1 if unknown.
	Position int64
	// Lag is the number of changelog records the store has not applied: 0 for a running
	// active task; for a standby, against the changelog's end as read at most half a second
	// ago; -1 if unknown.
	Lag int64
}

// LocalStorePartitions lists the store partitions this instance holds, active and standby,
// with each one's position and lag, sorted by store and partition: Kafka Streams'
// allLocalStorePartitionLags.
func (a *App) LocalStorePartitions() []LocalStorePartition {
	lps := a.rt.LocalPartitions()
	out := make([]LocalStorePartition, len(lps))
	for i, lp := range lps {
		out[i] = LocalStorePartition{Store: lp.Store, Partition: lp.Partition, Standby: lp.Standby,
			Restoring: lp.Restoring, Position: lp.Position, Lag: lp.Lag}
	}
	return out
}

// RawValue is a value read from a store: its serialized bytes (without the timestamp a
// table's store keeps with it) and where it was read.
type RawValue struct {
	Value []byte
	// Timestamp is the value's timestamp (Unix milliseconds) for stores that keep one
	// (tables, aggregations, windowed aggregations), else -1.
	Timestamp int64
	Partition int32
	// Standby says the value was read from a standby replica; Position is the changelog
	// offset that replica (or the active store) was complete up to.
	Standby  bool
	Position int64
}

// RawEntry is one key of a store with its value.
type RawEntry struct {
	Key []byte
	RawValue
}

// RawWindowEntry is one window of a window or session store: the key, the window's bounds
// (for a window store, End is Start plus the window size) and the value.
type RawWindowEntry struct {
	Key        []byte
	Start, End time.Time
	RawValue
}

// RawStore reads a store of this instance in serialized form, for tools and the HTTP
// layer of package query; [QueryStore], [QueryWindowStore] and [QuerySessionStore] are
// its typed forms. Each call checks where the partitions it reads are hosted now.
type RawStore struct {
	a    *App
	d    *storeDef
	opts queryOptions
}

// RawStore returns a serialized view of the store named name.
func (a *App) RawStore(name string, opts ...QueryOption) (*RawStore, error) {
	d, err := a.storeDefOf(name)
	if err != nil {
		return nil, err
	}
	s := &RawStore{a: a, d: d, opts: queryOptions{maxLag: -1}}
	for _, o := range opts {
		o(&s.opts)
	}
	return s, nil
}

// Info describes the store.
func (s *RawStore) Info() StoreInfo {
	n, _ := s.a.rt.StorePartitionCount(s.d.name)
	return StoreInfo{Name: s.d.name, Kind: s.d.query.kind, Partitions: n, Global: s.d.global}
}

// KeyFromJSON serializes a key given as JSON (a JSON string for a string key, a number
// for a number key, an object for a JSON serde's struct) with the store's key serde.
func (s *RawStore) KeyFromJSON(b []byte) ([]byte, error) { return s.d.query.keyFromJSON(b) }

// KeyToJSON renders a serialized key as JSON.
func (s *RawStore) KeyToJSON(b []byte) (json.RawMessage, error) { return s.d.query.keyToJSON(b) }

// ValueToJSON renders a serialized value (a RawValue's Value) as JSON.
func (s *RawStore) ValueToJSON(b []byte) (json.RawMessage, error) {
	return s.d.query.valueToJSON(b)
}

// Partition returns the partition of a serialized key (-1 for a global store): the one
// partition of [QueryPartitions] when the store was taken with exactly one (for a store
// partitioned by a [Partitioner]: see [KeyMetadataWith]), else the default partitioner's.
func (s *RawStore) Partition(key []byte) (int32, error) {
	if s.d.global {
		return runtime.GlobalDataPartition, nil
	}
	if len(s.opts.partitions) == 1 {
		return s.opts.partitions[0], nil
	}
	n, ok := s.a.rt.StorePartitionCount(s.d.name)
	if !ok {
		return 0, &StoreUnavailableError{Store: s.d.name, Partition: -1, Reason: NotRunning}
	}
	return partition.ForKey(key, n), nil
}

// view takes a read view of partition p, honoring the options.
func (s *RawStore) view(p int32) (*runtime.StoreView, func(), error) {
	v, release, err := s.a.rt.StoreView(s.d.name, p, s.opts.standby, s.opts.maxLag)
	return v, release, toStoreError(err)
}

// check reports, after a read of v, whether v was still hosted as it was when taken.
func (s *RawStore) check(v *runtime.StoreView) error {
	if s.a.rt.Valid(v) {
		return nil
	}
	return &StoreUnavailableError{Store: s.d.name, Partition: v.Partition, Reason: NotHosted}
}

// rawValue splits a stored value into its timestamp and bytes.
func (s *RawStore) rawValue(v *runtime.StoreView, b []byte) (RawValue, error) {
	rv := RawValue{Value: b, Timestamp: -1, Partition: v.Partition, Standby: v.Standby, Position: v.Position}
	if s.d.query.timestamped {
		if len(b) < 8 {
			return rv, fmt.Errorf("kstream: store %q partition %d: a value of %d bytes lacks its 8-byte timestamp", s.d.name, v.Partition, len(b))
		}
		rv.Timestamp, rv.Value = int64(binary.BigEndian.Uint64(b)), b[8:]
	}
	return rv, nil
}

// Get reads the value of a serialized key from the partition the key belongs to.
func (s *RawStore) Get(key []byte) (RawValue, bool, error) {
	if key == nil {
		return RawValue{}, false, fmt.Errorf("kstream: store %q: get of a null key", s.d.name)
	}
	p, err := s.Partition(key)
	if err != nil {
		return RawValue{}, false, err
	}
	// A view by value, given back at once: a get allocates no view.
	v, err := s.a.rt.AcquireView(s.d.name, p, s.opts.standby, s.opts.maxLag)
	if err != nil {
		return RawValue{}, false, toStoreError(err)
	}
	var b []byte
	var ok bool
	var versioned store.VersionedRecord[[]byte]
	if s.d.query.kind == VersionedKind {
		vs := store.NewVersionedKeyValueStore(s.d.name, v.Backend, serde.Bytes(), serde.Bytes(), s.d.historyRetention)
		versioned, ok, err = vs.Get(key)
	} else {
		b, ok, err = v.Backend.Get(key)
	}
	s.a.rt.ReleaseView(&v)
	if err != nil {
		return RawValue{}, false, fmt.Errorf("kstream: store %q partition %d: get: %w", s.d.name, p, err)
	}
	if err := s.check(&v); err != nil {
		return RawValue{}, false, err
	}
	if !ok {
		return RawValue{}, false, nil
	}
	if s.d.query.kind == VersionedKind {
		return RawValue{Value: versioned.Value, Timestamp: versioned.Timestamp, Partition: p, Standby: v.Standby, Position: v.Position}, true, nil
	}
	rv, err := s.rawValue(&v, b)
	return rv, err == nil, err
}

// partitions returns the partitions a scan reads: those of QueryPartitions, or every
// partition hosted here (active, and standby when stale stores are allowed).
func (s *RawStore) partitions() ([]int32, error) {
	if s.d.global {
		return []int32{runtime.GlobalDataPartition}, nil
	}
	if len(s.opts.partitions) > 0 {
		return s.opts.partitions, nil
	}
	if _, ok := s.a.rt.StorePartitionCount(s.d.name); !ok {
		return nil, &StoreUnavailableError{Store: s.d.name, Partition: -1, Reason: NotRunning}
	}
	var out []int32
	for _, lp := range s.a.rt.LocalPartitions() {
		if lp.Store != s.d.name || (lp.Standby && !s.opts.standby) {
			continue
		}
		if !slices.Contains(out, lp.Partition) {
			out = append(out, lp.Partition)
		}
	}
	slices.Sort(out)
	return out, nil
}

// views takes read views of the partitions a scan reads; every one must be available.
func (s *RawStore) views() ([]*runtime.StoreView, func(), error) {
	ps, err := s.partitions()
	if err != nil {
		return nil, nil, err
	}
	var vs []*runtime.StoreView
	var releases []func()
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	for _, p := range ps {
		v, release, err := s.view(p)
		if err != nil {
			releaseAll()
			return nil, nil, err
		}
		vs, releases = append(vs, v), append(releases, release)
	}
	return vs, releaseAll, nil
}

// Scan calls fn for the keys in [from, to) in key order (the bytes of the serialized keys;
// descending if reverse), over the partitions of the query merged, until fn returns
// false. A nil bound is unbounded. Each partition is read from one snapshot.
func (s *RawStore) Scan(from, to []byte, reverse bool, fn func(RawEntry) bool) error {
	if s.d.query.kind != KeyValueKind {
		return fmt.Errorf("kstream: store %q is a %s store: range queries need a key-value store", s.d.name, s.d.query.kind)
	}
	return s.scan(func(b store.Backend) (store.Iterator, error) {
		if reverse {
			return b.ReverseRange(from, to)
		}
		return b.Range(from, to)
	}, reverse, fn)
}

// PrefixScan calls fn for the keys whose serialized form starts with prefix, in key
// order, until fn returns false.
func (s *RawStore) PrefixScan(prefix []byte, fn func(RawEntry) bool) error {
	if s.d.query.kind != KeyValueKind {
		return fmt.Errorf("kstream: store %q is a %s store: prefix scans need a key-value store", s.d.name, s.d.query.kind)
	}
	return s.scan(func(b store.Backend) (store.Iterator, error) { return b.PrefixScan(prefix) }, false, fn)
}

func (s *RawStore) scan(open func(store.Backend) (store.Iterator, error), reverse bool, fn func(RawEntry) bool) error {
	vs, release, err := s.views()
	if err != nil {
		return err
	}
	defer release()
	its := make([]store.Iterator, len(vs))
	defer func() {
		for _, it := range its {
			if it != nil {
				it.Close()
			}
		}
	}()
	live := make([]bool, len(vs))
	for i, v := range vs {
		if its[i], err = open(v.Backend); err != nil {
			return fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, v.Partition, err)
		}
		live[i] = its[i].Next()
	}
	for {
		best := -1
		for i := range its {
			if !live[i] {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			c := bytes.Compare(its[i].Key(), its[best].Key())
			if (!reverse && c < 0) || (reverse && c > 0) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		it := its[best]
		rv, err := s.rawValue(vs[best], slices.Clone(it.Value()))
		if err != nil {
			return err
		}
		if !fn(RawEntry{Key: slices.Clone(it.Key()), RawValue: rv}) {
			break
		}
		live[best] = it.Next()
	}
	for i, it := range its {
		if err := it.Err(); err != nil {
			return fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, vs[i].Partition, err)
		}
	}
	for _, v := range vs {
		if err := s.check(v); err != nil {
			return err
		}
	}
	return nil
}

// ApproximateCount estimates the number of keys over the partitions of the query (exact
// for memory stores and small Pebble stores): Kafka Streams' approximateNumEntries.
func (s *RawStore) ApproximateCount() (int64, error) {
	vs, release, err := s.views()
	if err != nil {
		return 0, err
	}
	defer release()
	var n int64
	for _, v := range vs {
		c, err := v.Backend.ApproximateCount()
		if err != nil {
			return 0, fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, v.Partition, err)
		}
		n += c
	}
	return n, nil
}

// windowOptioner and sessionOptioner are the changelog codecs of window and session
// stores.
type windowOptioner interface{ WindowOptions() store.WindowOptions }
type sessionOptioner interface{ SessionOptions() store.SessionOptions }

// WindowFetch calls fn for the windows of a serialized key that start in [from, to]
// (inclusive, as Kafka Streams' fetch(key, from, to)), by start time, until fn returns
// false.
func (s *RawStore) WindowFetch(key []byte, from, to time.Time, fn func(RawWindowEntry) bool) error {
	p, err := s.Partition(key)
	if err != nil {
		return err
	}
	return s.windows([]int32{p}, func(ws *store.WindowStore[[]byte, []byte]) (*store.WindowedIterator[[]byte, []byte], error) {
		return ws.FetchRange(key, from, to)
	}, fn)
}

// WindowFetchAll calls fn for every window, of every key, that starts in [from, to], over
// the partitions of the query, until fn returns false: Kafka Streams' fetchAll.
func (s *RawStore) WindowFetchAll(from, to time.Time, fn func(RawWindowEntry) bool) error {
	ps, err := s.partitions()
	if err != nil {
		return err
	}
	return s.windows(ps, func(ws *store.WindowStore[[]byte, []byte]) (*store.WindowedIterator[[]byte, []byte], error) {
		return ws.FetchAll(from, to)
	}, fn)
}

func (s *RawStore) windows(ps []int32, open func(*store.WindowStore[[]byte, []byte]) (*store.WindowedIterator[[]byte, []byte], error), fn func(RawWindowEntry) bool) error {
	if s.d.query.kind != WindowKind {
		return fmt.Errorf("kstream: store %q is a %s store: window queries need a window store", s.d.name, s.d.query.kind)
	}
	for _, p := range ps {
		more, err := s.windowPartition(p, open, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (s *RawStore) windowPartition(p int32, open func(*store.WindowStore[[]byte, []byte]) (*store.WindowedIterator[[]byte, []byte], error), fn func(RawWindowEntry) bool) (bool, error) {
	v, release, err := s.view(p)
	if err != nil {
		return false, err
	}
	defer release()
	wo, ok := v.Spec.Codec.(windowOptioner)
	if !ok {
		return false, fmt.Errorf("kstream: store %q has no window layout", s.d.name)
	}
	o := wo.WindowOptions()
	ws, err := store.NewWindowStore(s.d.name, v.Backend, serde.Bytes(), serde.Bytes(), o)
	if err != nil {
		return false, err
	}
	it, err := open(ws)
	if err != nil {
		return false, fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, p, err)
	}
	defer it.Close()
	more := true
	for it.Next() {
		rv, err := s.rawValue(v, slices.Clone(it.Value()))
		if err != nil {
			return false, err
		}
		k := it.Key()
		e := RawWindowEntry{Key: slices.Clone(k.Key), Start: k.Start, End: k.End, RawValue: rv}
		if e.End.IsZero() || !e.End.After(e.Start) {
			e.End = e.Start.Add(o.WindowSize)
		}
		if !fn(e) {
			more = false
			break
		}
	}
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, p, err)
	}
	return more, s.check(v)
}

// SessionFetch calls fn for every session of a serialized key, by end then start time,
// until fn returns false: Kafka Streams' ReadOnlySessionStore.fetch(key).
func (s *RawStore) SessionFetch(key []byte, fn func(RawWindowEntry) bool) error {
	if s.d.query.kind != SessionKind {
		return fmt.Errorf("kstream: store %q is a %s store: session queries need a session store", s.d.name, s.d.query.kind)
	}
	p, err := s.Partition(key)
	if err != nil {
		return err
	}
	v, release, err := s.view(p)
	if err != nil {
		return err
	}
	defer release()
	so, ok := v.Spec.Codec.(sessionOptioner)
	if !ok {
		return fmt.Errorf("kstream: store %q has no session layout", s.d.name)
	}
	ss, err := store.NewSessionStore(s.d.name, v.Backend, serde.Bytes(), serde.Bytes(), so.SessionOptions())
	if err != nil {
		return err
	}
	it, err := ss.Fetch(key)
	if err != nil {
		return fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, p, err)
	}
	defer it.Close()
	for it.Next() {
		rv, err := s.rawValue(v, slices.Clone(it.Value()))
		if err != nil {
			return err
		}
		k := it.Key()
		if !fn(RawWindowEntry{Key: slices.Clone(k.Key), Start: k.Start, End: k.End, RawValue: rv}) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("kstream: store %q partition %d: %w", s.d.name, p, err)
	}
	return s.check(v)
}
