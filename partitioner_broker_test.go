package kstream_test

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionerOnBroker writes through a sink with a stream partitioner (multicast, drop,
// one partition, default) and counts through a repartition with one, then locates the
// counted keys with KeyMetadataWith and reads them from the partition it names.
func TestPartitionerOnBroker(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	byValue := func(topic, _, v string, n int32) kstream.Partitions {
		if topic != out || n != 3 {
			return kstream.ToPartitions(99) // a production error: the test fails
		}
		switch {
		case v == "all":
			return kstream.ToPartitions(2, 0, 1)
		case v == "drop":
			return kstream.ToPartitions()
		case strings.HasPrefix(v, "p"):
			return kstream.ToPartitions(int32(v[1] - '0'))
		}
		return kstream.DefaultPartition()
	}
	// byDigit sends key "k<d>" to partition d modulo the count.
	byDigit := func(_, k, _ string, n int32) kstream.Partitions { return kstream.ToPartitions(int32(k[1]-'0') % n) }

	b := kstream.NewBuilder()
	s := kstream.Stream(b, in, serde.String(), serde.String())
	s.To(out, nil, nil, kstream.WithPartitioner(byValue))
	kstream.Count(s.Repartition("rp", kstream.NumPartitions(5), kstream.WithPartitioner(byDigit)).GroupByKey(), "counts")
	app := newApp(t, b, testConfig(t))
	r := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })

	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for i, v := range []string{"all", "drop", "p1", "p2", "other"} {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	kafkatest.Produce(t, cl, recs...)
	got := kafkatest.Drain(t, out, 3*time.Second, 60*time.Second)
	var lines []string
	for _, rec := range got {
		lines = append(lines, fmt.Sprintf("%s=%s@%d", rec.Key, rec.Value, rec.Partition))
	}
	slices.Sort(lines)
	// "other" goes to the default partitioner's partition: murmur2 of "k4" over 3.
	want := []string{"k0=all@0", "k0=all@1", "k0=all@2", "k2=p1@1", "k3=p2@2"}
	var plain string
	for _, l := range lines {
		if strings.HasPrefix(l, "k4=other@") {
			plain = l
		}
	}
	if plain == "" {
		t.Fatalf("out = %v: no record k4=other", lines)
	}
	want = append(want, plain)
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("out = %v, want %v", lines, want)
	}
	if p := got[slices.IndexFunc(got, func(r *kgo.Record) bool { return string(r.Key) == "k4" })].Partition; p != partition.ForKey([]byte("k4"), 3) {
		t.Fatalf("k4=other went to partition %d, the default partitioner's is %d", p, partition.ForKey([]byte("k4"), 3))
	}

	// The counts are partitioned by byDigit: KeyMetadataWith names the partition, and a
	// store taken on that partition holds the count.
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		km, err := kstream.KeyMetadataWith(app, "counts", key, byDigit)
		if err != nil {
			t.Fatal(err)
		}
		if km.Partition != int32(i%5) || km.ActiveMember == "" {
			t.Fatalf("KeyMetadataWith(%s) = %+v, want partition %d with an active member", key, km, i%5)
		}
		raw, err := kstream.KeyMetadataWith(app, "counts", kstream.RawKey(key), byDigit)
		if err != nil || raw.Partition != km.Partition {
			t.Fatalf("KeyMetadataWith(RawKey %s) = %+v, %v; want partition %d", key, raw, err, km.Partition)
		}
		st, err := app.RawStore("counts", kstream.QueryPartitions(km.Partition))
		if err != nil {
			t.Fatal(err)
		}
		kafkatest.Eventually(t, 30*time.Second, "the count of "+key, func() bool {
			v, ok, err := st.Get([]byte(key))
			return err == nil && ok && v.Partition == km.Partition && len(v.Value) == 8 && binary.BigEndian.Uint64(v.Value) == 1
		})
	}

	// The query server finds them through Config.KeyMetadata.
	srv := query.NewServer(query.Config{App: app, Logger: testLogger(t), KeyMetadata: func(store string, k kstream.RawKey) (kstream.KeyMetadata, error) {
		return kstream.KeyMetadataWith(app, store, k, byDigit)
	}})
	for i := range 5 {
		rr := httptest.NewRecorder()
		srv.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/stores/counts/keys?key=k%d", i), nil))
		if body := rr.Body.String(); rr.Code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"partition":%d`, i)) {
			t.Fatalf("GET key k%d: %d %s; want 200 from partition %d", i, rr.Code, body, i)
		}
	}
}
