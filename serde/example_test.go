package serde_test

import (
	"fmt"

	"github.com/kstream-go/kstream/serde"
)

func ExampleString() {
	s := serde.String()

	b, _ := s.Serialize("héllo")
	fmt.Printf("%x\n", b) // the same bytes as Java's StringSerializer

	v, _ := s.Deserialize(b)
	fmt.Println(v)

	empty, _ := s.Serialize("")
	fmt.Println(empty != nil, len(empty)) // empty, but not a Kafka null

	null, err := s.Deserialize(nil) // a null key or value decodes to ""
	fmt.Printf("%q %v\n", null, err)

	_, err = s.Deserialize([]byte{0xff})
	fmt.Println(err)
	// Output:
	// 68c3a96c6c6f
	// héllo
	// true 0
	// "" <nil>
	// serde: string: 1 bytes are not valid UTF-8
}

func ExampleNullable() {
	s := serde.Nullable(serde.String())

	tombstone, _ := s.Serialize(nil)
	fmt.Println(tombstone == nil)

	empty := ""
	b, _ := s.Serialize(&empty)
	fmt.Println(b != nil, len(b))

	v, _ := s.Deserialize(nil)
	fmt.Println(v == nil)

	v, _ = s.Deserialize([]byte("kafka"))
	fmt.Println(*v)
	// Output:
	// true
	// true 0
	// true
	// kafka
}

func ExampleJSON() {
	type order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	s := serde.JSON[*order]()

	b, _ := s.Serialize(&order{ID: "o-1", Total: 9.5})
	fmt.Println(string(b))

	o, _ := s.Deserialize(b)
	fmt.Println(o.ID, o.Total)

	null, _ := s.Serialize(nil) // a nil pointer is a Kafka null, not the text "null"
	fmt.Println(null == nil)

	o, _ = s.Deserialize(nil)
	fmt.Println(o == nil)
	// Output:
	// {"id":"o-1","total":9.5}
	// o-1 9.5
	// true
	// true
}
