package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Client is a schema registry client shared by serdes: franz-go's sr.Client behind caches
// and retries. Every schema it fetches by id, every subject version, registration and
// lookup is asked of the registry once per Client and kept for its life, so a process
// should have one Client per registry. The latest version of a subject, once fetched, is
// kept too (Confluent's latest.cache.ttl.sec=-1).
//
// A request that fails because the registry is unavailable is retried as [Config.Retry]
// says, and logged at warn. Its error, once the retries are spent or the client is closed,
// wraps [ErrRegistryUnavailable]. A Client is safe for concurrent use.
type Client struct {
	cl    *sr.Client
	log   *slog.Logger
	retry Retry

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	byID       flight[int, sr.Schema]
	byVersion  flight[subjectVersion, sr.SubjectSchema]
	latest     flight[string, sr.SubjectSchema]
	registered flight[string, int]
	lookedUp   flight[string, sr.SubjectSchema]
}

type subjectVersion struct {
	subject string
	version int
}

// NewClient returns a client of the registry that cfg describes. It makes no request.
func NewClient(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("registry: Config.URLs is empty")
	}
	if cfg.Username != "" && cfg.BearerToken != "" {
		return nil, errors.New("registry: Config has both Username and BearerToken: set one")
	}
	opts := []sr.ClientOpt{sr.URLs(slices.Clone(cfg.URLs)...), sr.UserAgent("kstream")}
	if cfg.HTTPClient != nil {
		opts = append(opts, sr.HTTPClient(cfg.HTTPClient))
	}
	if cfg.TLS != nil {
		opts = append(opts, sr.DialTLSConfig(cfg.TLS))
	}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	if cfg.BearerToken != "" {
		opts = append(opts, sr.BearerToken(cfg.BearerToken))
	}
	opts = append(opts, cfg.ClientOptions...)
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{cl: cl, log: log, retry: cfg.Retry.withDefaults(), ctx: ctx, cancel: cancel}, nil
}

// Close stops the client's retries: requests waiting for the registry to come back fail
// with an error wrapping ErrRegistryUnavailable, and so do later requests that find it
// unavailable. The caches stay usable.
func (c *Client) Close() { c.cancel() }

// SR returns franz-go's registry client underneath, for the calls this package does not
// make (compatibility settings, deletions). Its calls are neither cached nor retried.
func (c *Client) SR() *sr.Client { return c.cl }

// SchemaByID returns the schema with the given id. An id that the registry does not know
// is an error wrapping ErrUnknownSchemaID.
func (c *Client) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	return c.byID.get(ctx, id, func() (sr.Schema, error) {
		var s sr.Schema
		err := c.call(ctx, "get schema by id", []slog.Attr{slog.Int("schema_id", id)}, func(ctx context.Context) error {
			var err error
			s, err = c.cl.SchemaByID(ctx, id)
			return err
		})
		switch {
		case err == nil:
			return s, nil
		case notFound(err):
			return s, fmt.Errorf("%w: %w", ErrUnknownSchemaID, err)
		case errors.Is(err, ErrRegistryUnavailable):
			return s, err
		}
		return s, refused(err)
	})
}

// SchemaByVersion returns version (a positive number) of subject's schema, which a
// reference names.
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error) {
	if version <= 0 {
		return sr.SubjectSchema{}, fmt.Errorf("registry: version %d of subject %q: versions are positive", version, subject)
	}
	return c.byVersion.get(ctx, subjectVersion{subject, version}, func() (sr.SubjectSchema, error) {
		return c.bySubject(ctx, subject, version)
	})
}

// LatestSchema returns the latest version of subject's schema, as first fetched by this
// client.
func (c *Client) LatestSchema(ctx context.Context, subject string) (sr.SubjectSchema, error) {
	return c.latest.get(ctx, subject, func() (sr.SubjectSchema, error) {
		return c.bySubject(ctx, subject, -1)
	})
}

