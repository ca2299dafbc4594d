package srcore

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/registry"
)

var testFormat = Format{Name: "avro", Type: sr.TypeAvro, TypeName: "Avro"}

func TestBoundUnboundWriter(t *testing.T) {
	b := NewBound[int](testFormat, Binding{}, registry.TopicName, "x.Rec")
	if _, err := b.Subject(); !errors.Is(err, registry.ErrUnbound) {
		t.Fatalf("Subject: %v, want ErrUnbound", err)
	}
	called := false
	_, err := b.Writer(func(string) (int, error) { called = true; return 1, nil })
	var re *registry.Error
	if called || !errors.Is(err, registry.ErrUnbound) || !errors.As(err, &re) || re.Op != "serialize" || re.Format != "avro" {
		t.Fatalf("Writer of an unbound binding: called %v, err %v", called, err)
	}
}

func TestBoundWriterAndErrors(t *testing.T) {
	b := NewBound[int](testFormat, Binding{Bound: true, Topic: "orders"}, registry.TopicName, "x.Rec")
	n := 0
	for range 2 {
		w, err := b.Writer(func(subject string) (int, error) {
			n++
			if subject != "orders-value" {
				t.Errorf("subject %q", subject)
			}
			return 7, nil
		})
		if err != nil || w != 7 {
			t.Fatalf("Writer: %v, %v", w, err)
		}
	}
	if n != 1 {
		t.Fatalf("mk called %d times, want once", n)
	}
	err := b.Corrupt(3, errors.New("bad"))
	var re *registry.Error
	if !errors.Is(err, registry.ErrCorrupt) || !errors.As(err, &re) || re.Op != "deserialize" || re.SchemaID != 3 || re.Subject != "orders-value" {
		t.Fatalf("Corrupt: %v", err)
	}
	if again := b.Errorf("serialize", 4, err); again != err {
		t.Fatalf("an error holding a *registry.Error is wrapped again: %v", again)
	}
	if err := testFormat.CheckType(5, sr.TypeProtobuf); err == nil || err.Error() != "schema id 5 is PROTOBUF, not Avro" {
		t.Fatalf("CheckType: %v", err)
	}
	if _, _, err := b.SplitHeader([]byte{1}); !errors.As(err, &re) || re.Op != "deserialize" {
		t.Fatalf("SplitHeader: %v", err)
	}
}
