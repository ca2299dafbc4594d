package srcore

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/registry"
)

// Format is what a serde package is: its name in errors, and the schema type it writes
// and reads.
type Format struct {
	Name     string        // in registry.Error: "avro", "protobuf", "json schema"
	Type     sr.SchemaType // the registry's type of its schemas
	TypeName string        // in messages: "Avro", "Protobuf", "JSON Schema"
}

// CheckType returns an error if t, the type of schema id, is not the format's.
func (f Format) CheckType(id int, t sr.SchemaType) error {
	if t != f.Type {
		return fmt.Errorf("schema id %d is %v, not %s", id, t, f.TypeName)
	}
	return nil
}

// ReaderSchema fetches schema id, which wrote a payload being read: a schema of another
// type is an error wrapping registry.ErrCorrupt.
func (f Format) ReaderSchema(ctx context.Context, c *registry.Client, id int) (sr.Schema, error) {
	ws, err := c.SchemaByID(ctx, id)
	if err != nil {
		return ws, err
	}
	if err := f.CheckType(id, ws.Type); err != nil {
		return ws, fmt.Errorf("%w: %w", registry.ErrCorrupt, err)
	}
	return ws, nil
}

// WriterSchemaError wraps an error of parsing or compiling a payload's writer schema in
// registry.ErrCorrupt, unless it is the registry being unavailable (then it is returned as
// it is, so that the caches do not keep it).
func WriterSchemaError(err error) error {
	if err == nil || errors.Is(err, registry.ErrRegistryUnavailable) {
		return err
	}
	return fmt.Errorf("%w: writer schema: %w", registry.ErrCorrupt, err)
}

// Bound is one binding of a Schema Registry serde (the unbound serde, or one that ForTopic
// returned): the subject its strategy names, and what it writes with (W, the format's
// writer: the schema id and what to encode with), prepared on first use and kept unless the
// registry was unavailable.
type Bound[W any] struct {
	f       Format
	subject string
	subErr  error // why the binding has no subject
	w       Lazy[W]
}

// NewBound returns binding b of a serde of format f whose subjects are named by strategy s,
// its record having the full name recordName.
func NewBound[W any](f Format, b Binding, s registry.SubjectNameStrategy, recordName string) *Bound[W] {
	bd := &Bound[W]{f: f}
	bd.subject, bd.subErr = b.Subject(s, recordName)
	return bd
}

// Subject returns the binding's subject, or an error wrapping registry.ErrUnbound if the
// strategy needs a topic and the binding has none.
func (b *Bound[W]) Subject() (string, error) { return b.subject, b.subErr }

// Writer returns what the binding writes with, made by mk (given the subject) on first use.
// A binding without a subject gets the error of Subject, as a serialize error.
func (b *Bound[W]) Writer(mk func(subject string) (W, error)) (W, error) {
	return b.w.Get(func() (W, error) {
		if b.subErr != nil {
			var zero W
			return zero, b.Errorf("serialize", 0, b.subErr)
		}
		return mk(b.subject)
	})
}

// Errorf returns err as a *registry.Error of op ("serialize" or "deserialize") with the
// format, the binding's subject and schema id (0 if unknown); an err that holds a
// *registry.Error already is returned as it is.
func (b *Bound[W]) Errorf(op string, id int, err error) error {
	var re *registry.Error
	if errors.As(err, &re) {
		return err
	}
	return &registry.Error{Format: b.f.Name, Op: op, Subject: b.subject, SchemaID: id, Err: err}
}

// Invalid is the serialize error of a value that cannot be written with schema id: err
// wrapped in registry.ErrInvalidValue.
func (b *Bound[W]) Invalid(id int, err error) error {
	return b.Errorf("serialize", id, fmt.Errorf("%w: %w", registry.ErrInvalidValue, err))
}

// Corrupt is the deserialize error of a payload written with schema id that cannot be
// read: err wrapped in registry.ErrCorrupt.
func (b *Bound[W]) Corrupt(id int, err error) error {
	return b.Errorf("deserialize", id, fmt.Errorf("%w: %w", registry.ErrCorrupt, err))
}

// SplitHeader returns the schema id of data, a Confluent-framed payload, and what follows
// the header; a missing or bad header is a deserialize error.
func (b *Bound[W]) SplitHeader(data []byte) (id int, payload []byte, err error) {
	id, payload, err = registry.SplitHeader(data)
	if err != nil {
		return 0, nil, b.Errorf("deserialize", 0, err)
	}
	return id, payload, nil
}
