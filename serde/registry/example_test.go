package registry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/registry"
)

func ExampleNewClient() {
	fake := srfake.New() // an in-memory registry; use your registry's URL instead
	defer fake.Close()

	client, err := registry.NewClient(registry.Config{
		URLs: []string{fake.URL()},
		// Username/Password or BearerToken authenticate; TLS sets roots and client
		// certificates. While the registry is down, requests are retried with backoff
		// for as long as Retry.For allows (by default until they succeed).
		Retry: registry.Retry{Initial: 100 * time.Millisecond, Max: 10 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ctx := context.Background()
	id, err := client.Register(ctx, "users-value", sr.Schema{Schema: `"string"`}, false)
	fmt.Println(id, err)
	schema, _ := client.SchemaByID(ctx, id) // cached: registering told the client
	fmt.Println(schema.Schema)
	_, err = client.SchemaByID(ctx, 99)
	fmt.Println(errors.Is(err, registry.ErrUnknownSchemaID), errors.Is(err, registry.ErrRegistryUnavailable))
	// Output:
	// 1 <nil>
	// "string"
	// true false
}

func ExampleSubjectNameStrategy_Subject() {
	for _, s := range []registry.SubjectNameStrategy{registry.TopicName, registry.RecordName, registry.TopicRecordName} {
		subject, _ := s.Subject("orders", false, "com.acme.Order")
		fmt.Printf("%v: %s\n", s, subject)
	}
	// Output:
	// TopicName: orders-value
	// RecordName: com.acme.Order
	// TopicRecordName: orders-com.acme.Order
}
