package protobuf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/protobuf/internal/testpb"
	"github.com/kstream-go/kstream/serde/registry"
)

func newSerde[T proto.Message](t *testing.T, c *registry.Client, opts registry.Options) *protobuf.Serde[T] {
	t.Helper()
	s, err := protobuf.New[T](c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func header(id int) []byte { return binary.BigEndian.AppendUint32([]byte{0}, uint32(id)) }

func sampleOrder() *testpb.Order {
	note := "door"
	return &testpb.Order{
		Id: "o-1", Qty: 3, Total: 1 << 40, Score: 2.5, Paid: true, Note: &note,
		Status: testpb.Status_STATUS_PAID, Tags: []string{"a", "b"},
		Attrs:   map[string]int64{"z": 1, "a": 2, "m": 3},
		Raw:     []byte{0, 1},
		ShipTo:  &testpb.Address{City: "Oslo", Country: "NO"},
		At:      timestamppb.New(time.UnixMilli(1767225600123)),
		Payment: &testpb.Order_Iban{Iban: "NO93"},
		Lines:   []*testpb.Order_Line{{Sku: "s", Count: 2, Discount: &testpb.Order_Line_Discount{Cents: -5}}},
	}
}

func TestRoundTripAndFraming(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[*testpb.Order](t, c, registry.Options{})
	vs := s.ForTopic("orders", false)
	want := sampleOrder()
	b, err := vs.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := reg.GetSchema("orders-value", 1)
	if !ok {
		t.Fatal("orders-value not registered")
	}
	body, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	// Order is the file's first message: its indexes are the single byte 0.
	if wantB := append(append(header(ss.ID), 0), body...); !bytes.Equal(b, wantB) {
		t.Errorf("bytes\n% x\nwant\n% x", b, wantB)
	}
	got, err := vs.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Deterministic: the same map always writes the same bytes (keys must).
	for range 20 {
		if again, _ := vs.Serialize(sampleOrder()); !bytes.Equal(again, b) {
			t.Fatal("encoding is not deterministic")
		}
	}
	// nil is a Kafka null both ways.
	if b, err := vs.Serialize(nil); b != nil || err != nil {
		t.Errorf("Serialize(nil) = %x, %v", b, err)
	}
	if o, err := vs.Deserialize(nil); o != nil || err != nil {
		t.Errorf("Deserialize(nil) = %v, %v", o, err)
	}
	// As a key.
	ks := newSerde[*testpb.Address](t, c, registry.Options{}).ForTopic("orders", true)
	kb, err := ks.Serialize(&testpb.Address{City: "Oslo"})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := ks.Deserialize(kb); err != nil || k.GetCity() != "Oslo" {
		t.Errorf("key: %v, %v", k, err)
	}
	if !reg.SubjectExists("orders-key") {
		t.Error("no subject orders-key")
	}
	var _ serde.TopicBound[*testpb.Order] = s
}

func TestMessageIndexes(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	for _, tc := range []struct {
		msg     proto.Message
		indexes []int
		bytes   []byte
	}{
		{&testpb.Order{Id: "x"}, []int{0}, []byte{0x00}},
		{&testpb.Refund{OrderId: "x"}, []int{1}, []byte{0x02, 0x02}}, // count 1, index 1
		// Line is Order's second nested message: the entry type of the map field attrs,
		// declared before it, is the first.
		{&testpb.Order_Line{Sku: "x"}, []int{0, 1}, []byte{0x04, 0x00, 0x02}},
		{&testpb.Order_Line_Discount{Cents: 1}, []int{0, 1, 0}, []byte{0x06, 0x00, 0x02, 0x00}},
		{&testpb.Legacy{Name: proto.String("x")}, []int{0}, []byte{0x00}}, // first of its file
		{&testpb.Reading{Sensor: "x"}, []int{0}, []byte{0x00}},            // only one
	} {
		md := tc.msg.ProtoReflect().Descriptor()
		if got := protobuf.MessageIndexes(md); !reflect.DeepEqual(got, tc.indexes) {
			t.Errorf("%s: indexes %v, want %v", md.FullName(), got, tc.indexes)
		}
		if got := protobuf.AppendMessageIndexes(nil, tc.indexes); !bytes.Equal(got, tc.bytes) {
			t.Errorf("%s: index bytes % x, want % x", md.FullName(), got, tc.bytes)
		}
		b := serializeAny(t, c, tc.msg)
		body, _ := proto.Marshal(tc.msg)
		if want := append(append(header(int(binary.BigEndian.Uint32(b[1:5]))), tc.bytes...), body...); !bytes.Equal(b, want) {
			t.Errorf("%s: % x, want % x", md.FullName(), b, want)
		}
	}
	// Large indexes are zig-zag varints.
	if got := protobuf.AppendMessageIndexes(nil, []int{2, 64}); !bytes.Equal(got, []byte{0x04, 0x04, 0x80, 0x01}) {
		t.Errorf("[2 64]: % x", got)
	}
}

func serializeAny(t *testing.T, c *registry.Client, m proto.Message) []byte {
	t.Helper()
	var b []byte
	var err error
	switch m := m.(type) {
	case *testpb.Order:
		b, err = newSerde[*testpb.Order](t, c, registry.Options{}).Bind("t1", false).Serialize(m)
	case *testpb.Refund:
		s := newSerde[*testpb.Refund](t, c, registry.Options{}).Bind("t2", false)
		if b, err = s.Serialize(m); err == nil {
			// And it reads back what Java would write for the second message.
			if got, err := s.Deserialize(b); err != nil || !proto.Equal(got, m) {
				t.Errorf("Refund: %v, %v", got, err)
			}
		}
	case *testpb.Order_Line:
		b, err = newSerde[*testpb.Order_Line](t, c, registry.Options{}).Bind("t3", false).Serialize(m)
	case *testpb.Order_Line_Discount:
		s := newSerde[*testpb.Order_Line_Discount](t, c, registry.Options{}).Bind("t4", false)
		if b, err = s.Serialize(m); err == nil {
			if got, err := s.Deserialize(b); err != nil || !proto.Equal(got, m) {
				t.Errorf("Discount: %v, %v", got, err)
			}
		}
	case *testpb.Legacy:
		b, err = newSerde[*testpb.Legacy](t, c, registry.Options{}).Bind("t5", false).Serialize(m)
	case *testpb.Reading:
		b, err = newSerde[*testpb.Reading](t, c, registry.Options{}).Bind("t6", false).Serialize(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImportsAreReferences(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[*testpb.Order](t, c, registry.Options{}).Bind("orders", false)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	dep, ok := reg.GetSchema("common/address.proto", 1)
	if !ok || dep.Type != sr.TypeProtobuf {
		t.Fatalf("common/address.proto: %+v", dep)
	}
	addrText, _ := protobuf.SchemaText((&testpb.Address{}).ProtoReflect().Descriptor().ParentFile())
	if dep.Schema.Schema != addrText {
		t.Errorf("registered import:\n%s\nwant\n%s", dep.Schema.Schema, addrText)
	}
	main, _ := reg.GetSchema("orders-value", 1)
	want := []sr.SchemaReference{{Name: "common/address.proto", Subject: "common/address.proto", Version: 1}}
	if !reflect.DeepEqual(main.References, want) {
		t.Errorf("references %+v, want %+v", main.References, want)
	}
	if main.Schema.Schema != s.Schema() {
		t.Error("registered schema is not the serde's")
	}
	if reg.SubjectExists("google/protobuf/timestamp.proto") {
		t.Error("a well-known type was registered")
	}

	// With auto-registration off, a second process finds the same schema.
	c2 := srtest.New(t).Client(registry.Config{URLs: []string{reg.URL()}})
	off := newSerde[*testpb.Order](t, c2, registry.Options{DisableAutoRegister: true}).Bind("orders", false)
	b, err := off.Serialize(sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:5], header(main.ID)) {
		t.Errorf("header % x, want id %d", b[:5], main.ID)
	}
	// ... and fails clearly where nothing is registered.
	err = newSerde[*testpb.Order](t, c2, registry.Options{DisableAutoRegister: true}).Bind("other", false).Check(t.Context())
	srtest.WantError(t, err, registry.ErrNotRegistered, "other-value", 0)
}

func TestSubjectNameStrategies(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	for strategy, want := range map[registry.SubjectNameStrategy]string{
		registry.TopicName:       "orders-value",
		registry.RecordName:      "kstream.test.Order",
		registry.TopicRecordName: "orders-kstream.test.Order",
	} {
		s := newSerde[*testpb.Order](t, c, registry.Options{Subject: strategy}).Bind("orders", false)
		if got, _ := s.Subject(); got != want {
			t.Errorf("%v: %q, want %q", strategy, got, want)
		}
		if _, err := s.Serialize(sampleOrder()); err != nil {
			t.Fatal(err)
		}
		if !reg.SubjectExists(want) {
			t.Errorf("%v: %q not registered", strategy, want)
		}
	}
	// Unbound: RecordName works; TopicName fails clearly.
	if _, err := newSerde[*testpb.Order](t, c, registry.Options{Subject: registry.RecordName}).Serialize(sampleOrder()); err != nil {
		t.Error(err)
	}
	_, err := newSerde[*testpb.Order](t, c, registry.Options{}).Serialize(sampleOrder())
	srtest.WantError(t, err, registry.ErrUnbound, "", 0)
}

func TestLatestAndPinned(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	first := newSerde[*testpb.Reading](t, c, registry.Options{}).Bind("r", false)
	if err := first.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	v2 := reg.Seed("r-value", sr.Schema{Schema: first.Schema() + "\nmessage Extra {}\n", Type: sr.TypeProtobuf})
	latest := newSerde[*testpb.Reading](t, c, registry.Options{UseLatestVersion: true}).Bind("r", false)
	b, err := latest.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:6], append(header(v2), 0)) {
		t.Errorf("latest: % x, want id %d", b[:6], v2)
	}
	pinned := newSerde[*testpb.Reading](t, c, registry.Options{SchemaID: 1}).Bind("r", false)
	b, err = pinned.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil || !bytes.Equal(b[:6], append(header(1), 0)) {
		t.Errorf("pinned: % x, %v", b, err)
	}
	avroID := reg.Seed("a-value", sr.Schema{Schema: `"string"`})
	err = newSerde[*testpb.Reading](t, c, registry.Options{SchemaID: avroID}).Bind("r", false).Check(t.Context())
	if err == nil {
		t.Error("pinned to an Avro schema: no error")
	}
}

func TestOneLookupPerSchemaID(t *testing.T) {
	reg := srtest.New(t)
	w := newSerde[*testpb.Reading](t, reg.Client(registry.Config{}), registry.Options{}).Bind("r", false)
	b, err := w.Serialize(&testpb.Reading{Sensor: "s"})
	if err != nil {
		t.Fatal(err)
	}
	c := srtest.New(t).Client(registry.Config{URLs: []string{reg.URL()}})
	r := newSerde[*testpb.Reading](t, c, registry.Options{})
	for _, s := range []serde.Serde[*testpb.Reading]{r, r.ForTopic("r", false), r.ForTopic("x", true)} {
		for range 20 {
			if _, err := s.Deserialize(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := reg.Requests("GET", "/schemas/ids/1"); n != 1 {
		t.Errorf("%d lookups of id 1, want 1", n)
	}
}

func TestBadInput(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[*testpb.Order](t, c, registry.Options{}).Bind("orders", false)
	good, err := s.Serialize(sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	id := int(binary.BigEndian.Uint32(good[1:5]))
	avroID := reg.Seed("a-value", sr.Schema{Schema: `"string"`})
	for name, tc := range map[string]struct {
		payload []byte
		want    error
		id      int
	}{
		"no magic byte":     {[]byte{8, 1}, registry.ErrNoMagicByte, 0},
		"unknown id":        {append(header(9999), 0), registry.ErrUnknownSchemaID, 9999},
		"avro id":           {append(header(avroID), 0), registry.ErrCorrupt, avroID},
		"no indexes":        {header(id), registry.ErrCorrupt, id},
		"bad index count":   {append(header(id), 0x7e, 0), registry.ErrCorrupt, id},
		"negative index":    {append(header(id), 0x02, 0x01), registry.ErrCorrupt, id},
		"corrupt message":   {append(header(id), 0, 0x0a, 0xff, 0x01), registry.ErrCorrupt, id},
		"truncated message": {good[:len(good)-2], registry.ErrCorrupt, id},
	} {
		_, err := s.Deserialize(tc.payload)
		t.Logf("%s: %v", name, err)
		srtest.WantError(t, err, tc.want, "orders-value", tc.id)
	}
}

func TestRegistryDownThenUp(t *testing.T) {
	reg := srtest.New(t)
	clock := srtest.NewClock()
	c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock}})
	reg.SetUnavailable(true)
	clock.OnSleep = func(n int) {
		if n == 4 {
			reg.SetUnavailable(false)
		}
	}
	s := newSerde[*testpb.Order](t, c, registry.Options{}).Bind("orders", false)
	b, err := s.Serialize(sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deserialize(b); err != nil {
		t.Fatal(err)
	}
	if n := len(clock.Slept()); n != 4 {
		t.Errorf("%d retries, want 4", n)
	}
}

func TestIncompatible(t *testing.T) {
	reg := srtest.New(t)
	reg.RefuseIncompatible("orders-value", "Schema being registered is incompatible with an earlier schema for subject \"orders-value\"")
	s := newSerde[*testpb.Order](t, reg.Client(registry.Config{}), registry.Options{}).Bind("orders", false)
	err := s.Check(t.Context())
	srtest.WantError(t, err, registry.ErrIncompatible, "orders-value", 0)
	if _, err2 := s.Serialize(sampleOrder()); !errors.Is(err2, registry.ErrIncompatible) || err2.Error() != err.Error() {
		t.Errorf("Serialize: %v, want %v", err2, err)
	}
}

// TestSchemaText compares the printed schemas with the golden files in testdata and, where
// protoc is installed, checks that protoc parses them back into the original descriptors.
func TestSchemaText(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		(&testpb.Order{}).ProtoReflect().Descriptor().ParentFile(),
		(&testpb.Address{}).ProtoReflect().Descriptor().ParentFile(),
		(&testpb.Reading{}).ProtoReflect().Descriptor().ParentFile(),
		(&testpb.Legacy{}).ProtoReflect().Descriptor().ParentFile(),
	}
	dir := t.TempDir()
	var paths []string
	for _, fd := range files {
		text, err := protobuf.SchemaText(fd)
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", filepath.Base(fd.Path())+".golden")
		if os.Getenv("UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if text != string(want) {
			t.Errorf("%s:\n%s\nwant (%s):\n%s", fd.Path(), text, golden, want)
		}
		p := filepath.Join(dir, fd.Path())
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, fd.Path())
	}

	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc is not installed: the printed schemas were not parsed back")
	}
	set := filepath.Join(dir, "set.pb")
	args := append([]string{"--proto_path=" + dir, "--include_imports", "--descriptor_set_out=" + set}, paths...)
	if out, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc rejects the printed schemas: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(set)
	if err != nil {
		t.Fatal(err)
	}
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &fds); err != nil {
		t.Fatal(err)
	}
	for _, fd := range files {
		want := protodesc.ToFileDescriptorProto(fd)
		var got *descriptorpb.FileDescriptorProto
		for _, f := range fds.File {
			if f.GetName() == fd.Path() {
				got = f
			}
		}
		clearJSONNames(want)
		clearJSONNames(got)
		if !proto.Equal(got, want) {
			t.Errorf("%s parses back to\n%v\nwant\n%v", fd.Path(), got, want)
		}
	}
}

// clearJSONNames drops what protoc fills in or not depending on how it is called.
func clearJSONNames(f *descriptorpb.FileDescriptorProto) {
	if f == nil {
		return
	}
	f.SourceCodeInfo = nil
	var walk func(m *descriptorpb.DescriptorProto)
	walk = func(m *descriptorpb.DescriptorProto) {
		for _, fd := range append(m.Field, m.Extension...) {
			fd.JsonName = nil
		}
		for _, n := range m.NestedType {
			walk(n)
		}
	}
	for _, m := range f.MessageType {
		walk(m)
	}
	for _, fd := range f.Extension {
		fd.JsonName = nil
	}
}
