package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/internal/srtest"
	"github.com/kstream-go/kstream/serde/registry"
)

// The TestShared tests run on the fake and, with KSTREAM_TEST_REGISTRY set, on a real
// registry (see docs/testing.md): they ask only what the registry's API answers.

// TestSharedClient: registration, lookup by id, by subject and version, of the latest
// version, and of a schema under a subject; each "not there" answer is the error the
// client promises.
func TestSharedClient(t *testing.T) {
	reg := srtest.Open(t)
	c := reg.Client(registry.Config{})
	subject := reg.Name("users") + "-value"
	other := reg.Name("users") + "-value"
	v1 := sr.Schema{Schema: strings.Replace(userSchema, `"User"`, `"User`+reg.Token()+`"`, 1)}

	id, err := c.Register(t.Context(), subject, v1, false)
	if err != nil || id <= 0 {
		t.Fatalf("Register = %d, %v", id, err)
	}
	// The same schema under another subject has the same id.
	if id2, err := c.Register(t.Context(), other, v1, false); err != nil || id2 != id {
		t.Errorf("the same schema under another subject: id %d, %v; want %d", id2, err, id)
	}
	// A new client (no cache) reads it back by id, by version, as the latest.
	c2 := reg.Client(registry.Config{})
	s, err := c2.SchemaByID(t.Context(), id)
	if err != nil || s.Schema != v1.Schema || s.Type != sr.TypeAvro {
		t.Errorf("SchemaByID(%d) = %+v, %v", id, s, err)
	}
	ss, err := c2.SchemaByVersion(t.Context(), subject, 1)
	if err != nil || ss.ID != id || ss.Version != 1 || ss.Subject != subject || ss.Schema.Schema != v1.Schema {
		t.Errorf("SchemaByVersion(%s, 1) = %+v, %v", subject, ss, err)
	}
	latest, err := c2.LatestSchema(t.Context(), subject)
	if err != nil || latest.ID != id || latest.Version != 1 {
		t.Errorf("LatestSchema(%s) = %+v, %v", subject, latest, err)
	}
	found, err := c2.Lookup(t.Context(), subject, v1, false)
	if err != nil || found.ID != id || found.Version != 1 {
		t.Errorf("Lookup = %+v, %v", found, err)
	}
	// Registering again is idempotent: same id, no new version.
	if again, err := c2.Register(t.Context(), subject, v1, false); err != nil || again != id {
		t.Errorf("registered again: %d, %v; want %d", again, err, id)
	}
	// normalize=true is accepted, and the normalized form of v1 is v1's id.
	if n, err := c2.Register(t.Context(), subject, v1, true); err != nil || n != id {
		t.Errorf("registered with normalize: %d, %v; want %d", n, err, id)
	}
	if vs := reg.Versions(subject); len(vs) != 1 || vs[0] != 1 {
		t.Errorf("versions of %s: %v, want [1]", subject, vs)
	}

	// A second version.
	v2 := sr.Schema{Schema: strings.Replace(v1.Schema, `"fields":[`, `"fields":[{"name":"email","type":"string","default":""},`, 1)}
	id2, err := c2.Register(t.Context(), subject, v2, false)
	if err != nil || id2 == id {
		t.Fatalf("v2: id %d, %v", id2, err)
	}
	if ss, err := reg.Client(registry.Config{}).LatestSchema(t.Context(), subject); err != nil || ss.ID != id2 || ss.Version != 2 {
		t.Errorf("latest after v2: %+v, %v", ss, err)
	}
	if vs := reg.Versions(subject); len(vs) != 2 || vs[1] != 2 {
		t.Errorf("versions of %s: %v, want [1 2]", subject, vs)
	}

	// What is not there.
	if _, err := c2.SchemaByID(t.Context(), 1<<30); !errors.Is(err, registry.ErrUnknownSchemaID) {
		t.Errorf("unknown id: %v, want ErrUnknownSchemaID", err)
	}
	if _, err := c2.SchemaByVersion(t.Context(), subject, 99); !errors.Is(err, registry.ErrNotRegistered) {
		t.Errorf("unknown version: %v, want ErrNotRegistered", err)
	}
	if _, err := c2.LatestSchema(t.Context(), reg.Name("none")); !errors.Is(err, registry.ErrNotRegistered) {
		t.Errorf("latest of an unknown subject: %v, want ErrNotRegistered", err)
	}
	v3 := sr.Schema{Schema: strings.Replace(v1.Schema, `"fields":[`, `"fields":[{"name":"x","type":"long","default":0},`, 1)}
	if _, err := c2.Lookup(t.Context(), subject, v3, false); !errors.Is(err, registry.ErrNotRegistered) {
		t.Errorf("lookup of an unregistered schema: %v, want ErrNotRegistered", err)
	}
	if _, err := c2.Lookup(t.Context(), reg.Name("none"), v1, false); !errors.Is(err, registry.ErrNotRegistered) {
		t.Errorf("lookup in an unknown subject: %v, want ErrNotRegistered", err)
	}
}

// TestSharedIncompatible: a registry that checks BACKWARD compatibility refuses a schema
// that cannot read the subject's earlier version; the error wraps ErrIncompatible and
// carries the registry's message. The fake checks no compatibility (TestRetriesOnlyWeather
// and the serdes' tests cover the 409 there).
func TestSharedIncompatible(t *testing.T) {
	reg := srtest.Open(t)
	if !reg.Real() {
		t.Skip("the fake registry checks no compatibility")
	}
	c := reg.Client(registry.Config{})
	subject := reg.Name("users") + "-value"
	reg.SetCompatibility(subject, sr.CompatBackward)
	v1 := sr.Schema{Schema: strings.Replace(userSchema, `"User"`, `"User`+reg.Token()+`"`, 1)}
	if _, err := c.Register(t.Context(), subject, v1, false); err != nil {
		t.Fatal(err)
	}
	// A new field without a default: v2 cannot read v1's records.
	v2 := sr.Schema{Schema: strings.Replace(v1.Schema, `"fields":[`, `"fields":[{"name":"age","type":"int"},`, 1)}
	_, err := c.Register(t.Context(), subject, v2, false)
	if !errors.Is(err, registry.ErrIncompatible) || errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Fatalf("incompatible schema: %v, want ErrIncompatible", err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 || re.Message == "" {
		t.Errorf("error does not carry the registry's 409 and message: %#v", re)
	}
	t.Logf("the registry's refusal: %v", err)
	if vs := reg.Versions(subject); len(vs) != 1 {
		t.Errorf("versions after the refusal: %v, want one", vs)
	}
}

// TestSharedInvalidSchema: a schema the registry cannot parse is refused (422), not
// retried as weather.
func TestSharedInvalidSchema(t *testing.T) {
	reg := srtest.Open(t)
	if !reg.Real() {
		t.Skip("the fake registry accepts any text as a schema")
	}
	c := reg.Client(registry.Config{})
	_, err := c.Register(t.Context(), reg.Name("bad")+"-value", sr.Schema{Schema: `{"type": "record", "name": `}, false)
	if !errors.Is(err, registry.ErrRegistryRefused) || errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Errorf("invalid schema: %v, want ErrRegistryRefused", err)
	}
	t.Logf("the registry's refusal: %v", err)
}
