package store_test

import (
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

// The serialized-key methods read and write the same entries as the typed ones, over a
// Buffer (whose values a typed get reads without a copy) and over a backend without one;
// values written through an appending serde are Serialize's bytes, and an empty value stays
// present and empty.
func TestKeyValueStoreSerializedKeys(t *testing.T) {
	db := memory.New()
	defer db.Close()
	raw, err := db.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := store.NewBuffer(raw).WithReadCache(1 << 20)
	for name, b := range map[string]store.Backend{"buffer": buf, "raw": raw} {
		t.Run(name, func(t *testing.T) {
			kv := store.NewKeyValueStore("s", b, serde.String(), serde.Int64())
			if err := kv.PutSerialized([]byte(name+"-a"), 7); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := kv.Get(name + "-a"); err != nil || !ok || v != 7 {
				t.Fatalf("Get = %d, %v, %v; want 7", v, ok, err)
			}
			raw, ok, err := b.Get([]byte(name + "-a"))
			if err != nil || !ok || string(raw) != "\x00\x00\x00\x00\x00\x00\x00\x07" {
				t.Fatalf("stored bytes %x, %v, %v; want Int64's 0000000000000007", raw, ok, err)
			}
			if err := kv.Put(name+"-b", 9); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := kv.GetSerialized([]byte(name + "-b")); err != nil || !ok || v != 9 {
				t.Fatalf("GetSerialized = %d, %v, %v; want 9", v, ok, err)
			}
			if err := kv.DeleteSerialized([]byte(name + "-b")); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := kv.Get(name + "-b"); err != nil || ok {
				t.Fatalf("Get after DeleteSerialized = %d, %v, %v; want absent", v, ok, err)
			}
			bs := store.NewKeyValueStore("s", b, serde.String(), serde.Bytes())
			if err := bs.Put(name+"-empty", []byte{}); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := bs.Get(name + "-empty"); err != nil || !ok || v == nil || len(v) != 0 {
				t.Fatalf("Get of an empty value = %#v, %v, %v; want present, empty, not nil", v, ok, err)
			}
		})
	}
	// Flushed, the values are read from the cache and from the engine alike.
	if err := buf.Flush(1); err != nil {
		t.Fatal(err)
	}
	kv := store.NewKeyValueStore("s", buf, serde.String(), serde.Int64())
	if v, ok, err := kv.GetSerialized([]byte("buffer-a")); err != nil || !ok || v != 7 {
		t.Fatalf("after flush: GetSerialized = %d, %v, %v; want 7", v, ok, err)
	}
}
