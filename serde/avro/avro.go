// Package avro provides kstream serdes for Avro in the Confluent wire format: the magic
// byte 0, the 4-byte big-endian schema id, then the value's Avro binary encoding, with the
// schema registered in (or found in) a Confluent Schema Registry. Java applications using
// Confluent's KafkaAvroSerializer and KafkaAvroDeserializer read and write the same bytes.
//
// Values are Go structs whose fields carry `avro:"name"` tags, generic maps
// (map[string]any), or any type that github.com/hamba/avro/v2 encodes (primitives,
// slices, maps, pointers for nullable unions, *big.Rat for decimals, time.Time for
// timestamps and dates).
//
// A serde writes with its own schema and reads with it too: a payload written with another
// schema (another version of the subject) is decoded by Avro's schema resolution, so that a
// field added with a default is defaulted and a removed field is skipped. A serde without
// a schema of its own reads each payload with its writer's schema (useful with generic
// maps).
//
// Avro maps (Go maps) are written in Go's map iteration order, which varies from one call
// to the next: the bytes of a value holding a map with more than one entry are not fixed,
// so such a type should not be a key (partitioning and stores compare key bytes).
//
// Arrays and maps are written in one block, as Apache Avro's Java library writes them.
// Decimals whose unscaled value is -2^(8k-1) (-128, -32768, ...) take one byte more than
// Java's encoding (hamba/avro's); Java reads them. docs/serdes.md ("Interop with Java")
// lists what is checked against Java byte for byte.
//
// A serde names its subject after the topic by default, so kstream binds it to each topic
// it is used with (see serde.TopicBound). Package serde/registry describes the client, the
// options and the errors.
package avro

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	havro "github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srcore"
	"github.com/kstream-go/kstream/serde/registry"
)

// api is the Avro configuration of every serde of this package. Its limits keep a corrupt
// payload from allocating more than a record could hold.
//
// Arrays and maps are written as Apache Avro's Java library (and so Confluent's
// serializer) writes them: in one block, its item count then the items, then the 0 that
// ends the array or map. hamba/avro's defaults would write blocks of 100 items, each with
// a negative count and its size in bytes: valid Avro that Java reads, but other bytes for
// the same value, so that a key holding an array would not match the same key written by
// Java (serde/testdata/interop checks the bytes against Java's).
var api = havro.Config{
	TagKey:                 "avro",
	MaxByteSliceSize:       64 << 20, // a string or bytes value
	MaxSliceAllocSize:      1 << 20,  // elements of an array
	DisableBlockSizeHeader: true,
	BlockLength:            math.MaxInt32,
}.Freeze()

// maxPooledBuf is the largest encoding buffer returned to the pool.
const maxPooledBuf = 64 << 10

var writers = sync.Pool{New: func() any { return havro.NewWriter(nil, 512, havro.WithWriterConfig(api)) }}

var readers = sync.Pool{New: func() any { return havro.NewReader(nil, 0, havro.WithReaderConfig(api)) }}

// Serde is an Avro serde for values of type T. It implements serde.Serde[T],
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

var format = srcore.Format{Name: "avro", Type: sr.TypeAvro, TypeName: "Avro"}

// shared is what the bindings of one serde share.
type shared struct {
	c          *registry.Client
	opts       registry.Options
	own        sr.Schema // the serde's own schema as registered; Schema is "" if none
	recordName string    // the own schema's full name
	parsed     srcore.Lazy[havro.Schema]
	decoders   srcore.ByID[havro.Schema] // schema id -> schema to decode with
	nilable    bool
	// vals pools the *T (of the serde's T) that values are decoded into and encoded from,
	// so that neither escapes to the heap per call (hamba's API takes an any).
	vals sync.Pool
}

// writer is what a binding writes with.
type writer struct {
	id     int
	schema havro.Schema
	header []byte
	// enc encodes a T through a pointer to it, as WriteVal does with a boxed T; nil if T is
	// an interface or pointer-shaped (boxed without an allocation: WriteVal is used).
	enc havro.ValEncoder
}

// New returns an Avro serde for T that reads and writes with schema, an Avro schema in its
// JSON form, through client c. schema may be "" for a serde that only reads (each payload
// with its writer's schema) or that writes with opts.SchemaID or opts.UseLatestVersion. A
// schema that references named types of other subjects lists them in opts.References;
// such a schema is parsed on first use, when the references have been fetched.
//
// New talks to no registry: the serde registers or looks up its schema on first use, or
// when [Serde.Check] is called.
func New[T any](c *registry.Client, schema string, opts registry.Options) (*Serde[T], error) {
	if c == nil {
		return nil, errors.New("serde: avro: nil registry client")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("serde: avro: %w", err)
	}
	sh := &shared{c: c, opts: opts, nilable: srcore.Nilable[T]()}
	if strings.TrimSpace(schema) != "" {
		name, err := fullName(schema)
		if err != nil {
			return nil, fmt.Errorf("serde: avro: schema: %w", err)
		}
		sh.own = sr.Schema{Schema: schema, Type: sr.TypeAvro, References: opts.References}
		sh.recordName = name
		if len(opts.References) == 0 {
			parsed, err := havro.ParseWithCache(schema, "", &havro.SchemaCache{})
			if err != nil {
				return nil, fmt.Errorf("serde: avro: schema: %w", err)
			}
			sh.parsed.Set(parsed)
		}
	} else if len(opts.References) > 0 {
		return nil, errors.New("serde: avro: References without a schema")
	}
	return newBinding[T](sh, srcore.Binding{}), nil
}

