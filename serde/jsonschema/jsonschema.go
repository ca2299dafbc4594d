// Package jsonschema provides kstream serdes for JSON validated by a JSON Schema, in the
// Confluent wire format: the magic byte 0, the 4-byte big-endian schema id, then the
// value's JSON text. Java applications using Confluent's KafkaJsonSchemaSerializer and
// KafkaJsonSchemaDeserializer read and write the same bytes.
//
// Values are Go types that encoding/json encodes, usually structs with `json` tags. The
// serde's schema is JSON Schema text (draft 7 unless its "$schema" says otherwise); values
// are validated against it before they are written, with
// github.com/santhosh-tekuri/jsonschema/v6, so that a value the schema refuses never
// reaches the topic. Reading decodes the JSON into T, and validates it against its
// writer's schema if asked to.
//
// The JSON is encoding/json's, without its HTML escaping (<, > and & are written as they
// are, as Jackson writes them). It differs from Jackson's in a few places, listed in
// docs/serdes.md ("Interop with Java"): whole doubles (10, Jackson 10.0), U+2028 and
// U+2029, characters beyond U+FFFF, and the hex digits' case of escaped control characters.
//
// A serde names its subject after the topic by default, so kstream binds it to each topic
// it is used with (see serde.TopicBound); with the record-naming strategies, the record
// name is the schema's "title". Package serde/registry describes the client, the options
// and the errors.
package jsonschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srcore"
	"github.com/kstream-go/kstream/serde/registry"
)

// Options are a JSON Schema serde's options: the registry options, and when it validates.
type Options struct {
	registry.Options
	// SkipValidation writes values without validating them against the schema (Confluent's
	// json.fail.invalid.schema=false).
	SkipValidation bool
	// ValidateOnRead validates each payload against its writer's schema before decoding
	// it; a payload that does not validate is an error wrapping registry.ErrCorrupt.
	ValidateOnRead bool
}

// Serde is a JSON Schema serde for values of type T. It implements serde.Serde[T],
// serde.TopicBound[T] and AppendSerialize, and is safe for concurrent use. Build it with
// [New]; bind it to a topic with [Serde.ForTopic] (kstream does so for every topic it uses
// the serde with).
type Serde[T any] struct {
	s *shared
	b *srcore.Bound[*writer]
	// ctx bounds the registry calls of Serialize and Deserialize (nil: none); WithContext
	// sets it.
	ctx context.Context
}

var format = srcore.Format{Name: "json schema", Type: sr.TypeJSON, TypeName: "JSON Schema"}

type shared struct {
	c        *registry.Client
	opts     Options
	own      sr.Schema
	title    string
	compiled srcore.Lazy[*js.Schema]
	readers  srcore.ByID[*js.Schema] // nil schema: no validation on read
	nilable  bool
}

type writer struct {
	id     int
	schema *js.Schema // nil with SkipValidation
	header []byte
}

// base is the location of the schema being compiled; references resolve against it.
const base = "mem:///schemas/"

// New returns a JSON Schema serde for T that writes with schema, JSON Schema text, through
// client c. schema may be "" for a serde that only reads or that writes with
// opts.SchemaID or opts.UseLatestVersion. A schema whose "$ref"s name schemas of other
// subjects lists them in opts.References, each named as its "$ref" names it; such a
// schema is compiled on first use, when the references have been fetched.
//
// New talks to no registry: the serde registers or looks up its schema on first use, or
// when [Serde.Check] is called.
func New[T any](c *registry.Client, schema string, opts Options) (*Serde[T], error) {
	if c == nil {
		return nil, errors.New("serde: json schema: nil registry client")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("serde: json schema: %w", err)
	}
	sh := &shared{c: c, opts: opts, nilable: srcore.Nilable[T]()}
	if strings.TrimSpace(schema) != "" {
		var doc struct {
			Title string `json:"title"`
		}
		if err := json.Unmarshal([]byte(schema), &doc); err != nil {
			return nil, fmt.Errorf("serde: json schema: schema is not a JSON object: %w", err)
		}
		sh.title = doc.Title
		sh.own = sr.Schema{Schema: schema, Type: sr.TypeJSON, References: opts.References}
		if len(opts.References) == 0 {
			compiled, err := compile(context.Background(), c, sh.own)
			if err != nil {
				return nil, fmt.Errorf("serde: json schema: %w", err)
			}
			sh.compiled.Set(compiled)
		}
	} else if len(opts.References) > 0 {
		return nil, errors.New("serde: json schema: References without a schema")
	}
	return newBinding[T](sh, srcore.Binding{}), nil
}

