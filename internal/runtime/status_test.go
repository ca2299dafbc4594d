package runtime

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

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

// Status never waits for the loop: while r.mu is held it shows the snapshot published last.
// A revocation (and an assignment, and a restored task) publishes its own, so that the
// tasks a Status shows then are not those of before the rebalance (a rolling-restart test
// once saw an instance with no task right after all of them were running).
func TestStatusWhileLockedShowsTheLastRebalance(t *testing.T) {
	r := &Runtime{caches: NewCacheBudget(0, 0), tasks: map[TaskID]*taskRun{}, parts: map[topicPartition]*taskRun{}, standby: &standbys{}, log: slog.New(slog.DiscardHandler),
		topo: &Topology{SubTopologies: []SubTopology{{ID: 0}}}}
	for p := range int32(2) {
		id := TaskID{Partition: p}
		tr := &taskRun{id: id, parts: map[topicPartition]*partPos{}}
		tr.group = NewPartitionGroup(r.groupConfig(tr))
		tp := topicPartition{"in", p}
		tr.parts[tp] = newPartPos()
		tr.group.AddPartition("in", p)
		r.tasks[id], r.parts[tp] = tr, tr
	}
	active := func() []string {
		var ids []string
		for _, ts := range r.Status().Active {
			ids = append(ids, ts.ID.String())
		}
		return ids
	}
	r.mu.Lock()
	r.publishStatusLocked(time.Now())
	if got := active(); len(got) != 2 {
		t.Fatalf("before the revocation: %v", got)
	}
	r.dropLocked(map[string][]int32{"in": {0}})
	if got := active(); len(got) != 1 || got[0] != "0_1" {
		t.Fatalf("after revoking in-0, while the loop holds the lock: %v, want [0_1]", got)
	}
	r.mu.Unlock()
}
