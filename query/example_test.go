package query_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
)

// Serve the stores of a word count on the instance's ApplicationServer: any instance
// answers for any word, asking the word's owner when it is not itself.
func ExampleNewServer() {
	b := kstream.NewBuilder()
	words := kstream.FlatMapValues(kstream.Stream(b, "lines", serde.String(), serde.String()), strings.Fields)
	kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String()), "counts")

	app, err := kstream.New(b, kstream.Config{
		ApplicationID:     "word-count",
		Brokers:           []string{"localhost:9092"},
		ApplicationServer: "10.0.0.7:8080", // where the other instances reach this one
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := query.NewServer(query.Config{
		App: app,
		Auth: func(r *http.Request) error {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				return errors.New("a bearer token is required")
			}
			return nil // forwarded requests carry the caller's Authorization header
		},
		Timeout: 5 * time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.ListenAndServe(ctx, ":8080", nil) }()
	// Or mount it on a mux of your own: mux.Handle("/v1/", srv).
	_ = app.Run(ctx)
}

// Read a store of a running application from any of its instances.
func ExampleStoreOf() {
	ctx := context.Background()
	c := query.NewClient("http://10.0.0.7:8080", query.WithBearerToken("s3cret"), query.WithRetry(3, 200*time.Millisecond))
	counts := query.StoreOf[string, int64](c, "counts")

	n, found, err := counts.Get(ctx, "kafka")
	fmt.Println(n, found, err)

	// Every word, in key order, 500 per request.
	err = counts.AllFunc(ctx, func(kv query.KeyValue[string, int64]) bool {
		fmt.Println(kv.Key, kv.Value)
		return true
	}, query.PageSize(500))
	var qe *query.Error
	if errors.As(err, &qe) && qe.Retryable {
		fmt.Println("try again later:", qe.Reason)
	}
}
