package kstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// A principal without CREATE permission gets an error that names the internal topic it
// could not create and the permission it lacks. This needs a broker with ACLs, so it runs on
// its own in-process cluster on both tiers.
func TestMissingCreatePermission(t *testing.T) {
	t.Parallel()
	allow := func(res kmsg.ACLResourceType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "admin-secret"),
		kfake.EnableACLs(),
		kfake.User("PLAIN", "app", "app-secret",
			allow(kmsg.ACLResourceTypeTopic, kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeTopic, kmsg.ACLOperationWrite),
			allow(kmsg.ACLResourceTypeTopic, kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeGroup, kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeGroup, kmsg.ACLOperationDescribe),
		),
		kfake.SeedTopics(2, "in", "out"),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.SelectKey(s, func(_, v string) string { return v }).WithSerdes(serde.String(), nil).Repartition("by-value").To("out", nil, nil)
	cfg := kstream.Config{
		ApplicationID: "noperm",
		Brokers:       c.ListenAddrs(),
		SASL:          plain.Auth{User: "app", Pass: "app-secret"}.AsMechanism(),
		Logger:        testLogger(t),
	}
	err, done := start(t, newApp(t, b, cfg)).wait(60 * time.Second)
	if !done {
		t.Fatal("Run did not return")
	}
	if err == nil || !strings.Contains(err.Error(), `"noperm-by-value-repartition"`) || !strings.Contains(err.Error(), "CREATE") {
		t.Fatalf("got %v, want an error naming the internal topic and the CREATE permission", err)
	}
	t.Logf("error: %v", err)
}
