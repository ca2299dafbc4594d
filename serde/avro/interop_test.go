package avro_test

import (
	"math/big"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

// The interop test with Apache Avro's Java library: the goldens of
// serde/testdata/interop/avro are written by testing/serdes (see its README).

type interopCustomer struct {
	Name string `avro:"name"`
	VIP  bool   `avro:"vip"`
}

type interopOrder struct {
	ID       string           `avro:"id"`
	Qty      int32            `avro:"qty"`
	Total    int64            `avro:"total"`
	Ratio    float32          `avro:"ratio"`
	Score    float64          `avro:"score"`
	Paid     bool             `avro:"paid"`
	Raw      []byte           `avro:"raw"`
	Customer interopCustomer  `avro:"customer"`
	Coupon   *string          `avro:"coupon"`
	Note     *string          `avro:"note"`
	Status   string           `avro:"status"`
	Tags     []string         `avro:"tags"`
	Attrs    map[string]int64 `avro:"attrs"`
	Amount   *big.Rat         `avro:"amount"`
	PlacedAt time.Time        `avro:"placed_at"`
}

// avroCase decodes Java's bytes into a T, which must equal want, and returns Go's
// encoding of want.
func avroCase[T any](name, text string, want T) srtest.InteropCase {
	return srtest.InteropCase{Name: name, Text: text, Run: func(t *testing.T, c *registry.Client, g srtest.Golden) []byte {
		s, err := avro.New[T](c, g.Schema, registry.Options{SchemaID: g.ID})
		if err != nil {
			t.Fatal(err)
		}
		bound := s.Bind("interop", false)
		got, err := bound.Deserialize(g.Bytes)
		if err != nil {
			t.Errorf("Go cannot read Java's bytes %x: %v", g.Bytes, err)
		} else if !sameValue(reflect.ValueOf(got), reflect.ValueOf(want)) {
			t.Errorf("Java's bytes decode to %#v, want %#v", got, want)
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

// kafkaNull marks c's Go encoding as a Kafka null.
func kafkaNull(c srtest.InteropCase) srtest.InteropCase {
	c.GoNull = true
	return c
}

// sameValue is reflect.DeepEqual, but with *big.Rat compared by value and time.Time by
// instant.
func sameValue(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch x := a.Interface().(type) {
	case *big.Rat:
		y := b.Interface().(*big.Rat)
		return (x == nil) == (y == nil) && (x == nil || x.Cmp(y) == 0)
	case time.Time:
		return x.Equal(b.Interface().(time.Time))
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func interopCases() []srtest.InteropCase {
	ptr := func(s string) *string { return &s }
	at := time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	var squares []int64
	text := "["
	for i := range int64(150) {
		squares = append(squares, i*i)
		if i > 0 {
			text += ", "
		}
		text += big.NewInt(i * i).String()
	}
	text += "]"
	return []srtest.InteropCase{
		// A nil is a Kafka null (no bytes), as Confluent's KafkaAvroSerializer writes a Java
		// null; Go reads Java's framed null all the same.
		kafkaNull(avroCase[any]("null", "null", nil)),
		avroCase("boolean", "true", true),
		avroCase("int", "-1234567", int32(-1234567)),
		avroCase("long", "1234567890123", int64(1234567890123)),
		avroCase("float", "3.25", float32(3.25)),
		avroCase("double", "-1234.5678", -1234.5678),
		avroCase("bytes", "0x0001feff", []byte{0, 1, 0xfe, 0xff}),
		avroCase("string", `"héllo, 世界"`, "héllo, 世界"),
		avroCase("record", `{"id": "o-1", "qty": 3, "total": -9000000000, "ratio": 0.5, "score": 99.125, "paid": true, "raw": 0xcafe, "customer": {"name": "Ann", "vip": true}, "coupon": "SPRING", "note": null, "status": "PAID", "tags": ["gift", "fragile"], "attrs": {"weight": 1200}, "amount": 123.45, "placed_at": "2024-05-06T07:08:09.123Z"}`,
			interopOrder{
				ID: "o-1", Qty: 3, Total: -9000000000, Ratio: 0.5, Score: 99.125, Paid: true, Raw: []byte{0xca, 0xfe},
				Customer: interopCustomer{Name: "Ann", VIP: true}, Coupon: ptr("SPRING"), Status: "PAID",
				Tags: []string{"gift", "fragile"}, Attrs: map[string]int64{"weight": 1200},
				Amount: big.NewRat(12345, 100), PlacedAt: at,
			}),
		kafkaNull(avroCase[*string]("union-null", "null", nil)),
		avroCase("union-string", `"x"`, ptr("x")),
		avroCase("enum", `"BLUE"`, "BLUE"),
		avroCase("array", "[1, -2, 300]", []int64{1, -2, 300}),
		avroCase("array-empty", "[]", []int64{}),
		avroCase("array-150", text, squares),
		avroCase("map", `{"k": 7}`, map[string]int32{"k": 7}),
		avroCase("map-empty", "{}", map[string]int32{}),
		avroCase("decimal", "123.45", big.NewRat(12345, 100)),
		avroCase("decimal-negative", "-123.45", big.NewRat(-12345, 100)),
		avroCase("decimal-zero", "0.00", new(big.Rat)),
		avroCase("decimal-high-bit", "1.28", big.NewRat(128, 100)),
		differs(avroCase("decimal-minus-128", "-1.28", big.NewRat(-128, 100)), "000000001604ff80"),
		avroCase("timestamp-millis", `"2024-05-06T07:08:09.123Z"`, at),
		avroCase("timestamp-micros", `"2024-05-06T07:08:09.123456Z"`, time.Date(2024, 5, 6, 7, 8, 9, 123_456_000, time.UTC)),
		avroCase("date", `"2024-05-06"`, time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)),
		avroCase("long-max-id", "-1", int64(-1)),
	}
}

// TestInteropWithJava decodes the bytes Apache Avro wrote for each case and requires the
// Go serde to write the same bytes, byte for byte (or as documented otherwise).
func TestInteropWithJava(t *testing.T) {
	srtest.RunInterop(t, "avro", sr.TypeAvro, interopCases(), false)
}

// TestInteropWriteForJava writes Go's encodings to $KSTREAM_SERDES_INTEROP_OUT/avro, for
// testing/serdes/run.sh read.
func TestInteropWriteForJava(t *testing.T) {
	if os.Getenv(srtest.InteropOutEnv) == "" {
		t.Skip(srtest.InteropOutEnv + " is not set")
	}
	srtest.RunInterop(t, "avro", sr.TypeAvro, interopCases(), true)
}