func newBinding[T any](sh *shared, b srcore.Binding) *Serde[T] {
	return &Serde[T]{s: sh, b: srcore.NewBound[*writer](format, b, sh.opts.Subject, sh.title)}
}

// ForTopic returns the serde bound to topic, for keys if isKey is true and for values
// otherwise. It implements serde.TopicBound.
func (s *Serde[T]) ForTopic(topic string, isKey bool) serde.Serde[T] {
	return s.Bind(topic, isKey)
}

// Bind is ForTopic returning the concrete type, whose Check and Subject methods an
// application calls at start.
func (s *Serde[T]) Bind(topic string, isKey bool) *Serde[T] {
	return newBinding[T](s.s, srcore.Binding{Bound: true, Topic: topic, IsKey: isKey})
}

// WithContext returns the serde, with its binding and caches, whose calls to the registry
// end when ctx is done: a Serialize or Deserialize waiting out a registry outage then
// returns an error wrapping registry.ErrRegistryUnavailable. It implements
// serde.ContextBound; kstream gives it the context of the running application, so that a
// shutdown does not wait for the registry.
func (s *Serde[T]) WithContext(ctx context.Context) serde.Serde[T] {
	c := *s
	c.ctx = ctx
	return &c
}

// context returns the context of the serde's registry calls.
func (s *Serde[T]) context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// Subject returns the subject of the serde's schema, or an error wrapping
// registry.ErrUnbound if the strategy needs a topic and the serde has none.
func (s *Serde[T]) Subject() (string, error) { return s.b.Subject() }

// Check prepares the serde to write, as its first Serialize would: it registers its schema
// under its subject (or looks it up, or fetches the latest or pinned one, as the options
// say) and compiles what it validates with. It returns the error that every Serialize
// would return, such as a schema the registry refuses as incompatible (wrapping
// registry.ErrIncompatible, with the subject and the registry's message). ctx bounds the
// retries while the registry is unavailable.
func (s *Serde[T]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[T]) writer(ctx context.Context) (*writer, error) {
	return s.b.Writer(func(subject string) (*writer, error) {
		id, ws, err := s.s.c.SchemaToWrite(ctx, subject, s.s.own, s.s.opts.Options)
		if err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		if err := format.CheckType(id, ws.Type); err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		w := &writer{id: id, header: registry.AppendHeader(nil, id)}
		if !s.s.opts.SkipValidation {
			if s.s.opts.SchemaID != 0 || s.s.opts.UseLatestVersion {
				w.schema, err = compile(ctx, s.s.c, ws)
			} else {
				w.schema, err = s.s.compiled.Get(func() (*js.Schema, error) { return compile(ctx, s.s.c, s.s.own) })
			}
			if err != nil {
				return nil, s.b.Errorf("serialize", id, err)
			}
		}
		return w, nil
	})
}

// Serialize encodes v as JSON after the Confluent header, once the JSON validates against
// the schema. A nil v (of a pointer, map or slice type) is a Kafka null.
func (s *Serde[T]) Serialize(v T) ([]byte, error) {
	out, _, err := s.appendSerialize(nil, v, true)
	return out, err
}

// AppendSerialize appends Serialize's bytes to dst; isNull reports a nil v, for which
// nothing is appended.
func (s *Serde[T]) AppendSerialize(dst []byte, v T) (out []byte, isNull bool, err error) {
	return s.appendSerialize(dst, v, false)
}

