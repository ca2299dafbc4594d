package avro_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/big"
	"reflect"
	"testing"
	"time"

	havro "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "com.acme",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "total", "type": "long"},
    {"name": "score", "type": "double"},
    {"name": "paid", "type": "boolean"},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "raw", "type": "bytes"}
  ]
}`

type Order struct {
	ID     string           `avro:"id"`
	Qty    int32            `avro:"qty"`
	Total  int64            `avro:"total"`
	Score  float64          `avro:"score"`
	Paid   bool             `avro:"paid"`
	Note   *string          `avro:"note"`
	Status string           `avro:"status"`
	Tags   []string         `avro:"tags"`
	Attrs  map[string]int64 `avro:"attrs"`
	Price  *big.Rat         `avro:"price"`
	At     time.Time        `avro:"at"`
	Day    time.Time        `avro:"day"`
	Raw    []byte           `avro:"raw"`
}

func sampleOrder() Order {
	note := "leave at door"
	return Order{
		ID: "o-1", Qty: 3, Total: 1 << 40, Score: 2.5, Paid: true, Note: &note, Status: "PAID",
		Tags:  []string{"a", "b"},
		Attrs: map[string]int64{"x": 1, "y": -2},
		Price: big.NewRat(12345, 100),
		At:    time.UnixMilli(1767225600123).UTC(),
		Day:   time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
		Raw:   []byte{0, 1, 2},
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func TestRoundTripValue(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s, err := avro.New[Order](c, orderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vs := s.ForTopic("orders", false)
	want := sampleOrder()
	want.Attrs = map[string]int64{"x": 1} // Go maps iterate at random: one entry, so the bytes are fixed
	b, err := vs.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	id := reg.Seed("orders-value", sr.Schema{Schema: orderSchema}) // already there: same id
	if b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != uint32(id) {
		t.Fatalf("header % x, want 00 then id %d", b[:5], id)
	}
	// hamba/avro's encoding with arrays and maps in one block, as Apache Avro's Java library
	// writes them (its default writes blocks with their sizes: see interop_test.go).
	javaLike := havro.Config{DisableBlockSizeHeader: true, BlockLength: math.MaxInt32}.Freeze()
	body, err := javaLike.Marshal(havro.MustParse(orderSchema), want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[5:], body) {
		t.Errorf("body % x, want Avro's % x", b[5:], body)
	}
	got, err := vs.Deserialize(b)
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
	var _ serde.TopicBound[Order] = s

	// A nil pointer is a Kafka null, and nil bytes decode to a nil pointer.
	ps, err := avro.New[*Order](c, orderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ps.Serialize(nil); b != nil || err != nil {
		t.Errorf("Serialize(nil) = %x, %v; want a Kafka null", b, err)
	}
	if o, err := ps.Deserialize(nil); o != nil || err != nil {
		t.Errorf("Deserialize(nil) = %v, %v; want nil", o, err)
	}
}