func newBinding[T any](sh *shared, b srcore.Binding) *Serde[T] {
	return &Serde[T]{s: sh, b: srcore.NewBound[*writer](format, b, sh.opts.Subject, sh.recordName)}
}

// ForTopic returns the serde bound to topic, for keys if isKey is true and for values
// otherwise. It implements serde.TopicBound. The bound serde shares the unbound one's
// caches of writer schemas.
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
// say) and parses what it writes with. It returns the error that every Serialize would
// return, such as a schema the registry refuses as incompatible (wrapping
// registry.ErrIncompatible, with the subject and the registry's message). Applications
// call it at start to fail fast; ctx bounds the retries while the registry is unavailable.
func (s *Serde[T]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[T]) writer(ctx context.Context) (*writer, error) {
	return s.b.Writer(func(subject string) (*writer, error) {
		id, ws, err := s.s.c.SchemaToWrite(ctx, subject, s.s.own, s.s.opts)
		if err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		var schema havro.Schema
		if s.s.opts.SchemaID != 0 || s.s.opts.UseLatestVersion {
			if err := format.CheckType(id, ws.Type); err != nil {
				return nil, s.b.Errorf("serialize", id, err)
			}
			schema, err = parse(ctx, s.s.c, ws)
		} else {
			schema, err = s.s.ownSchema(ctx)
		}
		if err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		w := &writer{id: id, schema: schema, header: registry.AppendHeader(nil, id)}
		if rt := reflect.TypeFor[T](); rt.Kind() != reflect.Interface {
			// WriteVal(schema, x) encodes reflect2.PtrOf(x) with the encoder of x's type,
			// wrapped in a dereference when the type is pointer-shaped (its boxed value is
			// the pointer itself): the same encoder given a pointer to a copy of the value
			// encodes the same bytes.
			if typ := reflect2.Type2(rt); !typ.LikePtr() {
				w.enc = api.EncoderOf(schema, typ)
			}
		}
		return w, nil
	})
}

// Serialize encodes v: the Confluent header, then v's Avro encoding. A nil v (of a pointer,
// map or slice type) is a Kafka null.
func (s *Serde[T]) Serialize(v T) ([]byte, error) {
	out, _, err := s.appendSerialize(nil, v, true)
	return out, err
}

// AppendSerialize appends Serialize's bytes to dst; isNull reports a nil v, for which
// nothing is appended. kstream's stores and aggregations serialize so, into buffers they
// reuse.
func (s *Serde[T]) AppendSerialize(dst []byte, v T) (out []byte, isNull bool, err error) {
	return s.appendSerialize(dst, v, false)
}

func (s *Serde[T]) appendSerialize(dst []byte, v T, exact bool) (out []byte, isNull bool, err error) {
	if s.s.nilable && srcore.IsNil(any(v)) {
		return dst, true, nil
	}
	w, err := s.writer(s.context())
	if err != nil {
		return dst, false, err
	}
	enc := writers.Get().(*havro.Writer)
	enc.Reset(nil)
	enc.Error = nil
	if w.enc != nil {
		p := s.val()
		*p = v
		err = encode(enc, w.enc, unsafe.Pointer(p))
		s.putVal(p)
	} else {
		err = write(enc, w.schema, any(v))
	}
	if err != nil {
		writers.Put(enc)
		return dst, false, s.b.Invalid(w.id, err)
	}
	body := enc.Buffer()
	if exact {
		out = make([]byte, 0, len(w.header)+len(body))
	} else {
		out = dst
	}
	out = append(append(out, w.header...), body...)
	if cap(body) <= maxPooledBuf {
		writers.Put(enc)
	}
	return out, false, nil
}

// write encodes x, turning a panic of the encoder into an error.
func write(enc *havro.Writer, schema havro.Schema, x any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("avro encoder panicked: %v", r)
		}
	}()
	enc.WriteVal(schema, x)
	return enc.Error
}

// encode encodes the value at p with e, turning a panic of the encoder into an error.
func encode(enc *havro.Writer, e havro.ValEncoder, p unsafe.Pointer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("avro encoder panicked: %v", r)
		}
	}()
	e.Encode(p, enc)
	return enc.Error
}

// val returns a *T holding the zero T, from the serde's pool.
func (s *Serde[T]) val() *T {
	if p, ok := s.s.vals.Get().(*T); ok {
		return p
	}
	return new(T)
}