func (s *Serde[T]) appendSerialize(dst []byte, v T, exact bool) ([]byte, bool, error) {
	x := any(v)
	if s.s.nilable && srcore.IsNil(x) {
		return dst, true, nil
	}
	w, err := s.writer(s.context())
	if err != nil {
		return dst, false, err
	}
	body, err := marshal(x)
	if err != nil {
		return dst, false, s.b.Invalid(w.id, err)
	}
	if w.schema != nil {
		if err := validate(w.schema, body); err != nil {
			return dst, false, s.b.Invalid(w.id, err)
		}
	}
	if exact {
		dst = make([]byte, 0, len(w.header)+len(body))
	}
	return append(append(dst, w.header...), body...), false, nil
}

// marshal is json.Marshal without its HTML escaping: <, > and & are written as they are,
// as Jackson (and so Confluent's KafkaJsonSchemaSerializer) writes them, not as \u003c,
// \u003e and \u0026, so that Go and Java write the same bytes for the same value
// (serde/testdata/interop checks them against Jackson's).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func validate(schema *js.Schema, doc []byte) error {
	inst, err := js.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	if err := schema.Validate(inst); err != nil {
		return oneLine{err}
	}
	return nil
}

// oneLine is an error whose message fits on one line: the validator's lists the failures
// on lines of their own.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(e.err.Error(), "\n", " ")), " ")
}

func (e oneLine) Unwrap() error { return e.err }

// Deserialize decodes b's JSON into a T, after validating it against its writer's schema
// if Options.ValidateOnRead is set. nil (a Kafka null) decodes to the zero T.
func (s *Serde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, nil
	}
	id, payload, err := s.b.SplitHeader(b)
	if err != nil {
		return v, err
	}
	schema, err := s.s.readers.Get(id, func(id int) (*js.Schema, error) { return s.s.readerFor(s.context(), id) })
	if err != nil {
		return v, s.b.Errorf("deserialize", id, err)
	}
	if schema != nil {
		if err := validate(schema, payload); err != nil {
			return v, s.b.Corrupt(id, err)
		}
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, s.b.Corrupt(id, err)
	}
	return v, nil
}

// readerFor checks that schema id is a JSON Schema and compiles it if payloads are
// validated on read.
func (sh *shared) readerFor(ctx context.Context, id int) (*js.Schema, error) {
	ws, err := format.ReaderSchema(ctx, sh.c, id)
	if err != nil {
		return nil, err
	}
	if !sh.opts.ValidateOnRead {
		return nil, nil
	}
	compiled, err := compile(ctx, sh.c, ws)
	if err != nil {
		return nil, srcore.WriterSchemaError(err)
	}
	return compiled, nil
}

// compile compiles s with the schemas it references, fetched from the registry; it loads
// nothing else (no files, no network).
func compile(ctx context.Context, c *registry.Client, s sr.Schema) (*js.Schema, error) {
	comp := js.NewCompiler()
	comp.DefaultDraft(js.Draft7)
	comp.UseLoader(noLoader{})
	root, err := url.Parse(base + "root.json")
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	var add func(loc *url.URL, schema sr.Schema) error
	add = func(loc *url.URL, schema sr.Schema) error {
		doc, err := js.UnmarshalJSON(strings.NewReader(schema.Schema))
		if err != nil {
			return fmt.Errorf("%s: %w", loc, err)
		}
		if err := comp.AddResource(loc.String(), doc); err != nil {
			return err
		}
		for _, r := range schema.References {
			refLoc, err := loc.Parse(r.Name)
			if err != nil {
				return fmt.Errorf("reference %q: %w", r.Name, err)
			}
			if seen[refLoc.String()] {
				continue
			}
			seen[refLoc.String()] = true
			ss, err := c.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %q: %w", r.Name, err)
			}
			if err := add(refLoc, ss.Schema); err != nil {
				return err
			}
		}
		return nil
	}
	seen[root.String()] = true
	if err := add(root, s); err != nil {
		return nil, err
	}
	return comp.Compile(root.String())
}

// noLoader refuses to load what was not added: schemas reach no file and no URL.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is neither a reference of the schema nor a known meta-schema", u)
}
