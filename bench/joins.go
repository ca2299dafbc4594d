package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
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
	_, err := k.fillFrom(ctx, topic, o, keepAll, true, true, first.startMs, nil)
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

// fkCustomers is the number of customers of fk-pebble: the orders (the input's count keys)
// reference them by foreign key.
const fkCustomers = 1000

// fkOf is fk-pebble's foreign key of an order: the customer "c%03d" of its key's number
// modulo fkCustomers, or of the next number for one value in 10 (the first value byte below
// 26), so that about a tenth of the updates move their order to another customer.
func fkOf(key string, v []byte) string {
	n := 0
	for _, c := range key[3:] {
		n = n*10 + int(c-'0')
	}
	if len(v) > 0 && v[0] < 26 {
		n++
	}
	return fmt.Sprintf("c%03d", n%fkCustomers)
}

// fillCustomers writes fk-pebble's customers to topic: fkCustomers records "c%03d" with a
// 100-byte name, timestamped an hour before the orders so that each task takes them first.
func fillCustomers(ctx context.Context, k *kafka, o options, topic string, _ filled) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	at := time.Now().Add(-time.Hour)
	recs := make([]*kgo.Record, 0, fkCustomers)
	for i := range fkCustomers {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "c%03d", i), Value: bytes.Repeat([]byte{'n'}, o.valueSize), Timestamp: at})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// fkTopology is the foreign-key join of the orders table (in: count keys, random values)
// with the customers table (in2) by fkOf, Pebble stores, the result written to out.
func fkTopology(env *runEnv) *kstream.Builder {
	b := kstream.NewBuilder()
	orders := kstream.Table(b, env.in, serde.String(), serde.Bytes(), "orders")
	customers := kstream.Table(b, env.in2, serde.String(), serde.Bytes(), "customers")
	kstream.TableJoinOn(orders, customers, fkOf, func(v, _ []byte) []byte { return v }).
		ToStream().To(env.out, serde.String(), serde.Bytes())
	return b
}

// runFKPebble: fk-pebble's topology at least once.
func runFKPebble(ctx context.Context, env *runEnv) error {
	return runStatefulApp(ctx, fkTopology(env), env, nil, kstream.AtLeastOnce)
}

// verifyFK checks fk-pebble's result once the run has drained: every order's last output
// is the join of its last update with its customer (the joiner returns the order's value,
// and every customer exists), so it must equal the order's last input value.
func verifyFK(ctx context.Context, k *kafka, env *runEnv) error {
	want, err := k.lastValues(ctx, env.in)
	if err != nil {
		return err
	}
	got, err := k.lastValues(ctx, env.out)
	if err != nil {
		return err
	}
	wrong := 0
	var example string
	for key, v := range want {
		if g, ok := got[key]; !ok || !bytes.Equal(g, v) {
			if wrong == 0 {
				example = fmt.Sprintf("order %q: last output present %v, equal %v", key, ok, ok && bytes.Equal(g, v))
			}
			wrong++
		}
	}
	if wrong > 0 || len(got) != len(want) {
		return fmt.Errorf("fk-pebble: %d of %d orders' last results wrong, %d orders in the output (first: %s)", wrong, len(want), len(got), example)
	}
	return nil
}
