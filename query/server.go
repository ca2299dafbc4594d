package query

import (
	"bytes"
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/ops"
)

// Headers of the query API.
const (
	// HeaderForwarded marks a request one instance sends another (its value is the origin's
	// ApplicationServer): the receiver answers from its own stores only, never forwarding
	// again, so that a query takes at most one hop.
	HeaderForwarded = "X-Kstream-Forwarded"
	// HeaderServedBy names the instance(s) that read the answer, comma-separated for a scan
	// that fanned out.
	HeaderServedBy = "X-Kstream-Served-By"
	// HeaderHops is 0 when the instance asked answered alone, 1 when it asked another.
	HeaderHops = "X-Kstream-Hops"
)

// Defaults of [Config].
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 4 << 20
)

// maxBatchKeys bounds the keys of one multi-get; maxBodyBytes its body.
const (
	maxBatchKeys = 10000
	maxBodyBytes = 8 << 20
)

//go:embed openapi.json
var openAPI []byte

// Config configures a [Server].
type Config struct {
	// App is the application whose stores the server answers for. Its
	// Config.ApplicationServer must be the address other instances reach this server at.
	App *kstream.App
	// Auth, when set, authenticates every request (a bearer token in r.Header, or the mTLS
	// identity in r.TLS.PeerCertificates); an error refuses it with 401.
	Auth func(*http.Request) error
	// Timeout bounds each request, forwarding included (default 10s). A request may ask
	// for less with ?timeout= (a Go duration or milliseconds).
	Timeout time.Duration
	// MaxResponseBytes bounds the body of a scan's answer (default 4 MiB): a page stops
	// early and returns a cursor rather than exceed it. One entry is always returned.
	MaxResponseBytes int
	// Client sends the requests to other instances (default: a client of its own); set its
	// Transport's TLSClientConfig to reach peers over TLS (and present a client
	// certificate for mTLS).
	Client *http.Client
	// Scheme is "http" (default) or "https", for the URLs of other instances built from
	// their ApplicationServer.
	Scheme string
	// ForwardHeader copies what a forwarded request needs from the incoming one, so that
	// it passes the peer's Auth (default: the Authorization header).
	ForwardHeader func(in, out *http.Request)
	// Logger receives the errors of the HTTP server that [Server.Serve] runs (failed TLS
	// handshakes, for one); default slog.Default().
	Logger *slog.Logger
	// KeyMetadata locates a key of a store, for the routing of key lookups (default
	// App.KeyMetadata). Set it when a store's input is partitioned by a stream partitioner,
	// as with kstream.KeyMetadataWith(app, store, key, partitioner), so that lookups go to
	// the instance that holds the key.
	KeyMetadata func(store string, key kstream.RawKey) (kstream.KeyMetadata, error)
}

// keyMetadata locates a serialized key of the store named name (Config.KeyMetadata).
func (s *Server) keyMetadata(name string, kb []byte) (kstream.KeyMetadata, error) {
	if s.cfg.KeyMetadata != nil {
		return s.cfg.KeyMetadata(name, kstream.RawKey(kb))
	}
	return s.cfg.App.KeyMetadata(name, kstream.RawKey(kb))
}

// Server answers queries over HTTP for one instance of an application, reading its own
// stores or asking the instance that owns a key; it is an [http.Handler] to mount at the
// root of a mux (its paths start with /v1/). The endpoints are described in
// docs/queries.md and openapi.json. Kafka Streams has no counterpart: its users write this
// layer themselves.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	routes []string
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request) error

