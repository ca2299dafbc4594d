package kstream

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// The foreign-key join's internal records stay bytes from topic to topic where they can:
// its sources forward the fetched bytes without a serde's copy, and its joiners read the
// tables' stores as bytes when the serdes would give back the same bytes.

// fkRawSource is the source of the registration topic: it forwards each record's key and
// value as fetched (the serde.Bytes source would copy them; nothing downstream keeps or
// changes them: the subscription store copies what it keeps).
func fkRawSource(t *task, n *node) (any, error) {
	ctx, err := childInputs[[]byte, []byte](t, n)
	if err != nil {
		return nil, err
	}
	return sourceFn(func(raw *rawRecord) {
		ctx.Forward(Record[[]byte, []byte]{Key: raw.Key, Value: raw.Value, Timestamp: time.UnixMilli(t.curTS), Headers: fromKgoHeaders(raw.Headers),
			null: raw.Value == nil, nullKey: raw.Key == nil})
	}), nil
}

// fkRespRecord is what the response source passes to the response resolver: the response
// as fetched, and the serialized primary key (the record's key).
type fkRespRecord struct {
	wire []byte
	pk   []byte
}

// fkResponseSource is the source of the response topic: the key is the left table's key
// (deserialized with ks, and kept serialized), the value the response's bytes.
func fkResponseSource[K any](t *task, n *node, ks serde.Serde[K]) (any, error) {
	ctx, err := childInputs[K, fkRespRecord](t, n)
	if err != nil {
		return nil, err
	}
	return sourceFn(func(raw *rawRecord) {
		k, err := deserialize(ks, raw.Key)
		if err != nil {
			t.deserializationError(n, fmt.Errorf("key: %w", err))
			return
		}
		ctx.Forward(Record[K, fkRespRecord]{Key: k, Value: fkRespRecord{wire: raw.Value, pk: raw.Key}, Timestamp: time.UnixMilli(t.curTS), Headers: fromKgoHeaders(raw.Headers),
			null: raw.Value == nil, nullKey: raw.Key == nil})
	}), nil
}

// fkBytesGetter returns, when table tb reads its own store and its serdes give back the
// bytes they were given (serde.String, serde.Bytes), a getter of that store by serialized
// key that returns the stored bytes (an 8-byte timestamp, then the serialized value); else
// nil. Its values are what deserializing and serializing again would give, without the
// copies: they are the store's own bytes (store.KeyValueStore.GetSerializedView), valid
// until the task's next call on that store. Its callers are done with them before: the
// subscription join hands them to the response topic's sink, its only child, which encodes
// them as it is forwarded to; the resolver hashes and deserializes them (the serdes above
// copy) before it forwards.
func fkBytesGetter[K, V any](tb KTable[K, V], t *task) func(key []byte) ([]byte, bool, error) {
	if tb.store == "" || len(tb.getterStores) != 1 {
		return nil
	}
	d := tb.getterStores[0]
	if d.name != tb.store || d.versioned || !d.timestamped || !fkIdentitySerde(tb.ks) || !fkIdentitySerde(tb.vs) {
		return nil
	}
	st, ok := t.stores[tb.store].(*tableKV[K, V])
	if !ok {
		return nil
	}
	return st.GetSerializedView
}

// fkIdentitySerde reports whether s serializes what it deserialized into the same bytes.
func fkIdentitySerde(s any) bool {
	return s != nil && (s == any(serde.String()) || s == any(serde.Bytes()))
}

// fkSplitStored splits a table store's value into its timestamp and value bytes.
func fkSplitStored(b []byte) (ts int64, v []byte, err error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("kstream: a table store value has %d bytes, fewer than its 8-byte timestamp", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:], nil
}
