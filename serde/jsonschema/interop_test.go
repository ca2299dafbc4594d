package jsonschema_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/registry"
)

// The interop test with Jackson, as Confluent's KafkaJsonSchemaSerializer writes JSON: the
// goldens of serde/testdata/interop/jsonschema are written by testing/serdes (see its
// README).

type interopCustomer struct {
	Name  string  `json:"name"`
	Email *string `json:"email"`
}

type interopLine struct {
	SKU   string `json:"sku"`
	Count int    `json:"count"`
}

type interopOrder struct {
	ID       string          `json:"id"`
	Qty      int             `json:"qty"`
	Price    float64         `json:"price"`
	Customer interopCustomer `json:"customer"`
	Lines    []interopLine   `json:"lines"`
	Note     *string         `json:"note"`
}

// jsonCase decodes Java's bytes into an interopOrder, which must equal want, and returns
// Go's encoding of want, validated against the golden's schema.
func jsonCase(name, text string, want interopOrder) srtest.InteropCase {
	return srtest.InteropCase{Name: name, Text: text, Run: func(t *testing.T, c *registry.Client, g srtest.Golden) []byte {
		s, err := jsonschema.New[interopOrder](c, g.Schema, jsonschema.Options{
			Options: registry.Options{SchemaID: g.ID}, ValidateOnRead: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		bound := s.Bind("interop", false)
		got, err := bound.Deserialize(g.Bytes)
		if err != nil {
			t.Errorf("Go cannot read Java's bytes %x: %v", g.Bytes, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("Java's bytes decode to %+v, want %+v", got, want)
		}
		b, err := bound.Serialize(want)
		if err != nil {
			t.Fatalf("serialize: %v", err)
		}
		return b
	}}
}

// differs marks c's Go encoding as different from Java's, as documented: goJSON is what
// Go writes after the header.
func differs(c srtest.InteropCase, goJSON string) srtest.InteropCase {
	c.GoText = goJSON
	return c
}

func interopCases() []srtest.InteropCase {
	ptr := func(s string) *string { return &s }
	order := func(id string, price float64, name string, note *string) interopOrder {
		return interopOrder{ID: id, Qty: 1, Price: price, Customer: interopCustomer{Name: name}, Lines: []interopLine{}, Note: note}
	}
	escapes := interopOrder{ID: "o-<3>", Qty: 1, Price: -7.125, Customer: interopCustomer{Name: "Zoë & 世界", Email: ptr("a@b")},
		Lines: []interopLine{{SKU: "<b>"}}, Note: ptr("fish & chips \"to go\" \\ \n\t/")}
	return []srtest.InteropCase{
		jsonCase("order", `{"id":"o-1","qty":2,"price":12.5,"customer":{"name":"Ann","email":"ann@example.com"},"lines":[{"sku":"a-1","count":1},{"sku":"b-2","count":3}],"note":"leave at the door"}`,
			interopOrder{ID: "o-1", Qty: 2, Price: 12.5, Customer: interopCustomer{Name: "Ann", Email: ptr("ann@example.com")},
				Lines: []interopLine{{"a-1", 1}, {"b-2", 3}}, Note: ptr("leave at the door")}),
		jsonCase("order-nulls", `{"id":"o-2","qty":1,"price":0.25,"customer":{"name":"Bob","email":null},"lines":[],"note":null}`,
			order("o-2", 0.25, "Bob", nil)),
		// <, > and & as they are, as Jackson writes them (not encoding/json's \u003c).
		jsonCase("escapes", `{"id":"o-<3>","qty":1,"price":-7.125,"customer":{"name":"Zoë & 世界","email":"a@b"},"lines":[{"sku":"<b>","count":0}],"note":"fish & chips \"to go\" \\ \n\t/"}`,
			escapes),
		differs(jsonCase("whole-double", `{"id":"o-4","qty":1,"price":10.0,"customer":{"name":"Cy","email":null},"lines":[],"note":null}`,
			order("o-4", 10, "Cy", nil)), `{"id":"o-4","qty":1,"price":10,"customer":{"name":"Cy","email":null},"lines":[],"note":null}`),
		differs(jsonCase("line-separator", "{\"id\":\"o-5\",\"qty\":1,\"price\":1.5,\"customer\":{\"name\":\"Di\",\"email\":null},\"lines\":[],\"note\":\"a\u2028b\u2029c\"}",
			order("o-5", 1.5, "Di", ptr("a\u2028b\u2029c"))), `{"id":"o-5","qty":1,"price":1.5,"customer":{"name":"Di","email":null},"lines":[],"note":"a\u2028b\u2029c"}`),
		differs(jsonCase("astral-character", `{"id":"o-7","qty":1,"price":1.5,"customer":{"name":"Fay","email":null},"lines":[],"note":"a😀b"}`,
			order("o-7", 1.5, "Fay", ptr("a😀b"))), `{"id":"o-7","qty":1,"price":1.5,"customer":{"name":"Fay","email":null},"lines":[],"note":"a😀b"}`),
		differs(jsonCase("control-character", `{"id":"o-6","qty":1,"price":1.5,"customer":{"name":"Ed","email":null},"lines":[],"note":"a\u001Fb"}`,
			order("o-6", 1.5, "Ed", ptr("a\x1fb"))), `{"id":"o-6","qty":1,"price":1.5,"customer":{"name":"Ed","email":null},"lines":[],"note":"a\u001fb"}`),
	}
}

// TestInteropWithJava decodes the JSON Jackson wrote for each case and requires the Go
// serde to write the same bytes (or as documented otherwise).
func TestInteropWithJava(t *testing.T) {
	srtest.RunInterop(t, "jsonschema", sr.TypeJSON, interopCases(), false)
}

// TestInteropWriteForJava writes Go's encodings to $KSTREAM_SERDES_INTEROP_OUT/jsonschema,
// for testing/serdes/run.sh read.
func TestInteropWriteForJava(t *testing.T) {
	if os.Getenv(srtest.InteropOutEnv) == "" {
		t.Skip(srtest.InteropOutEnv + " is not set")
	}
	srtest.RunInterop(t, "jsonschema", sr.TypeJSON, interopCases(), true)
}