func (c *Client) bySubject(ctx context.Context, subject string, version int) (sr.SubjectSchema, error) {
	var ss sr.SubjectSchema
	v := "latest"
	if version > 0 {
		v = strconv.Itoa(version)
	}
	err := c.call(ctx, "get subject version", []slog.Attr{slog.String("subject", subject), slog.String("version", v)}, func(ctx context.Context) error {
		var err error
		ss, err = c.cl.SchemaByVersion(ctx, subject, version)
		return err
	})
	switch {
	case err == nil:
		if ss.ID > 0 {
			c.byID.put(ss.ID, ss.Schema)
		}
		return ss, nil
	case notFound(err):
		return ss, fmt.Errorf("%w: version %s of subject %q: %w", ErrNotRegistered, v, subject, err)
	case errors.Is(err, ErrRegistryUnavailable):
		return ss, err
	}
	return ss, refused(err)
}

// Register registers schema under subject, unless this client did so already, and returns
// its id. A schema the registry refuses as incompatible (HTTP 409 on three tries, each
// followed by a lookup of the schema under subject) is an error wrapping ErrIncompatible
// that carries the registry's message.
func (c *Client) Register(ctx context.Context, subject string, schema sr.Schema, normalize bool) (int, error) {
	return c.registered.get(ctx, schemaKey(subject, schema, normalize), func() (int, error) {
		for round := 1; ; round++ {
			var id int
			err := c.call(ctx, "register schema", []slog.Attr{slog.String("subject", subject)}, func(ctx context.Context) error {
				if normalize {
					ctx = sr.WithParams(ctx, sr.Normalize)
				}
				var err error
				id, err = c.cl.RegisterSchema(ctx, subject, schema, -1, -1)
				return err
			})
			switch {
			case err == nil:
				c.byID.put(id, schema)
				return id, nil
			case errors.Is(err, ErrRegistryUnavailable):
				return 0, err
			case !conflict(err):
				return 0, refused(err)
			}
			// Confluent's registry answers 409 for a schema incompatible with the subject's
			// versions; Apicurio's compatibility API also to the second of two concurrent
			// creates of a new subject ("An artifact with ID ... already exists"), before
			// the first one's version can be looked up. If the schema is registered after
			// all, that is its id; if not, the registration is tried again, a few times:
			// a refusal that holds is one.
			if id, ok := c.registeredAfterAll(ctx, subject, schema, normalize); ok {
				return id, nil
			}
			if round == conflictRounds || c.retry.Clock.Sleep(ctx, jitter(c.retry.Initial)) != nil {
				return 0, refused(err)
			}
		}
	})
}

// conflictRounds is how many times Register tries a registration refused with 409.
const conflictRounds = 3

// registeredAfterAll looks schema up under subject after a registration was refused with
// a conflict, and returns its id if it is registered there.
func (c *Client) registeredAfterAll(ctx context.Context, subject string, schema sr.Schema, normalize bool) (int, bool) {
	ss, err := c.lookupSchema(ctx, "look up schema after a conflict", subject, schema, normalize)
	if err != nil || ss.ID <= 0 {
		return 0, false
	}
	c.byID.put(ss.ID, schema)
	return ss.ID, true
}

// Lookup returns the version of subject that holds schema. A schema that is not registered
// under subject is an error wrapping ErrNotRegistered.
func (c *Client) Lookup(ctx context.Context, subject string, schema sr.Schema, normalize bool) (sr.SubjectSchema, error) {
	return c.lookedUp.get(ctx, schemaKey(subject, schema, normalize), func() (sr.SubjectSchema, error) {
		ss, err := c.lookupSchema(ctx, "look up schema", subject, schema, normalize)
		switch {
		case err == nil:
			if ss.ID > 0 {
				c.byID.put(ss.ID, schema)
			}
			return ss, nil
		case notFound(err):
			return ss, fmt.Errorf("%w (auto-registration is off): %w", ErrNotRegistered, err)
		case errors.Is(err, ErrRegistryUnavailable):
			return ss, err
		}
		return ss, refused(err)
	})
}