// NewServer returns a server over cfg.App.
func NewServer(cfg Config) *Server {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64 // peers are few and asked often
		cfg.Client = &http.Client{Transport: tr}
	}
	if cfg.Scheme == "" {
		cfg.Scheme = "http"
	}
	if cfg.ForwardHeader == nil {
		cfg.ForwardHeader = func(in, out *http.Request) {
			if a := in.Header.Get("Authorization"); a != "" {
				out.Header.Set("Authorization", a)
			}
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.handle("GET /v1/openapi.json", s.openapi)
	s.handle("GET /v1/metadata", s.metadata)
	s.handle("GET /v1/status", s.status)
	s.handle("GET /v1/stores", s.stores)
	s.handle("GET /v1/stores/{store}/owner", s.owner)
	s.handle("GET /v1/stores/{store}/keys", s.get)
	s.handle("POST /v1/stores/{store}/keys:batch", s.batch)
	s.handle("GET /v1/stores/{store}/range", s.scan(scanRange))
	s.handle("GET /v1/stores/{store}/prefix", s.scan(scanPrefix))
	s.handle("GET /v1/stores/{store}/all", s.scan(scanAll))
	s.handle("GET /v1/stores/{store}/count", s.count)
	s.handle("GET /v1/stores/{store}/windows", s.windows)
	s.handle("GET /v1/stores/{store}/windows/all", s.windowsAll)
	s.handle("GET /v1/stores/{store}/sessions", s.sessions)
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// notFound answers requests that match no endpoint: 405 if the path has an endpoint for
// another method, else 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		rm := r.Clone(r.Context())
		rm.Method = m
		if _, p := s.mux.Handler(rm); p != "/" && p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, errorf(http.StatusMethodNotAllowed, ReasonBadRequest, "%s %s: the endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, errorf(http.StatusNotFound, ReasonNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
}

// handle registers h at pattern behind authentication and the request timeout.
func (s *Server) handle(pattern string, h handlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Auth != nil {
			if err := s.cfg.Auth(r); err != nil {
				writeError(w, errorf(http.StatusUnauthorized, ReasonUnauthenticated, "%v", err))
				return
			}
		}
		d := s.cfg.Timeout
		if t := r.URL.Query().Get("timeout"); t != "" {
			td, err := parseDuration(t)
			if err != nil {
				writeError(w, err)
				return
			}
			d = min(d, td)
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		if err := h(ctx, w, r.WithContext(ctx)); err != nil {
			writeError(w, err)
		}
	})
}

// parseDuration parses a Go duration or a number of milliseconds.
func parseDuration(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badRequest("parameter timeout=%q is not a positive duration", s)
	}
	return d, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// ListenAndServe listens on addr (":8080", or the host:port of Config.ApplicationServer)
// and serves until ctx ends, then shuts down gracefully (waiting up to Config.Timeout for
// the requests in flight) and returns nil. tlsCfg, when not nil, serves HTTPS (set its
// ClientAuth and ClientCAs for mTLS).
func (s *Server) ListenAndServe(ctx context.Context, addr string, tlsCfg *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("query: listening on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln, tlsCfg)
}

// Serve is ListenAndServe on a listener of the caller's, which it closes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsCfg *tls.Config) error {
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: s.cfg.Timeout, TLSConfig: tlsCfg,
		ErrorLog:    slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		s.CloseIdleConnections()
		return fmt.Errorf("query: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-done
	s.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("query: shutting down on %s: %w", ln.Addr(), err)
	}
	return nil
}

// CloseIdleConnections closes the idle connections to other instances (Serve does when it
// returns), for a server mounted on a mux of the caller's.
func (s *Server) CloseIdleConnections() { s.cfg.Client.CloseIdleConnections() }

// self returns this instance as the last rebalance described it (zero before it joined).
func (s *Server) self() kstream.InstanceMetadata {
	for _, m := range s.cfg.App.Metadata() {
		if m.Self {
			return m
		}
	}
	return kstream.InstanceMetadata{}
}

// servedBy sets the answer's headers.
func servedBy(w http.ResponseWriter, hops int, hosts ...string) {
	w.Header().Set(HeaderServedBy, strings.Join(hosts, ","))
	w.Header().Set(HeaderHops, strconv.Itoa(hops))
}

func forwarded(r *http.Request) bool { return r.Header.Get(HeaderForwarded) != "" }

func (s *Server) openapi(_ context.Context, w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
	return nil
}

func describe(si kstream.StoreInfo) StoreDescription {
	return StoreDescription{Name: si.Name, Kind: si.Kind.String(), Partitions: si.Partitions}
}

func (s *Server) storeList() []StoreDescription {
	out := []StoreDescription{}
	for _, si := range s.cfg.App.QueryableStores() {
		out = append(out, describe(si))
	}
	return out
}

func (s *Server) metadata(_ context.Context, w http.ResponseWriter, _ *http.Request) error {
	resp := MetadataResponse{Instances: []Instance{}, Stores: s.storeList()}
	for _, m := range s.cfg.App.Metadata() {
		in := Instance{Host: m.Host, MemberID: m.MemberID, Self: m.Self, Stores: map[string][]int32{}, Standbys: map[string][]int32{}}
		for _, st := range resp.Stores {
			if ps := m.Partitions(s.cfg.App, st.Name); len(ps) > 0 {
				in.Stores[st.Name] = ps
			}
			sb := kstream.InstanceMetadata{Active: m.Standby}
			if ps := sb.Partitions(s.cfg.App, st.Name); len(ps) > 0 {
				in.Standbys[st.Name] = ps
			}
		}
		resp.Instances = append(resp.Instances, in)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// status serves this instance's status, the JSON of ops.StatusOf: the fleet view of the ops
// page reads it from every instance, through their ApplicationServer.
func (s *Server) status(_ context.Context, w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, ops.StatusOf(s.cfg.App))
	return nil
}

func (s *Server) stores(_ context.Context, w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, StoresResponse{Stores: s.storeList()})
	return nil
}

// request is what every store endpoint parses first.
type request struct {
	name string
	opts []kstream.QueryOption
	rs   *kstream.RawStore
	raw  bool
	// me is this instance, host its name for HeaderServedBy (the request's Host if it has
	// no ApplicationServer).
	me   kstream.InstanceMetadata
	host string
}

// parse parses the store, stale_lag and format parameters; the store must be of one of
// kinds (any when none).
func (s *Server) parse(r *http.Request, kinds ...kstream.StoreKind) (*request, error) {
	q := r.URL.Query()
	rq := &request{name: r.PathValue("store"), me: s.self()}
	if rq.host = rq.me.Host; rq.host == "" {
		rq.host = r.Host
	}
	switch f := q.Get("format"); f {
	case "", "json":
	case "raw":
		rq.raw = true
	default:
		return nil, badRequest("parameter format=%q: want json or raw", f)
	}
	if l := q.Get("stale_lag"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return nil, badRequest("parameter stale_lag=%q is not an integer", l)
		}
		rq.opts = append(rq.opts, kstream.StaleStores(n))
	}
	rs, err := s.cfg.App.RawStore(rq.name, rq.opts...)
	if err != nil {
		return nil, err
	}
	rq.rs = rs
	if k := rs.Info().Kind; len(kinds) > 0 && !slices.Contains(kinds, k) {
		return nil, badRequest("store %q is a %s store; this endpoint needs a %s store", rq.name, k, kinds[0])
	}
	return rq, nil
}

