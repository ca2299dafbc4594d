package runtime

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The dead-letter ring keeps the last 100 records, oldest first, read from their headers,
// and counts them all.
func TestDeadLetterRing(t *testing.T) {
	r := &Runtime{}
	for i := range 250 {
		r.noteDeadLetter(&kgo.Record{Topic: "dlq", Partition: 1, Offset: int64(i), Headers: []kgo.RecordHeader{
			{Key: "__streams.errors.topic", Value: []byte("in")},
			{Key: "__streams.errors.partition", Value: []byte("3")},
			{Key: "__streams.errors.offset", Value: []byte(strconv.Itoa(1000 + i))},
			{Key: "__streams.errors.message", Value: []byte("boom " + strconv.Itoa(i))},
			{Key: "kstream.error.kind", Value: []byte("processing")},
			{Key: "kstream.error.operator", Value: []byte("op")},
		}})
		if i == 41 {
			got, n := r.deadLetters()
			if n != 42 || len(got) != 42 || got[0].DeadLetterOffset != 0 || got[41].DeadLetterOffset != 41 {
				t.Fatalf("after 42: %d, %d records, first %+v", n, len(got), got[0])
			}
		}
	}
	got, n := r.deadLetters()
	if n != 250 || len(got) != deadLetterRing {
		t.Fatalf("%d noted, %d kept", n, len(got))
	}
	for i, d := range got {
		j := int64(150 + i)
		want := DeadLetterInfo{Time: d.Time, Kind: "processing", Operator: "op", Topic: "in", Partition: 3, Offset: 1000 + j,
			Error: "boom " + strconv.Itoa(int(j)), DeadLetterTopic: "dlq", DeadLetterPartition: 1, DeadLetterOffset: j}
		if d != want || d.Time.IsZero() {
			t.Fatalf("record %d: %+v, want %+v", i, d, want)
		}
	}
}
