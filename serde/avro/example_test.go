package avro_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
)

func ExampleNew() {
	fake := srfake.New() // an in-memory registry; use your registry's URL instead
	defer fake.Close()
	client, err := registry.NewClient(registry.Config{URLs: []string{fake.URL()}})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	type User struct {
		Name string `avro:"name"`
		Age  int32  `avro:"age"`
	}
	users, err := avro.New[User](client, `{"type": "record", "name": "User", "namespace": "com.acme",
	  "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}`, registry.Options{})
	if err != nil {
		panic(err)
	}

	// kstream binds the serde to each topic it uses it with; an application can bind it
	// itself, and check at start that the registry takes its schema.
	values := users.Bind("users", false)
	if err := values.Check(context.Background()); err != nil {
		panic(err)
	}
	subject, _ := values.Subject()
	fmt.Println("subject:", subject)

	b, _ := values.Serialize(User{Name: "ann", Age: 41})
	fmt.Printf("% x\n", b) // magic byte, schema id 1, then Avro
	u, _ := values.Deserialize(b)
	fmt.Println(u.Name, u.Age)

	// Unbound, the default TopicName strategy has no subject: it fails clearly.
	_, err = users.Serialize(User{})
	fmt.Println(errors.Is(err, registry.ErrUnbound))
	// Output:
	// subject: users-value
	// 00 00 00 00 01 06 61 6e 6e 52
	// ann 41
	// true
}

func ExampleSerde_ForTopic() {
	fake := srfake.New()
	defer fake.Close()
	client, _ := registry.NewClient(registry.Config{URLs: []string{fake.URL()}})
	defer client.Close()

	keys, _ := avro.New[string](client, `"string"`, registry.Options{})
	// What kstream does for each topic: serde.ForTopic binds a TopicBound serde.
	var s serde.Serde[string] = keys
	bound := serde.ForTopic(s, "orders", true)
	b, _ := bound.Serialize("o-1")
	fmt.Printf("% x\n", b)
	fmt.Println(fake.SubjectExists("orders-key"))
	// Output:
	// 00 00 00 00 01 06 6f 2d 31
	// true
}
