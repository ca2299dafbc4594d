package avro_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	havro "github.com/hamba/avro/v2"

	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

// sameAsMarshal checks that the serde writes, for v, the header then exactly what
// hamba's Marshal writes (the serde encodes through a pooled pointer to a copy of v
// instead of a boxed v), and reads it back to want.
func sameAsMarshal[T any](t *testing.T, c *registry.Client, schema string, v T, eq func(a, b T) bool) {
	t.Helper()
	s, err := avro.New[T](c, schema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Bind("pool", false)
	got, err := b.Serialize(v)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	// The serde's configuration: arrays and maps in one block, as Java writes them.
	api := havro.Config{TagKey: "avro", DisableBlockSizeHeader: true, BlockLength: math.MaxInt32}.Freeze()
	body, err := api.Marshal(havro.MustParse(schema), v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[5:], body) {
		t.Errorf("%T: % x, want % x", v, got[5:], body)
	}
	appended, isNull, err := b.AppendSerialize([]byte("x"), v)
	if err != nil || isNull || !bytes.Equal(appended[1:], got) {
		t.Errorf("%T: AppendSerialize % x, %v, %v", v, appended, isNull, err)
	}
	back, err := b.Deserialize(got)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	if !eq(back, v) {
		t.Errorf("%T: read back %v, want %v", v, back, v)
	}
}

type oneField struct {
	N int64 `avro:"n"`
}

type onePointer struct {
	P *string `avro:"p"`
}

func TestPooledValuesEncodeAsWriteVal(t *testing.T) {
	c := srtest.New(t).Client(registry.Config{})
	same := func(a, b any) bool { return a == b }
	sameAsMarshal(t, c, `"string"`, "abc", func(a, b string) bool { return same(a, b) })
	sameAsMarshal(t, c, `"long"`, int64(-42), func(a, b int64) bool { return a == b })
	sameAsMarshal(t, c, `"boolean"`, true, func(a, b bool) bool { return a == b })
	sameAsMarshal(t, c, benchSchema, reading, func(a, b Reading) bool { return a == b })
	sameAsMarshal(t, c, benchSchema, &reading, func(a, b *Reading) bool { return *a == *b })
	rec := `{"type": "record", "name": "One", "fields": [{"name": "n", "type": "long"}]}`
	sameAsMarshal(t, c, rec, oneField{N: 7}, func(a, b oneField) bool { return a == b })
	str := "s"
	ptr := `{"type": "record", "name": "P", "fields": [{"name": "p", "type": ["null", "string"]}]}`
	sameAsMarshal(t, c, ptr, onePointer{P: &str}, func(a, b onePointer) bool { return *a.P == *b.P })
	sameAsMarshal(t, c, `{"type": "array", "items": "int"}`, []int32{1, 2, 3}, func(a, b []int32) bool {
		return len(a) == 3 && a[0] == b[0] && a[1] == b[1] && a[2] == b[2]
	})
	sameAsMarshal(t, c, `{"type": "map", "values": "long"}`, map[string]int64{"a": 1}, func(a, b map[string]int64) bool {
		return len(a) == 1 && a["a"] == b["a"]
	})
	ts := time.UnixMilli(1767225600123).UTC()
	sameAsMarshal(t, c, `{"type": "long", "logicalType": "timestamp-millis"}`, ts, func(a, b time.Time) bool { return a.Equal(b) })
	sameAsMarshal(t, c, rec, any(map[string]any{"n": int64(3)}), func(a, b any) bool {
		return a.(map[string]any)["n"] == b.(map[string]any)["n"]
	})
}

// TestNoAllocationPerRecord: writing into a caller's buffer allocates nothing, and reading
// allocates only for the strings (hamba copies them into a shared slab).
func TestNoAllocationPerRecord(t *testing.T) {
	s := benchSerde(t).(*avro.Serde[Reading])
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, err := s.AppendSerialize(buf[:0], reading); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendSerialize: %v allocations, want 0", n)
	}
	data, err := s.Serialize(reading)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := s.Deserialize(data); err != nil {
			t.Fatal(err)
		}
	}); n >= 1 {
		t.Errorf("Deserialize: %v allocations, want < 1 (the slab of strings only)", n)
	}
}
