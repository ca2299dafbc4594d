package runtime

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The clients' memory bounds (see openProducer and openConsumer, and the memory section of
// docs/operations-guide.md): the producer buffers at most twice MaxPollRecords
// records and the consumer fetches at most fetchMaxPartitionBytes of a partition, unless
// ProducerOpts and ConsumerOpts override them. The clients are created but never connect.
func TestClientMemoryBounds(t *testing.T) {
	for _, tc := range []struct {
		name               string
		cfg                Config
		wantBuffered       int64
		wantPartitionFetch int32
	}{
		{name: "defaults", wantBuffered: 20000, wantPartitionFetch: fetchMaxPartitionBytes},
		{name: "two polls", cfg: Config{MaxPollRecords: 500}, wantBuffered: 1000, wantPartitionFetch: fetchMaxPartitionBytes},
		{
			name: "overridden",
			cfg: Config{
				ProducerOpts: []kgo.Opt{kgo.MaxBufferedRecords(123)},
				ConsumerOpts: []kgo.Opt{kgo.FetchMaxPartitionBytes(1 << 20)},
			},
			wantBuffered: 123, wantPartitionFetch: 1 << 20,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.ApplicationID, cfg.Brokers, cfg.StateDir = "app", []string{"127.0.0.1:1"}, t.TempDir()
			r, err := New(&Topology{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.openProducer(); err != nil {
				t.Fatal(err)
			}
			defer r.producer.Close()
			if got := r.producer.OptValue(kgo.MaxBufferedRecords); got != tc.wantBuffered {
				t.Errorf("producer MaxBufferedRecords = %v, want %d", got, tc.wantBuffered)
			}
			if err := r.openConsumer(); err != nil {
				t.Fatal(err)
			}
			defer r.consumer.Close()
			if got := r.consumer.OptValue(kgo.FetchMaxPartitionBytes); got != tc.wantPartitionFetch {
				t.Errorf("consumer FetchMaxPartitionBytes = %v, want %d", got, tc.wantPartitionFetch)
			}
		})
	}
}

// Under exactly-once one client consumes and produces: it gets both bounds.
func TestClientMemoryBoundsExactlyOnce(t *testing.T) {
	cfg := Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), ExactlyOnce: true,
		Logger: slog.New(slog.DiscardHandler)}
	r, err := New(&Topology{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.openConsumer(); err != nil {
		t.Fatal(err)
	}
	defer r.sess.Client().Close()
	if got := r.consumer.OptValue(kgo.MaxBufferedRecords); got != int64(20000) {
		t.Errorf("MaxBufferedRecords = %v, want 20000", got)
	}
	if got := r.consumer.OptValue(kgo.FetchMaxPartitionBytes); got != int32(fetchMaxPartitionBytes) {
		t.Errorf("FetchMaxPartitionBytes = %v, want %d", got, fetchMaxPartitionBytes)
	}
}
