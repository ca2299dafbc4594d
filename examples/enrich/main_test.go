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

// The example runs end to end on an in-process broker: every order is enriched once, each
// customer's in input order.
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, 1000, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "ok: every order enriched once") {
		t.Errorf("output:\n%s", out.String())
	}
	t.Log(out.String())
}
