package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The example runs end to end: two instances answer every word over HTTP.
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"127.0.0.1:0", "127.0.0.1:0"}, true, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "ok: every word answered with its exact count at both instances") {
		t.Errorf("output:\n%s", out.String())
	}
}
