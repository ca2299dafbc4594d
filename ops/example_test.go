package ops_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/ops"
	"github.com/kstream-go/kstream/serde"
)

// Serve the ops page, its JSON and the health probes of an application under /ops/, next
// to the application's other routes. Here the requests are made in-process, before Run:
// the instance is live but not ready yet, and /api/describe already has its topology.
func ExampleHandler() {
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, "words", serde.String(), serde.String(), kstream.Named("words")).GroupByKey(), "counts")
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:     "wordcount",
		Brokers:           []string{"localhost:9092"},
		ApplicationServer: "localhost:8080", // where this mux is served: other instances link here
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", ops.Handler(app)))
	// In main: go http.ListenAndServe(":8080", mux); then app.Run(ctx).

	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	for _, p := range []string{"/ops/healthz/live", "/ops/healthz/ready"} {
		rec := get(p)
		fmt.Println(p, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var d ops.Describe
	if err := json.Unmarshal(get("/ops/api/describe").Body.Bytes(), &d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.ApplicationID, d.State)
	for _, n := range d.Topology.Subtopologies[0].Nodes {
		fmt.Println(n.Kind, n.Name)
	}
	page := get("/ops/")
	fmt.Println(page.Code, page.Header().Get("Content-Type"))
	// Output:
	// /ops/healthz/live 200 {"live":true,"ready":false,"state":"CREATED","reason":"state CREATED"}
	// /ops/healthz/ready 503 {"live":true,"ready":false,"state":"CREATED","reason":"state CREATED"}
	// wordcount CREATED
	// source words
	// processor KSTREAM-AGGREGATE-0000000001
	// store counts
	// 200 text/html; charset=utf-8
}
