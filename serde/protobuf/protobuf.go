// Package protobuf provides kstream serdes for Protobuf in the Confluent wire format: the
// magic byte 0, the 4-byte big-endian schema id, the message indexes (the path of the
// message's type in its .proto file, a single 0 byte for the file's first message), then
// the message's Protobuf encoding. Java applications using Confluent's
// KafkaProtobufSerializer and KafkaProtobufDeserializer read and write the same bytes.
//
// Values are generated message types (T is a pointer such as *orderpb.Order). The schema
// that a serde registers is the .proto source of the message's file, printed from its
// descriptor ([SchemaText]); the files it imports are registered too, each under a subject
// named after its import path (Confluent's default reference subject names), and
// referenced. The well-known types (google/protobuf/*.proto) are known to the registry and
// are not registered.
//
// Reading does not need the writer's schema: Protobuf's encoding carries field numbers, so
// a message written by an older or newer version of its type decodes into T (unknown
// fields are kept, missing ones are zero). The serde still checks that the payload's
// schema id is a Protobuf schema known to the registry, once per id. It does not check
// that the message indexes name T's type.
//
// The payload is protobuf-go's deterministic encoding, which writes a set oneof field after
// the message's other fields, where protobuf-java writes fields in number order: such a
// message has other bytes than Java's (each reads the other's; docs/serdes.md, "Interop
// with Java").
//
// A serde names its subject after the topic by default, so kstream binds it to each topic
// it is used with (see serde.TopicBound). Package serde/registry describes the client, the
// options and the errors.
package protobuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/internal/srcore"
	"github.com/kstream-go/kstream/serde/registry"
)

// Serde is a Protobuf serde for the generated message type T. It implements
// serde.Serde[T], serde.TopicBound[T] and AppendSerialize, and is safe for concurrent use.
// Build it with [New]; bind it to a topic with [Serde.ForTopic] (kstream does so for every
// topic it uses the serde with).
type Serde[T proto.Message] struct {
	s *shared
	b *srcore.Bound[*writer]
	// ctx bounds the registry calls of Serialize and Deserialize (nil: none); WithContext
	// sets it.
	ctx context.Context
}

var format = srcore.Format{Name: "protobuf", Type: sr.TypeProtobuf, TypeName: "Protobuf"}

type shared struct {
	c     *registry.Client
	opts  registry.Options
	mt    protoreflect.MessageType
	index []int // the message's path in its file
	text  string
	known srcore.ByID[struct{}] // schema ids checked to be Protobuf
}

type writer struct {
	id     int
	header []byte // magic byte, id, message indexes
}

var (
	marshal   = proto.MarshalOptions{Deterministic: true}
	marshalSz = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}
)

// New returns a Protobuf serde for the generated message type T through client c.
// opts.References is ignored: the references are the imports of T's file.
//
// New talks to no registry: the serde registers or looks up its schema on first use, or
// when [Serde.Check] is called.
func New[T proto.Message](c *registry.Client, opts registry.Options) (*Serde[T], error) {
	if c == nil {
		return nil, errors.New("serde: protobuf: nil registry client")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("serde: protobuf: %w", err)
	}
	var zero T
	mt := zero.ProtoReflect().Type()
	md := mt.Descriptor()
	text, err := SchemaText(md.ParentFile())
	if err != nil {
		return nil, fmt.Errorf("serde: protobuf: %w", err)
	}
	opts.References = nil
	sh := &shared{c: c, opts: opts, mt: mt, index: MessageIndexes(md), text: text}
	return newBinding[T](sh, srcore.Binding{}), nil
}

func newBinding[T proto.Message](sh *shared, b srcore.Binding) *Serde[T] {
	return &Serde[T]{s: sh, b: srcore.NewBound[*writer](format, b, sh.opts.Subject, string(sh.mt.Descriptor().FullName()))}
}

// MessageIndexes returns the path of md in its file, as the Confluent wire format writes
// it: [i] for the file's i-th message, [i, j] for the j-th message nested in it, and so on.
// These are the descriptor's indexes, so the entry types that protoc generates for map
// fields count among the nested messages, as they do for Confluent's Java serializer
// (whose schema is built from the descriptor) and Go serializer.
func MessageIndexes(md protoreflect.MessageDescriptor) []int {
	var path []int
	for d := protoreflect.Descriptor(md); ; {
		path = append(path, d.Index())
		parent := d.Parent()
		if _, ok := parent.(protoreflect.MessageDescriptor); !ok {
			break
		}
		d = parent
	}
	slices.Reverse(path)
	return path
}

// AppendMessageIndexes appends the Confluent encoding of message indexes to dst: a single 0
// for [0], else their count then each, as zig-zag varints.
func AppendMessageIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

// skipMessageIndexes returns b after its message indexes.
func skipMessageIndexes(b []byte) ([]byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, errors.New("message indexes: bad count")
	}
	b = b[k:]
	if n < 0 || n > int64(len(b)) {
		return nil, fmt.Errorf("message indexes: count %d with %d bytes left", n, len(b))
	}
	for range n {
		i, k := binary.Varint(b)
		if k <= 0 || i < 0 {
			return nil, errors.New("message indexes: bad index")
		}
		b = b[k:]
	}
	return b, nil
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

