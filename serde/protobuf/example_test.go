package protobuf_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/protobuf/internal/testpb"
	"github.com/kstream-go/kstream/serde/registry"
)

func ExampleNew() {
	fake := srfake.New()
	defer fake.Close()
	client, _ := registry.NewClient(registry.Config{URLs: []string{fake.URL()}})
	defer client.Close()

	refunds, err := protobuf.New[*testpb.Refund](client, registry.Options{})
	if err != nil {
		panic(err)
	}
	values := refunds.ForTopic("refunds", false)
	b, _ := values.Serialize(&testpb.Refund{OrderId: "o-1"})
	// Magic byte, schema id 2 (id 1 is the imported common/address.proto, registered
	// first), message indexes [1] (Refund is the file's second message), then Protobuf.
	fmt.Printf("% x\n", b)
	r, _ := values.Deserialize(b)
	fmt.Println(r.GetOrderId())
	// Output:
	// 00 00 00 00 02 02 02 0a 03 6f 2d 31
	// o-1
}
