package runtime

import (
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// UnknownTime is the partition or stream time of a task that has processed nothing yet
// (Kafka Streams' RecordQueue.UNKNOWN).
const UnknownTime int64 = -1

// GroupConfig configures a [PartitionGroup].
type GroupConfig struct {
	// MaxTaskIdle is Kafka Streams' max.task.idle.ms: how long a task whose partition has
	// no buffered record, but is known to be caught up, waits for one before it processes
	// the other partitions out of order. Zero waits only while the lag of an empty
	// partition is unknown or positive; negative never waits.
	MaxTaskIdle time.Duration
	// Extract gives a record its timestamp (ms). partitionTime is the largest timestamp
	// taken from the record's partition so far, or UnknownTime. A negative timestamp drops
	// the record (Dropped is called); an error stops processing.
	Extract func(r *kgo.Record, partitionTime int64) (int64, error)
	// Dropped is told of a record dropped for its negative timestamp.
	Dropped func(r *kgo.Record, ts int64)
	// Lag reports what is known of the lag of an empty partition (records on the broker
	// that the consumer has not fetched yet): known is false when nothing is known.
	Lag func(topic string, partition int32, now time.Time) (lag int64, known bool)
	// Enforced, if set, is told of every enforced processing (see Ready).
	Enforced func()
}

// PartitionGroup buffers the fetched records of one task's input partitions and hands them
// out in the order Kafka Streams' PartitionGroup does: the head with the lowest timestamp
// first, across all partitions and across polls, ties going to the record buffered first.
// It keeps each partition's time (the largest timestamp taken from it) for the timestamp
// extractor, and decides whether the task may process now (Ready) or must wait for an
// empty partition. It is used by one goroutine at a time.
type PartitionGroup struct {
	cfg      GroupConfig
	queues   []*partQueue
	byTP     map[topicPartition]*partQueue
	buffered int
	seq      int64
	enforced int64
	// enforcing: the last Ready found the task ready only because MaxTaskIdle passed; the
	// next record taken (Next) is an enforced processing. Ready may run several times
	// before a record is taken (every poll re-evaluates an idle task): counting there
	// counted one record several times.
	enforcing bool
	// saved is the partition times at the last commit (see Save and Restore).
	saved map[topicPartition]int64
	// cut is the partition times taken by the last Cut, which Save keeps if hasCut.
	cut    map[topicPartition]int64
	hasCut bool
}

// partQueue is the buffer of one partition.
type partQueue struct {
	tp       topicPartition
	recs     []*kgo.Record // fetched, in offset order, after the head
	seqs     []int64       // the buffering sequence number of each of recs
	head     *kgo.Record   // the next record, its timestamp extracted
	headTS   int64
	headSeq  int64
	partTime int64
	// deadline is when an empty partition known to be caught up stops holding the task
	// back (max.task.idle.ms); zero while not waiting.
	deadline time.Time
}

func (q *partQueue) size() int {
	n := len(q.recs)
	if q.head != nil {
		n++
	}
	return n
}

// NewPartitionGroup returns an empty group.
func NewPartitionGroup(cfg GroupConfig) *PartitionGroup {
	return &PartitionGroup{cfg: cfg, byTP: map[topicPartition]*partQueue{}}
}

// AddPartition makes topic's partition an input of the group (a no-op if it is one).
func (g *PartitionGroup) AddPartition(topic string, partition int32) {
	tp := topicPartition{topic, partition}
	if g.byTP[tp] != nil {
		return
	}
	q := &partQueue{tp: tp, partTime: UnknownTime}
	if t, ok := g.saved[tp]; ok {
		q.partTime = t
	}
	g.byTP[tp] = q
	g.queues = append(g.queues, q)
}

// RemovePartition drops a partition and its buffered records.
func (g *PartitionGroup) RemovePartition(topic string, partition int32) {
	tp := topicPartition{topic, partition}
	q := g.byTP[tp]
	if q == nil {
		return
	}
	g.buffered -= q.size()
	delete(g.byTP, tp)
	for i, x := range g.queues {
		if x == q {
			g.queues = append(g.queues[:i], g.queues[i+1:]...)
			break
		}
	}
}

// Add buffers fetched records of a partition of the group, in offset order. It returns the
// partition's buffered count. An error of the timestamp extractor is returned as is.
func (g *PartitionGroup) Add(topic string, partition int32, recs []*kgo.Record) (int, error) {
	q := g.byTP[topicPartition{topic, partition}]
	if q == nil {
		return 0, fmt.Errorf("kstream: internal error: partition %d of topic %q is not an input of the task", partition, topic)
	}
	for _, r := range recs {
		q.recs = append(q.recs, r)
		q.seqs = append(q.seqs, g.seq)
		g.seq++
	}
	g.buffered += len(recs)
	err := g.updateHead(q)
	return q.size(), err
}

// updateHead takes the next record of q as its head, extracting its timestamp, and drops
// the records whose timestamp is negative.
func (g *PartitionGroup) updateHead(q *partQueue) error {
	for q.head == nil && len(q.recs) > 0 {
		r, seq := q.recs[0], q.seqs[0]
		q.recs[0] = nil
		q.recs, q.seqs = q.recs[1:], q.seqs[1:]
		if len(q.recs) == 0 {
			q.recs, q.seqs = nil, nil // let the backing arrays go
		}
		ts, err := g.cfg.Extract(r, q.partTime)
		if err != nil {
			g.buffered--
			return err
		}
		if ts < 0 {
			g.buffered--
			if g.cfg.Dropped != nil {
				g.cfg.Dropped(r, ts)
			}
			continue
		}
		q.head, q.headTS, q.headSeq = r, ts, seq
	}
	return nil
}

// Buffered is the number of records buffered in all partitions.
func (g *PartitionGroup) Buffered() int { return g.buffered }

// Size is the number of records buffered for a partition.
func (g *PartitionGroup) Size(topic string, partition int32) int {
	if q := g.byTP[topicPartition{topic, partition}]; q != nil {
		return q.size()
	}
	return 0
}

// Enforced counts the records the task took (Next) although a partition had no record
// buffered, because MaxTaskIdle passed (Kafka Streams' enforced-processing-total).
func (g *PartitionGroup) Enforced() int64 { return g.enforced }

// Ready reports whether the task may process its next record now: every partition has a
// record buffered; or the empty ones are known to be caught up and have been waited for
// MaxTaskIdle (then the processing is "enforced", and the record Next takes next is
// counted, once however often Ready ran). When it is not ready
// because of an idle deadline, wake is that deadline; when it waits for a lag to be known
// or to be fetched, wait is true.
func (g *PartitionGroup) Ready(now time.Time) (ready bool, wake time.Time, wait bool) {
	g.enforcing = false
	if g.buffered == 0 {
		return false, time.Time{}, false
	}
	if g.cfg.MaxTaskIdle < 0 {
		return true, time.Time{}, false
	}
	var queued, enforced bool
	for _, q := range g.queues {
		if q.head != nil {
			q.deadline = time.Time{}
			queued = true
			continue
		}
		lag, known := g.cfg.Lag(q.tp.topic, q.tp.partition, now)
		if !known || lag > 0 {
			// Wait until the lag is known, or the records known to be on the broker are
			// fetched.
			q.deadline = time.Time{}
			return false, time.Time{}, true
		}
		if q.deadline.IsZero() {
			q.deadline = now.Add(g.cfg.MaxTaskIdle)
		}
		if now.Before(q.deadline) {
			return false, q.deadline, false
		}
		enforced = true
	}
	if !queued {
		return false, time.Time{}, false
	}
	g.enforcing = enforced
	return true, time.Time{}, false
}

// Next takes the buffered head with the lowest timestamp (ties: the one buffered first)
// and returns it with its timestamp; r is nil when nothing is buffered. It moves the
// partition's time forward. An error of the timestamp extractor on the
// partition's next record is returned with r, which must then not be processed.
func (g *PartitionGroup) Next() (r *kgo.Record, ts int64, err error) {
	var best *partQueue
	for _, q := range g.queues {
		if q.head == nil {
			continue
		}
		if best == nil || q.headTS < best.headTS || (q.headTS == best.headTS && q.headSeq < best.headSeq) {
			best = q
		}
	}
	if best == nil {
		return nil, 0, nil
	}
	if g.enforcing {
		g.enforcing = false
		g.enforced++
		if g.cfg.Enforced != nil {
			g.cfg.Enforced()
		}
	}
	r, ts = best.head, best.headTS
	best.head = nil
	g.buffered--
	best.partTime = max(best.partTime, ts)
	return r, ts, g.updateHead(best)
}

// Clear drops every buffered record (after the consumer was moved back to the committed
// offsets). Partition times stay.
func (g *PartitionGroup) Clear() {
	for _, q := range g.queues {
		q.recs, q.seqs, q.head, q.deadline = nil, nil, nil, time.Time{}
	}
	g.buffered = 0
}

// Cut takes the partition times as of now for the next Save: under exactly-once the task
// goes on while the transaction of a commit ends, and what that transaction commits is
// the state at its cut.
func (g *PartitionGroup) Cut() {
	if g.cut == nil {
		g.cut = map[topicPartition]int64{}
	}
	clear(g.cut)
	for _, q := range g.queues {
		g.cut[q.tp] = q.partTime
	}
	g.hasCut = true
}

// Save keeps the partition times of the last Cut as those of a commit, for Restore.
// Without a Cut since the last Save or Restore it does nothing: the group's task was
// created after the commit's cut, and nothing it did is in the commit.
func (g *PartitionGroup) Save() {
	if !g.hasCut {
		return
	}
	if g.saved == nil {
		g.saved = map[topicPartition]int64{}
	}
	maps.Copy(g.saved, g.cut)
	g.hasCut = false
}

// Restore goes back to the partition times of the last Save (UnknownTime if none).
func (g *PartitionGroup) Restore() {
	g.hasCut = false
	for _, q := range g.queues {
		q.partTime = UnknownTime
		if t, ok := g.saved[q.tp]; ok {
			q.partTime = t
		}
	}
}
