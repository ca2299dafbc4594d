package serde

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The hex vectors below were produced by Apache Kafka's Java client, kafka-clients 4.1.1
// (OpenJDK 17.0.15), by printing the output of StringSerializer, IntegerSerializer,
// LongSerializer, DoubleSerializer and ByteArraySerializer for each value. They are pasted
// verbatim so that these tests prove byte-identity with Java rather than restate the spec.

var javaStringVectors = []struct {
	in  string
	hex string
}{
	{"", ""},
	{"a", "61"},
	{"hello", "68656c6c6f"},
	{"h\u00e9llo", "68c3a96c6c6f"}, // héllo: 2-byte UTF-8
	{"\u65e5\u672c\u8a9e", "e697a5e69cace8aa9e"}, // 日本語: 3-byte UTF-8
	{"\U0001F600", "f09f9880"},                   // 😀: 4-byte UTF-8 (a surrogate pair in Java)
	{"key-12345", "6b65792d3132333435"},
	{"\x00", "00"},
}

var javaInt32Vectors = []struct {
	in  int32
	hex string
}{
	{0, "00000000"},
	{1, "00000001"},
	{-1, "ffffffff"},
	{42, "0000002a"},
	{-42, "ffffffd6"},
	{256, "00000100"},
	{0x12345678, "12345678"},
	{math.MaxInt32, "7fffffff"},
	{math.MinInt32, "80000000"},
}

var javaInt64Vectors = []struct {
	in  int64
	hex string
}{
	{0, "0000000000000000"},
	{1, "0000000000000001"},
	{-1, "ffffffffffffffff"},
	{42, "000000000000002a"},
	{-42, "ffffffffffffffd6"},
	{0x0102030405060708, "0102030405060708"},
	{1700000000000, "0000018bcfe56800"},
	{math.MaxInt64, "7fffffffffffffff"},
	{math.MinInt64, "8000000000000000"},
}

var javaFloat64Vectors = []struct {
	name string
	in   float64
	hex  string
}{
	{"0.0", 0.0, "0000000000000000"},
	{"-0.0", math.Copysign(0, -1), "8000000000000000"},
	{"1.0", 1.0, "3ff0000000000000"},
	{"-1.0", -1.0, "bff0000000000000"},
	{"0.1", 0.1, "3fb999999999999a"},
	{"pi", math.Pi, "400921fb54442d18"},
	{"-2.5", -2.5, "c004000000000000"},
	{"MaxFloat64", math.MaxFloat64, "7fefffffffffffff"},
	{"-MaxFloat64", -math.MaxFloat64, "ffefffffffffffff"},
	{"SmallestNonzero (Double.MIN_VALUE)", math.SmallestNonzeroFloat64, "0000000000000001"},
	{"MIN_NORMAL", 0x1p-1022, "0010000000000000"},
	{"+Inf", math.Inf(1), "7ff0000000000000"},
	{"-Inf", math.Inf(-1), "fff0000000000000"},
	{"NaN", math.NaN(), "7ff8000000000000"},
	// Java's doubleToLongBits collapses every NaN to the canonical 0x7ff8000000000000.
	{"NaN signalling 0x7ff0000000000001", math.Float64frombits(0x7ff0000000000001), "7ff8000000000000"},
	{"NaN negative 0xfff8000000000000", math.Float64frombits(0xfff8000000000000), "7ff8000000000000"},
	{"NaN payload 0x7fffffffffffffff", math.Float64frombits(0x7fffffffffffffff), "7ff8000000000000"},
}

// javaBytesVector is ByteArraySerializer's output for {0x00, 0xff, 0x7f, 0x80}: pass-through.
const javaBytesVector = "00ff7f80"

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestStringJavaVectors(t *testing.T) {
	s := String()
	for _, tc := range javaStringVectors {
		want := mustHex(t, tc.hex)
		got, err := s.Serialize(tc.in)
		if err != nil {
			t.Fatalf("Serialize(%q): %v", tc.in, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Serialize(%q) = %x, want %x", tc.in, got, want)
		}
		if got == nil {
			t.Errorf("Serialize(%q) = nil, want non-nil (a present value is not a Kafka null)", tc.in)
		}
		back, err := s.Deserialize(want)
		if err != nil || back != tc.in {
			t.Errorf("Deserialize(%x) = %q, %v; want %q", want, back, err, tc.in)
		}
	}
}

func TestInt32JavaVectors(t *testing.T) {
	s := Int32()
	for _, tc := range javaInt32Vectors {
		want := mustHex(t, tc.hex)
		got, err := s.Serialize(tc.in)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Serialize(%d) = %x, %v; want %x", tc.in, got, err, want)
		}
		back, err := s.Deserialize(want)
		if err != nil || back != tc.in {
			t.Errorf("Deserialize(%x) = %d, %v; want %d", want, back, err, tc.in)
		}
	}
}

