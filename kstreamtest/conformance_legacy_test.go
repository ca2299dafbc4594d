package kstreamtest_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The input of the table scenarios of the first conformance suite (17 scenarios), before the
// suite's input (confInput) got null keys and the topics in and global. Tests whose Java
// goldens were made from it use confTableInput and confRunTables; new scenarios belong in
// confScenarios instead.

// confTableRecord is one record of that input; a nil value is a Kafka null.
type confTableRecord struct {
	topic, key string
	value      *string
	ts         time.Time
	headers    []kstream.Header
}

// confTableInput is that input: for i = 0..59, topic right when i % 3 == 2, else left; key
// "k" + (i * 7 % 5); value null when i % 7 == 5, else words[i % 8]; timestamp
// T0 + ((i * 13) % 40) s; header i when i % 4 == 0.
func confTableInput() []confTableRecord {
	words := []string{"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"}
	recs := make([]confTableRecord, 0, 60)
	for i := range 60 {
		r := confTableRecord{topic: "left", key: "k" + strconv.Itoa(i*7%5), ts: time.UnixMilli(1_700_000_000_000 + int64(i*13%40)*1000)}
		if i%3 == 2 {
			r.topic = "right"
		}
		if i%7 != 5 {
			r.value = &words[i%len(words)]
		}
		if i%4 == 0 {
			r.headers = []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}
		}
		recs = append(recs, r)
	}
	return recs
}

// confRunTables runs build's topology with confTableInput's records of the topics in inputs
// and returns topic out in the golden format.
func confRunTables(t *testing.T, inputs []string, build func(b *kstream.Builder)) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(b)
	// No record cache: the Java goldens were made with statestore.cache.max.bytes 0.
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "conformance", CacheMaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ins := map[string]*kstreamtest.InputTopic[string, string]{}
	for _, topic := range inputs {
		ins[topic] = kstreamtest.CreateInputTopic(d, topic, serde.String(), serde.String())
	}
	for _, r := range confTableInput() {
		in, ok := ins[r.topic]
		if !ok {
			continue
		}
		if err := in.PipeRaw([]byte(r.key), confBytes(r.value), r.ts, r.headers...); err != nil {
			t.Fatal(err)
		}
	}
	lines := confReadOut(d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}