// stale reports whether the request allows standby reads.
func (rq *request) stale() bool { return len(rq.opts) > 0 }

// parseKey reads a key from parameter name as JSON (a bare word that is not JSON is taken
// as a JSON string, so that ?key=hello works for string keys), or from name_b64 as the
// base64 of the serialized key.
func parseKey(r *http.Request, rs *kstream.RawStore, name string, required bool) ([]byte, error) {
	q := r.URL.Query()
	if b64 := q.Get(name + "_b64"); b64 != "" {
		kb, err := decodeB64(b64)
		if err != nil {
			return nil, badRequest("parameter %s_b64: %v", name, err)
		}
		return kb, nil
	}
	if !q.Has(name) {
		if required {
			return nil, badRequest("parameter %s is required", name)
		}
		return nil, nil
	}
	return keyFromJSON(rs, []byte(q.Get(name)), true)
}

// keyFromJSON serializes a key given as JSON; lenient takes text that fails as a JSON
// string.
func keyFromJSON(rs *kstream.RawStore, k []byte, lenient bool) ([]byte, error) {
	kb, err := rs.KeyFromJSON(k)
	if err != nil && lenient {
		s, _ := json.Marshal(string(k))
		if kb2, err2 := rs.KeyFromJSON(s); err2 == nil {
			return kb2, nil
		}
	}
	if err != nil {
		return nil, badRequest("bad key %s: %v", truncate(k), err)
	}
	if kb == nil {
		return nil, badRequest("bad key %s: it serializes to null", truncate(k))
	}
	return kb, nil
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "..."
	}
	return strconv.Quote(string(b))
}

