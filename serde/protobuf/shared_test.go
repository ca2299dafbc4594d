package protobuf_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/protobuf/internal/testpb"
	"github.com/kstream-go/kstream/serde/registry"
)

// The TestShared tests run on the fake and, with KSTREAM_TEST_REGISTRY set, on a real
// registry (see docs/testing.md). The imports' subjects ("common/address.proto") are the
// same for every test, as they are for every application: registering the same file there
// again is idempotent.

// TestSharedRoundTripAndReferences: the file's import is registered under its own subject
// and referenced; a second process (a client with no cache) reads by id, and with
// auto-registration off finds the same schema; nested messages and the second message of a
// file round-trip with their indexes.
func TestSharedRoundTripAndReferences(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("orders")
	s := newSerde[*testpb.Order](t, reg.Client(registry.Config{}), registry.Options{}).Bind(topic, false)
	want := sampleOrder()
	b, err := s.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	main := reg.Schema(topic+"-value", 1)
	if int(binary.BigEndian.Uint32(b[1:5])) != main.ID || b[5] != 0 {
		t.Errorf("header % x, want id %d and index 0", b[:6], main.ID)
	}
	if main.Type != sr.TypeProtobuf {
		t.Errorf("registered as %v", main.Type)
	}
	if main.Schema.Schema != s.Schema() {
		t.Errorf("registered schema:\n%s\nwant the serde's:\n%s", main.Schema.Schema, s.Schema())
	}
	if len(main.References) != 1 || main.References[0].Name != "common/address.proto" || main.References[0].Subject != "common/address.proto" {
		t.Fatalf("references %+v, want common/address.proto", main.References)
	}
	dep := reg.Schema("common/address.proto", main.References[0].Version)
	addrText, _ := protobuf.SchemaText((&testpb.Address{}).ProtoReflect().Descriptor().ParentFile())
	if dep.Schema.Schema != addrText || dep.Type != sr.TypeProtobuf {
		t.Errorf("registered import (%v):\n%s\nwant\n%s", dep.Type, dep.Schema.Schema, addrText)
	}
	if reg.SubjectExists("google/protobuf/timestamp.proto") {
		t.Error("a well-known type was registered")
	}

	r := newSerde[*testpb.Order](t, reg.Client(registry.Config{}), registry.Options{})
	if got, err := r.Deserialize(b); err != nil || !proto.Equal(got, want) {
		t.Errorf("read by another client: %v, %v", got, err)
	}
	off := newSerde[*testpb.Order](t, reg.Client(registry.Config{}), registry.Options{DisableAutoRegister: true}).Bind(topic, false)
	if b2, err := off.Serialize(want); err != nil || !bytes.Equal(b2[:5], b[:5]) {
		t.Errorf("auto-registration off: % x, %v; want id %d", b2, err, main.ID)
	}
	err = newSerde[*testpb.Order](t, reg.Client(registry.Config{}), registry.Options{DisableAutoRegister: true}).Bind(reg.Name("other"), false).Check(t.Context())
	if err == nil {
		t.Error("auto-registration off, nothing registered: no error")
	}

	// Other messages: the second of a file, and a nested one two levels deep.
	refund := newSerde[*testpb.Refund](t, reg.Client(registry.Config{}), registry.Options{}).Bind(reg.Name("refunds"), false)
	rb, err := refund.Serialize(&testpb.Refund{OrderId: "x"})
	if err != nil || !bytes.Equal(rb[5:7], []byte{0x02, 0x02}) {
		t.Fatalf("refund: % x, %v", rb, err)
	}
	if got, err := newSerde[*testpb.Refund](t, reg.Client(registry.Config{}), registry.Options{}).Deserialize(rb); err != nil || got.GetOrderId() != "x" {
		t.Errorf("refund read back: %v, %v", got, err)
	}
	disc := newSerde[*testpb.Order_Line_Discount](t, reg.Client(registry.Config{}), registry.Options{}).Bind(reg.Name("discounts"), false)
	db, err := disc.Serialize(&testpb.Order_Line_Discount{Cents: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := newSerde[*testpb.Order_Line_Discount](t, reg.Client(registry.Config{}), registry.Options{}).Deserialize(db); err != nil || got.GetCents() != 7 {
		t.Errorf("discount read back: %v, %v", got, err)
	}
}

// TestSharedLatestAndPinned: UseLatestVersion writes with the subject's latest version, a
// pinned id with that id.
func TestSharedLatestAndPinned(t *testing.T) {
	reg := srtest.Open(t)
	topic := reg.Name("readings")
	subject := topic + "-value"
	first := newSerde[*testpb.Reading](t, reg.Client(registry.Config{}), registry.Options{}).Bind(topic, false)
	b1, err := first.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil {
		t.Fatal(err)
	}
	id1 := int(binary.BigEndian.Uint32(b1[1:5]))
	v2 := reg.Seed(subject, sr.Schema{Schema: first.Schema() + "\nmessage Extra" + reg.Token() + " {}\n", Type: sr.TypeProtobuf})
	if v2 == id1 {
		t.Fatalf("v2 has v1's id %d", v2)
	}
	latest := newSerde[*testpb.Reading](t, reg.Client(registry.Config{}), registry.Options{UseLatestVersion: true}).Bind(topic, false)
	b, err := latest.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil || !bytes.Equal(b[:6], append(header(v2), 0)) {
		t.Errorf("latest: % x, %v; want id %d", b, err, v2)
	}
	pinned := newSerde[*testpb.Reading](t, reg.Client(registry.Config{}), registry.Options{SchemaID: id1}).Bind(topic, false)
	b, err = pinned.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil || !bytes.Equal(b[:6], append(header(id1), 0)) {
		t.Errorf("pinned: % x, %v; want id %d", b, err, id1)
	}
	if got, err := newSerde[*testpb.Reading](t, reg.Client(registry.Config{}), registry.Options{}).Deserialize(b); err != nil || got.GetSensor() != "s" {
		t.Errorf("read back: %v, %v", got, err)
	}
}
