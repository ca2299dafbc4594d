package ops_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

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

// Serve the ops page with its fleet view: the view asks every other instance of the
// application for its status at its application server (by default GET /v1/status of its
// query server, which checks its Auth hook), sending the token that hook wants. Before Run
// the instance has not joined its group: the fleet is itself.
func ExampleNewHandler() {
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, "words", serde.String(), serde.String()).GroupByKey(), "counts")
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:     "wordcount",
		Brokers:           []string{"localhost:9092"},
		ApplicationServer: "localhost:8080", // where this instance's query server listens
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := ops.NewHandler(app, ops.Config{
		ForwardHeader: func(_, out *http.Request) { out.Header.Set("Authorization", "Bearer service-token") },
		Timeout:       time.Second,
	})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	// In main: go http.ListenAndServe(":8081", mux), the query server on :8080; then
	// app.Run(ctx). The fleet view is /ops/#fleet.

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops/api/fleet", nil))
	var f ops.Fleet
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		fmt.Println(err)
		return
	}
	for _, fi := range f.Instances {
		fmt.Println(fi.Endpoint, "self:", fi.Self, "reachable:", fi.Reachable, "state:", fi.Status.State)
	}
	// Output:
	// localhost:8080 self: true reachable: true state: CREATED
}
