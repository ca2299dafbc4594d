package jsonschema_test

import (
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/registry"
)

// Reading is the 10-field record of the benchmarks (the same fields as serde/avro's).
type Reading struct {
	Sensor string  `json:"sensor"`
	Site   string  `json:"site"`
	Seq    int64   `json:"seq"`
	At     int64   `json:"at"`
	Value  float64 `json:"value"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Count  int32   `json:"count"`
	OK     bool    `json:"ok"`
	Unit   string  `json:"unit"`
}

const readingSchema = `{"title": "Reading", "type": "object", "properties": {
  "sensor": {"type": "string"}, "site": {"type": "string"}, "seq": {"type": "integer"},
  "at": {"type": "integer"}, "value": {"type": "number"}, "min": {"type": "number"},
  "max": {"type": "number"}, "count": {"type": "integer"}, "ok": {"type": "boolean"},
  "unit": {"type": "string"}}, "required": ["sensor", "seq", "value"]}`

var reading = Reading{Sensor: "sensor-0042", Site: "plant-north", Seq: 123456789, At: 1767225600123,
	Value: 21.5, Min: 19.25, Max: 23.75, Count: 60, OK: true, Unit: "celsius"}

func benchSerde(b *testing.B, opts jsonschema.Options) serde.Serde[Reading] {
	s, err := jsonschema.New[Reading](srtest.New(b).Client(registry.Config{}), readingSchema, opts)
	if err != nil {
		b.Fatal(err)
	}
	return s.ForTopic("readings", false)
}

func BenchmarkJSONSchemaSerialize(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts jsonschema.Options
	}{{"validated", jsonschema.Options{}}, {"unvalidated", jsonschema.Options{SkipValidation: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchSerde(b, tc.opts)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Serialize(reading); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJSONSchemaDeserialize(b *testing.B) {
	s := benchSerde(b, jsonschema.Options{})
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
	s := serde.JSON[Reading]()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Serialize(reading); err != nil {
			b.Fatal(err)
		}
	}
}
