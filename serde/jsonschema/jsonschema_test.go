package jsonschema_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/registry"
)

const orderSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "com.acme.Order",
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "qty": {"type": "integer", "minimum": 1},
    "note": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["id", "qty"]
}`

type Order struct {
	ID   string   `json:"id"`
	Qty  int      `json:"qty"`
	Note *string  `json:"note,omitempty"`
	Tags []string `json:"tags,omitempty"`
}

func newSerde[T any](t *testing.T, c *registry.Client, schema string, opts jsonschema.Options) *jsonschema.Serde[T] {
	t.Helper()
	s, err := jsonschema.New[T](c, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func header(id int) []byte { return binary.BigEndian.AppendUint32([]byte{0}, uint32(id)) }

func TestRoundTripAndFraming(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{})
	vs := s.ForTopic("orders", false)
	note := "n"
	want := Order{ID: "o-1", Qty: 2, Note: &note, Tags: []string{"a"}}
	b, err := vs.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := reg.GetSchema("orders-value", 1)
	if !ok || ss.Type != sr.TypeJSON {
		t.Fatalf("registered %+v", ss)
	}
	body, _ := json.Marshal(want)
	if wantB := append(header(ss.ID), body...); !bytes.Equal(b, wantB) {
		t.Errorf("bytes %q, want %q", b, wantB)
	}
	got, err := vs.Deserialize(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	// Keys, pointers and nulls.
	ks := newSerde[*Order](t, c, orderSchema, jsonschema.Options{}).ForTopic("orders", true)
	kb, err := ks.Serialize(&want)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := ks.Deserialize(kb); err != nil || k.ID != "o-1" {
		t.Errorf("key: %+v, %v", k, err)
	}
	if b, err := ks.Serialize(nil); b != nil || err != nil {
		t.Errorf("Serialize(nil) = %q, %v", b, err)
	}
	if !reg.SubjectExists("orders-key") {
		t.Error("no orders-key")
	}
	var _ serde.TopicBound[Order] = s
}

func TestValidation(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{}).Bind("orders", false)
	_, err := s.Serialize(Order{ID: "", Qty: 0})
	srtest.WantError(t, err, registry.ErrInvalidValue, "orders-value", 1)
	t.Log(err)

	skip := newSerde[Order](t, c, orderSchema, jsonschema.Options{SkipValidation: true}).Bind("orders", false)
	bad, err := skip.Serialize(Order{ID: "", Qty: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Read without validation: decodes; with: refused.
	if _, err := s.Deserialize(bad); err != nil {
		t.Errorf("no validation on read: %v", err)
	}
	strict := newSerde[Order](t, c, orderSchema, jsonschema.Options{ValidateOnRead: true})
	_, err = strict.Deserialize(bad)
	srtest.WantError(t, err, registry.ErrCorrupt, "", 1)
}

func TestSubjectNameStrategies(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	for strategy, want := range map[registry.SubjectNameStrategy]string{
		registry.TopicName:       "orders-value",
		registry.RecordName:      "com.acme.Order",
		registry.TopicRecordName: "orders-com.acme.Order",
	} {
		s := newSerde[Order](t, c, orderSchema, jsonschema.Options{Options: registry.Options{Subject: strategy}}).Bind("orders", false)
		if got, _ := s.Subject(); got != want {
			t.Errorf("%v: %q, want %q", strategy, got, want)
		}
		if _, err := s.Serialize(Order{ID: "x", Qty: 1}); err != nil {
			t.Fatal(err)
		}
		if !reg.SubjectExists(want) {
			t.Errorf("%v: %q not registered", strategy, want)
		}
	}
	untitled := newSerde[Order](t, c, `{"type":"object"}`, jsonschema.Options{Options: registry.Options{Subject: registry.RecordName}})
	if _, err := untitled.Serialize(Order{}); err == nil {
		t.Error("RecordName without a title: no error")
	}
	_, err := newSerde[Order](t, c, orderSchema, jsonschema.Options{}).Serialize(Order{ID: "x", Qty: 1})
	srtest.WantError(t, err, registry.ErrUnbound, "", 0)
}

func TestRegisterModes(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	off := jsonschema.Options{Options: registry.Options{DisableAutoRegister: true}}
	err := newSerde[Order](t, c, orderSchema, off).Bind("orders", false).Check(t.Context())
	srtest.WantError(t, err, registry.ErrNotRegistered, "orders-value", 0)

	id := reg.Seed("orders-value", sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	b, err := newSerde[Order](t, c, orderSchema, off).Bind("orders", false).Serialize(Order{ID: "x", Qty: 1})
	if err != nil || !bytes.Equal(b[:5], header(id)) {
		t.Errorf("lookup: % x, %v", b, err)
	}
	v2 := reg.Seed("orders-value", sr.Schema{Schema: `{"title":"com.acme.Order","type":"object","required":["id"]}`, Type: sr.TypeJSON})
	latest := newSerde[Order](t, c, "", jsonschema.Options{Options: registry.Options{UseLatestVersion: true}}).Bind("orders", false)
	b, err = latest.Serialize(Order{ID: "x"})
	if err != nil || !bytes.Equal(b[:5], header(v2)) {
		t.Errorf("latest: % x, %v", b, err)
	}
	pinned := newSerde[Order](t, c, "", jsonschema.Options{Options: registry.Options{SchemaID: id}}).Bind("orders", false)
	if _, err := pinned.Serialize(Order{ID: "x"}); !errors.Is(err, registry.ErrInvalidValue) {
		t.Errorf("pinned to v1, qty 0: %v, want ErrInvalidValue", err)
	}
}

func TestReferences(t *testing.T) {
	reg := srtest.New(t)
	reg.Seed("address.json", sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`})
	const customer = `{"title":"Customer","type":"object","properties":{"home":{"$ref":"address.json"}},"required":["home"]}`
	type Address struct {
		City string `json:"city,omitempty"`
	}
	type Customer struct {
		Home Address `json:"home"`
	}
	refs := []sr.SchemaReference{{Name: "address.json", Subject: "address.json", Version: 1}}
	c := reg.Client(registry.Config{})
	s := newSerde[Customer](t, c, customer, jsonschema.Options{Options: registry.Options{References: refs}}).Bind("customers", false)
	b, err := s.Serialize(Customer{Home: Address{City: "Oslo"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Serialize(Customer{}); !errors.Is(err, registry.ErrInvalidValue) {
		t.Errorf("referenced schema not applied: %v", err)
	}
	strict := newSerde[Customer](t, c, "", jsonschema.Options{ValidateOnRead: true})
	if got, err := strict.Deserialize(b); err != nil || got.Home.City != "Oslo" {
		t.Errorf("read: %+v, %v", got, err)
	}
	// A $ref to anything else loads nothing.
	if _, err := jsonschema.New[Customer](c, `{"$ref":"file:///etc/passwd"}`, jsonschema.Options{}); err == nil {
		t.Error("compiled a schema referencing a file")
	}
}

func TestBadInput(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{}).Bind("orders", false)
	good, err := s.Serialize(Order{ID: "x", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	avroID := reg.Seed("a-value", sr.Schema{Schema: `"string"`})
	for name, tc := range map[string]struct {
		payload []byte
		want    error
		id      int
	}{
		"plain JSON": {[]byte(`{"id":"x"}`), registry.ErrNoMagicByte, 0},
		"unknown id": {append(header(31337), good[5:]...), registry.ErrUnknownSchemaID, 31337},
		"avro id":    {append(header(avroID), good[5:]...), registry.ErrCorrupt, avroID},
		"not JSON":   {append(header(1), "{nope"...), registry.ErrCorrupt, 1},
		"wrong type": {append(header(1), `{"id":5}`...), registry.ErrCorrupt, 1},
	} {
		_, err := s.Deserialize(tc.payload)
		t.Logf("%s: %v", name, err)
		srtest.WantError(t, err, tc.want, "orders-value", tc.id)
	}
}

func TestOneLookupPerSchemaID(t *testing.T) {
	reg := srtest.New(t)
	id := reg.Seed("orders-value", sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{ValidateOnRead: true})
	payload := append(header(id), `{"id":"x","qty":1}`...)
	for _, d := range []serde.Serde[Order]{s, s.ForTopic("a", false), s.ForTopic("b", true)} {
		for range 10 {
			if _, err := d.Deserialize(payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := reg.Requests("GET", "/schemas/ids/1"); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
}

func TestIncompatibleAndDown(t *testing.T) {
	reg := srtest.New(t)
	reg.RefuseIncompatible("orders-value", "incompatible: required property qty added")
	clock := srtest.NewClock()
	c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
	reg.SetUnavailable(true)
	clock.OnSleep = func(n int) {
		if n == 2 {
			reg.SetUnavailable(false)
		}
	}
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{}).Bind("orders", false)
	err := s.Check(t.Context())
	srtest.WantError(t, err, registry.ErrIncompatible, "orders-value", 0)
	// Two waits while the registry is down, then two between the three tries of the
	// refused registration (registry.Client.Register).
	if len(clock.Slept()) != 4 {
		t.Errorf("%d waits, want 4", len(clock.Slept()))
	}
}

// <, > and & are written as they are, as Jackson writes them, not as encoding/json's
// \u003c, \u003e and \u0026; no newline follows the JSON.
func TestNoHTMLEscaping(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, jsonschema.Options{}).Bind("orders", false)
	note := "<b>fish & chips</b>"
	b, err := s.Serialize(Order{ID: "o-<1>", Qty: 1, Note: &note})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b[5:]), `{"id":"o-<1>","qty":1,"note":"<b>fish & chips</b>"}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
	if got, err := s.Deserialize(b); err != nil || got.ID != "o-<1>" || *got.Note != note {
		t.Errorf("read back %+v, %v", got, err)
	}
}
