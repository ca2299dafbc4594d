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
func (e *suppressEnv) Holding() bool                                         { return false }
func (e *suppressEnv) Wake()                                                 {}
func (e *suppressEnv) PartitionCount(context.Context, string) (int32, error) { return 1, nil }

func (e *suppressEnv) take() string {
	s := strings.Join(e.out, " ")
	e.out = nil
	return s
}

// suppressHarness runs the one sub-topology of a topology as the runtime does, over stores
// wrapped in store.Buffers as the runtime's exactly-once mode wraps them: a commit is the
// task's cut (PreCommit) then the buffers' writes, and an abort discards them. With
// frozen, a commit's writes are those of a non-blocking commit (store.Buffer.Freeze): they
// are written only when the next commit begins (or a task opens), so that an abort in
// between discards only the writes made since the freeze.
type suppressHarness struct {
	t        *testing.T
	topo     *Topology
	env      *suppressEnv
	backends map[string]store.Backend
	bufs     map[string]*store.Buffer
	frozen   bool
	inflight map[string]*store.Frozen
}

func newSuppressHarness(t *testing.T, b *Builder) *suppressHarness {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	db := memory.New()
	t.Cleanup(func() { db.Close() })
	h := &suppressHarness{t: t, topo: topo, env: &suppressEnv{}, backends: map[string]store.Backend{}, bufs: map[string]*store.Buffer{}}
	for _, d := range topo.stores {
		bk, err := db.Open(d.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := store.NewBuffer(bk)
		h.bufs[d.name] = buf
		h.backends[d.name] = buf
	}
	return h
}

// open starts a task on the stores as they are.
func (h *suppressHarness) open() *task {
	h.t.Helper()
	h.settle()
	tk, err := newTask("app", &handlers{}, h.topo.subs[0], h.env, runtime.TaskID{}, h.backends)
	if err != nil {
		h.t.Fatal(err)
	}
	return tk
}

func (h *suppressHarness) process(tk *task, topic, key string, ms int64) {
	h.t.Helper()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
	if err := tk.Process(r, ms); err != nil {
		h.t.Fatal(err)
	}
}

// cut is the first half of a commit: the task's (the suppression writes its buffer to its
// store).
func (h *suppressHarness) cut(tk *task) {
	h.t.Helper()
	if err := tk.PreCommit(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *suppressHarness) commit(tk *task) {
	h.t.Helper()
	h.settle()
	h.cut(tk)
	for name, buf := range h.bufs {
		if !h.frozen {
			if err := buf.Flush(0); err != nil {
				h.t.Fatal(err)
			}
			continue
		}
		f, err := buf.Freeze()
		if err != nil {
			h.t.Fatal(err)
		}
		if h.inflight == nil {
			h.inflight = map[string]*store.Frozen{}
		}
		h.inflight[name] = f
	}
	tk.Cut()
	tk.Committed()
}

// settle writes the frozen writes of the last commit.
func (h *suppressHarness) settle() {
	h.t.Helper()
	for name, f := range h.inflight {
		if err := f.Write(0); err != nil {
			h.t.Fatal(err)
		}
		h.bufs[name].Release(f)
	}
	clear(h.inflight)
}

func (h *suppressHarness) abort(tk *task) {
	for _, buf := range h.bufs {
		buf.Discard()
	}
	tk.Aborted()
}

func (h *suppressHarness) expect(what, want string) {
	h.t.Helper()
	if got := h.env.take(); got != want {
		h.t.Errorf("%s: output %q, want %q", what, got, want)
	}
}

// A suppression's buffer is in its store as of the last commit: a task that restarts on
// the store rebuilds the buffer from it and emits each buffered result once, and an
// aborted transaction (whose store writes the runtime discards) leaves the buffer as it was
// at the last commit, evictions included.
func TestSuppressBufferRestartAndAbort(t *testing.T) {
	b := NewBuilder()
	counts := Count(Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	MapValues(counts.Suppress(UntilTimeLimit(10*time.Second, Unbounded())).ToStream(), func(n int64) string { return fmt.Sprint(n) }).
		To("out", serde.String(), serde.String())
	h := newSuppressHarness(t, b)
	if _, ok := h.backends["KTABLE-SUPPRESS-STATE-STORE-0000000003"]; !ok {
		t.Fatalf("no suppression store among %v", h.backends)
	}
	process := func(tk *task, key string, ms int64) { t.Helper(); h.process(tk, "in", key, ms) }

	t1 := h.open()
	process(t1, "a", 0)
	process(t1, "a", 1000)
	process(t1, "b", 2000)
	h.commit(t1)
	process(t1, "a", 5000)
	process(t1, "c", 12000) // would evict a=3 and b=1
	h.expect("before the abort", "a=3@5000 b=1@2000")
	h.abort(t1)
	process(t1, "a", 5000)
	h.expect("after the abort", "")
	h.commit(t1)
	if err := t1.Close(); err != nil {
		t.Fatal(err)
	}

	// The restarted task starts with no observed stream time, as Java's does, and its
	// buffer as committed: a (buffer time 0, count 3) and b.
	t2 := h.open()
	process(t2, "c", 12000)
	h.expect("after the restart", "a=3@5000 b=1@2000")
	h.commit(t2)
	process(t2, "d", 30000)
	h.expect("evicting c", "c=1@12000")
	h.abort(t2) // the eviction of c is undone with the transaction
	process(t2, "d", 30000)
	h.expect("evicting c again", "c=1@12000")
	h.commit(t2)
	if err := t2.Close(); err != nil {
		t.Fatal(err)
	}

	t3 := h.open()
	process(t3, "e", 40000)
	h.expect("after the second restart", "d=1@30000")
}

// The buffer lives in memory and reaches its store at commits only. An exactly-once abort
// after updates that were buffered, evicted and buffered again (none of them committed)
// neither loses nor repeats a result; a table read through the suppressed table (a join)
// sees a buffered key's prior value before it is committed, and the committed one after
// the abort; and a key buffered and evicted between two commits is never written to the
// store.
func TestSuppressBufferInMemoryAbortAndView(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "frozen"}[frozen], func(t *testing.T) { testSuppressInMemory(t, frozen) })
	}
}

