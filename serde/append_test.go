package serde_test

import (
	"bytes"
	"testing"

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
