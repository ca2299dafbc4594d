package srtest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kstream-go/kstream/serde/registry"
)

// The interop goldens: the files that testing/serdes (Java: Apache Avro, protobuf-java,
// Jackson) writes, one per case, and that the Go serdes' tests read; and the files of the
// same layout that the Go tests write for the Java program to read.
// serde/testdata/interop/README.md describes them.

// InteropDirEnv names a directory of goldens to read instead of the checked-in ones
// (testing/serdes/run.sh check sets it to the ones Java has just written).
const InteropDirEnv = "KSTREAM_SERDES_INTEROP_DIR"

// InteropOutEnv names the directory the Go tests write their encodings to, for
// testing/serdes/run.sh read.
const InteropOutEnv = "KSTREAM_SERDES_INTEROP_OUT"

// Golden is one interop file.
type Golden struct {
	Name   string // the case: the file's name without .txt
	ID     int    // the schema id in the header
	Value  string // the value in its canonical text form
	Bytes  []byte // the framed bytes
	Note   string // a documented difference of Go's bytes, if any
	Schema string // the writer schema
}

// InteropDir returns the directory of the goldens of format (avro, protobuf, jsonschema).
func InteropDir(format string) string {
	if d := os.Getenv(InteropDirEnv); d != "" {
		return filepath.Join(d, format)
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "interop", format)
}

// ReadGoldens reads the goldens of format, by case name.
func ReadGoldens(t testing.TB, format string) map[string]Golden {
	t.Helper()
	dir := InteropDir(format)
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no goldens in %s", dir)
	}
	out := make(map[string]Golden, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := ParseGolden(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		g.Name = strings.TrimSuffix(filepath.Base(f), ".txt")
		out[g.Name] = g
	}
	return out
}

// ParseGolden parses a golden file's text.
func ParseGolden(text string) (Golden, error) {
	var g Golden
	seen := map[string]bool{}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "schema:" {
			g.Schema = strings.TrimRight(strings.Join(lines[i+1:], "\n"), "\n")
			for _, k := range []string{"id", "value", "hex"} {
				if !seen[k] {
					return g, fmt.Errorf("no %q line", k+":")
				}
			}
			return g, nil
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			k, ok = strings.CutSuffix(line, ":") // "hex:" of a Kafka null
			if !ok {
				return g, fmt.Errorf("line %d is not \"key: value\": %q", i+1, line)
			}
		}
		seen[k] = true
		var err error
		switch k {
		case "id":
			g.ID, err = strconv.Atoi(v)
		case "value":
			g.Value = v
		case "hex":
			g.Bytes, err = hex.DecodeString(v)
		case "note":
			g.Note = v
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return g, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	return g, fmt.Errorf(`no "schema:" line`)
}

// SeedGoldens registers every golden's schema at its id, each under its own subject, so
// that serdes pinned to the golden's id (registry.Options.SchemaID) write with it.
func (r *Registry) SeedGoldens(goldens map[string]Golden, typ sr.SchemaType) {
	r.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(goldens)) {
		g := goldens[name]
		r.SeedSchema("interop-"+name+"-value", 1, g.ID, sr.Schema{Schema: g.Schema, Type: typ})
	}
}