func TestInt64JavaVectors(t *testing.T) {
	s := Int64()
	for _, tc := range javaInt64Vectors {
		want := mustHex(t, tc.hex)
		got, err := s.Serialize(tc.in)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Serialize(%d) = %x, %v; want %x", tc.in, got, err, want)
		}
		back, err := s.Deserialize(want)
		if err != nil || back != tc.in {
			t.Errorf("Deserialize(%x) = %d, %v; want %d", want, back, err, tc.in)
		}
	}
}

func TestFloat64JavaVectors(t *testing.T) {
	s := Float64()
	for _, tc := range javaFloat64Vectors {
		t.Run(tc.name, func(t *testing.T) {
			want := mustHex(t, tc.hex)
			got, err := s.Serialize(tc.in)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Serialize(%v bits %016x) = %x, %v; want %x",
					tc.in, math.Float64bits(tc.in), got, err, want)
			}
			back, err := s.Deserialize(want)
			if err != nil {
				t.Fatalf("Deserialize(%x): %v", want, err)
			}
			if math.IsNaN(tc.in) {
				if !math.IsNaN(back) {
					t.Errorf("Deserialize(%x) = %v, want NaN", want, back)
				}
				return
			}
			// Compare bits so that -0.0 and +0.0 are told apart.
			if math.Float64bits(back) != math.Float64bits(tc.in) {
				t.Errorf("Deserialize(%x) = %v (bits %016x), want %v (bits %016x)",
					want, back, math.Float64bits(back), tc.in, math.Float64bits(tc.in))
			}
		})
	}
}

func TestFloat64NegativeZeroSignKept(t *testing.T) {
	b, err := Float64().Serialize(math.Copysign(0, -1))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Float64().Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 || !math.Signbit(v) {
		t.Errorf("round trip of -0.0 = %v (signbit %v), want -0.0", v, math.Signbit(v))
	}
}

func TestBytesJavaVector(t *testing.T) {
	s := Bytes()
	in := []byte{0x00, 0xff, 0x7f, 0x80}
	want := mustHex(t, javaBytesVector)
	got, err := s.Serialize(in)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("Serialize(%x) = %x, %v; want %x", in, got, err, want)
	}
	back, err := s.Deserialize(want)
	if err != nil || !bytes.Equal(back, in) {
		t.Errorf("Deserialize(%x) = %x, %v; want %x", want, back, err, in)
	}
}

func TestBytesNilAndEmptyDistinct(t *testing.T) {
	s := Bytes()

	b, err := s.Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("Serialize(nil) = %#v, %v; want nil, nil", b, err)
	}
	b, err = s.Serialize([]byte{})
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf("Serialize([]byte{}) = %#v, %v; want empty non-nil", b, err)
	}

	v, err := s.Deserialize(nil)
	if err != nil || v != nil {
		t.Errorf("Deserialize(nil) = %#v, %v; want nil, nil", v, err)
	}
	v, err = s.Deserialize([]byte{})
	if err != nil || v == nil || len(v) != 0 {
		t.Errorf("Deserialize([]byte{}) = %#v, %v; want empty non-nil", v, err)
	}
}

