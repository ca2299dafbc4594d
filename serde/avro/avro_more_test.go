package avro_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	havro "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

func newSerde[T any](t *testing.T, c *registry.Client, schema string, opts registry.Options) *avro.Serde[T] {
	t.Helper()
	s, err := avro.New[T](c, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func header(id int) []byte { return binary.BigEndian.AppendUint32([]byte{0}, uint32(id)) }

func TestPrimitivesAsKeysAndValues(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})

	check := func(name string, run func() ([]byte, error), wantBody []byte) {
		t.Helper()
		b, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		id := int(binary.BigEndian.Uint32(b[1:5]))
		if want := append(header(id), wantBody...); !bytes.Equal(b, want) {
			t.Errorf("%s: % x, want % x", name, b, want)
		}
	}

	str := newSerde[string](t, c, `"string"`, registry.Options{}).Bind("t", true)
	check("string key", func() ([]byte, error) { return str.Serialize("abc") }, []byte{6, 'a', 'b', 'c'})
	if v, err := str.Deserialize(append(header(1), 6, 'a', 'b', 'c')); v != "abc" || err != nil {
		t.Errorf("string key: %q, %v", v, err)
	}
	if !reg.SubjectExists("t-key") {
		t.Error("no subject t-key")
	}

	long := newSerde[int64](t, c, `"long"`, registry.Options{}).Bind("t", false)
	check("long value", func() ([]byte, error) { return long.Serialize(-3) }, []byte{5}) // zig-zag
	for _, v := range []int64{0, -1, 1 << 62, -1 << 63} {
		b, _ := long.Serialize(v)
		if got, err := long.Deserialize(b); got != v || err != nil {
			t.Errorf("long %d: %d, %v", v, got, err)
		}
	}
	i := newSerde[int32](t, c, `"int"`, registry.Options{}).Bind("ti", false)
	check("int", func() ([]byte, error) { return i.Serialize(64) }, []byte{0x80, 0x01})
	d := newSerde[float64](t, c, `"double"`, registry.Options{}).Bind("td", false)
	check("double", func() ([]byte, error) { return d.Serialize(1) }, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f})
	bo := newSerde[bool](t, c, `"boolean"`, registry.Options{}).Bind("tb", false)
	check("boolean", func() ([]byte, error) { return bo.Serialize(true) }, []byte{1})
	by := newSerde[[]byte](t, c, `"bytes"`, registry.Options{}).Bind("tby", false)
	check("bytes", func() ([]byte, error) { return by.Serialize([]byte{9, 8}) }, []byte{4, 9, 8})
}

func TestNullableUnionsAndEnums(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, registry.Options{}).Bind("orders", false)
	o := sampleOrder()
	o.Note = nil
	o.Status = "SHIPPED"
	b, err := s.Serialize(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Note != nil || got.Status != "SHIPPED" {
		t.Errorf("note %v status %q, want nil and SHIPPED", got.Note, got.Status)
	}
	o.Status = "LOST"
	if _, err := s.Serialize(o); !errors.Is(err, registry.ErrInvalidValue) {
		t.Errorf("unknown enum symbol: %v, want ErrInvalidValue", err)
	}
}

const (
	userV1 = `{"type": "record", "name": "User", "namespace": "com.acme", "fields": [
  {"name": "name", "type": "string"},
  {"name": "age", "type": "int"}
]}`
	// userV2 adds a field with a default and removes age.
	userV2 = `{"type": "record", "name": "User", "namespace": "com.acme", "fields": [
  {"name": "name", "type": "string"},
  {"name": "email", "type": "string", "default": "none@example.com"}
]}`
)

type UserV1 struct {
	Name string `avro:"name"`
	Age  int32  `avro:"age"`
}

type UserV2 struct {
	Name  string `avro:"name"`
	Email string `avro:"email"`
}

