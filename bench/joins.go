package main

import (
	"context"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// The join scenarios of issue 12, judged against count-pebble in the same run by input
// records per second (a join reads two inputs: in and in2).

// joinWindow is the time difference of join-pebble's windows (JoinWindowsOf: 5 s before
// and after), and joinGrace their grace: long enough that no record is late when one
// input's fetch runs ahead of the other's (a late record would be missing from the output).
const (
	joinWindow = 5 * time.Second
	joinGrace  = time.Minute
)

// fillSame fills the second input with the first one's records: the same keys, values and
// timestamps (see fill), so that each record of in meets its twin in in2.
func fillSame(ctx context.Context, k *kafka, o options, topic string, first filled) error {
	_, err := k.fillFrom(ctx, topic, o, keepAll, true, true, first.startMs)
	return err
}

// joinPairs is the number of results of join-pebble's inner join of two copies of the
// input: the ordered pairs (i, j) of records of the same key (i ≡ j mod countKeys) whose
// timestamps (fill's start + i*eventTimeSpan/records) are at most joinWindow apart.
func joinPairs(o options) int64 {
	span := int64(eventTimeSpan / time.Millisecond)
	d := int64(joinWindow / time.Millisecond)
	ts := func(i int) int64 { return int64(i) * span / int64(o.records) }
	n := int64(o.records) // every record meets its twin
	for i := range o.records {
		for j := i + countKeys; j < o.records && ts(j)-ts(i) <= d; j += countKeys {
			n += 2 // (i, j) and (j, i)
		}
	}
	return n
}

// joinTopology is the stream-stream inner join of in and in2 (String keys, Bytes values)
// within joinWindow (grace joinGrace), Pebble window stores, the joiner concatenating
// nothing: it returns the left value (the cost is the stores, not the joiner).
func joinTopology(env *runEnv) *kstream.Builder {
	b := kstream.NewBuilder()
	l := kstream.Stream(b, env.in, serde.String(), serde.Bytes())
	r := kstream.Stream(b, env.in2, serde.String(), serde.Bytes())
	kstream.JoinWindowed(l, r, func(_ string, v1, _ []byte) []byte { return v1 },
		kstream.JoinWindowsOf(joinWindow).WithGrace(joinGrace), kstream.JoinStoreName(countStore)).
		To(env.out, serde.String(), serde.Bytes())
	return b
}

// runJoinPebble: join-pebble's topology at least once.
func runJoinPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, joinTopology(env), env, nil, kstream.AtLeastOnce)
}
