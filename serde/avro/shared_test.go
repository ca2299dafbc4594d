package avro_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

// The TestShared tests run on the fake and, with KSTREAM_TEST_REGISTRY set, on a real
// registry (see docs/testing.md). Record names carry the test's token, so that the
// RecordName subjects and the schemas' ids are the test's own on a shared registry.

func named(schema, token string) string {
	return strings.Replace(schema, `"namespace": "com.acme"`, `"namespace": "com.acme.`+token+`"`, 1)
}

func payloadID(b []byte) int { return int(binary.BigEndian.Uint32(b[1:5])) }

// TestSharedRoundTrip: written by one client, read by another that knows nothing of it
// (the schema fetched by id), and registered under the topic's subject.
func TestSharedRoundTrip(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("orders")
	schema := strings.Replace(orderSchema, `"namespace": "com.acme"`, `"namespace": "com.acme.`+reg.Token()+`"`, 1)
	w := newSerde[Order](t, reg.Client(registry.Config{}), schema, registry.Options{}).Bind(topic, false)
	want := sampleOrder()
	b, err := w.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	ss := reg.Schema(topic+"-value", 1)
	if payloadID(b) != ss.ID || b[0] != 0 {
		t.Errorf("header % x, want 00 then the registered id %d", b[:5], ss.ID)
	}
	r := newSerde[Order](t, reg.Client(registry.Config{}), schema, registry.Options{})
	got, err := r.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Price.Cmp(want.Price) != 0 {
		t.Errorf("price %v, want %v", got.Price, want.Price)
	}
	got.Price, want.Price = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// A generic reader without a schema reads with the writer's.
	m, err := newSerde[map[string]any](t, reg.Client(registry.Config{}), "", registry.Options{}).Deserialize(b)
	if err != nil || m["id"] != "o-1" {
		t.Errorf("generic read: %v, %v", m, err)
	}
	// A key.
	ks := newSerde[string](t, reg.Client(registry.Config{}), `"string"`, registry.Options{}).Bind(topic, true)
	kb, err := ks.Serialize("k")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := ks.Deserialize(kb); k != "k" || err != nil {
		t.Errorf("key: %q, %v", k, err)
	}
	if !reg.SubjectExists(topic + "-key") {
		t.Errorf("no subject %s-key", topic)
	}
}