// decodeB64 decodes standard or URL base64, padded or not.
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64URL.DecodeString(s)
	}
	return base64Std.DecodeString(s)
}

func (s *Server) owner(_ context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r)
	if err != nil {
		return err
	}
	kb, err := parseKey(r, rq.rs, "key", true)
	if err != nil {
		return err
	}
	km, err := s.keyMetadata(rq.name, kb)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KeyOwner{Partition: km.Partition, Active: km.Active, Standbys: append([]string{}, km.Standbys...)})
	return nil
}

func (s *Server) get(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r)
	if err != nil {
		return err
	}
	kb, err := parseKey(r, rq.rs, "key", true)
	if err != nil {
		return err
	}
	return s.routeKey(ctx, w, r, rq, kb, func(rs *kstream.RawStore) (any, error) {
		v, ok, err := rs.Get(kb)
		if err != nil {
			return nil, err
		}
		if !ok {
			k, _ := render(kb, rq.raw, rs.KeyToJSON)
			return nil, errorf(http.StatusNotFound, ReasonNotFound, "key %s not found in store %q", k, rq.name)
		}
		return entryOf(rs, kb, v, rq.raw, false)
	})
}

// routeKey answers a query about one key: here if this instance runs the key's partition
// (or, with stale_lag, holds a fresh enough replica of it), else at the instance that runs
// it, unless the request was itself forwarded.
func (s *Server) routeKey(ctx context.Context, w http.ResponseWriter, r *http.Request, rq *request, kb []byte, local func(*kstream.RawStore) (any, error)) error {
	serveLocal := func() error {
		servedBy(w, 0, rq.host) // on errors too: a 404 says where the key is absent
		rs := rq.rs
		if s.cfg.KeyMetadata != nil {
			// The key's partition is the one Config.KeyMetadata names, which may not be
			// the default partitioner's.
			km, err := s.keyMetadata(rq.name, kb)
			if err != nil {
				return err
			}
			if rs, err = s.cfg.App.RawStore(rq.name, append(slices.Clone(rq.opts), kstream.QueryPartitions(km.Partition))...); err != nil {
				return err
			}
		}
		v, err := local(rs)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
	if forwarded(r) {
		return serveLocal()
	}
	km, err := s.keyMetadata(rq.name, kb)
	if err != nil {
		return err
	}
	if km.ActiveMember != "" && km.ActiveMember == rq.me.MemberID {
		return serveLocal()
	}
	if rq.stale() {
		err := serveLocal()
		if e := toError(err); err == nil || !e.Retryable {
			return err
		}
	}
	var standbys []string // the replicas a stale read may fall back to
	if rq.stale() {
		for _, h := range km.Standbys {
			if h != rq.host {
				standbys = append(standbys, h)
			}
		}
	}
	var first error
	var unavailable *answer // the active instance's 503, relayed if no standby answers
	switch {
	case km.ActiveMember == "":
		first = errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d has no active instance now (rebalancing)", rq.name, km.Partition)
	case km.Active == "":
		first = errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d: its instance %s has no ApplicationServer", rq.name, km.Partition, km.ActiveMember)
	default:
		a, err := s.forwardTo(ctx, r, rq, km.Active)
		if err == nil && (a.status != http.StatusServiceUnavailable || len(standbys) == 0) {
			return a.write(w)
		}
		if err != nil {
			first = err
		} else {
			unavailable = &a
		}
	}
	// The active copy cannot answer (its instance is down, restoring or gone) and stale
	// reads are allowed: ask the standby replicas, which answer within the lag bound.
	for _, h := range standbys {
		a, err := s.forwardTo(ctx, r, rq, h)
		if err == nil && a.status != http.StatusServiceUnavailable {
			return a.write(w)
		}
	}
	if unavailable != nil {
		return unavailable.write(w)
	}
	return first
}

// answer is a peer's answer to a forwarded request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// write relays the answer.
func (a answer) write(w http.ResponseWriter) error {
	for _, h := range []string{"Content-Type", "Retry-After", HeaderServedBy} {
		w.Header().Del(h)
		if v := a.header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set(HeaderHops, "1")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
	return nil
}

// forwardTo sends a GET request to host and returns its answer.
func (s *Server) forwardTo(ctx context.Context, r *http.Request, rq *request, host string) (answer, error) {
	resp, err := s.peer(ctx, r, rq, http.MethodGet, host, r.URL.Path, r.URL.RawQuery, nil)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.peerLimit()))
	if err != nil {
		return answer{}, peerError(ctx, host, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// peerLimit bounds what is read of a peer's answer.
func (s *Server) peerLimit() int64 { return int64(max(4*s.cfg.MaxResponseBytes, 16<<20)) }

// peer sends a request to another instance, marked as forwarded.
func (s *Server) peer(ctx context.Context, in *http.Request, rq *request, method, host, path, rawQuery string, body []byte) (*http.Response, error) {
	u := url.URL{Scheme: s.cfg.Scheme, Host: host, Path: path, RawQuery: rawQuery}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, ReasonInternal, "request to %s: %v", host, err)
	}
	origin := rq.host
	if origin == "" {
		origin = "unknown"
	}
	out.Header.Set(HeaderForwarded, origin)
	if body != nil {
		out.Header.Set("Content-Type", "application/json")
	}
	s.cfg.ForwardHeader(in, out)
	resp, err := s.cfg.Client.Do(out)
	if err != nil {
		return nil, peerError(ctx, host, err)
	}
	return resp, nil
}

// peerError is the error of a failed exchange with host.
func peerError(ctx context.Context, host string, err error) error {
	if ctx.Err() != nil {
		return toError(fmt.Errorf("asking %s: %w", host, ctx.Err()))
	}
	return errorf(http.StatusServiceUnavailable, ReasonPeerUnavailable, "asking %s: %v", host, err)
}

// callPeer sends a request to another instance and decodes its JSON answer into out; an
// error answer becomes an *Error.
func (s *Server) callPeer(ctx context.Context, in *http.Request, rq *request, method, host, path, rawQuery string, body []byte, out any) error {
	resp, err := s.peer(ctx, in, rq, method, host, path, rawQuery, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.peerLimit()))
	if err != nil {
		return peerError(ctx, host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp.StatusCode, b, host)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return errorf(http.StatusBadGateway, ReasonInternal, "decoding the answer of %s: %v", host, err)
	}
	return nil
}

