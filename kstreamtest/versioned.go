package kstreamtest

import (
	"fmt"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// VersionedStore returns a typed view of partition partition of the versioned store named
// name: the store of a table read with the [kstream.Versioned] option. Its Get reads a
// key's latest value and GetAsOf its value as of a time, with the version's validity, as
// TopologyTestDriver.getVersionedKeyValueStore's store does. The view reads the store as
// of the last record piped.
func VersionedStore[K, V any](d *Driver, name string, partition int32, ks serde.Serde[K], vs serde.Serde[V]) (*store.VersionedKeyValueStore[K, V], error) {
	spec, err := d.storeSpec(name)
	if err != nil {
		return nil, err
	}
	c, ok := spec.Codec.(interface{ HistoryRetention() time.Duration })
	if !ok {
		return nil, fmt.Errorf("kstreamtest: store %q is not a versioned store", name)
	}
	b, err := d.db.Open(name, partition)
	if err != nil {
		return nil, err
	}
	return store.NewVersionedKeyValueStore(name, b, ks, vs, c.HistoryRetention()), nil
}
