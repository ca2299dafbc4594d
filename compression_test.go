package kstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config.Compression sets the codec of every batch the application produces: none by
// default (Kafka Streams' producer default), and each of Kafka's codecs when asked; the
// records read back are the ones written. Config.Linger = NoLinger works too.
func TestCompression(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		codec  kstream.Compression
		attr   uint8 // the batch attribute's compression type
		linger time.Duration
	}{
		{kstream.CompressionNone, 0, 0},
		{kstream.CompressionGzip, 1, kstream.NoLinger},
		{kstream.CompressionSnappy, 2, 0},
		{kstream.CompressionLZ4, 3, 20 * time.Millisecond},
		{kstream.CompressionZstd, 4, 0},
	} {
		t.Run(c.codec.String(), func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 1, nil)
			out := kafkatest.CreateTopic(t, "out", 1, nil)
			b := kstream.NewBuilder()
			kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.String()), strings.ToUpper).
				To(out, serde.String(), serde.String())
			cfg := testConfig(t)
			cfg.Compression, cfg.Linger = c.codec, c.linger
			r := start(t, newApp(t, b, cfg))
			cl := kafkatest.Client(t)
			var want []string
			for i := range 50 {
				v := fmt.Sprintf("value %d %s", i, strings.Repeat("x", 100))
				want = append(want, strings.ToUpper(v))
				kafkatest.Produce(t, cl, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte(v)})
			}
			recs := kafkatest.Consume(t, out, len(want), 30*time.Second)
			for i, rec := range recs {
				if string(rec.Value) != want[i] {
					t.Errorf("record %d: %q, want %q", i, rec.Value, want[i])
				}
				if got := rec.Attrs.CompressionType(); got != c.attr {
					t.Errorf("record %d: compression type %d, want %d (%s)", i, got, c.attr, c.codec)
				}
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A Compression that is not one of the constants is refused with an error naming it.
func TestCompressionInvalid(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).To("out", serde.String(), serde.String())
	cfg := testConfig(t)
	cfg.Compression = 9
	_, err := kstream.New(b, cfg)
	if err == nil || !strings.Contains(err.Error(), "Config.Compression is Compression(9)") {
		t.Fatalf("New: %v, want an error naming Config.Compression", err)
	}
}