// WriteGolden writes Go's encoding b of golden g's case to the directory named by
// InteropOutEnv, for testing/serdes/run.sh read. A nil b (a Kafka null) is an empty "hex:".
func WriteGolden(t testing.TB, format string, g Golden, b []byte) {
	t.Helper()
	dir := filepath.Join(os.Getenv(InteropOutEnv), format)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "# %s/%s: written by the Go serde's TestInteropWriteForJava\n", format, g.Name)
	fmt.Fprintf(&s, "id: %d\nvalue: %s\nhex: %s\n", g.ID, g.Value, hex.EncodeToString(b))
	fmt.Fprintf(&s, "schema:\n%s\n", g.Schema)
	if err := os.WriteFile(filepath.Join(dir, g.Name+".txt"), []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// InteropCase is one case of a serde's interop test with Java.
type InteropCase struct {
	Name string
	// Text is the value's canonical text, as the Java program renders it.
	Text string
	// GoHex, if set, is Go's framed encoding of the value where it differs from Java's, as
	// the README of the goldens documents.
	GoHex string
	// GoText is GoHex for a text payload (JSON): Go's bytes after the 5-byte header.
	GoText string
	// GoNull says that Go writes the value as a Kafka null (no bytes), as Confluent's
	// serializers write a Java null, where Java's golden holds the framed null.
	GoNull bool
	// Run decodes Java's bytes (g.Bytes) with a serde that writes with schema id g.ID, fails
	// the test unless they decode to the expected value, and returns the serde's encoding
	// of the expected value.
	Run func(t *testing.T, c *registry.Client, g Golden) []byte
}

// RunInterop runs the interop cases of format against its goldens: every case must have
// a golden and every golden a case; the golden's value text must be the case's; the
// serde must decode Java's bytes to the expected value, and encode it to Java's bytes (or
// to the documented GoHex). With write, it writes Go's encodings for Java to read.
func RunInterop(t *testing.T, format string, typ sr.SchemaType, cases []InteropCase, write bool) {
	t.Helper()
	goldens := ReadGoldens(t, format)
	known := make(map[string]bool)
	for _, c := range cases {
		if known[c.Name] {
			t.Fatalf("case %s twice", c.Name)
		}
		known[c.Name] = true
		if _, ok := goldens[c.Name]; !ok {
			t.Errorf("case %s/%s has no golden in %s: is testing/serdes missing it?", format, c.Name, InteropDir(format))
		}
	}
	for name := range goldens {
		if !known[name] {
			t.Errorf("golden %s/%s has no case here: add one", format, name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	reg := New(t)
	reg.SeedGoldens(goldens, typ)
	client := reg.Client(registry.Config{})
	identical, differ := 0, 0
	for _, c := range cases {
		g := goldens[c.Name]
		ok := t.Run(c.Name, func(t *testing.T) {
			if g.Value != c.Text {
				t.Errorf("Java's value\n\t%s\nis not the case's\n\t%s", g.Value, c.Text)
			}
			b := c.Run(t, client, g)
			goHex := c.GoHex
			if c.GoText != "" {
				goHex = hex.EncodeToString(append(registry.AppendHeader(nil, g.ID), c.GoText...))
			}
			switch {
			case c.GoNull && b != nil:
				t.Errorf("Go's bytes %x, want a Kafka null (nil)", b)
			case c.GoNull && g.Note == "":
				t.Errorf("Go writes a Kafka null as the case says, but Java's golden documents no difference")
			case c.GoNull:
			case goHex == "" && !bytes.Equal(b, g.Bytes):
				t.Errorf("Go's bytes differ from Java's:\n\tgo:   %x\n\tjava: %x\n\tgo:   %q\n\tjava: %q", b, g.Bytes, b, g.Bytes)
			case goHex == "" && g.Note != "":
				t.Errorf("Java documents a difference the case does not expect: %s", g.Note)
			case goHex != "" && hex.EncodeToString(b) != goHex:
				t.Errorf("Go's bytes %x, want the documented %s (Java's: %x)", b, goHex, g.Bytes)
			case goHex != "" && g.Note == "":
				t.Errorf("Go's bytes differ from Java's as the case says, but Java's golden documents no difference")
			}
			if write && !t.Failed() {
				WriteGolden(t, format, g, b)
			}
		})
		switch {
		case !ok:
		case c.GoHex == "" && c.GoText == "" && !c.GoNull:
			identical++
		default:
			differ++
		}
	}
	t.Logf("interop: %s: %d cases of Java's decoded to the expected values; Go's encodings: %d byte-identical, %d documented differences",
		format, len(cases), identical, differ)
}