// lookupSchema asks the registry for the version of subject that holds schema (op names
// the request in errors and logs).
func (c *Client) lookupSchema(ctx context.Context, op, subject string, schema sr.Schema, normalize bool) (sr.SubjectSchema, error) {
	var ss sr.SubjectSchema
	err := c.call(ctx, op, []slog.Attr{slog.String("subject", subject)}, func(ctx context.Context) error {
		if normalize {
			ctx = sr.WithParams(ctx, sr.Normalize)
		}
		var err error
		ss, err = c.cl.LookupSchema(ctx, subject, schema)
		return err
	})
	return ss, err
}

// SchemaToWrite returns the id and the schema that a serde whose own schema is own writes
// with under subject, as opts says: the pinned SchemaID, the subject's latest version, or
// own, registered (by default) or looked up. own.Schema may be empty if opts pins an id or
// asks for the latest version.
func (c *Client) SchemaToWrite(ctx context.Context, subject string, own sr.Schema, opts Options) (int, sr.Schema, error) {
	switch {
	case opts.SchemaID != 0:
		s, err := c.SchemaByID(ctx, opts.SchemaID)
		return opts.SchemaID, s, err
	case opts.UseLatestVersion:
		ss, err := c.LatestSchema(ctx, subject)
		return ss.ID, ss.Schema, err
	case own.Schema == "":
		return 0, sr.Schema{}, errors.New("the serde has no schema of its own to write with: give it one, or set UseLatestVersion or SchemaID")
	case !opts.DisableAutoRegister:
		id, err := c.Register(ctx, subject, own, opts.Normalize)
		return id, own, err
	}
	ss, err := c.Lookup(ctx, subject, own, opts.Normalize)
	return ss.ID, own, err
}

func schemaKey(subject string, s sr.Schema, normalize bool) string {
	var b strings.Builder
	b.WriteString(subject)
	b.WriteByte(0)
	b.WriteString(s.Type.String())
	b.WriteByte(0)
	b.WriteString(strconv.FormatBool(normalize))
	b.WriteByte(0)
	b.WriteString(s.Schema)
	for _, r := range s.References {
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%d", r.Name, r.Subject, r.Version)
	}
	return b.String()
}

// call runs req until it succeeds, fails for a reason other than the registry's
// unavailability, or the retries that c.retry allows are spent. ctx and Close cancel it.
func (c *Client) call(ctx context.Context, op string, attrs []slog.Attr, req func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	start := c.retry.Clock.Now()
	backoff := c.retry.Initial
	for attempt := 1; ; attempt++ {
		err := req(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// Cut short (by ctx or Close), whatever the request's own error says: the
			// registry was not heard, which is no fault of the record.
			return c.gaveUp(ctx, op, attempt, err)
		}
		if !transient(err) {
			return err
		}
		wait := jitter(backoff)
		if c.retry.For > 0 && c.retry.Clock.Now().Add(wait).Sub(start) > c.retry.For {
			return fmt.Errorf("%w: %s: gave up after %d attempts in %v (Retry.For is %v): %w",
				ErrRegistryUnavailable, op, attempt, c.retry.Clock.Now().Sub(start).Round(time.Millisecond), c.retry.For, err)
		}
		if c.log.Enabled(ctx, slog.LevelWarn) {
			as := append(slices.Clone(attrs), slog.String("op", op), slog.Int("attempt", attempt),
				slog.Duration("retry_in", wait), slog.Any("error", err))
			c.log.LogAttrs(ctx, slog.LevelWarn, "schema registry unavailable; retrying", as...)
		}
		if c.retry.Clock.Sleep(ctx, wait) != nil {
			return c.gaveUp(ctx, op, attempt, err)
		}
		backoff = min(2*backoff, c.retry.Max)
	}
}

func (c *Client) gaveUp(ctx context.Context, op string, attempts int, err error) error {
	why := "canceled"
	if c.ctx.Err() != nil {
		why = "client closed"
	} else if ctx.Err() != nil {
		why = ctx.Err().Error()
	}
	return fmt.Errorf("%w: %s: %s after %d attempts: %w", ErrRegistryUnavailable, op, why, attempts, err)
}

// jitter returns d give or take a fifth.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