func testSuppressInMemory(t *testing.T, frozen bool) {
	b := NewBuilder()
	counts := Count(Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	suppressed := counts.Suppress(UntilTimeLimit(10*time.Second, Unbounded()).WithName("sup"))
	MapValues(suppressed.ToStream(), func(n int64) string { return fmt.Sprint(n) }).To("out", serde.String(), serde.String())
	LeftJoin(Stream(b, "probe", serde.String(), serde.String()), suppressed, func(_ string, _ string, n int64, found bool) string {
		if !found {
			return "view:none"
		}
		return fmt.Sprintf("view:%d", n)
	}).To("joined", serde.String(), serde.String())
	h := newSuppressHarness(t, b)
	h.frozen = frozen
	in := func(tk *task, key string, ms int64) { t.Helper(); h.process(tk, "in", key, ms) }
	probe := func(tk *task, key string, ms int64) { t.Helper(); h.process(tk, "probe", key, ms) }

	t1 := h.open()
	in(t1, "a", 0)
	in(t1, "b", 1000)
	h.commit(t1) // the store: a (count 1, prior value 0, the count's old value) and b
	// The transaction to abort: a is updated, evicted (count 2), buffered again with the
	// prior value 2, which the view shows although the store has not seen it.
	in(t1, "a", 5000)
	probe(t1, "a", 5000)
	in(t1, "c", 10000)
	in(t1, "a", 10500)
	probe(t1, "a", 10500)
	h.expect("the transaction", "a=view:0@5000 a=2@5000 a=view:2@10500")
	h.abort(t1)
	probe(t1, "a", 1000)
	h.expect("the view after the abort", "a=view:0@1000")
	in(t1, "a", 5000)
	in(t1, "c", 10000)
	in(t1, "a", 10500)
	probe(t1, "a", 10500)
	h.expect("the transaction again", "a=2@5000 a=view:2@10500")
	h.commit(t1)
	in(t1, "d", 20000) // evicts b and c
	h.expect("evictions to abort", "b=1@1000 c=1@10000")
	h.abort(t1)
	if err := t1.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart on the store emits what the aborted transaction had emitted, once.
	t2 := h.open()
	probe(t2, "a", 20000)
	in(t2, "d", 20000)
	h.expect("after the restart", "a=view:2@20000 b=1@1000 c=1@10000")
	// d and x are buffered and evicted between two commits: the cut writes no entry of
	// them, nor a tombstone; a, b and c, evicted, had one, which the cut deletes.
	in(t2, "x", 21000)
	in(t2, "y", 40000) // evicts a, d and x
	h.expect("the evictions", "a=3@10500 d=1@20000 x=1@21000")
	h.settle()
	h.cut(t2)
	pending := map[string]bool{}
	h.bufs["sup-store"].Pending(func(k, _ []byte, deleted bool) { pending[string(k)] = deleted })
	if want := map[string]bool{"a": true, "b": true, "c": true, "y": false}; fmt.Sprint(pending) != fmt.Sprint(want) {
		t.Errorf("the cut's store writes (key: deleted) %v, want %v", pending, want)
	}
	h.commit(t2)
	if err := t2.Close(); err != nil {
		t.Fatal(err)
	}
	t3 := h.open()
	in(t3, "z", 60000)
	h.expect("after the second restart", "y=1@40000")
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