// decodeError decodes an error body of status from host.
func decodeError(status int, b []byte, host string) *Error {
	e := &Error{}
	if err := json.Unmarshal(b, e); err != nil || e.Reason == "" {
		e = errorf(status, ReasonInternal, "%s answered %d: %s", host, status, truncate(b))
	}
	e.Status = status
	return e
}

// fanOut runs local over every partition of the store, split by the instance running it:
// here for this instance's partitions, at the others through a forwarded request that
// names theirs. A forwarded request runs local over the partitions it names only. Every
// partition must have an active instance, and every instance must answer.
func fanOut[T any](s *Server, ctx context.Context, r *http.Request, rq *request, local func(*kstream.RawStore) (T, error)) (results []T, hosts []string, err error) {
	app := s.cfg.App
	if forwarded(r) {
		rs := rq.rs
		if p := r.URL.Query().Get("partitions"); p != "" {
			ps, err := parsePartitions(p)
			if err != nil {
				return nil, nil, err
			}
			if rs, err = app.RawStore(rq.name, append(slices.Clone(rq.opts), kstream.QueryPartitions(ps...))...); err != nil {
				return nil, nil, err
			}
		}
		v, err := local(rs)
		if err != nil {
			return nil, nil, err
		}
		return []T{v}, []string{rq.host}, nil
	}
	n := rq.rs.Info().Partitions
	if n <= 0 {
		return nil, nil, &kstream.StoreUnavailableError{Store: rq.name, Partition: -1, Reason: kstream.NotRunning}
	}
	// Each partition is asked of one instance: the first that the metadata says runs it.
	owner := make([]int, n)
	var insts []kstream.InstanceMetadata
	for i := range owner {
		owner[i] = -1
	}
	for _, m := range app.Metadata() {
		for _, p := range m.Partitions(app, rq.name) {
			if p >= 0 && p < n && owner[p] < 0 {
				if len(insts) == 0 || insts[len(insts)-1].MemberID != m.MemberID {
					insts = append(insts, m)
				}
				owner[p] = len(insts) - 1
			}
		}
	}
	parts := make([][]int32, len(insts))
	for p, i := range owner {
		if i < 0 {
			return nil, nil, errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d has no active instance now (rebalancing)", rq.name, p)
		}
		if !insts[i].Self && insts[i].Host == "" {
			return nil, nil, errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d: its instance %s has no ApplicationServer", rq.name, p, insts[i].MemberID)
		}
		parts[i] = append(parts[i], int32(p))
	}
	results = make([]T, len(insts))
	errs := make([]error, len(insts))
	hosts = make([]string, len(insts))
	var wg sync.WaitGroup
	for i, m := range insts {
		hosts[i] = m.Host
		if m.Self {
			hosts[i] = rq.host
			rs, err := app.RawStore(rq.name, append(slices.Clone(rq.opts), kstream.QueryPartitions(parts[i]...))...)
			if err == nil {
				results[i], err = local(rs)
			}
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := r.URL.Query()
			q.Set("partitions", formatPartitions(parts[i]))
			errs[i] = s.callPeer(ctx, r, rq, http.MethodGet, m.Host, r.URL.Path, q.Encode(), nil, &results[i])
		}()
	}
	wg.Wait()
	var out []T
	var outHosts []string
	for i, err := range errs {
		if err == nil {
			out, outHosts = append(out, results[i]), append(outHosts, hosts[i])
			continue
		}
		if e := toError(err); !rq.stale() || !e.Retryable || forwarded(r) {
			return nil, nil, err
		}
		// Stale reads allowed and the instance cannot answer (down, restoring, moving its
		// partitions): ask the standby replicas of its partitions instead.
		more, moreHosts, ferr := standbyFallback(s, ctx, r, rq, parts[i], insts[i].MemberID, local)
		if ferr != nil {
			return nil, nil, err
		}
		out, outHosts = append(out, more...), append(outHosts, moreHosts...)
	}
	return out, outHosts, ctx.Err()
}

