package avro_test

import (
	"os"
	"testing"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

// benchSchema is the 10-field record of the benchmarks, against serde.JSON on the same
// struct.
const benchSchema = `{"type": "record", "name": "Reading", "namespace": "bench", "fields": [
  {"name": "sensor", "type": "string"},
  {"name": "site", "type": "string"},
  {"name": "seq", "type": "long"},
  {"name": "at", "type": "long"},
  {"name": "value", "type": "double"},
  {"name": "min", "type": "double"},
  {"name": "max", "type": "double"},
  {"name": "count", "type": "int"},
  {"name": "ok", "type": "boolean"},
  {"name": "unit", "type": "string"}
]}`

// Reading is the benchmarks' record.
type Reading struct {
	Sensor string  `avro:"sensor" json:"sensor"`
	Site   string  `avro:"site" json:"site"`
	Seq    int64   `avro:"seq" json:"seq"`
	At     int64   `avro:"at" json:"at"`
	Value  float64 `avro:"value" json:"value"`
	Min    float64 `avro:"min" json:"min"`
	Max    float64 `avro:"max" json:"max"`
	Count  int32   `avro:"count" json:"count"`
	OK     bool    `avro:"ok" json:"ok"`
	Unit   string  `avro:"unit" json:"unit"`
}

var reading = Reading{Sensor: "sensor-0042", Site: "plant-north", Seq: 123456789, At: 1767225600123,
	Value: 21.5, Min: 19.25, Max: 23.75, Count: 60, OK: true, Unit: "celsius"}

func benchSerde(b testing.TB) serde.Serde[Reading] {
	reg := srtest.New(b)
	s, err := avro.New[Reading](reg.Client(registry.Config{}), benchSchema, registry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return s.ForTopic("readings", false)
}

func BenchmarkAvroSerialize(b *testing.B) {
	s := benchSerde(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Serialize(reading); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroAppendSerialize(b *testing.B) {
	s := benchSerde(b).(*avro.Serde[Reading])
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.AppendSerialize(buf[:0], reading); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroDeserialize(b *testing.B) {
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
	s := serde.JSON[Reading]()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Serialize(reading); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONDeserialize(b *testing.B) {
	s := serde.JSON[Reading]()
	data, _ := s.Serialize(reading)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Deserialize(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestThroughputVersusJSON runs the serialize and deserialize benchmarks of Avro and of
// serde.JSON on the same 10-field record and logs the ratios (the target is Avro
// at 1.0x JSON's records/s or better). It takes a few seconds, so it runs only when
// KSTREAM_SERDE_RATIO is set:
//
//	KSTREAM_SERDE_RATIO=1 go test ./serde/avro -run TestThroughputVersusJSON -v
func TestThroughputVersusJSON(t *testing.T) {
	if os.Getenv("KSTREAM_SERDE_RATIO") == "" {
		t.Skip("set KSTREAM_SERDE_RATIO=1 to measure")
	}
	run := func(f func(*testing.B)) testing.BenchmarkResult { return testing.Benchmark(f) }
	for _, pair := range []struct {
		name       string
		avro, json func(*testing.B)
	}{
		{"serialize", BenchmarkAvroSerialize, BenchmarkJSONSerialize},
		{"deserialize", BenchmarkAvroDeserialize, BenchmarkJSONDeserialize},
	} {
		a, j := run(pair.avro), run(pair.json)
		ratio := float64(j.NsPerOp()) / float64(a.NsPerOp())
		t.Logf("%s: avro %d ns/op %d allocs/op; json %d ns/op %d allocs/op; avro records/s = %.2fx json's",
			pair.name, a.NsPerOp(), a.AllocsPerOp(), j.NsPerOp(), j.AllocsPerOp(), ratio)
		if ratio < 1 {
			t.Errorf("%s: avro is slower than JSON (%.2fx)", pair.name, ratio)
		}
	}
}