// TestSharedEvolution: under BACKWARD compatibility, v2 (a field added with a default, one
// removed) is registered after v1; v1's records read as v2, v2's as v1.1 (v1 with a
// default for the removed field); plain v1 cannot read v2's; and v1 registered again
// after v2 is refused where the registry checks compatibility.
func TestSharedEvolution(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("users")
	subject := topic + "-value"
	reg.SetCompatibility(subject, sr.CompatBackward)
	v1, v2 := named(userV1, reg.Token()), named(userV2, reg.Token())
	c := reg.Client(registry.Config{})
	w1 := newSerde[UserV1](t, c, v1, registry.Options{}).Bind(topic, false)
	b1, err := w1.Serialize(UserV1{Name: "ann", Age: 41})
	if err != nil {
		t.Fatal(err)
	}
	// Another application, newer: its v2 is a second version of the subject.
	w2 := newSerde[UserV2](t, reg.Client(registry.Config{}), v2, registry.Options{}).Bind(topic, false)
	b2, err := w2.Serialize(UserV2{Name: "bob", Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if vs := reg.Versions(subject); len(vs) != 2 {
		t.Errorf("versions %v, want 2", vs)
	}
	if payloadID(b1) == payloadID(b2) {
		t.Errorf("v1 and v2 written with the same id %d", payloadID(b1))
	}

	r2 := newSerde[UserV2](t, reg.Client(registry.Config{}), v2, registry.Options{})
	if got, err := r2.Deserialize(b1); err != nil || got != (UserV2{Name: "ann", Email: "none@example.com"}) {
		t.Errorf("v1 read as v2: %+v, %v", got, err)
	}
	v11 := strings.Replace(v1, `"type": "int"}`, `"type": "int", "default": -1}`, 1)
	r11 := newSerde[UserV1](t, reg.Client(registry.Config{}), v11, registry.Options{})
	if got, err := r11.Deserialize(b2); err != nil || got != (UserV1{Name: "bob", Age: -1}) {
		t.Errorf("v2 read as v1.1: %+v, %v", got, err)
	}
	r1 := newSerde[UserV1](t, reg.Client(registry.Config{}), v1, registry.Options{})
	_, err = r1.Deserialize(b2)
	srtest.WantError(t, err, registry.ErrCorrupt, "", payloadID(b2))

	if !reg.Real() {
		return // the fake checks no compatibility: TestIncompatibleSchema fakes the refusal
	}
	// v1 again after v2: v1 cannot read v2's records (age has no default).
	v1b := strings.Replace(v1, `"name": "age"`, `"name": "age2"`, 1)
	_, err = newSerde[UserV1](t, reg.Client(registry.Config{}), v1b, registry.Options{}).Bind(topic, false).Serialize(UserV1{})
	srtest.WantError(t, err, registry.ErrIncompatible, subject, 0)
	t.Logf("refused: %v", err)
}

// TestSharedLatestAndPinned: UseLatestVersion writes with the subject's latest version and
// registers nothing; a pinned id writes with that id; an unknown pinned id fails.
func TestSharedLatestAndPinned(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("users")
	subject := topic + "-value"
	id1 := reg.Seed(subject, sr.Schema{Schema: named(userV1, reg.Token())})
	id2 := reg.Seed(subject, sr.Schema{Schema: named(userV2, reg.Token())})
	c := reg.Client(registry.Config{})
	latest := newSerde[map[string]any](t, c, "", registry.Options{UseLatestVersion: true}).Bind(topic, false)
	b, err := latest.Serialize(map[string]any{"name": "a", "email": "a@x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := append(header(id2), 2, 'a', 6, 'a', '@', 'x'); !bytes.Equal(b, want) {
		t.Errorf("latest: % x, want % x", b, want)
	}
	pinned := newSerde[UserV1](t, c, named(userV1, reg.Token()), registry.Options{SchemaID: id1}).Bind(topic, false)
	b, err = pinned.Serialize(UserV1{Name: "a", Age: 1})
	if want := append(header(id1), 2, 'a', 2); err != nil || !bytes.Equal(b, want) {
		t.Errorf("pinned: % x, %v; want % x", b, err, want)
	}
	if vs := reg.Versions(subject); len(vs) != 2 {
		t.Errorf("versions %v, want the 2 seeded", vs)
	}
	bad := newSerde[UserV1](t, c, userV1, registry.Options{SchemaID: 1 << 30}).Bind(topic, false)
	srtest.WantError(t, bad.Check(ctx(t)), registry.ErrUnknownSchemaID, subject, 1<<30)
}

// TestSharedAutoRegisterOff: with auto-registration off, a schema not registered fails
// clearly; once another process registered it, it is found.
func TestSharedAutoRegisterOff(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("users")
	subject := topic + "-value"
	schema := named(userV1, reg.Token())
	off := registry.Options{DisableAutoRegister: true}
	err := newSerde[UserV1](t, reg.Client(registry.Config{}), schema, off).Bind(topic, false).Check(ctx(t))
	srtest.WantError(t, err, registry.ErrNotRegistered, subject, 0)
	if reg.SubjectExists(subject) {
		t.Error("registered with auto-registration off")
	}
	id := reg.Seed(subject, sr.Schema{Schema: schema})
	// A schema the subject does not hold, in a subject that exists.
	other := strings.Replace(schema, `"name": "age"`, `"name": "years"`, 1)
	err = newSerde[UserV1](t, reg.Client(registry.Config{}), other, off).Bind(topic, false).Check(ctx(t))
	srtest.WantError(t, err, registry.ErrNotRegistered, subject, 0)
	b, err := newSerde[UserV1](t, reg.Client(registry.Config{}), schema, off).Bind(topic, false).Serialize(UserV1{Name: "a"})
	if err != nil || !bytes.Equal(b[:5], header(id)) {
		t.Errorf("after seeding: % x, %v; want id %d", b, err, id)
	}
}

// TestSharedSubjectNameStrategies: each strategy registers under the subject it names.
func TestSharedSubjectNameStrategies(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("orders")
	schema := named(userV1, reg.Token())
	record := "com.acme." + reg.Token() + ".User"
	for _, tc := range []struct {
		strategy registry.SubjectNameStrategy
		want     string
	}{
		{registry.TopicName, topic + "-value"},
		{registry.RecordName, record},
		{registry.TopicRecordName, topic + "-" + record},
	} {
		s := newSerde[UserV1](t, reg.Client(registry.Config{}), schema, registry.Options{Subject: tc.strategy}).Bind(topic, false)
		b, err := s.Serialize(UserV1{Name: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if !reg.SubjectExists(tc.want) {
			t.Errorf("%v: subject %q not registered", tc.strategy, tc.want)
		}
		if got, err := s.Deserialize(b); err != nil || got.Name != "x" {
			t.Errorf("%v: read back %+v, %v", tc.strategy, got, err)
		}
	}
}

// TestSharedReferences: a schema that names a type of another subject registers with its
// reference, and a reader in another process resolves it.
func TestSharedReferences(t *testing.T) {
	reg := srtest.Open(t)
	ns := "com.acme." + reg.Token()
	address := strings.Replace(addressSchema, `"com.acme"`, `"`+ns+`"`, 1)
	customer := strings.ReplaceAll(strings.Replace(customerSchema, `"com.acme"`, `"`+ns+`"`, 1), "com.acme.Address", ns+".Address")
	addrSubject := reg.Name("address")
	reg.Seed(addrSubject, sr.Schema{Schema: address})
	refs := []sr.SchemaReference{{Name: ns + ".Address", Subject: addrSubject, Version: 1}}
	topic := reg.Name("customers")
	s := newSerde[Customer](t, reg.Client(registry.Config{}), customer, registry.Options{References: refs}).Bind(topic, false)
	want := Customer{Name: "ann", Home: Address{City: "Oslo"}, Work: &Address{City: "Bergen"}}
	b, err := s.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Deserialize(b); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	ss := reg.Schema(topic+"-value", 1)
	if !reflect.DeepEqual(ss.References, refs) {
		t.Errorf("registered references %+v, want %+v", ss.References, refs)
	}
	m, err := newSerde[map[string]any](t, reg.Client(registry.Config{}), "", registry.Options{}).Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if home, _ := m["home"].(map[string]any); home["city"] != "Oslo" {
		t.Errorf("generic read: %#v", m)
	}
}