// Schema returns the schema the serde registers: the .proto source of T's file and its
// references, whose versions are resolved when the serde registers it.
func (s *Serde[T]) Schema() string { return s.s.text }

// Check prepares the serde to write, as its first Serialize would: it registers the
// schema of T's file (and of the files it imports) under its subject, or looks it up, or
// fetches the latest or pinned one, as the options say. It returns the error that every
// Serialize would return, such as a schema the registry refuses as incompatible (wrapping
// registry.ErrIncompatible, with the subject and the registry's message). ctx bounds the
// retries while the registry is unavailable.
func (s *Serde[T]) Check(ctx context.Context) error {
	_, err := s.writer(ctx)
	return err
}

func (s *Serde[T]) writer(ctx context.Context) (*writer, error) {
	return s.b.Writer(func(subject string) (*writer, error) {
		own := sr.Schema{Schema: s.s.text, Type: sr.TypeProtobuf}
		if s.s.opts.SchemaID == 0 && !s.s.opts.UseLatestVersion {
			refs, err := s.s.references(ctx, s.s.mt.Descriptor().ParentFile(), map[string]sr.SchemaReference{})
			if err != nil {
				return nil, s.b.Errorf("serialize", 0, err)
			}
			own.References = refs
		}
		id, ws, err := s.s.c.SchemaToWrite(ctx, subject, own, s.s.opts)
		if err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		if err := format.CheckType(id, ws.Type); err != nil {
			return nil, s.b.Errorf("serialize", id, err)
		}
		return &writer{id: id, header: AppendMessageIndexes(registry.AppendHeader(nil, id), s.s.index)}, nil
	})
}

// references registers (or looks up) the files that file imports, depth first, and
// returns the references to them. done holds the references of files already resolved.
func (sh *shared) references(ctx context.Context, file protoreflect.FileDescriptor, done map[string]sr.SchemaReference) ([]sr.SchemaReference, error) {
	imports := file.Imports()
	var refs []sr.SchemaReference
	for i := range imports.Len() {
		dep := imports.Get(i).FileDescriptor
		path := dep.Path()
		if strings.HasPrefix(path, "google/protobuf/") {
			continue // well-known types: the registry has them
		}
		if ref, ok := done[path]; ok {
			refs = append(refs, ref)
			continue
		}
		depRefs, err := sh.references(ctx, dep, done)
		if err != nil {
			return nil, err
		}
		text, err := SchemaText(dep)
		if err != nil {
			return nil, err
		}
		schema := sr.Schema{Schema: text, Type: sr.TypeProtobuf, References: depRefs}
		if !sh.opts.DisableAutoRegister {
			if _, err := sh.c.Register(ctx, path, schema, sh.opts.Normalize); err != nil {
				return nil, fmt.Errorf("import %q: %w", path, err)
			}
		}
		ss, err := sh.c.Lookup(ctx, path, schema, sh.opts.Normalize)
		if err != nil {
			return nil, fmt.Errorf("import %q: %w", path, err)
		}
		ref := sr.SchemaReference{Name: path, Subject: path, Version: ss.Version}
		done[path] = ref
		refs = append(refs, ref)
	}
	return refs, nil
}

// Serialize encodes v: the Confluent header, the message indexes of T, then v's
// deterministic Protobuf encoding. A nil v is a Kafka null.
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
	if isNil(v) {
		return dst, true, nil
	}
	w, err := s.writer(s.context())
	if err != nil {
		return dst, false, err
	}
	m := marshal
	if exact {
		dst = make([]byte, 0, len(w.header)+marshal.Size(v))
		m = marshalSz
	}
	out, err := m.MarshalAppend(append(dst, w.header...), v)
	if err != nil {
		return dst, false, s.b.Invalid(w.id, err)
	}
	return out, false, nil
}

func isNil(v proto.Message) bool {
	return v == nil || !v.ProtoReflect().IsValid()
}

// Deserialize decodes b into a new T. nil (a Kafka null) decodes to a nil T.
func (s *Serde[T]) Deserialize(b []byte) (T, error) {
	var zero T
	if b == nil {
		return zero, nil
	}
	id, rest, err := s.b.SplitHeader(b)
	if err != nil {
		return zero, err
	}
	if _, err := s.s.known.Get(id, func(id int) (struct{}, error) { return s.s.check(s.context(), id) }); err != nil {
		return zero, s.b.Errorf("deserialize", id, err)
	}
	rest, err = skipMessageIndexes(rest)
	if err != nil {
		return zero, s.b.Corrupt(id, err)
	}
	msg := s.s.mt.New().Interface()
	if err := proto.Unmarshal(rest, msg); err != nil {
		return zero, s.b.Corrupt(id, err)
	}
	v, ok := msg.(T)
	if !ok {
		return zero, s.b.Errorf("deserialize", id, fmt.Errorf("%T is not %T", msg, zero))
	}
	return v, nil
}

// check verifies that schema id is a Protobuf schema the registry knows.
func (sh *shared) check(ctx context.Context, id int) (struct{}, error) {
	_, err := format.ReaderSchema(ctx, sh.c, id)
	return struct{}{}, err
}
