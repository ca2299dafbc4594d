package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the query API of any instance of an application; [StoreOf] gives typed
// reads of one store. It does not retry unless made with [WithRetry].
type Client struct {
	base    string
	hc      *http.Client
	header  http.Header
	retries int
	backoff time.Duration
}

// ClientOption configures a [Client].
type ClientOption func(*Client)

// WithHTTPClient sends the requests with hc (for TLS, give its Transport a
// TLSClientConfig).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// WithHeader adds a header to every request.
func WithHeader(key, value string) ClientOption {
	return func(c *Client) { c.header.Add(key, value) }
}

// WithBearerToken authenticates every request with "Authorization: Bearer token".
func WithBearerToken(token string) ClientOption {
	return func(c *Client) { c.header.Set("Authorization", "Bearer "+token) }
}

// WithRetry retries a request whose answer is a retryable [*Error] (a store restoring, a
// rebalance, a peer down, a timeout) up to n more times, waiting backoff, then twice
// that, and so on. Other errors, and transport errors, are returned at once.
func WithRetry(n int, backoff time.Duration) ClientOption {
	return func(c *Client) { c.retries, c.backoff = n, backoff }
}

// NewClient returns a client of the server at baseURL ("http://host:port"; any path is
// kept as a prefix).
func NewClient(baseURL string, opts ...ClientOption) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), header: http.Header{}}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return c
}

// CloseIdleConnections closes the idle connections of the client's HTTP client.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Served says who answered a request: [HeaderServedBy] and [HeaderHops].
type Served struct {
	By   string
	Hops int
}