// standbyFallback reads partitions ps of a scan from the instances keeping standby replicas
// of them (other than the failed member), each partition from one of them.
func standbyFallback[T any](s *Server, ctx context.Context, r *http.Request, rq *request, ps []int32, failed string, local func(*kstream.RawStore) (T, error)) ([]T, []string, error) {
	app := s.cfg.App
	byHost := map[string][]int32{}
	var order []string
	self := ""
	for _, p := range ps {
		found := false
		for _, m := range app.Metadata() {
			if m.MemberID == failed || !slices.Contains(m.StandbyPartitions(app, rq.name), p) {
				continue
			}
			host := m.Host
			if m.Self {
				host, self = rq.host, rq.host
			} else if host == "" {
				continue
			}
			if byHost[host] == nil {
				order = append(order, host)
			}
			byHost[host] = append(byHost[host], p)
			found = true
			break
		}
		if !found {
			return nil, nil, errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d: no reachable active or standby copy", rq.name, p)
		}
	}
	out := make([]T, len(order))
	for i, host := range order {
		var err error
		if host == self {
			var rs *kstream.RawStore
			if rs, err = app.RawStore(rq.name, append(slices.Clone(rq.opts), kstream.QueryPartitions(byHost[host]...))...); err == nil {
				out[i], err = local(rs)
			}
		} else {
			q := r.URL.Query()
			q.Set("partitions", formatPartitions(byHost[host]))
			err = s.callPeer(ctx, r, rq, http.MethodGet, host, r.URL.Path, q.Encode(), nil, &out[i])
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return out, order, nil
}

func parsePartitions(s string) ([]int32, error) {
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return nil, badRequest("parameter partitions=%q: want partition numbers separated by commas", s)
		}
		out = append(out, int32(p))
	}
	return out, nil
}

func formatPartitions(ps []int32) string {
	fs := make([]string, len(ps))
	for i, p := range ps {
		fs[i] = strconv.Itoa(int(p))
	}
	return strings.Join(fs, ",")
}

// hopsOf is the hops of a fanned-out answer: 1 if another instance contributed.
func hopsOf(r *http.Request, hosts []string, self string) int {
	if forwarded(r) {
		return 0
	}
	for _, h := range hosts {
		if h != self {
			return 1
		}
	}
	return 0
}
