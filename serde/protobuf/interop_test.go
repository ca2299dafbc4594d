package protobuf_test

import (
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/protobuf/internal/testpb"
	"github.com/kstream-go/kstream/serde/registry"
)

// The interop test with protobuf-java: the goldens of serde/testdata/interop/protobuf are
// written by testing/serdes (see its README), from a descriptor it builds as protoc builds
// testpb/proto/interop.proto.

// protoCase decodes Java's bytes into a T, which must equal want, and returns Go's
// encoding of want.
func protoCase[T proto.Message](name, text string, want T) srtest.InteropCase {
	return srtest.InteropCase{Name: name, Text: text, Run: func(t *testing.T, c *registry.Client, g srtest.Golden) []byte {
		schema, err := protobuf.SchemaText(want.ProtoReflect().Descriptor().ParentFile())
		if err != nil {
			t.Fatal(err)
		}
		if g.Schema != strings.TrimRight(schema, "\n") {
			t.Errorf("Java's schema (ProtobufCases.SCHEMA) is not what the serde registers for interop.proto:\n%s\nwant\n%s", g.Schema, schema)
		}
		s, err := protobuf.New[T](c, registry.Options{SchemaID: g.ID})
		if err != nil {
			t.Fatal(err)
		}
		bound := s.Bind("interop", false)
		got, err := bound.Deserialize(g.Bytes)
		if err != nil {
			t.Errorf("Go cannot read Java's bytes %x: %v", g.Bytes, err)
		} else if !proto.Equal(got, want) {
			t.Errorf("Java's bytes decode to %v, want %v", got, want)
		}
		b, err := bound.Serialize(want)
		if err != nil {
			t.Fatalf("serialize: %v", err)
		}
		return b
	}}
}

// differs marks c's Go encoding as different from Java's, as documented.
func differs(c srtest.InteropCase, goHex string) srtest.InteropCase {
	c.GoHex = goHex
	return c
}

func interopCases() []srtest.InteropCase {
	label := &testpb.Shipment_Parcel_Label{Text: "this side up"}
	parcel := &testpb.Shipment_Parcel{Sku: "sku-9", Grams: -250, Label: label}
	stop := &testpb.Shipment_Stop{Place: "Depot 4", Seq: 7}
	note := ""
	shipment := &testpb.Shipment{
		Id:      "s-1",
		Parcels: []*testpb.Shipment_Parcel{parcel, {Sku: "sku-10"}},
		Counts:  map[string]int64{"a": 1, "b": -2},
		Next:    stop,
		Kind:    testpb.Shipment_KIND_EXPRESS,
		Weight:  12.75,
		Ratio:   0.25,
		Total:   -9000000000,
		Delta:   -1,
		Raw:     []byte{0, 0xff},
		Note:    &note,
		At:      &timestamppb.Timestamp{Seconds: 1714979289, Nanos: 123000000},
		Codes:   []int32{1, -1, 300},
	}
	return []srtest.InteropCase{
		protoCase("plain", `id: "p-1" count: -3 flag: true`, &testpb.Plain{Id: "p-1", Count: -3, Flag: true}), // [0]
		protoCase("plain-empty", "(no fields set)", &testpb.Plain{}),                                          // [0]
		protoCase("shipment", `id: "s-1" parcels { sku: "sku-9" grams: -250 label { text: "this side up" } } parcels { sku: "sku-10" } `+
			`counts { key: "a" value: 1 } counts { key: "b" value: -2 } next { place: "Depot 4" seq: 7 } kind: KIND_EXPRESS `+
			`weight: 12.75 ratio: 0.25 total: -9000000000 delta: -1 raw: "\000\377" note: "" at { seconds: 1714979289 nanos: 123000000 } `+
			`codes: 1 codes: -1 codes: 300`, shipment), // [1]
		// protobuf-go writes a oneof field last, after codes (15); Java by number.
		differs(protoCase("shipment-oneof", `id: "s-2" locker: 42 codes: 5`,
			&testpb.Shipment{Id: "s-2", Dest: &testpb.Shipment_Locker{Locker: 42}, Codes: []int32{5}}),
			"000000006802020a03732d327a0105702a"),
		protoCase("shipment-oneof-last", `id: "s-3" address: "Main St 1"`,
			&testpb.Shipment{Id: "s-3", Dest: &testpb.Shipment_Address{Address: "Main St 1"}}),
		protoCase("parcel", `sku: "sku-9" grams: -250 label { text: "this side up" }`, parcel), // [1, 0]
		protoCase("label", `text: "this side up"`, label),                                      // [1, 0, 0]
		protoCase("stop", `place: "Depot 4" seq: 7`, stop),                                     // [1, 2]: after the map entry type [1, 1]
	}
}

// TestInteropWithJava decodes the bytes protobuf-java wrote for each case (Confluent's
// framing, message indexes included) and requires the Go serde to write the same bytes.
func TestInteropWithJava(t *testing.T) {
	srtest.RunInterop(t, "protobuf", sr.TypeProtobuf, interopCases(), false)
}

// TestInteropWriteForJava writes Go's encodings to $KSTREAM_SERDES_INTEROP_OUT/protobuf,
// for testing/serdes/run.sh read.
func TestInteropWriteForJava(t *testing.T) {
	if os.Getenv(srtest.InteropOutEnv) == "" {
		t.Skip(srtest.InteropOutEnv + " is not set")
	}
	srtest.RunInterop(t, "protobuf", sr.TypeProtobuf, interopCases(), true)
}
