package serde_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
)

type appender[T any] interface {
	AppendSerialize(dst []byte, v T) ([]byte, bool, error)
}

// checkAppend checks that AppendSerialize appends exactly Serialize's bytes after a prefix
// it keeps, and never reports a null for these never-null serdes.
func checkAppend[T any](t *testing.T, name string, s serde.Serde[T], vs ...T) {
	t.Helper()
	a, ok := s.(appender[T])
	if !ok {
		t.Fatalf("%s: no AppendSerialize", name)
	}
	for _, v := range vs {
		want, err := s.Serialize(v)
		if err != nil {
			t.Fatal(err)
		}
		got, isNull, err := a.AppendSerialize([]byte("prefix"), v)
		if err != nil || isNull || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%s: AppendSerialize(%v) = %x, %v, %v; want prefix then %x", name, v, got, isNull, err, want)
		}
	}
}

func TestAppendSerializeMatchesSerialize(t *testing.T) {
	checkAppend(t, "String", serde.String(), "", "a", "héllo wörld")
	checkAppend(t, "Int32", serde.Int32(), 0, -1, 1<<31-1, -1<<31)
	checkAppend(t, "Int64", serde.Int64(), 0, -1, 1<<63-1, -1<<63, 42)
}

// The windowed serdes append too, over an inner serde that appends or not, and write the
// bytes Kafka Streams' do (serde's windowed tests): AppendSerialize and Serialize agree, and
// a key whose inner serde writes null is its empty bytes and the timestamps.
func TestWindowedAppendSerializeMatchesSerialize(t *testing.T) {
	at := func(k string, start, end int64) serde.Windowed[string] { return serde.WindowedMs(k, start, end) }
	ws := []serde.Windowed[string]{at("", 0, 60_000), at("key00042", 1_700_000_000_000, 1_700_000_060_000),
		at("a key longer than the forty bytes Serialize allocates", -5, 7)}
	checkAppend(t, "TimeWindowed(String)", serde.TimeWindowed(serde.String(), time.Minute), ws...)
	checkAppend(t, "SessionWindowed(String)", serde.SessionWindowed(serde.String()), ws...)
	bs := []serde.Windowed[[]byte]{serde.WindowedMs([]byte("k"), 1, 2), serde.WindowedMs([]byte(nil), 3, 4)}
	checkAppend(t, "TimeWindowed(Bytes)", serde.TimeWindowed(serde.Bytes(), time.Minute), bs...)
	checkAppend(t, "SessionWindowed(Bytes)", serde.SessionWindowed(serde.Bytes()), bs...)

	want := []byte{0, 0, 0, 0, 0, 0, 0, 3} // a null inner key: its empty bytes, then the start
	for name, s := range map[string]serde.Serde[serde.Windowed[[]byte]]{
		"TimeWindowed(Bytes)":  serde.TimeWindowed(serde.Bytes(), time.Minute),
		"TimeWindowed(nulls)":  serde.TimeWindowed[[]byte](nullAppender{}, time.Minute),
		"SessionWindowed(nil)": serde.SessionWindowed[[]byte](nullAppender{}),
	} {
		got, err := s.Serialize(serde.WindowedMs([]byte(nil), 3, 4))
		if err != nil {
			t.Fatal(err)
		}
		if name == "SessionWindowed(nil)" {
			want := []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 3}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: Serialize of a null inner key = %x, want %x", name, got, want)
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: Serialize of a null inner key = %x, want %x", name, got, want)
		}
	}
}

// nullAppender writes every value as a Kafka null, through AppendSerialize too.
type nullAppender struct{}

func (nullAppender) Serialize([]byte) ([]byte, error)     { return nil, nil }
func (nullAppender) Deserialize(b []byte) ([]byte, error) { return b, nil }
func (nullAppender) AppendSerialize(dst []byte, _ []byte) ([]byte, bool, error) {
	return dst, true, nil
}
