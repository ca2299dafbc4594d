package jsonschema_test

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/registry"
)

func ExampleNew() {
	fake := srfake.New()
	defer fake.Close()
	client, _ := registry.NewClient(registry.Config{URLs: []string{fake.URL()}})
	defer client.Close()

	type Payment struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	payments, err := jsonschema.New[Payment](client, `{"title": "Payment", "type": "object",
	  "properties": {"amount": {"type": "integer", "minimum": 1}}, "required": ["id", "amount"]}`,
		jsonschema.Options{})
	if err != nil {
		panic(err)
	}
	values := payments.ForTopic("payments", false)
	b, _ := values.Serialize(Payment{ID: "p-1", Amount: 5})
	fmt.Printf("%q\n", b)

	_, err = values.Serialize(Payment{ID: "p-2"}) // amount 0: the schema refuses it
	fmt.Println(errors.Is(err, registry.ErrInvalidValue))
	// Output:
	// "\x00\x00\x00\x00\x01{\"id\":\"p-1\",\"amount\":5}"
	// true
}
