// Package ops serves a running kstream application to its operators over HTTP: a web page
// that draws the topology and shows the state, the tasks and standbys of every instance,
// the lag of each input partition, restorations in progress, recent dead-letter records,
// dropped records by operator and reason, and live charts; a fleet view of the same page
// with the lag, standbys, restores, dead letters and dropped records of every instance of
// the application, each row naming its instance; the JSON it is drawn from; and liveness
// and readiness probes.
//
// [Handler] is one http.Handler with everything embedded (no external assets: it works
// offline). Mount it at any prefix:
//
//	mux.Handle("/ops/", http.StripPrefix("/ops", ops.Handler(app)))
//
// Its routes, relative to where it is mounted:
//
//	/               the page
//	/api/describe   JSON Describe: application id, state, topology (text and graph), every
//	                instance of the group with its tasks and stores, and this instance's status
//	/api/status     JSON Status: this instance's status (kstream.App.Status) and health
//	/api/fleet      JSON Fleet: every instance of the group with its tasks and the status
//	                it serves at its application server (see [Config]), or why it is
//	                unreachable; the page's fleet view (<base>/#fleet) draws it
//	/healthz/live   200 when live, 503 when not, with a JSON Health body
//	/healthz/ready  200 when ready, 503 when not, with a JSON Health body
//
// The JSON field names are stable (the kstream CLI reads /api/describe); see api.go.
package ops

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"path"
	"strings"

	"github.com/kstream-go/kstream"
)

//go:embed page.html
var page []byte

// Handler returns the handler of the ops page, its JSON API and the health probes of app
// (see the package documentation for its routes). It may be mounted at any prefix, with or
// without http.StripPrefix: it recognizes its routes by their last path elements, and the
// page fetches its data with relative URLs.
func Handler(app *kstream.App) http.Handler { return NewHandler(app, Config{}) }

// NewHandler is [Handler] with cfg saying how the fleet view (/api/fleet) reaches the other
// instances: by default their query server's GET /v1/status over plain HTTP, with the
// page's Authorization header.
func NewHandler(app *kstream.App, cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		switch {
		case strings.HasSuffix(p, "/api/describe"):
			writeJSON(w, http.StatusOK, DescribeOf(app))
		case strings.HasSuffix(p, "/api/status"):
			writeJSON(w, http.StatusOK, StatusOf(app))
		case strings.HasSuffix(p, "/api/fleet"):
			writeJSON(w, http.StatusOK, FleetOf(r.Context(), app, cfg, r))
		case strings.HasSuffix(p, "/healthz/live"):
			Liveness(app).ServeHTTP(w, r)
		case strings.HasSuffix(p, "/healthz/ready"):
			Readiness(app).ServeHTTP(w, r)
		case p == "" || strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/index.html"):
			if rp := requestPath(r); !strings.HasSuffix(rp, "/") && !strings.HasSuffix(rp, "/index.html") {
				// Mounted with StripPrefix and asked for the prefix itself ("/ops"): the
				// page's relative URLs need the trailing slash.
				http.Redirect(w, r, path.Base(rp)+"/", http.StatusMovedPermanently)
				return
			}
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Cache-Control", "no-store")
			h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")
			h.Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write(page)
		default:
			http.NotFound(w, r)
		}
	})
}

// requestPath is the path the client asked for, before any StripPrefix.
func requestPath(r *http.Request) string {
	if u := r.RequestURI; u != "" {
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		return u
	}
	return r.URL.Path
}

// Liveness returns a liveness probe of app: 200 while app is live (no fatal error, its poll
// loop turning: see kstream.App.Health), else 503; the body is a JSON [Health].
func Liveness(app *kstream.App) http.Handler {
	return probe(app, func(h kstream.Health) bool { return h.Live })
}

// Readiness returns a readiness probe of app: 200 while app is ready (RUNNING with every
// active task restored: see kstream.App.Health), else 503; the body is a JSON [Health].
func Readiness(app *kstream.App) http.Handler {
	return probe(app, func(h kstream.Health) bool { return h.Ready })
}

func probe(app *kstream.App, ok func(kstream.Health) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := app.Health()
		code := http.StatusOK
		if !ok(h) {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, Health{Live: h.Live, Ready: h.Ready, State: app.State().String(), Reason: h.Reason})
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
