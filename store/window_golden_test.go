package store_test

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"

	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// The golden test runs testdata/window_script.txt against kstream's window and session
// stores over every engine, with and without a write buffer, and compares each command's
// results and changelog records with testdata/window_golden.txt, which Kafka Streams 4.4's
// RocksDB stores produced (testdata/windowjava/WindowGolden.java). It then restores Java's
// changelog into a new store and checks that it holds exactly what the store that ran the
// commands holds.

// scriptCmd is one line of the script, with kstream's annotations.
type scriptCmd struct {
	line    string   // as Java saw it (the golden block's header)
	fields  []string // unescaped, annotations removed
	expired bool     // "!expired": Java logs it, kstream drops it
	differs bool     // "!differs": kstream's result is want
	want    []string
}

type goldenBlock struct {
	header    string
	changelog []string
	results   []string
}

func unescapeToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			n, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeLine escapes control characters as the Java program does.
func escapeLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readScript(t *testing.T) []scriptCmd {
	t.Helper()
	f, err := os.Open("testdata/window_script.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []scriptCmd
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "="):
			c := &cmds[len(cmds)-1]
			if r := strings.TrimSpace(strings.TrimPrefix(line, "=")); r != "" {
				c.want = append(c.want, r)
			}
			continue
		}
		c := scriptCmd{line: line}
		for _, f := range strings.Fields(line) {
			switch f {
			case "!expired":
				c.expired = true
			case "!differs":
				c.differs = true
			default:
				c.fields = append(c.fields, unescapeToken(f))
			}
		}
		cmds = append(cmds, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

func readGolden(t *testing.T) []goldenBlock {
	t.Helper()
	data, err := os.ReadFile("testdata/window_golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenBlock
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			out = append(out, goldenBlock{header: line[2:]})
		case strings.HasPrefix(line, "changelog "):
			out[len(out)-1].changelog = append(out[len(out)-1].changelog, line)
		default:
			out[len(out)-1].results = append(out[len(out)-1].results, line)
		}
	}
	return out
}

// recorder is a backend that records the changelog records the runtime would write for the
// writes made to it (through a store.ChangelogCodec), as the runtime's logging backend does:
// one record per Set or Delete, none for DeleteRange.
type recorder struct {
	store.Backend
	codec store.ChangelogCodec
	log   *[]string
}

func (r recorder) record(k, v []byte) {
	ck, ok := r.codec.ChangelogKey(k)
	if !ok {
		return
	}
	val := "null"
	if v != nil {
		val = hex.EncodeToString(v)
	}
	*r.log = append(*r.log, "changelog "+hex.EncodeToString(ck)+" "+val)
}

func (r recorder) Set(k, v []byte) error {
	if err := r.Backend.Set(k, v); err != nil {
		return err
	}
	r.record(k, v)
	return nil
}

func (r recorder) Delete(k []byte) error {
	if err := r.Backend.Delete(k); err != nil {
		return err
	}
	r.record(k, nil)
	return nil
}

// goldenVariant is one way of running the script: an engine, with or without a Buffer in
// front (whose pending writes are logged and flushed after every command, as a commit does).
type goldenVariant struct {
	engine   engine
	buffered bool
}

func goldenVariants() []goldenVariant {
	var vs []goldenVariant
	for _, e := range engines {
		vs = append(vs, goldenVariant{e, false}, goldenVariant{e, true})
	}
	return vs
}

func (v goldenVariant) String() string {
	if v.buffered {
		return v.engine.name + "+buffer"
	}
	return v.engine.name
}

// goldenStore is a store under test: the backend its typed store writes to, and what
// happens after each command.
type goldenStore struct {
	raw   store.Backend // the engine's backend
	typed store.Backend // what the typed store writes to
	after func()        // logs and flushes a buffer
	log   []string
}

