package kstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// suppressEnv is a runtime.TaskEnv that keeps what the task produces.
type suppressEnv struct{ out []string }

func (e *suppressEnv) Produce(o *runtime.OutRecord) {
	e.out = append(e.out, fmt.Sprintf("%s=%s@%d", o.Record.Key, o.Record.Value, o.Record.Timestamp.UnixMilli()))
}
func (e *suppressEnv) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (e *suppressEnv) GlobalStore(string) (store.Backend, error) {
	return nil, errors.New("no global stores")
}
func (e *suppressEnv) RecordDropped()                                        {}
func (e *suppressEnv) Now() time.Time                                        { return time.UnixMilli(0) }
func (e *suppressEnv) Context() context.Context                              { return context.Background() }
func (e *suppressEnv) Upstream(string) (int, int32, int32, bool)             { return 0, 0, 0, false }
func (e *suppressEnv) CaughtUp(runtime.TaskID) bool                          { return true }
func (e *suppressEnv) Wake()                                                 {}
func (e *suppressEnv) PartitionCount(context.Context, string) (int32, error) { return 1, nil }

func (e *suppressEnv) take() string {
	s := strings.Join(e.out, " ")
	e.out = nil
	return s
}

// A suppression's buffer is in its store as of the last commit: a task that restarts on
// the store rebuilds the buffer from it and emits each buffered result once, and an aborted transaction
// (whose store writes the runtime discards) leaves the buffer as it was at the last commit,
// evictions included. The stores are wrapped in store.Buffers, as the runtime's
// exactly-once mode does, so that a commit flushes them and an abort discards them.
func TestSuppressBufferRestartAndAbort(t *testing.T) {
	b := NewBuilder()
	counts := Count(Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	MapValues(counts.Suppress(UntilTimeLimit(10*time.Second, Unbounded())).ToStream(), func(n int64) string { return fmt.Sprint(n) }).
		To("out", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	db := memory.New()
	defer db.Close()
	backends := map[string]store.Backend{}
	var bufs []*store.Buffer
	for _, d := range topo.stores {
		bk, err := db.Open(d.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := store.NewBuffer(bk)
		bufs = append(bufs, buf)
		backends[d.name] = buf
	}
	if _, ok := backends["KTABLE-SUPPRESS-STATE-STORE-0000000003"]; !ok {
		t.Fatalf("no suppression store among %v", backends)
	}
	env := &suppressEnv{}
	open := func() *task {
		tk, err := newTask("app", &handlers{}, topo.subs[0], env, runtime.TaskID{}, backends)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	process := func(tk *task, key string, ms int64) {
		t.Helper()
		r := &kgo.Record{Topic: "in", Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
		if err := tk.Process(r, ms); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(tk *task) {
		t.Helper()
		// As the runtime's commit: the task's cut (the suppression writes its buffer to
		// its store), then the stores' writes.
		if err := tk.PreCommit(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, buf := range bufs {
			if err := buf.Flush(0); err != nil {
				t.Fatal(err)
			}
		}
		tk.Committed()
	}
	abort := func(tk *task) {
		for _, buf := range bufs {
			buf.Discard()
		}
		tk.Aborted()
	}
	expect := func(what, want string) {
		t.Helper()
		if got := env.take(); got != want {
			t.Errorf("%s: output %q, want %q", what, got, want)
		}
	}

	t1 := open()
	process(t1, "a", 0)
	process(t1, "a", 1000)
	process(t1, "b", 2000)
	commit(t1)
	process(t1, "a", 5000)
	process(t1, "c", 12000) // would evict a=3 and b=1
	expect("before the abort", "a=3@5000 b=1@2000")
	abort(t1)
	process(t1, "a", 5000)
	expect("after the abort", "")
	commit(t1)
	if err := t1.Close(); err != nil {
		t.Fatal(err)
	}

	// The restarted task starts with no observed stream time, as Java's does, and its
	// buffer as committed: a (buffer time 0, count 3) and b.
	t2 := open()
	process(t2, "c", 12000)
	expect("after the restart", "a=3@5000 b=1@2000")
	commit(t2)
	process(t2, "d", 30000)
	expect("evicting c", "c=1@12000")
	abort(t2) // the eviction of c is undone with the transaction
	process(t2, "d", 30000)
	expect("evicting c again", "c=1@12000")
	commit(t2)
	if err := t2.Close(); err != nil {
		t.Fatal(err)
	}

	t3 := open()
	process(t3, "e", 40000)
	expect("after the second restart", "d=1@30000")
}

// bufferEntry's encoding keeps every field, and rejects truncated input.
func TestSuppressBufferEntryEncoding(t *testing.T) {
	e := bufferEntry{time: 10000, ts: 7, topic: "in", headers: []Header{{"h", []byte("v")}, {"n", nil}, {"e", []byte{}}},
		prior: []byte("p"), old: []byte("o"), new: []byte("nn"), hasPrior: true, hasOld: true, hasNew: true}
	raw := e.encode()
	got, err := decodeBufferEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", e) {
		t.Errorf("decoded %+v,\nwant %+v", got, e)
	}
	if got.headers[1].Value != nil || got.headers[2].Value == nil {
		t.Errorf("nil and empty header values not kept apart: %+v", got.headers)
	}
	// 8 + key 1 + prior 1 + old 1 + new 2 + 16 + topic 2 + 4 + headers (1+1, 1+0, 1+0)
	if n := got.size([]byte("k")); n != 39 {
		t.Errorf("size %d, want 39", n)
	}
	for i := range raw {
		if _, err := decodeBufferEntry(raw[:i]); err == nil {
			t.Fatalf("a truncated entry of %d bytes decoded", i)
		}
	}
}