// do sends a request and decodes its JSON answer into out, retrying as configured.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) (Served, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return Served{}, fmt.Errorf("query: encoding the request to %s: %w", path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		sv, err := c.once(ctx, method, path, q, b, out)
		var e *Error
		if err == nil || attempt >= c.retries || !errors.As(err, &e) || !e.Retryable {
			return sv, err
		}
		t := time.NewTimer(c.backoff * time.Duration(1<<min(attempt, 10)))
		select {
		case <-ctx.Done():
			t.Stop()
			return sv, fmt.Errorf("query: %s %s: %w (after %w)", method, path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, q url.Values, body []byte, out any) (Served, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return Served{}, fmt.Errorf("query: %s %s: %w", method, u, err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Served{}, fmt.Errorf("query: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Served{}, fmt.Errorf("query: %s %s: reading the answer: %w", method, u, err)
	}
	sv := Served{By: resp.Header.Get(HeaderServedBy)}
	sv.Hops, _ = strconv.Atoi(resp.Header.Get(HeaderHops))
	if resp.StatusCode != http.StatusOK {
		return sv, decodeError(resp.StatusCode, b, c.base)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return sv, fmt.Errorf("query: %s %s: decoding the answer: %w", method, u, err)
	}
	return sv, nil
}

// Metadata returns every instance of the application and the queryable stores.
func (c *Client) Metadata(ctx context.Context) (MetadataResponse, error) {
	var m MetadataResponse
	_, err := c.do(ctx, http.MethodGet, "/v1/metadata", nil, nil, &m)
	return m, err
}

// Stores lists the queryable stores.
func (c *Client) Stores(ctx context.Context) ([]StoreDescription, error) {
	var s StoresResponse
	_, err := c.do(ctx, http.MethodGet, "/v1/stores", nil, nil, &s)
	return s.Stores, err
}

// Store reads one store through a [Client], with keys of type K and values of type V:
// they are decoded with encoding/json from what the server renders with the store's
// serdes, so they must be JSON-compatible with the store's key and value types. Kafka
// Streams' ReadOnlyKeyValueStore, ReadOnlyWindowStore and ReadOnlySessionStore, remote.
type Store[K, V any] struct {
	c    *Client
	name string
	q    url.Values
}

// StoreOption configures a [Store].
type StoreOption func(url.Values)

// StaleReads lets the store's reads be answered by standby replicas whose lag is at most
// maxLag records (negative: any lag); the stale_lag parameter.
func StaleReads(maxLag int64) StoreOption {
	return func(q url.Values) { q.Set("stale_lag", strconv.FormatInt(maxLag, 10)) }
}

// StoreOf returns a typed view of the store named name.
func StoreOf[K, V any](c *Client, name string, opts ...StoreOption) *Store[K, V] {
	s := &Store[K, V]{c: c, name: name, q: url.Values{}}
	for _, o := range opts {
		o(s.q)
	}
	return s
}

// KeyValue is one key of a store with its value, its timestamp (Unix ms, -1 if the store
// keeps none) and its partition.
type KeyValue[K, V any] struct {
	Key       K
	Value     V
	Timestamp int64
	Partition int32
}

// Window is one window (of a window store) or session (of a session store) of a key.
type Window[K, V any] struct {
	Key        K
	Start, End time.Time
	Value      V
	Timestamp  int64
	Partition  int32
}

// Result is a value read by [Store.Lookup] with where it was read.
type Result[V any] struct {
	Value     V
	Timestamp int64
	Partition int32
	// Standby says a standby replica answered (with [StaleReads]); Position is the
	// changelog offset the replica was complete up to.
	Standby  bool
	Position int64
	Served   Served
}

func (s *Store[K, V]) path(endpoint string) string {
	return "/v1/stores/" + url.PathEscape(s.name) + endpoint
}

func (s *Store[K, V]) query() url.Values {
	q := url.Values{}
	for k, v := range s.q {
		q[k] = v
	}
	return q
}

// keyParam encodes a key as JSON for a query parameter.
func keyParam[K any](k K) (string, error) {
	b, err := json.Marshal(k)
	if err != nil {
		return "", fmt.Errorf("query: encoding the key %v as JSON: %w", k, err)
	}
	return string(b), nil
}

// Get returns the value of key k, and whether it is present: Kafka Streams'
// ReadOnlyKeyValueStore.get.
func (s *Store[K, V]) Get(ctx context.Context, k K) (V, bool, error) {
	r, ok, err := s.Lookup(ctx, k)
	return r.Value, ok, err
}

// Lookup is Get with the value's metadata and who served it.
func (s *Store[K, V]) Lookup(ctx context.Context, k K) (Result[V], bool, error) {
	kp, err := keyParam(k)
	if err != nil {
		return Result[V]{}, false, err
	}
	q := s.query()
	q.Set("key", kp)
	var e Entry
	sv, err := s.c.do(ctx, http.MethodGet, s.path("/keys"), q, nil, &e)
	var qe *Error
	if errors.As(err, &qe) && qe.Reason == ReasonNotFound {
		return Result[V]{Served: sv}, false, nil
	}
	if err != nil {
		return Result[V]{Served: sv}, false, err
	}
	r := Result[V]{Timestamp: e.Timestamp, Partition: e.Partition, Standby: e.Standby, Position: e.Position, Served: sv}
	if err := json.Unmarshal(e.Value, &r.Value); err != nil {
		return r, false, fmt.Errorf("query: store %q: decoding the value of %s: %w", s.name, kp, err)
	}
	return r, true, nil
}

// Owner returns the partition of key k and the instances hosting it, as the instance
// asked knows them: Kafka Streams' queryMetadataForKey.
func (s *Store[K, V]) Owner(ctx context.Context, k K) (KeyOwner, error) {
	kp, err := keyParam(k)
	if err != nil {
		return KeyOwner{}, err
	}
	q := s.query()
	q.Set("key", kp)
	var o KeyOwner
	_, err = s.c.do(ctx, http.MethodGet, s.path("/owner"), q, nil, &o)
	return o, err
}

// MultiGet returns the keys of keys that are present, with their values, in the order
// asked; the server asks each instance once for the keys it owns.
func (s *Store[K, V]) MultiGet(ctx context.Context, keys ...K) ([]KeyValue[K, V], error) {
	req := BatchRequest{Keys: make([]json.RawMessage, len(keys))}
	for i, k := range keys {
		kp, err := keyParam(k)
		if err != nil {
			return nil, err
		}
		req.Keys[i] = json.RawMessage(kp)
	}
	var resp BatchResponse
	if _, err := s.c.do(ctx, http.MethodPost, s.path("/keys:batch"), s.query(), req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(keys) {
		return nil, fmt.Errorf("query: store %q: %d results for %d keys", s.name, len(resp.Results), len(keys))
	}
	var out []KeyValue[K, V]
	for i, r := range resp.Results {
		if !r.Found {
			continue
		}
		kv := KeyValue[K, V]{Key: keys[i], Timestamp: r.Timestamp, Partition: r.Partition}
		if err := json.Unmarshal(r.Value, &kv.Value); err != nil {
			return nil, fmt.Errorf("query: store %q: decoding a value: %w", s.name, err)
		}
		out = append(out, kv)
	}
	return out, nil
}

// ScanOption adjusts a scan.
type ScanOption func(url.Values)

// PageSize asks for pages of at most n entries (the server may return fewer, to keep
// within its response size limit); by default a page is as large as that limit allows.
func PageSize(n int) ScanOption {
	return func(q url.Values) { q.Set("limit", strconv.Itoa(n)) }
}

// Reverse scans in descending key order (Kafka Streams' reverseRange and reverseAll).
func Reverse() ScanOption { return func(q url.Values) { q.Set("reverse", "true") } }

// Range returns the keys from from to to, both included, in the order of their serialized
// bytes: Kafka Streams' range.
func (s *Store[K, V]) Range(ctx context.Context, from, to K, opts ...ScanOption) ([]KeyValue[K, V], error) {
	return collect(func(fn func(KeyValue[K, V]) bool) error { return s.RangeFunc(ctx, from, to, fn, opts...) })
}

// RangeFunc calls fn for each key of Range, following the pages, until fn returns false.
func (s *Store[K, V]) RangeFunc(ctx context.Context, from, to K, fn func(KeyValue[K, V]) bool, opts ...ScanOption) error {
	q := s.query()
	for name, k := range map[string]K{"from": from, "to": to} {
		kp, err := keyParam(k)
		if err != nil {
			return err
		}
		q.Set(name, kp)
	}
	return s.scan(ctx, "/range", q, fn, opts)
}

// All returns every key of the store, in the order of their serialized bytes: Kafka
// Streams' all.
func (s *Store[K, V]) All(ctx context.Context, opts ...ScanOption) ([]KeyValue[K, V], error) {
	return collect(func(fn func(KeyValue[K, V]) bool) error { return s.AllFunc(ctx, fn, opts...) })
}

// AllFunc calls fn for each key of All, following the pages, until fn returns false.
func (s *Store[K, V]) AllFunc(ctx context.Context, fn func(KeyValue[K, V]) bool, opts ...ScanOption) error {
	return s.scan(ctx, "/all", s.query(), fn, opts)
}

// Prefix returns the keys whose serialized form starts with prefix (for a string key,
// its UTF-8 bytes): Kafka Streams' prefixScan.
func (s *Store[K, V]) Prefix(ctx context.Context, prefix []byte, opts ...ScanOption) ([]KeyValue[K, V], error) {
	return collect(func(fn func(KeyValue[K, V]) bool) error { return s.PrefixFunc(ctx, prefix, fn, opts...) })
}

// PrefixFunc calls fn for each key of Prefix, following the pages, until fn returns false.
func (s *Store[K, V]) PrefixFunc(ctx context.Context, prefix []byte, fn func(KeyValue[K, V]) bool, opts ...ScanOption) error {
	q := s.query()
	q.Set("prefix_b64", base64URL.EncodeToString(prefix))
	return s.scan(ctx, "/prefix", q, fn, opts)
}

func collect[T any](scan func(func(T) bool) error) ([]T, error) {
	var out []T
	err := scan(func(v T) bool { out = append(out, v); return true })
	return out, err
}

// pages calls page for each page of a scan at path, following cursors.
func (s *Store[K, V]) pages(ctx context.Context, path string, q url.Values, page func(Page) (bool, error)) error {
	for {
		var p Page
		if _, err := s.c.do(ctx, http.MethodGet, s.path(path), q, nil, &p); err != nil {
			return err
		}
		more, err := page(p)
		if err != nil || !more || p.Cursor == "" {
			return err
		}
		q.Set("cursor", p.Cursor)
	}
}

func (s *Store[K, V]) scan(ctx context.Context, path string, q url.Values, fn func(KeyValue[K, V]) bool, opts []ScanOption) error {
	for _, o := range opts {
		o(q)
	}
	return s.pages(ctx, path, q, func(p Page) (bool, error) {
		for _, e := range p.Entries {
			kv := KeyValue[K, V]{Timestamp: e.Timestamp, Partition: e.Partition}
			if err := json.Unmarshal(e.Key, &kv.Key); err != nil {
				return false, fmt.Errorf("query: store %q: decoding a key: %w", s.name, err)
			}
			if err := json.Unmarshal(e.Value, &kv.Value); err != nil {
				return false, fmt.Errorf("query: store %q: decoding a value: %w", s.name, err)
			}
			if !fn(kv) {
				return false, nil
			}
		}
		return true, nil
	})
}

// Count returns the approximate number of keys of the store over every instance: Kafka
// Streams' approximateNumEntries.
func (s *Store[K, V]) Count(ctx context.Context) (int64, error) {
	var c CountResponse
	_, err := s.c.do(ctx, http.MethodGet, s.path("/count"), s.query(), nil, &c)
	return c.Count, err
}

// Windows returns the windows of key k that start in [from, to], by start time: Kafka
// Streams' ReadOnlyWindowStore.fetch(key, timeFrom, timeTo).
func (s *Store[K, V]) Windows(ctx context.Context, k K, from, to time.Time) ([]Window[K, V], error) {
	kp, err := keyParam(k)
	if err != nil {
		return nil, err
	}
	q := s.query()
	q.Set("key", kp)
	setTimes(q, from, to)
	return s.windows(ctx, "/windows", q)
}

// WindowsAll returns the windows of every key that start in [from, to], by key then
// start time: Kafka Streams' ReadOnlyWindowStore.fetchAll(timeFrom, timeTo).
func (s *Store[K, V]) WindowsAll(ctx context.Context, from, to time.Time) ([]Window[K, V], error) {
	q := s.query()
	setTimes(q, from, to)
	return s.windows(ctx, "/windows/all", q)
}

// Sessions returns the sessions of key k, by end then start time: Kafka Streams'
// ReadOnlySessionStore.fetch(key).
func (s *Store[K, V]) Sessions(ctx context.Context, k K) ([]Window[K, V], error) {
	kp, err := keyParam(k)
	if err != nil {
		return nil, err
	}
	q := s.query()
	q.Set("key", kp)
	return s.windows(ctx, "/sessions", q)
}

func setTimes(q url.Values, from, to time.Time) {
	q.Set("from", strconv.FormatInt(from.UnixMilli(), 10))
	q.Set("to", strconv.FormatInt(to.UnixMilli(), 10))
}

func (s *Store[K, V]) windows(ctx context.Context, path string, q url.Values) ([]Window[K, V], error) {
	var out []Window[K, V]
	err := s.pages(ctx, path, q, func(p Page) (bool, error) {
		for _, e := range p.Entries {
			w := Window[K, V]{Timestamp: e.Timestamp, Partition: e.Partition}
			if e.Start != nil {
				w.Start = time.UnixMilli(*e.Start)
			}
			if e.End != nil {
				w.End = time.UnixMilli(*e.End)
			}
			if err := json.Unmarshal(e.Key, &w.Key); err != nil {
				return false, fmt.Errorf("query: store %q: decoding a key: %w", s.name, err)
			}
			if err := json.Unmarshal(e.Value, &w.Value); err != nil {
				return false, fmt.Errorf("query: store %q: decoding a value: %w", s.name, err)
			}
			out = append(out, w)
		}
		return true, nil
	})
	return out, err
}
