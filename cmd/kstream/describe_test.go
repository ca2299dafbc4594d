package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// describeJSON is an answer of the ops handler's /api/describe, with fields kstream
// describe does not print.
const describeJSON = `{
  "application_id": "orders",
  "state": "RUNNING",
  "topology": {
    "text": "Topologies:\n   Sub-topology: 0\n    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])\n      --> KSTREAM-SINK-0000000001\n    Sink: KSTREAM-SINK-0000000001 (topic: out)\n      <-- KSTREAM-SOURCE-0000000000\n\n",
    "subtopologies": [{"id": 0, "nodes": []}]
  },
  "instances": [
    {"endpoint": "10.0.0.1:8080", "member_id": "m-1", "active_tasks": ["0_0", "0_2"], "standby_tasks": ["0_1"], "stores": ["counts"], "extra": 1},
    {"endpoint": "10.0.0.2:8080", "member_id": "m-2", "active_tasks": [{"id": "0_1"}], "standby_tasks": [], "stores": [{"name": "counts"}]},
    {"member_id": "m-3"}
  ],
  "local": {"endpoint": "10.0.0.1:8080", "tasks": []}
}`

const describeText = `Application orders: RUNNING

Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])
      --> KSTREAM-SINK-0000000001
    Sink: KSTREAM-SINK-0000000001 (topic: out)
      <-- KSTREAM-SOURCE-0000000000

Instances (3):
ENDPOINT       ACTIVE TASKS  STANDBY TASKS  STORES
10.0.0.1:8080  0_0,0_2       0_1            counts
10.0.0.2:8080  0_1           -              counts
m-3            -             -              -
`

func TestDescribe(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/ops/api/describe":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(describeJSON))
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	defer srv.Close()

	if got := mustCLI(t, "describe", "-url", srv.URL+"/ops/"); got != describeText {
		t.Errorf("describe printed:\n%s\nwant:\n%s", got, describeText)
	}
	if got := mustCLI(t, "describe", "-url", srv.URL+"/ops", "-json"); got != describeJSON {
		t.Errorf("describe -json printed:\n%s\nwant the answer as it came", got)
	}
	_, _, err := cli(t, "describe", "-url", srv.URL+"/elsewhere")
	if err == nil || !strings.Contains(err.Error(), "404 Not Found: no such page") {
		t.Errorf("describe of a wrong URL: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/ops/api/describe", "/ops/api/describe", "/elsewhere/api/describe"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("requested %v, want %v", paths, want)
	}
	// The topology as a plain string is read too.
	var a describeAnswer
	if err := json.Unmarshal([]byte(`{"topology": "Topologies:\n", "instances": []}`), &a); err != nil || a.Topology.Text != "Topologies:\n" {
		t.Errorf("topology as a string: %q, %v", a.Topology.Text, err)
	}
	if _, _, err := cli(t, "describe"); err != errUsage {
		t.Errorf("describe without -url: %v, want a usage error", err)
	}
}
