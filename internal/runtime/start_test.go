package runtime

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// awaitTopic waits until every partition of a new internal topic has a leader: a topic
// whose partitions are listed without a leader (as a real cluster lists them right after
// CreateTopics) is not used yet.
func TestAwaitTopicWaitsForLeaders(t *testing.T) {
	broker := kafkatest.Embedded(t)
	if broker == nil {
		t.Skip("needs the in-process broker's request hooks")
	}
	topic := kafkatest.CreateTopic(t, "internal", 3, nil)
	host, portS, err := net.SplitHostPort(broker.Addr())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portS)
	const leaderless = 4
	var injected atomic.Int32
	c := broker.Cluster()
	c.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != topic {
			c.KeepControl()
			return nil, nil, false
		}
		if injected.Load() >= leaderless {
			c.DropControl()
			return nil, nil, false
		}
		injected.Add(1)
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(topic)
		for p := range int32(3) {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader = p, -1
			if p == 0 {
				rp.Leader = 0 // one partition led, the others not yet
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})

	r, err := New(&Topology{}, Config{ApplicationID: kafkatest.Name(t, "app"), Brokers: kafkatest.Brokers(t), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.openProducer(); err != nil {
		t.Fatal(err)
	}
	defer r.producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.awaitTopic(ctx, topic, 3); err != nil {
		t.Fatalf("awaitTopic: %v", err)
	}
	if got := injected.Load(); got != leaderless {
		t.Fatalf("awaitTopic returned after %d leaderless answers, want %d", got, leaderless)
	}
}
