package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
)

// The fleet view: every instance of the application, found through the group assignment
// (kstream.App.Metadata), with the status each one serves at its application server
// (Config.ApplicationServer). This instance's status is read in process; the others' over
// HTTP, by default from GET /v1/status of their query server (package query), which checks
// the same Auth hook as its queries.

// Defaults of [Config].
const (
	DefaultStatusPath   = "/v1/status"
	DefaultFleetTimeout = 2 * time.Second
)

// maxStatusBytes bounds the body of an instance's status.
const maxStatusBytes = 16 << 20

// Config configures [NewHandler]: how its fleet view reaches the other instances of the
// application. The zero Config asks each instance for GET http://<its ApplicationServer>/v1/status,
// the status endpoint of package query's server.
type Config struct {
	// StatusPath is the path of an instance's status on its application server (default
	// [DefaultStatusPath], served by query.Server behind its Auth hook). Set it to where
	// the instances serve this package's /api/status instead (as "/ops/api/status") when
	// their application server mounts the ops handler rather than the query server.
	StatusPath string
	// Scheme is "http" (default) or "https".
	Scheme string
	// Client sends the requests (default: http.DefaultClient); set its Transport's
	// TLSClientConfig to reach the instances over TLS, with a client certificate for mTLS.
	Client *http.Client
	// ForwardHeader sets what a request to another instance carries so that it passes that
	// instance's Auth hook: in is the request of the page (nil when [FleetOf] is called
	// without one), out the request to the instance. Default: in's Authorization header,
	// as query.Config.ForwardHeader. Set a service token here when the page's users do not
	// hold one the query servers accept.
	ForwardHeader func(in, out *http.Request)
	// Timeout bounds each instance's answer (default [DefaultFleetTimeout]); an instance
	// that does not answer in time is shown as unreachable.
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.StatusPath == "" {
		c.StatusPath = DefaultStatusPath
	}
	if !strings.HasPrefix(c.StatusPath, "/") {
		c.StatusPath = "/" + c.StatusPath
	}
	if c.Scheme == "" {
		c.Scheme = "http"
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	if c.ForwardHeader == nil {
		c.ForwardHeader = func(in, out *http.Request) {
			if in == nil {
				return
			}
			if a := in.Header.Get("Authorization"); a != "" {
				out.Header.Set("Authorization", a)
			}
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultFleetTimeout
	}
	return c
}

// Fleet is the body of GET <base>/api/fleet: every instance of the application with its
// status.
type Fleet struct {
	ApplicationID string `json:"application_id"`
	// Time is when the view was taken (when this instance began asking the others).
	Time time.Time `json:"time"`
	// Instances are the members of the group as of the last rebalance, sorted by endpoint;
	// before this instance joined its group, only itself.
	Instances []FleetInstance `json:"instances"`
}

// FleetInstance is one instance of the fleet: its place in the group assignment, and the
// status it served, or why it could not be read.
type FleetInstance struct {
	// Endpoint is its Config.ApplicationServer ("" if it has none); MemberID its group
	// member id.
	Endpoint string `json:"endpoint"`
	MemberID string `json:"member_id"`
	// Self marks the instance that served the view.
	Self bool `json:"self"`
	// Active and Standby are its task ids in the group assignment, sorted.
	Active  []string `json:"active"`
	Standby []string `json:"standby"`
	// Reachable says that Status holds the instance's status; otherwise Error says why
	// not (no application server, refused connection, timeout, HTTP status).
	Reachable bool    `json:"reachable"`
	Error     string  `json:"error,omitempty"`
	Status    *Status `json:"status,omitempty"`
	// LatencyMs is how long the instance took to answer (0 for this instance).
	LatencyMs float64 `json:"latency_ms"`
}

// FleetOf returns what GET <base>/api/fleet serves for app: every instance of its group,
// this one read in process and the others asked in parallel, each within cfg.Timeout (and
// ctx). An instance that cannot be read is in the result with Reachable false and the
// reason; FleetOf itself does not fail. in is the request being served, whose headers
// cfg.ForwardHeader may copy; it may be nil.
func FleetOf(ctx context.Context, app *kstream.App, cfg Config, in *http.Request) Fleet {
	cfg = cfg.withDefaults()
	local := StatusOf(app)
	f := Fleet{ApplicationID: local.ApplicationID, Time: time.Now(), Instances: []FleetInstance{}}
	md := app.Metadata()
	if len(md) == 0 {
		st := local
		f.Instances = append(f.Instances, FleetInstance{Endpoint: local.Endpoint, MemberID: local.MemberID, Self: true,
			Active: []string{}, Standby: []string{}, Reachable: true, Status: &st})
		return f
	}
	f.Instances = make([]FleetInstance, len(md))
	var wg sync.WaitGroup
	for i, m := range md {
		f.Instances[i] = FleetInstance{Endpoint: m.Host, MemberID: m.MemberID, Self: m.Self, Active: taskIDs(m.Active), Standby: taskIDs(m.Standby)}
		switch {
		case m.Self:
			st := local
			f.Instances[i].Reachable, f.Instances[i].Status = true, &st
		case m.Host == "":
			f.Instances[i].Error = "no application server (Config.ApplicationServer is empty)"
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				st, err := fetchStatus(ctx, cfg, in, m.Host)
				f.Instances[i].LatencyMs = ms(time.Since(start))
				if err != nil {
					f.Instances[i].Error = err.Error()
					return
				}
				f.Instances[i].Reachable, f.Instances[i].Status = true, st
			}()
		}
	}
	wg.Wait()
	return f
}

// fetchStatus asks the instance at host for its status.
func fetchStatus(ctx context.Context, cfg Config, in *http.Request, host string) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	u := cfg.Scheme + "://" + host + cfg.StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	cfg.ForwardHeader(in, req)
	resp, err := cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from %s within %v: %w", u, cfg.Timeout, err)
		}
		return nil, fmt.Errorf("asking %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return nil, fmt.Errorf("%s answered %s: %s", u, resp.Status, msg)
	}
	if len(body) > maxStatusBytes {
		return nil, fmt.Errorf("the answer of %s is larger than %d bytes", u, maxStatusBytes)
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("decoding the answer of %s: %w", u, err)
	}
	return &st, nil
}