func TestDeserializeCopiesInput(t *testing.T) {
	buf := []byte("hello")
	b, err := Bytes().Deserialize(buf)
	if err != nil {
		t.Fatal(err)
	}
	str, err := String().Deserialize(buf)
	if err != nil {
		t.Fatal(err)
	}
	np, err := Nullable(Bytes()).Deserialize(buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX") // the runtime may reuse the record buffer
	if string(b) != "hello" {
		t.Errorf("Bytes().Deserialize result aliases its input: now %q", b)
	}
	if str != "hello" {
		t.Errorf("String().Deserialize result aliases its input: now %q", str)
	}
	if string(*np) != "hello" {
		t.Errorf("Nullable(Bytes()).Deserialize result aliases its input: now %q", *np)
	}
}

type point struct {
	X    int               `json:"x"`
	Y    int               `json:"y"`
	Name string            `json:"name,omitempty"`
	Tags []string          `json:"tags,omitempty"`
	Meta map[string]string `json:"meta,omitempty"`
}

func TestDeserializeNilIsZeroNoError(t *testing.T) {
	check := func(name string, f func() (any, error), isZero func(any) bool) {
		t.Helper()
		v, err := f()
		if err != nil {
			t.Errorf("%s.Deserialize(nil): unexpected error %v", name, err)
			return
		}
		if !isZero(v) {
			t.Errorf("%s.Deserialize(nil) = %#v, want zero value", name, v)
		}
	}
	check("String", func() (any, error) { return String().Deserialize(nil) },
		func(v any) bool { return v.(string) == "" })
	check("Bytes", func() (any, error) { return Bytes().Deserialize(nil) },
		func(v any) bool { return v.([]byte) == nil })
	check("Int32", func() (any, error) { return Int32().Deserialize(nil) },
		func(v any) bool { return v.(int32) == 0 })
	check("Int64", func() (any, error) { return Int64().Deserialize(nil) },
		func(v any) bool { return v.(int64) == 0 })
	check("Float64", func() (any, error) { return Float64().Deserialize(nil) },
		func(v any) bool { f := v.(float64); return f == 0 && !math.Signbit(f) })
	check("JSON[point]", func() (any, error) { return JSON[point]().Deserialize(nil) },
		func(v any) bool {
			p := v.(point)
			return p.X == 0 && p.Y == 0 && p.Name == "" && p.Tags == nil && p.Meta == nil
		})
	check("JSON[*point]", func() (any, error) { return JSON[*point]().Deserialize(nil) },
		func(v any) bool { return v.(*point) == nil })
	check("JSON[map[string]int]", func() (any, error) { return JSON[map[string]int]().Deserialize(nil) },
		func(v any) bool { return v.(map[string]int) == nil })
	check("JSON[[]int]", func() (any, error) { return JSON[[]int]().Deserialize(nil) },
		func(v any) bool { return v.([]int) == nil })
	check("JSON[any]", func() (any, error) { return JSON[any]().Deserialize(nil) },
		func(v any) bool { return v == nil })
	check("JSON[int]", func() (any, error) { return JSON[int]().Deserialize(nil) },
		func(v any) bool { return v.(int) == 0 })
	check("Nullable(String())", func() (any, error) { return Nullable(String()).Deserialize(nil) },
		func(v any) bool { return v.(*string) == nil })
	check("Nullable(Int64())", func() (any, error) { return Nullable(Int64()).Deserialize(nil) },
		func(v any) bool { return v.(*int64) == nil })
	check("Funcs", func() (any, error) {
		return Funcs(String().Serialize, String().Deserialize).Deserialize(nil)
	}, func(v any) bool { return v.(string) == "" })
}

func TestStringEmptyIsNotNull(t *testing.T) {
	b, err := String().Serialize("")
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf(`String().Serialize("") = %#v, %v; want empty non-nil`, b, err)
	}
	v, err := String().Deserialize([]byte{})
	if err != nil || v != "" {
		t.Errorf(`String().Deserialize([]byte{}) = %q, %v; want "", nil`, v, err)
	}
}

func TestStringInvalidUTF8(t *testing.T) {
	for _, in := range [][]byte{
		{0xff},
		{0xc3},             // truncated 2-byte sequence
		{0xe6, 0x97},       // truncated 3-byte sequence
		{0xc0, 0xaf},       // overlong encoding of '/'
		{0xed, 0xa0, 0x80}, // UTF-16 surrogate U+D800 encoded as UTF-8
		{'o', 'k', 0x80},
	} {
		v, err := String().Deserialize(in)
		if err == nil {
			t.Errorf("Deserialize(%x) = %q, nil; want an error", in, v)
			continue
		}
		if !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Deserialize(%x) error %q does not mention UTF-8", in, err)
		}
		if _, err := Nullable(String()).Deserialize(in); err == nil {
			t.Errorf("Nullable(String()).Deserialize(%x): want an error", in)
		}
	}
}

