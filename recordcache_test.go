package kstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
)

// With Config.CacheMaxBytes, a count forwards each key's latest count once per commit
// instead of every update (Kafka Streams' record cache): 2,000 records of 5 keys come out as
// a handful of updates whose last per key is exact, under both guarantees. A cache with
// room for one entry forwards every update. WithoutCaching turns a store's cache off.
func TestRecordCacheDeduplicatesUpdates(t *testing.T) {
	const keys, perKey = 5, 400
	for _, tc := range []struct {
		name      string
		guarantee kstream.Guarantee
		cache     int64
		opts      []kstream.StoreOption
		maxOut    int // the most output records expected
	}{
		{"at-least-once", kstream.AtLeastOnce, 10 << 20, nil, keys * perKey / 10},
		{"exactly-once", kstream.ExactlyOnce, 10 << 20, nil, keys * perKey / 10},
		{"one-entry", kstream.AtLeastOnce, 1, nil, keys * perKey},
		{"without-caching", kstream.AtLeastOnce, 10 << 20, []kstream.StoreOption{kstream.WithoutCaching()}, keys * perKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "clicks", 1, nil)
			out := kafkatest.CreateTopic(t, "click-counts", 1, nil)
			var recs []*kgo.Record
			for i := range keys * perKey {
				recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("v")})
			}
			kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

			b := kstream.NewBuilder()
			counts := kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts", tc.opts...)
			counts.ToStream().To(out, serde.String(), serde.Int64())
			cfg := testConfig(t)
			cfg.Guarantee, cfg.CacheMaxBytes = tc.guarantee, tc.cache
			start(t, newApp(t, b, cfg))

			cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			latest := map[string]int64{}
			n := 0
			done := func() bool {
				for k := range keys {
					if latest[fmt.Sprintf("k%d", k)] != perKey {
						return false
					}
				}
				return true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for !done() && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
					c, err := serde.Int64().Deserialize(r.Value)
					if err != nil {
						t.Errorf("offset %d: %v", r.Offset, err)
					}
					if c <= latest[string(r.Key)] {
						t.Errorf("key %s: count %d after %d", r.Key, c, latest[string(r.Key)])
					}
					latest[string(r.Key)] = c
					n++
				})
			}
			if !done() {
				t.Fatalf("final counts %v, want %d for each of %d keys", latest, perKey, keys)
			}
			t.Logf("%d records in, %d updates out", keys*perKey, n)
			if n > tc.maxOut {
				t.Errorf("%d updates out, want at most %d", n, tc.maxOut)
			}
			if tc.maxOut == keys*perKey && n != keys*perKey {
				t.Errorf("%d updates out, want every one of the %d", n, keys*perKey)
			}
		})
	}
}
