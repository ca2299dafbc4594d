package protobuf_test

import (
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/protobuf/internal/testpb"
	"github.com/kstream-go/kstream/serde/registry"
)

// reading is the 10-field record of the benchmarks (the same fields as serde/avro's).
var reading = &testpb.Reading{Sensor: "sensor-0042", Site: "plant-north", Seq: 123456789, At: 1767225600123,
	Value: 21.5, Min: 19.25, Max: 23.75, Count: 60, Ok: true, Unit: "celsius"}

func benchSerde(b *testing.B) serde.Serde[*testpb.Reading] {
	s, err := protobuf.New[*testpb.Reading](srtest.New(b).Client(registry.Config{}), registry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return s.ForTopic("readings", false)
}

func BenchmarkProtobufSerialize(b *testing.B) {
	s := benchSerde(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Serialize(reading); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProtobufDeserialize(b *testing.B) {
	s := benchSerde(b)
	data, err := s.Serialize(reading)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Deserialize(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONSerialize(b *testing.B) {
	s := serde.JSON[*testpb.Reading]()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Serialize(reading); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONDeserialize(b *testing.B) {
	s := serde.JSON[*testpb.Reading]()
	data, _ := s.Serialize(reading)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Deserialize(data); err != nil {
			b.Fatal(err)
		}
	}
}
