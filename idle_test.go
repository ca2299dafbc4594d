package kstream_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CloseWhenIdle on a broker, both guarantees: the last window of a burst comes out once
// the wall clock has moved the idle aggregation's stream time past its close, with no new
// record (under exactly-once, its final result is committed by itself).
func TestCloseWhenIdleOnBroker(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[eos], func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 2, nil)
			out := kafkatest.CreateTopic(t, "out", 1, nil)
			b := kstream.NewBuilder()
			w := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey().
				WindowedBy(kstream.TimeWindowsOf(2 * time.Second).WithGrace(time.Second)).EmitOnWindowClose(kstream.CloseWhenIdle(time.Second))
			kstream.Map(kstream.WindowedCount(w, "counts").ToStream(), func(k serde.Windowed[string], n int64) (string, string) {
				return fmt.Sprintf("%s@%d", k.Key, k.StartMs()), strconv.FormatInt(n, 10)
			}).To(out, serde.String(), serde.String())
			cfg := testConfig(t)
			if eos {
				cfg.Guarantee = kstream.ExactlyOnce
			}
			start(t, newApp(t, b, cfg))
			// Event time near the wall clock, in the middle of a 2 s window.
			at := time.Now().Truncate(2 * time.Second).Add(500 * time.Millisecond)
			kafkatest.Produce(t, kafkatest.ManualProducer(t),
				&kgo.Record{Topic: in, Partition: 0, Key: []byte("k"), Value: []byte("v"), Timestamp: at},
				&kgo.Record{Topic: in, Partition: 0, Key: []byte("k"), Value: []byte("v"), Timestamp: at.Add(time.Second)})
			got := kafkatest.Consume(t, out, 1, 60*time.Second, readCommitted)
			if want := fmt.Sprintf("k@%d", at.Truncate(2*time.Second).UnixMilli()); string(got[0].Key) != want || string(got[0].Value) != "2" {
				t.Errorf("final result %s = %s, want %s = 2", got[0].Key, got[0].Value, want)
			}
		})
	}
}
