package jsonschema_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/registry"
)

// The TestShared tests run on the fake and, with KSTREAM_TEST_REGISTRY set, on a real
// registry (see docs/testing.md).

// TestSharedRoundTrip: registered as JSON, read back by another client (the schema
// fetched by id, and validated on read); auto-registration off finds it; use-latest and a
// pinned id write with those ids.
func TestSharedRoundTrip(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("orders")
	subject := topic + "-value"
	schema := strings.Replace(orderSchema, `"com.acme.Order"`, `"com.acme.`+reg.Token()+`.Order"`, 1)
	note := "n"
	want := Order{ID: "o-1", Qty: 2, Note: &note, Tags: []string{"a"}}
	b, err := newSerde[Order](t, reg.Client(registry.Config{}), schema, jsonschema.Options{}).Bind(topic, false).Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	ss := reg.Schema(subject, 1)
	id := int(binary.BigEndian.Uint32(b[1:5]))
	if ss.ID != id || ss.Type != sr.TypeJSON {
		t.Errorf("registered %+v, want id %d and JSON", ss, id)
	}
	strict := newSerde[Order](t, reg.Client(registry.Config{}), "", jsonschema.Options{ValidateOnRead: true})
	if got, err := strict.Deserialize(b); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("read back: %+v, %v; want %+v", got, err, want)
	}
	if _, err := strict.Deserialize(append(header(id), `{"id":""}`...)); !errors.Is(err, registry.ErrCorrupt) {
		t.Errorf("invalid payload validated on read: %v, want ErrCorrupt", err)
	}

	off := jsonschema.Options{Options: registry.Options{DisableAutoRegister: true}}
	if b2, err := newSerde[Order](t, reg.Client(registry.Config{}), schema, off).Bind(topic, false).Serialize(want); err != nil || !bytes.Equal(b2[:5], header(id)) {
		t.Errorf("auto-registration off: % x, %v; want id %d", b2, err, id)
	}
	err = newSerde[Order](t, reg.Client(registry.Config{}), schema, off).Bind(reg.Name("other"), false).Check(t.Context())
	if !errors.Is(err, registry.ErrNotRegistered) {
		t.Errorf("auto-registration off, nothing registered: %v, want ErrNotRegistered", err)
	}

	// "$schema" or "properties" is needed by Apicurio Registry 2.4, which tells a new
	// version's type from its content, not from schemaType.
	v2 := reg.Seed(subject, sr.Schema{Schema: `{"$schema":"http://json-schema.org/draft-07/schema#","title":"com.acme.` + reg.Token() + `.Order","type":"object","required":["id"]}`, Type: sr.TypeJSON})
	latest := newSerde[Order](t, reg.Client(registry.Config{}), "", jsonschema.Options{Options: registry.Options{UseLatestVersion: true}}).Bind(topic, false)
	if b, err := latest.Serialize(Order{ID: "x"}); err != nil || !bytes.Equal(b[:5], header(v2)) {
		t.Errorf("latest: % x, %v; want id %d", b, err, v2)
	}
	pinned := newSerde[Order](t, reg.Client(registry.Config{}), "", jsonschema.Options{Options: registry.Options{SchemaID: id}}).Bind(topic, false)
	if _, err := pinned.Serialize(Order{ID: "x"}); !errors.Is(err, registry.ErrInvalidValue) {
		t.Errorf("pinned to v1, qty 0: %v, want ErrInvalidValue", err)
	}
}

// TestSharedReferences: a schema whose $ref names another subject's schema registers with
// the reference and validates with it, on write and, in another process, on read.
func TestSharedReferences(t *testing.T) {
	reg := srtest.Open(t)
	addrSubject := reg.Name("address") + ".json"
	reg.Seed(addrSubject, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`})
	customer := `{"title":"Customer` + reg.Token() + `","type":"object","properties":{"home":{"$ref":"` + addrSubject + `"}},"required":["home"]}`
	type Address struct {
		City string `json:"city,omitempty"`
	}
	type Customer struct {
		Home Address `json:"home"`
	}
	refs := []sr.SchemaReference{{Name: addrSubject, Subject: addrSubject, Version: 1}}
	topic := reg.Name("customers")
	s := newSerde[Customer](t, reg.Client(registry.Config{}), customer, jsonschema.Options{Options: registry.Options{References: refs}}).Bind(topic, false)
	b, err := s.Serialize(Customer{Home: Address{City: "Oslo"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Serialize(Customer{}); !errors.Is(err, registry.ErrInvalidValue) {
		t.Errorf("referenced schema not applied: %v", err)
	}
	if ss := reg.Schema(topic+"-value", 1); !reflect.DeepEqual(ss.References, refs) {
		t.Errorf("registered references %+v, want %+v", ss.References, refs)
	}
	strict := newSerde[Customer](t, reg.Client(registry.Config{}), "", jsonschema.Options{ValidateOnRead: true})
	if got, err := strict.Deserialize(b); err != nil || got.Home.City != "Oslo" {
		t.Errorf("read: %+v, %v", got, err)
	}
}

// TestSharedIncompatible: where the registry checks compatibility, a required property
// added under BACKWARD is refused with ErrIncompatible.
func TestSharedIncompatible(t *testing.T) {
	reg := srtest.Open(t)
	if !reg.Real() {
		t.Skip("the fake registry checks no compatibility (TestIncompatibleAndDown fakes the refusal)")
	}
	topic := reg.Name("orders")
	subject := topic + "-value"
	reg.SetCompatibility(subject, sr.CompatBackward)
	v1 := `{"title":"O` + reg.Token() + `","type":"object","properties":{"id":{"type":"string"},"qty":{"type":"integer"}},"required":["id"]}`
	if _, err := newSerde[Order](t, reg.Client(registry.Config{}), v1, jsonschema.Options{}).Bind(topic, false).Serialize(Order{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	v2 := `{"title":"O` + reg.Token() + `","type":"object","properties":{"id":{"type":"string"},"qty":{"type":"integer"}},"required":["id","qty"]}`
	_, err := newSerde[Order](t, reg.Client(registry.Config{}), v2, jsonschema.Options{}).Bind(topic, false).Serialize(Order{ID: "x", Qty: 1})
	srtest.WantError(t, err, registry.ErrIncompatible, subject, 0)
	t.Logf("refused: %v", err)
}