func TestWrongLengths(t *testing.T) {
	type tc struct {
		name string
		de   func([]byte) error
		want int
	}
	cases := []tc{
		{"Int32", func(b []byte) error { _, err := Int32().Deserialize(b); return err }, 4},
		{"Int64", func(b []byte) error { _, err := Int64().Deserialize(b); return err }, 8},
		{"Float64", func(b []byte) error { _, err := Float64().Deserialize(b); return err }, 8},
		{"Nullable(Int32)", func(b []byte) error { _, err := Nullable(Int32()).Deserialize(b); return err }, 4},
		{"Nullable(Int64)", func(b []byte) error { _, err := Nullable(Int64()).Deserialize(b); return err }, 8},
		{"Nullable(Float64)", func(b []byte) error { _, err := Nullable(Float64()).Deserialize(b); return err }, 8},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 16} {
			if n == c.want {
				continue
			}
			err := c.de(make([]byte, n))
			if err == nil {
				t.Errorf("%s.Deserialize(%d bytes): want an error", c.name, n)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "got "+strconv.Itoa(n)) || !strings.Contains(msg, "want "+strconv.Itoa(c.want)) {
				t.Errorf("%s.Deserialize(%d bytes) error %q does not mention got %d / want %d",
					c.name, n, msg, n, c.want)
			}
		}
	}
}

func TestNullableString(t *testing.T) {
	s := Nullable(String())

	b, err := s.Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("Serialize(nil) = %#v, %v; want nil, nil", b, err)
	}
	v, err := s.Deserialize(nil)
	if err != nil || v != nil {
		t.Errorf("Deserialize(nil) = %v, %v; want nil, nil", v, err)
	}

	empty := ""
	b, err = s.Serialize(&empty)
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf(`Serialize(&"") = %#v, %v; want empty non-nil`, b, err)
	}
	v, err = s.Deserialize([]byte{})
	if err != nil || v == nil || *v != "" {
		t.Errorf("Deserialize([]byte{}) = %v, %v; want pointer to \"\"", v, err)
	}

	for _, tc := range javaStringVectors {
		in := tc.in
		want := mustHex(t, tc.hex)
		b, err := s.Serialize(&in)
		if err != nil || !bytes.Equal(b, want) || b == nil {
			t.Errorf("Serialize(&%q) = %#v, %v; want %x", in, b, err, want)
		}
		v, err := s.Deserialize(want)
		if err != nil || v == nil || *v != in {
			t.Errorf("Deserialize(%x) = %v, %v; want &%q", want, v, err, in)
		}
	}
}

func TestNullableNumbers(t *testing.T) {
	i := int64(-42)
	b, err := Nullable(Int64()).Serialize(&i)
	if err != nil || hex.EncodeToString(b) != "ffffffffffffffd6" {
		t.Errorf("Nullable(Int64()).Serialize(&-42) = %x, %v", b, err)
	}
	p, err := Nullable(Int64()).Deserialize(b)
	if err != nil || p == nil || *p != -42 {
		t.Errorf("Nullable(Int64()).Deserialize(%x) = %v, %v", b, p, err)
	}
	// A zero value is present, not a null.
	var zero int32
	b, err = Nullable(Int32()).Serialize(&zero)
	if err != nil || hex.EncodeToString(b) != "00000000" {
		t.Errorf("Nullable(Int32()).Serialize(&0) = %x, %v", b, err)
	}
}

// A present value whose inner serde yields nil bytes must stay present (empty, not null).
func TestNullablePresentNeverNull(t *testing.T) {
	var nilSlice []byte
	b, err := Nullable(Bytes()).Serialize(&nilSlice)
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf("Nullable(Bytes()).Serialize(&nil) = %#v, %v; want empty non-nil", b, err)
	}
	v, err := Nullable(Bytes()).Deserialize([]byte{})
	if err != nil || v == nil || *v == nil || len(*v) != 0 {
		t.Errorf("Nullable(Bytes()).Deserialize([]byte{}) = %#v, %v; want pointer to empty non-nil", v, err)
	}
}

func TestNullablePropagatesErrors(t *testing.T) {
	boom := errors.New("boom")
	s := Nullable(Funcs(
		func(string) ([]byte, error) { return nil, boom },
		func([]byte) (string, error) { return "", boom },
	))
	x := "x"
	if _, err := s.Serialize(&x); !errors.Is(err, boom) {
		t.Errorf("Serialize error = %v, want boom", err)
	}
	v, err := s.Deserialize([]byte("x"))
	if !errors.Is(err, boom) || v != nil {
		t.Errorf("Deserialize = %v, %v; want nil, boom", v, err)
	}
}