func TestSchemaEvolution(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	// Each version under its own topic, as two applications of different ages would.
	w1 := newSerde[UserV1](t, c, userV1, registry.Options{}).Bind("users-v1", false)
	w2 := newSerde[UserV2](t, c, userV2, registry.Options{}).Bind("users-v2", false)
	r1 := newSerde[UserV1](t, c, userV1, registry.Options{})
	r2 := newSerde[UserV2](t, c, userV2, registry.Options{})

	// Written with v1, read as v2: email takes its default, age is skipped.
	b1, err := w1.Serialize(UserV1{Name: "ann", Age: 41})
	if err != nil {
		t.Fatal(err)
	}
	got2, err := r2.Deserialize(b1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (UserV2{Name: "ann", Email: "none@example.com"}); got2 != want {
		t.Errorf("v1 read as v2: %+v, want %+v", got2, want)
	}

	// Written with v2, read as v1: email is ignored; age has no default, so v1 cannot
	// read it.
	b2, err := w2.Serialize(UserV2{Name: "bob", Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r1.Deserialize(b2)
	srtest.WantError(t, err, registry.ErrCorrupt, "", int(binary.BigEndian.Uint32(b2[1:5])))

	// A v1.1 reader with a default for age reads v2, ignoring the removed... added email.
	v11 := strings.Replace(userV1, `"type": "int"}`, `"type": "int", "default": -1}`, 1)
	r11 := newSerde[UserV1](t, c, v11, registry.Options{})
	got1, err := r11.Deserialize(b2)
	if err != nil {
		t.Fatal(err)
	}
	if want := (UserV1{Name: "bob", Age: -1}); got1 != want {
		t.Errorf("v2 read as v1.1: %+v, want %+v", got1, want)
	}
}

func TestGenericMaps(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	w := newSerde[map[string]any](t, c, userV1, registry.Options{}).Bind("users", false)
	b, err := w.Serialize(map[string]any{"name": "ann", "age": 41})
	if err != nil {
		t.Fatal(err)
	}
	// A serde without a schema reads with the writer's.
	r := newSerde[map[string]any](t, c, "", registry.Options{})
	got, err := r.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"name": "ann", "age": 41}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	// A generic reader with a schema of its own resolves.
	r2 := newSerde[map[string]any](t, c, userV2, registry.Options{})
	got, err = r2.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"name": "ann", "email": "none@example.com"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	// A nil map is a Kafka null.
	if b, err := w.Serialize(nil); b != nil || err != nil {
		t.Errorf("Serialize(nil map) = %x, %v", b, err)
	}
	// A map missing a field does not fit.
	_, err = w.Serialize(map[string]any{"name": "ann"})
	srtest.WantError(t, err, registry.ErrInvalidValue, "users-value", int(binary.BigEndian.Uint32(b[1:5])))
}

func TestSubjectNameStrategies(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	for _, tc := range []struct {
		strategy registry.SubjectNameStrategy
		isKey    bool
		want     string
	}{
		{registry.TopicName, false, "orders-value"},
		{registry.TopicName, true, "orders-key"},
		{registry.RecordName, false, "com.acme.User"},
		{registry.RecordName, true, "com.acme.User"},
		{registry.TopicRecordName, false, "orders-com.acme.User"},
		{registry.TopicRecordName, true, "orders-com.acme.User"},
	} {
		s := newSerde[UserV1](t, c, userV1, registry.Options{Subject: tc.strategy}).Bind("orders", tc.isKey)
		if got, err := s.Subject(); got != tc.want || err != nil {
			t.Errorf("%v key=%v: subject %q, %v; want %q", tc.strategy, tc.isKey, got, err, tc.want)
		}
		if _, err := s.Serialize(UserV1{Name: "x"}); err != nil {
			t.Fatal(err)
		}
		if !reg.SubjectExists(tc.want) {
			t.Errorf("%v: subject %q not registered", tc.strategy, tc.want)
		}
	}
	// A name without a namespace is the full name; a name with dots ignores the namespace.
	s := newSerde[map[string]any](t, c, `{"type":"record","name":"a.b.C","namespace":"x","fields":[]}`,
		registry.Options{Subject: registry.RecordName})
	if got, _ := s.Subject(); got != "a.b.C" {
		t.Errorf("dotted name: subject %q, want a.b.C", got)
	}
}

func TestUnbound(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	for _, strategy := range []registry.SubjectNameStrategy{registry.TopicName, registry.TopicRecordName} {
		s := newSerde[UserV1](t, c, userV1, registry.Options{Subject: strategy})
		_, err := s.Serialize(UserV1{Name: "x"})
		srtest.WantError(t, err, registry.ErrUnbound, "", 0)
		if !strings.Contains(err.Error(), "serde used without a topic") {
			t.Errorf("error %q does not say the serde has no topic", err)
		}
		if err2 := s.Check(ctx(t)); !errors.Is(err2, registry.ErrUnbound) {
			t.Errorf("Check: %v", err2)
		}
	}
	if n := reg.TotalRequests(); n != 0 {
		t.Errorf("the registry got %d requests, want none", n)
	}
	// RecordName needs no topic, for writing or reading; reading needs no subject at all.
	s := newSerde[UserV1](t, c, userV1, registry.Options{Subject: registry.RecordName})
	b, err := s.Serialize(UserV1{Name: "x", Age: 1})
	if err != nil {
		t.Fatal(err)
	}
	unbound := newSerde[UserV1](t, c, userV1, registry.Options{})
	if got, err := unbound.Deserialize(b); err != nil || got.Name != "x" {
		t.Errorf("unbound TopicName serde reading: %+v, %v", got, err)
	}
}

func TestAutoRegisterOff(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	off := registry.Options{DisableAutoRegister: true}
	s := newSerde[UserV1](t, c, userV1, off).Bind("users", false)
	err := s.Check(ctx(t))
	srtest.WantError(t, err, registry.ErrNotRegistered, "users-value", 0)
	if _, err2 := s.Serialize(UserV1{}); err2 != err {
		t.Errorf("Serialize after Check: %v, want Check's error", err2)
	}
	if reg.SubjectExists("users-value") || reg.Requests("POST", "/subjects/users-value/versions") != 0 {
		t.Error("registered with auto-registration off")
	}

	id := reg.Seed("users-value", sr.Schema{Schema: userV1})
	s = newSerde[UserV1](t, c, userV1, off).Bind("users", false)
	b, err := s.Serialize(UserV1{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:5], header(id)) {
		t.Errorf("header % x, want id %d", b[:5], id)
	}
	if n := reg.Requests("POST", "/subjects/users-value"); n != 2 {
		t.Errorf("%d lookups, want 2 (one refused, one found)", n)
	}
}

func TestUseLatestVersionAndPinnedID(t *testing.T) {
	reg := srtest.New(t)
	id1 := reg.Seed("users-value", sr.Schema{Schema: userV1})
	id2 := reg.Seed("users-value", sr.Schema{Schema: userV2})
	c := reg.Client(registry.Config{})

	// Latest: writes with v2's schema and id, registers nothing.
	latest := newSerde[map[string]any](t, c, "", registry.Options{UseLatestVersion: true}).Bind("users", false)
	b, err := latest.Serialize(map[string]any{"name": "a", "email": "a@x"})
	if err != nil {
		t.Fatal(err)
	}
	want := append(header(id2), 2, 'a', 6, 'a', '@', 'x')
	if !bytes.Equal(b, want) {
		t.Errorf("latest: % x, want % x", b, want)
	}

	// Pinned: writes with id1's schema, even though the serde's own is v2.
	pinned := newSerde[UserV1](t, c, userV1, registry.Options{SchemaID: id1}).Bind("users", false)
	b, err = pinned.Serialize(UserV1{Name: "a", Age: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := append(header(id1), 2, 'a', 2); !bytes.Equal(b, want) {
		t.Errorf("pinned: % x, want % x", b, want)
	}
	if n := reg.Requests("POST", "/subjects/users-value/versions") + reg.Requests("POST", "/subjects/users-value"); n != 0 {
		t.Errorf("%d registrations or lookups, want none", n)
	}

	// A pinned id the registry does not know.
	bad := newSerde[UserV1](t, c, userV1, registry.Options{SchemaID: 999}).Bind("users", false)
	srtest.WantError(t, bad.Check(ctx(t)), registry.ErrUnknownSchemaID, "users-value", 999)

	if _, err := avro.New[UserV1](c, userV1, registry.Options{SchemaID: 1, UseLatestVersion: true}); err == nil {
		t.Error("New accepted SchemaID with UseLatestVersion")
	}
}

func TestOneLookupPerSchemaID(t *testing.T) {
	reg := srtest.New(t)
	id := reg.Seed("users-value", sr.Schema{Schema: userV1})
	payload := append(header(id), 2, 'a', 2)

	c := reg.Client(registry.Config{})
	a := newSerde[UserV1](t, c, userV1, registry.Options{})
	b := newSerde[UserV2](t, c, userV2, registry.Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, s := range []serde.Serde[UserV1]{a, a.ForTopic("users", false), a.ForTopic("other", true)} {
				for range 50 {
					if _, err := s.Deserialize(payload); err != nil {
						t.Error(err)
						return
					}
				}
			}
			for range 50 {
				if _, err := b.Deserialize(payload); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := reg.Requests("GET", "/schemas/ids/1"); n != 1 {
		t.Errorf("%d requests for schema id 1, want 1", n)
	}

	// Writing: one registration per subject and schema, however many bindings.
	for _, topic := range []string{"x", "x", "y"} {
		s := a.Bind(topic, false)
		for range 10 {
			if _, err := s.Serialize(UserV1{Name: "n"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, m := reg.Requests("POST", "/subjects/x-value/versions"), reg.Requests("POST", "/subjects/y-value/versions"); n != 1 || m != 1 {
		t.Errorf("registrations: x %d, y %d; want 1 each", n, m)
	}
	// The registered schema's id needs no lookup to read what the process wrote.
	before := reg.TotalRequests()
	out, _ := a.Bind("x", false).Serialize(UserV1{Name: "n"})
	if _, err := newSerde[UserV1](t, c, userV1, registry.Options{}).Deserialize(out); err != nil {
		t.Fatal(err)
	}
	if after := reg.TotalRequests(); after != before {
		t.Errorf("%d requests to read what the process wrote, want none", after-before)
	}
}

func TestBadInput(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, registry.Options{}).Bind("orders", false)
	good, err := s.Serialize(sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	id := int(binary.BigEndian.Uint32(good[1:5]))

	for _, tc := range []struct {
		name    string
		payload []byte
		want    error
		id      int
	}{
		{"plain JSON", []byte(`{"id":"o-1"}`), registry.ErrNoMagicByte, 0},
		{"empty", []byte{}, registry.ErrNoMagicByte, 0},
		{"short header", []byte{0, 0, 1}, registry.ErrNoMagicByte, 0},
		{"magic byte 1", append([]byte{1}, good[1:]...), registry.ErrNoMagicByte, 0},
		{"unknown id", append(header(4242), good[5:]...), registry.ErrUnknownSchemaID, 4242},
		{"truncated", good[:len(good)-3], registry.ErrCorrupt, id},
		{"trailing bytes", append(bytes.Clone(good), 1, 2), registry.ErrCorrupt, id},
		{"garbage", append(header(id), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), registry.ErrCorrupt, id},
		{"huge length", append(header(id), 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), registry.ErrCorrupt, id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Deserialize(tc.payload)
			srtest.WantError(t, err, tc.want, "orders-value", tc.id)
			t.Log(err)
		})
	}

	// A schema of another format under the id.
	pid := reg.Seed("p-value", sr.Schema{Schema: `syntax = "proto3"; message M {}`, Type: sr.TypeProtobuf})
	_, err = s.Deserialize(append(header(pid), 0))
	srtest.WantError(t, err, registry.ErrCorrupt, "orders-value", pid)
}

func TestIncompatibleSchema(t *testing.T) {
	reg := srtest.New(t)
	const msg = `Schema being registered is incompatible with an earlier schema for subject "users-value", details: [{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'age' at path '/fields/1' in the new schema has no default value and is missing in the old schema'}]`
	reg.RefuseIncompatible("users-value", msg)
	c := reg.Client(registry.Config{})
	s := newSerde[UserV1](t, c, userV1, registry.Options{}).Bind("users", false)
	err := s.Check(ctx(t))
	srtest.WantError(t, err, registry.ErrIncompatible, "users-value", 0)
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q lacks the registry's message", err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 {
		t.Errorf("error does not carry the registry's 409: %v", err)
	}
	// The first Serialize fails with the same error, without asking again.
	if _, err2 := s.Serialize(UserV1{}); err2 != err {
		t.Errorf("Serialize: %v, want Check's error", err2)
	}
	// ... and so does a serde that was never checked.
	_, err3 := newSerde[UserV1](t, c, userV1, registry.Options{}).Bind("users", false).Serialize(UserV1{})
	if err3 == nil || err3.Error() != err.Error() {
		t.Errorf("first Serialize: %v, want %v", err3, err)
	}
	// Three tries per serde binding: a 409 is looked up and tried again twice
	// (registry.Client.Register), and the error is then kept.
	if n := reg.Requests("POST", "/subjects/users-value/versions"); n != 6 {
		t.Errorf("%d registrations, want 6 (three tries per serde binding)", n)
	}
}

func TestRegistryDownThenUp(t *testing.T) {
	for _, mode := range []string{"503", "connection refused"} {
		t.Run(mode, func(t *testing.T) {
			reg := srtest.New(t)
			id := reg.Seed("users-value", sr.Schema{Schema: userV1})
			down, up := func() { reg.SetUnavailable(true) }, func() { reg.SetUnavailable(false) }
			if mode != "503" {
				down, up = reg.Disconnect, reg.Reconnect
			}
			clock := srtest.NewClock()
			var logs bytes.Buffer
			c := reg.Client(registry.Config{
				Retry:  registry.Retry{Clock: clock, Initial: 100 * time.Millisecond, Max: time.Second},
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			s := newSerde[UserV1](t, c, userV1, registry.Options{}).Bind("users", false)

			down()
			clock.OnSleep = func(n int) {
				if n == 6 {
					up()
				}
			}
			b, err := s.Serialize(UserV1{Name: "a", Age: 2})
			if err != nil {
				t.Fatalf("Serialize: %v", err)
			}
			if !bytes.Equal(b[:5], header(id)) {
				t.Errorf("header % x", b[:5])
			}
			slept := clock.Slept()
			if len(slept) != 6 {
				t.Errorf("%d retries, want 6", len(slept))
			}
			for i, d := range slept {
				want := min(100*time.Millisecond<<i, time.Second)
				if d < want*4/5 || d > want*6/5 {
					t.Errorf("retry %d waited %v, want %v give or take a fifth", i+1, d, want)
				}
			}
			if n := strings.Count(logs.String(), "level=WARN msg=\"schema registry unavailable; retrying\""); n != 6 {
				t.Errorf("%d warnings, want 6:\n%s", n, logs.String())
			}

			// Reading an id not yet cached blocks the same way.
			id2 := reg.Seed("users-v2", sr.Schema{Schema: userV2})
			down()
			clock.OnSleep = func(n int) {
				if n == 9 {
					up()
				}
			}
			r := newSerde[UserV2](t, c, userV2, registry.Options{})
			got, err := r.Deserialize(append(header(id2), 2, 'b', 2, 'c'))
			if err != nil || got != (UserV2{Name: "b", Email: "c"}) {
				t.Fatalf("Deserialize: %+v, %v", got, err)
			}
		})
	}
}

func TestRegistryDownPastTheBound(t *testing.T) {
	reg := srtest.New(t)
	reg.SetUnavailable(true)
	clock := srtest.NewClock()
	c := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock, For: 5 * time.Second}})
	s := newSerde[UserV1](t, c, userV1, registry.Options{}).Bind("users", false)
	_, err := s.Serialize(UserV1{})
	if !errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Fatalf("error %v does not wrap ErrRegistryUnavailable", err)
	}
	for _, bad := range []error{registry.ErrNotRegistered, registry.ErrIncompatible, registry.ErrCorrupt, registry.ErrRegistryRefused} {
		if errors.Is(err, bad) {
			t.Errorf("error %v wraps %v", err, bad)
		}
	}
	var total time.Duration
	for _, d := range clock.Slept() {
		total += d
	}
	if total > 5*time.Second {
		t.Errorf("retried for %v, past the bound", total)
	}
	// Weather is not kept: once the registry is back, the serde works.
	reg.SetUnavailable(false)
	if _, err := s.Serialize(UserV1{}); err != nil {
		t.Fatal(err)
	}

	// Close ends the retries of an unbounded client.
	reg.SetUnavailable(true)
	clock2 := srtest.NewClock()
	c2 := reg.Client(registry.Config{Retry: registry.Retry{Clock: clock2}})
	clock2.OnSleep = func(n int) {
		if n == 3 {
			c2.Close()
		}
	}
	_, err = newSerde[UserV1](t, c2, userV1, registry.Options{}).Bind("z", false).Serialize(UserV1{})
	if !errors.Is(err, registry.ErrRegistryUnavailable) || !strings.Contains(err.Error(), "client closed") {
		t.Errorf("after Close: %v", err)
	}
}

const addressSchema = `{"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
  {"name": "city", "type": "string"}
]}`

const customerSchema = `{"type": "record", "name": "Customer", "namespace": "com.acme", "fields": [
  {"name": "name", "type": "string"},
  {"name": "home", "type": "com.acme.Address"},
  {"name": "work", "type": ["null", "Address"], "default": null}
]}`

type Address struct {
	City string `avro:"city"`
}

type Customer struct {
	Name string   `avro:"name"`
	Home Address  `avro:"home"`
	Work *Address `avro:"work"`
}

func TestReferences(t *testing.T) {
	reg := srtest.New(t)
	reg.Seed("com.acme.Address", sr.Schema{Schema: addressSchema})
	refs := []sr.SchemaReference{{Name: "com.acme.Address", Subject: "com.acme.Address", Version: 1}}
	c := reg.Client(registry.Config{})
	s, err := avro.New[Customer](c, customerSchema, registry.Options{References: refs})
	if err != nil {
		t.Fatal(err)
	}
	vs := s.Bind("customers", false)
	if err := vs.Check(ctx(t)); err != nil {
		t.Fatal(err)
	}
	want := Customer{Name: "ann", Home: Address{City: "Oslo"}, Work: &Address{City: "Bergen"}}
	b, err := vs.Serialize(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := vs.Deserialize(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	ss, ok := reg.GetSchema("customers-value", 1)
	if !ok || !reflect.DeepEqual(ss.References, refs) {
		t.Errorf("registered %+v, want references %+v", ss, refs)
	}
	// Another process, reading generically, resolves the writer's references.
	reader := newSerde[map[string]any](t, srtest.New(t).Client(registry.Config{URLs: []string{reg.URL()}}), "", registry.Options{})
	m, err := reader.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if home, _ := m["home"].(map[string]any); home["city"] != "Oslo" {
		t.Errorf("generic read: %#v", m)
	}
	// Without the reference, the schema does not parse.
	if _, err := avro.New[Customer](c, customerSchema, registry.Options{}); err == nil {
		t.Error("New parsed a schema with an unresolved reference")
	}
}

func TestConcurrentUse(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	s := newSerde[Order](t, c, orderSchema, registry.Options{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			vs := s.ForTopic("orders", i%2 == 0)
			for range 200 {
				o := sampleOrder()
				b, err := vs.Serialize(o)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := vs.Deserialize(b)
				if err != nil || got.ID != o.ID || len(got.Tags) != 2 {
					t.Error(got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestAppendSerialize(t *testing.T) {
	reg := srtest.New(t)
	s := newSerde[*UserV1](t, reg.Client(registry.Config{}), userV1, registry.Options{}).Bind("u", false)
	want, err := s.Serialize(&UserV1{Name: "a", Age: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, isNull, err := s.AppendSerialize([]byte("prefix"), &UserV1{Name: "a", Age: 1})
	if err != nil || isNull || !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Errorf("AppendSerialize = %q, %v, %v; want prefix then %q", got, isNull, err, want)
	}
	got, isNull, err = s.AppendSerialize([]byte("p"), nil)
	if err != nil || !isNull || string(got) != "p" {
		t.Errorf("AppendSerialize(nil) = %q, %v, %v", got, isNull, err)
	}
	var _ interface {
		AppendSerialize([]byte, *UserV1) ([]byte, bool, error)
	} = s
	_ = context.Background
	_ = havro.Marshal
}

// Arrays and maps are written as Apache Avro's Java library writes them: one block, its
// item count (not hamba/avro's default negative count and byte size, in blocks of 100),
// then the closing 0. interop_test.go checks more against Java's own bytes.
func TestArraysAndMapsInOneBlock(t *testing.T) {
	reg := srtest.New(t)
	c := reg.Client(registry.Config{})
	arr := newSerde[[]int64](t, c, `{"type": "array", "items": "long"}`, registry.Options{}).Bind("a", false)
	long := make([]int64, 150)
	for i := range long {
		long[i] = 1
	}
	for _, tc := range []struct {
		v    []int64
		want []byte
	}{
		{[]int64{1, -2}, []byte{0x04, 0x02, 0x03, 0x00}},
		{[]int64{}, []byte{0x00}},
		{long, append(append([]byte{0xac, 0x02}, bytes.Repeat([]byte{0x02}, 150)...), 0x00)}, // count 150, then 150 ones
	} {
		b, err := arr.Serialize(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := b[5:]; !bytes.Equal(got, tc.want) {
			t.Errorf("array of %d: %x, want %x", len(tc.v), got, tc.want)
		}
	}
	m := newSerde[map[string]int32](t, c, `{"type": "map", "values": "int"}`, registry.Options{}).Bind("m", false)
	b, err := m.Serialize(map[string]int32{"k": 7})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b[5:], []byte{0x02, 0x02, 'k', 0x0e, 0x00}; !bytes.Equal(got, want) {
		t.Errorf("map: %x, want %x", got, want)
	}
}
