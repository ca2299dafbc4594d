package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// The example runs end to end on an in-process broker with its in-memory registry: every
// count is exact, and the registry holds the input topic's and the repartition topic's
// subjects.
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, settings{orders: 1000}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"ok: every count is exact",
		"  avro-orders-value ",
		"  avro-example-by-customer-repartition-value ",
		"(magic byte, schema id 1)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