// putVal zeroes *p (the pool must not keep what a value refers to) and pools p.
func (s *Serde[T]) putVal(p *T) {
	var zero T
	*p = zero
	s.s.vals.Put(p)
}

// Deserialize decodes b, written with the schema whose id its header holds, into a T, with
// Avro's schema resolution from that schema to the serde's own. nil (a Kafka null)
// decodes to the zero T.
func (s *Serde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, nil
	}
	id, payload, err := s.b.SplitHeader(b)
	if err != nil {
		return v, err
	}
	schema, err := s.s.decoders.Get(id, func(id int) (havro.Schema, error) { return s.s.decoderFor(s.context(), id) })
	if err != nil {
		return v, s.b.Errorf("deserialize", id, err)
	}
	p := s.val()
	err = read(schema, payload, p)
	v = *p
	s.putVal(p)
	if err != nil {
		return v, s.b.Corrupt(id, err)
	}
	return v, nil
}

// read decodes payload into v, which must take all of it, turning a panic of the decoder
// into an error.
func read(schema havro.Schema, payload []byte, v any) (err error) {
	dec := readers.Get().(*havro.Reader)
	dec.Reset(payload)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("avro decoder panicked: %v", r)
		}
		dec.Reset(nil)
		dec.Error = nil
		readers.Put(dec)
	}()
	dec.ReadVal(schema, v)
	if dec.Error != nil {
		if errors.Is(dec.Error, io.EOF) {
			return fmt.Errorf("%d bytes end in the middle of a value", len(payload))
		}
		return dec.Error
	}
	dec.Peek() // sets io.EOF if all of payload was read
	if dec.Error == nil {
		return fmt.Errorf("bytes left over after the value (%d in all)", len(payload))
	}
	return nil
}

// decoderFor returns the schema that decodes the payloads written with schema id: the
// serde's own if it is the writer's, the writer's if the serde has none, or else the
// resolution of the writer's to the serde's own.
func (sh *shared) decoderFor(ctx context.Context, id int) (havro.Schema, error) {
	ws, err := format.ReaderSchema(ctx, sh.c, id)
	if err != nil {
		return nil, err
	}
	writerSchema, err := parse(ctx, sh.c, ws)
	if err != nil {
		return nil, srcore.WriterSchemaError(err)
	}
	if sh.own.Schema == "" {
		return writerSchema, nil
	}
	own, err := sh.ownSchema(ctx)
	if err != nil {
		return nil, err
	}
	if own.Fingerprint() == writerSchema.Fingerprint() {
		return own, nil
	}
	resolved, err := havro.NewSchemaCompatibility().Resolve(own, writerSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: the serde's schema cannot read what schema id %d wrote: %w", registry.ErrCorrupt, id, err)
	}
	return resolved, nil
}

// ownSchema returns the serde's own schema, parsed once its references are fetched.
func (sh *shared) ownSchema(ctx context.Context) (havro.Schema, error) {
	return sh.parsed.Get(func() (havro.Schema, error) { return parse(ctx, sh.c, sh.own) })
}

// parse parses s after the schemas it references, depth first, each once, with names
// resolved among them only.
func parse(ctx context.Context, c *registry.Client, s sr.Schema) (havro.Schema, error) {
	cache := &havro.SchemaCache{}
	seen := make(map[sr.SchemaReference]bool)
	var load func(refs []sr.SchemaReference) error
	load = func(refs []sr.SchemaReference) error {
		for _, r := range refs {
			if seen[r] {
				continue
			}
			seen[r] = true
			ss, err := c.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %q: %w", r.Name, err)
			}
			if err := load(ss.References); err != nil {
				return err
			}
			if _, err := havro.ParseWithCache(ss.Schema.Schema, "", cache); err != nil {
				return fmt.Errorf("reference %q (subject %q version %d): %w", r.Name, r.Subject, r.Version, err)
			}
		}
		return nil
	}
	if err := load(s.References); err != nil {
		return nil, err
	}
	return havro.ParseWithCache(s.Schema, "", cache)
}

// fullName returns the full name of an Avro schema's top-level type: a named type's
// namespace and name, or a primitive's or container's type name, as Confluent's
// AvroSchema.name() does.
func fullName(schema string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	switch t := v.(type) {
	case string:
		return t, nil
	case []any:
		return "union", nil
	case map[string]any:
		name, _ := t["name"].(string)
		typ, _ := t["type"].(string)
		switch typ {
		case "record", "enum", "fixed", "error":
			if name == "" {
				return "", fmt.Errorf("a %s without a name", typ)
			}
			if ns, _ := t["namespace"].(string); ns != "" && !strings.Contains(name, ".") {
				return ns + "." + name, nil
			}
			return name, nil
		case "":
			return "", errors.New(`no "type"`)
		}
		return typ, nil
	}
	return "", fmt.Errorf("a JSON %T is no Avro schema", v)
}