func TestJSONPointerNil(t *testing.T) {
	s := JSON[*point]()
	b, err := s.Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("Serialize(nil) = %q, %v; want nil bytes (a Kafka null, not the text null)", b, err)
	}
	v, err := s.Deserialize(nil)
	if err != nil || v != nil {
		t.Errorf("Deserialize(nil) = %v, %v; want nil", v, err)
	}
	p := &point{X: 1, Y: -2, Name: "é"}
	b, err = s.Serialize(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"x":1,"y":-2,"name":"é"}` {
		t.Errorf("Serialize = %s", b)
	}
	v, err = s.Deserialize(b)
	if err != nil || v == nil || v.X != 1 || v.Y != -2 || v.Name != "é" {
		t.Errorf("Deserialize(%s) = %+v, %v", b, v, err)
	}
}

func TestJSONMapNil(t *testing.T) {
	s := JSON[map[string]int]()
	b, err := s.Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("Serialize(nil map) = %q, %v; want nil bytes", b, err)
	}
	v, err := s.Deserialize(nil)
	if err != nil || v != nil {
		t.Errorf("Deserialize(nil) = %v, %v; want nil map", v, err)
	}
	// An empty map is present.
	b, err = s.Serialize(map[string]int{})
	if err != nil || string(b) != "{}" {
		t.Errorf("Serialize(empty map) = %q, %v; want {}", b, err)
	}
	b, err = s.Serialize(map[string]int{"b": 2, "a": -1})
	if err != nil || string(b) != `{"a":-1,"b":2}` {
		t.Errorf("Serialize = %q, %v", b, err)
	}
	v, err = s.Deserialize(b)
	if err != nil || len(v) != 2 || v["a"] != -1 || v["b"] != 2 {
		t.Errorf("Deserialize(%s) = %v, %v", b, v, err)
	}
}

func TestJSONSliceAndInterfaceNil(t *testing.T) {
	b, err := JSON[[]int]().Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("JSON[[]int].Serialize(nil) = %q, %v; want nil bytes", b, err)
	}
	b, err = JSON[[]int]().Serialize([]int{})
	if err != nil || string(b) != "[]" {
		t.Errorf("JSON[[]int].Serialize([]int{}) = %q, %v; want []", b, err)
	}
	b, err = JSON[any]().Serialize(nil)
	if err != nil || b != nil {
		t.Errorf("JSON[any].Serialize(nil) = %q, %v; want nil bytes", b, err)
	}
	b, err = JSON[any]().Serialize(map[string]any{"k": []any{1, "x"}})
	if err != nil || string(b) != `{"k":[1,"x"]}` {
		t.Errorf("JSON[any].Serialize = %q, %v", b, err)
	}
}

func TestJSONStructRoundTrip(t *testing.T) {
	s := JSON[point]()
	in := point{
		X: math.MaxInt32, Y: math.MinInt32, Name: "日本語 😀",
		Tags: []string{"a", "", "c"}, Meta: map[string]string{"k": "v"},
	}
	b, err := s.Serialize(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.X != in.X || out.Y != in.Y || out.Name != in.Name ||
		strings.Join(out.Tags, ",") != strings.Join(in.Tags, ",") || len(out.Tags) != 3 ||
		len(out.Meta) != 1 || out.Meta["k"] != "v" {
		t.Errorf("round trip: got %+v, want %+v", out, in)
	}
	// The zero struct is a present value, never a null.
	b, err = s.Serialize(point{})
	if err != nil || string(b) != `{"x":0,"y":0}` {
		t.Errorf("Serialize(point{}) = %q, %v", b, err)
	}
}

func TestJSONErrors(t *testing.T) {
	if _, err := JSON[point]().Deserialize([]byte(`{"x":`)); err == nil || !strings.Contains(err.Error(), "serde: json") {
		t.Errorf("truncated JSON: err = %v, want serde: json error", err)
	}
	if _, err := JSON[point]().Deserialize([]byte(`{"x":"notanint"}`)); err == nil {
		t.Error("type mismatch: want an error")
	}
	if _, err := JSON[point]().Deserialize([]byte{}); err == nil {
		t.Error("empty non-null bytes: want an error")
	}
	if _, err := JSON[float64]().Serialize(math.NaN()); err == nil || !strings.Contains(err.Error(), "serde: json") {
		t.Errorf("NaN: err = %v, want serde: json error", err)
	}
	if _, err := JSON[chan int]().Serialize(make(chan int)); err == nil {
		t.Error("chan: want an error")
	}
}

func TestFuncs(t *testing.T) {
	s := Funcs(
		func(v int) ([]byte, error) { return []byte{byte(v)}, nil },
		func(b []byte) (int, error) {
			if len(b) != 1 {
				return 0, errors.New("len")
			}
			return int(b[0]), nil
		},
	)
	b, err := s.Serialize(7)
	if err != nil || !bytes.Equal(b, []byte{7}) {
		t.Errorf("Serialize(7) = %v, %v", b, err)
	}
	v, err := s.Deserialize([]byte{9})
	if err != nil || v != 9 {
		t.Errorf("Deserialize = %v, %v", v, err)
	}
	if _, err := s.Deserialize(nil); err == nil {
		t.Error("Funcs must pass nil to the user's function unchanged")
	}
}

// Random-ish round trips beyond the Java vectors.
func TestNumberRoundTrips(t *testing.T) {
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < 2000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		i32 := int32(x)
		if b, err := Int32().Serialize(i32); err != nil {
			t.Fatal(err)
		} else if v, err := Int32().Deserialize(b); err != nil || v != i32 {
			t.Fatalf("int32 %d: got %d, %v", i32, v, err)
		}
		i64 := int64(x)
		if b, err := Int64().Serialize(i64); err != nil {
			t.Fatal(err)
		} else if v, err := Int64().Deserialize(b); err != nil || v != i64 {
			t.Fatalf("int64 %d: got %d, %v", i64, v, err)
		}
		f := math.Float64frombits(x)
		b, err := Float64().Serialize(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Float64().Deserialize(b)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(f) {
			if !math.IsNaN(v) || hex.EncodeToString(b) != "7ff8000000000000" {
				t.Fatalf("NaN %016x: got %x", x, b)
			}
		} else if math.Float64bits(v) != x {
			t.Fatalf("float64 bits %016x: got %016x", x, math.Float64bits(v))
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	str, by, i32, i64, f64 := String(), Bytes(), Int32(), Int64(), Float64()
	js, ns := JSON[*point](), Nullable(String())
	const goroutines, iters = 8, 300
	var wg sync.WaitGroup
	errs := make(chan string, goroutines*iters)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < iters; i++ {
				sv := javaStringVectors[(g+i)%len(javaStringVectors)]
				if b, _ := str.Serialize(sv.in); hex.EncodeToString(b) != sv.hex {
					errs <- "string " + sv.in
				}
				if v, err := str.Deserialize([]byte(sv.in)); err != nil || v != sv.in {
					errs <- "string de " + sv.in
				}
				if v, _ := by.Deserialize([]byte{byte(g), byte(i)}); len(v) != 2 || v[0] != byte(g) || v[1] != byte(i) {
					errs <- "bytes"
				}
				iv := javaInt32Vectors[(g+i)%len(javaInt32Vectors)]
				if b, _ := i32.Serialize(iv.in); hex.EncodeToString(b) != iv.hex {
					errs <- "int32"
				}
				lv := javaInt64Vectors[(g+i)%len(javaInt64Vectors)]
				if b, _ := i64.Serialize(lv.in); hex.EncodeToString(b) != lv.hex {
					errs <- "int64"
				} else if v, err := i64.Deserialize(b); err != nil || v != lv.in {
					errs <- "int64 de"
				}
				fv := javaFloat64Vectors[(g+i)%len(javaFloat64Vectors)]
				if b, _ := f64.Serialize(fv.in); hex.EncodeToString(b) != fv.hex {
					errs <- "float64 " + fv.name
				}
				p := &point{X: g, Y: i}
				b, err := js.Serialize(p)
				if err != nil {
					errs <- "json ser"
				} else if v, err := js.Deserialize(b); err != nil || v == nil || v.X != g || v.Y != i {
					errs <- "json de"
				}
				if b, _ := ns.Serialize(nil); b != nil {
					errs <- "nullable nil"
				}
				s := sv.in
				if b, _ := ns.Serialize(&s); b == nil || hex.EncodeToString(b) != sv.hex {
					errs <- "nullable"
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent mismatch: %s", e)
	}
}