func openGoldenStore(t *testing.T, v goldenVariant, codec store.ChangelogCodec) *goldenStore {
	db := v.engine.open(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	raw, err := db.Open("store", 0)
	if err != nil {
		t.Fatal(err)
	}
	gs := &goldenStore{raw: raw, after: func() {}}
	if !v.buffered {
		gs.typed = recorder{raw, codec, &gs.log}
		return gs
	}
	buf := store.NewBuffer(raw).WithReadCache(1 << 16)
	gs.typed = buf
	rec := recorder{raw, codec, &gs.log}
	gs.after = func() {
		buf.Pending(func(k, v []byte, deleted bool) {
			if deleted {
				v = nil
			} else if v == nil {
				v = []byte{}
			}
			rec.record(k, v)
		})
		if err := buf.Flush(-1); err != nil {
			t.Fatal(err)
		}
	}
	return gs
}

func msArg(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad time %q", s)
	}
	return time.UnixMilli(n)
}

func valArg(s string) *string {
	if s == "null" {
		return nil
	}
	return &s
}

func drainWindowed(t *testing.T, it *store.WindowedIterator[string, *string], err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for it.Next() {
		out = append(out, escapeLine(it.Key().String()+"="+*it.Value()))
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
	return out
}

func optional(v *string, ok bool, err error) (string, error) {
	if err != nil || !ok {
		return "null", err
	}
	return escapeLine(*v), nil
}

// runWindowCmd runs one window store command and returns its result lines.
func runWindowCmd(t *testing.T, w *store.WindowStore[string, *string], f []string) []string {
	t.Helper()
	switch f[0] {
	case "put":
		if err := w.Put(f[1], valArg(f[3]), msArg(t, f[2])); err != nil {
			t.Fatal(err)
		}
		return nil
	case "fetch":
		v, ok, err := w.Fetch(f[1], msArg(t, f[2]))
		s, err := optional(v, ok, err)
		if err != nil {
			t.Fatal(err)
		}
		return []string{s}
	case "range":
		it, err := w.FetchRange(f[1], msArg(t, f[2]), msArg(t, f[3]))
		return drainWindowed(t, it, err)
	case "brange":
		it, err := w.BackwardFetchRange(f[1], msArg(t, f[2]), msArg(t, f[3]))
		return drainWindowed(t, it, err)
	case "keys":
		it, err := w.FetchKeyRange(f[1], f[2], msArg(t, f[3]), msArg(t, f[4]))
		return drainWindowed(t, it, err)
	case "bkeys":
		it, err := w.BackwardFetchKeyRange(f[1], f[2], msArg(t, f[3]), msArg(t, f[4]))
		return drainWindowed(t, it, err)
	case "fetchall":
		it, err := w.FetchAll(msArg(t, f[1]), msArg(t, f[2]))
		return drainWindowed(t, it, err)
	case "bfetchall":
		it, err := w.BackwardFetchAll(msArg(t, f[1]), msArg(t, f[2]))
		return drainWindowed(t, it, err)
	case "all":
		it, err := w.All()
		return drainWindowed(t, it, err)
	case "ball":
		it, err := w.BackwardAll()
		return drainWindowed(t, it, err)
	}
	t.Fatalf("unknown window command %q", f)
	return nil
}

// runSessionCmd runs one session store command and returns its result lines.
func runSessionCmd(t *testing.T, s *store.SessionStore[string, *string], f []string) []string {
	t.Helper()
	session := func() serde.Windowed[string] {
		return serde.Windowed[string]{Key: f[1], Start: msArg(t, f[2]), End: msArg(t, f[3])}
	}
	switch f[0] {
	case "sput":
		if err := s.Put(session(), valArg(f[4])); err != nil {
			t.Fatal(err)
		}
		return nil
	case "sremove":
		if err := s.Remove(session()); err != nil {
			t.Fatal(err)
		}
		return nil
	case "sfetch":
		v, ok, err := s.FetchSession(f[1], msArg(t, f[2]), msArg(t, f[3]))
		r, err := optional(v, ok, err)
		if err != nil {
			t.Fatal(err)
		}
		return []string{r}
	case "find":
		it, err := s.FindSessions(f[1], msArg(t, f[2]), msArg(t, f[3]))
		return drainWindowed(t, it, err)
	case "bfind":
		it, err := s.BackwardFindSessions(f[1], msArg(t, f[2]), msArg(t, f[3]))
		return drainWindowed(t, it, err)
	case "findkeys":
		it, err := s.FindSessionsKeyRange(f[1], f[2], msArg(t, f[3]), msArg(t, f[4]))
		return drainWindowed(t, it, err)
	case "bfindkeys":
		it, err := s.BackwardFindSessionsKeyRange(f[1], f[2], msArg(t, f[3]), msArg(t, f[4]))
		return drainWindowed(t, it, err)
	case "sfetchkey":
		it, err := s.Fetch(f[1])
		return drainWindowed(t, it, err)
	case "sbfetchkey":
		it, err := s.BackwardFetch(f[1])
		return drainWindowed(t, it, err)
	case "sfetchkeys":
		it, err := s.FetchKeyRange(f[1], f[2])
		return drainWindowed(t, it, err)
	case "sbfetchkeys":
		it, err := s.BackwardFetchKeyRange(f[1], f[2])
		return drainWindowed(t, it, err)
	}
	t.Fatalf("unknown session command %q", f)
	return nil
}

// runSerdesLine checks one serdes line against Java's output.
func runSerdesLine(t *testing.T, f []string, want []string) {
	t.Helper()
	n := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var got []string
	switch f[1] {
	case "time":
		size := time.Duration(n(f[4])) * time.Millisecond
		sd := serde.TimeWindowed(serde.String(), size)
		b, err := sd.Serialize(serde.WindowedMs(f[2], n(f[3]), n(f[3])+n(f[4])))
		if err != nil {
			t.Fatal(err)
		}
		w, err := sd.Deserialize(b)
		if err != nil {
			t.Fatal(err)
		}
		got = []string{hex.EncodeToString(b), escapeLine(w.String())}
	case "timelong":
		b, err := serde.TimeWindowed(serde.Int64(), 0).Serialize(serde.WindowedMs(n(f[2]), n(f[3]), n(f[3])+n(f[4])))
		if err != nil {
			t.Fatal(err)
		}
		got = []string{hex.EncodeToString(b)}
	case "timedecode":
		b, err := hex.DecodeString(f[2])
		if err != nil {
			t.Fatal(err)
		}
		w, err := serde.TimeWindowed(serde.String(), time.Duration(n(f[3]))*time.Millisecond).Deserialize(b)
		if err != nil {
			t.Fatal(err)
		}
		got = []string{escapeLine(w.String())}
	case "session":
		sd := serde.SessionWindowed(serde.String())
		b, err := sd.Serialize(serde.WindowedMs(f[2], n(f[3]), n(f[4])))
		if err != nil {
			t.Fatal(err)
		}
		w, err := sd.Deserialize(b)
		if err != nil {
			t.Fatal(err)
		}
		got = []string{hex.EncodeToString(b), escapeLine(w.String())}
	case "sessionlong":
		b, err := serde.SessionWindowed(serde.Int64()).Serialize(serde.WindowedMs(n(f[2]), n(f[3]), n(f[4])))
		if err != nil {
			t.Fatal(err)
		}
		got = []string{hex.EncodeToString(b)}
	default:
		t.Fatalf("unknown serdes line %q", f)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", strings.Join(f, " "), got, want)
	}
}

type goldenScenario struct {
	header []string
	cmds   []scriptCmd
	blocks []goldenBlock
}

func TestWindowGolden(t *testing.T) {
	cmds, golden := readScript(t), readGolden(t)
	if len(cmds) != len(golden) {
		t.Fatalf("%d script lines, %d golden blocks: regenerate window_golden.txt", len(cmds), len(golden))
	}
	var scenarios []goldenScenario
	for i, c := range cmds {
		if golden[i].header != c.line {
			t.Fatalf("script line %q, golden block %q: regenerate window_golden.txt", c.line, golden[i].header)
		}
		switch c.fields[0] {
		case "serdes":
			runSerdesLine(t, c.fields, golden[i].results)
		case "scenario":
			scenarios = append(scenarios, goldenScenario{header: c.fields})
		default:
			sc := &scenarios[len(scenarios)-1]
			sc.cmds = append(sc.cmds, c)
			sc.blocks = append(sc.blocks, golden[i])
		}
	}
	for _, sc := range scenarios {
		for _, v := range goldenVariants() {
			t.Run(sc.header[1]+"-"+sc.header[2]+"/"+v.String(), func(t *testing.T) { runGoldenScenario(t, sc, v) })
		}
	}
}

func runGoldenScenario(t *testing.T, sc goldenScenario, v goldenVariant) {
	dur := func(s string) time.Duration {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(n) * time.Millisecond
	}
	var (
		codec store.ChangelogCodec
		err   error
		run   func(f []string) []string
		gs    *goldenStore
		drops func() int64
	)
	ns := serde.Nullable(serde.String())
	if sc.header[2] == "window" {
		o := store.WindowOptions{Retention: dur(sc.header[3]), SegmentInterval: dur(sc.header[4]), WindowSize: dur(sc.header[5]), RetainDuplicates: sc.header[6] == "true"}
		if codec, err = store.NewWindowChangelog(o); err != nil {
			t.Fatal(err)
		}
		gs = openGoldenStore(t, v, codec)
		w, err := store.NewWindowStore("store", gs.typed, serde.String(), ns, o)
		if err != nil {
			t.Fatal(err)
		}
		run = func(f []string) []string { return runWindowCmd(t, w, f) }
		drops = w.DroppedExpired
	} else {
		o := store.SessionOptions{Retention: dur(sc.header[3])}
		if codec, err = store.NewSessionChangelog(o); err != nil {
			t.Fatal(err)
		}
		gs = openGoldenStore(t, v, codec)
		s, err := store.NewSessionStore("store", gs.typed, serde.String(), ns, o)
		if err != nil {
			t.Fatal(err)
		}
		run = func(f []string) []string { return runSessionCmd(t, s, f) }
		drops = s.DroppedExpired
	}
	var javaLog []string
	for i, c := range sc.cmds {
		gs.log = gs.log[:0]
		before := drops()
		got := run(c.fields)
		gs.after()
		want := sc.blocks[i].results
		if c.differs {
			want = c.want
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", c.line, got, want)
		}
		javaLog = append(javaLog, sc.blocks[i].changelog...)
		switch {
		case c.expired:
			if len(gs.log) != 0 {
				t.Errorf("%s: an expired write was logged: %q", c.line, gs.log)
			}
			if c.fields[0] != "sremove" && drops() != before+1 {
				t.Errorf("%s: DroppedExpired went from %d to %d", c.line, before, drops())
			}
		case !slices.Equal(gs.log, sc.blocks[i].changelog):
			t.Errorf("%s: changelog:\n got %q\nwant %q", c.line, gs.log, sc.blocks[i].changelog)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	// Restore Java's changelog, expired records included, into a new store, in batches of
	// three records: it must hold exactly what the store that ran the commands holds.
	db := v.engine.open(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	restored, err := db.Open("restored", 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := codec.NewRestorer(restored)
	if err != nil {
		t.Fatal(err)
	}
	bt := restored.NewBatch()
	for i, rec := range javaLog {
		f := strings.Fields(rec)
		k, err := hex.DecodeString(f[1])
		if err != nil {
			t.Fatal(err)
		}
		var val []byte
		if f[2] != "null" {
			if val, err = hex.DecodeString(f[2]); err != nil {
				t.Fatal(err)
			}
			if val == nil {
				val = []byte{}
			}
		}
		if err := r.Restore(bt, k, val); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			bt.SetCheckpoint(int64(i))
			mustCommitBatch(t, bt)
		}
	}
	mustCommitBatch(t, bt)
	wantPairs(t, "restored store", scan(t, restored, nil, nil, false), scan(t, gs.raw, nil, nil, false))
	if len(scan(t, restored, nil, nil, false)) == 0 {
		t.Error("restored store is empty")
	}
}

func mustCommitBatch(t *testing.T, bt store.Batch) {
	t.Helper()
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
}
