package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testTimeout bounds every blocking call in these tests.
const testTimeout = 20 * time.Second

// TestMain runs the tests on the shared in-process broker of kafkatest (the lag, reset
// and dlq tests run applications on it), closes it, and checks that no goroutine leaked.
func TestMain(m *testing.M) { kafkatest.Main(m) }

// syncBuffer is a bytes.Buffer safe for the concurrent writes of the
// broker's logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listeningRE = regexp.MustCompile(`^kstream dev broker listening on (127\.0\.0\.1:\d+) \(data: (.*)\)$`)

var registryRE = regexp.MustCompile(`^kstream dev schema registry at (http://127\.0\.0\.1:\d+) \(in memory\)$`)

// devBroker is a "kstream dev" running in a goroutine.
type devBroker struct {
	addr     string
	data     string
	registry string // its schema registry's URL, "" without one
	cancel   context.CancelFunc
	errc     chan error
	stderr   *syncBuffer
}

// startDev runs "kstream dev args..." and waits for its listening line.
func startDev(t *testing.T, args ...string) *devBroker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &devBroker{cancel: cancel, errc: make(chan error, 1), stderr: new(syncBuffer)}
	if !slices.Contains(args, "-registry") {
		args = append(args, "-registry", "127.0.0.1:0") // not the default port: tests run in parallel
	}
	withRegistry := args[slices.Index(args, "-registry")+1] != ""
	go func() {
		err := run(ctx, append([]string{"dev"}, args...), pw, d.stderr)
		pw.Close()
		d.errc <- err
	}()

	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		if withRegistry && sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, pr) // keep draining until run returns
	}()

	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-lines:
		if !ok {
			cancel()
			t.Fatalf("dev exited without printing its address: %v\nstderr:\n%s", <-d.errc, d.stderr)
		}
		m := listeningRE.FindStringSubmatch(line)
		if m == nil {
			cancel()
			<-d.errc
			t.Fatalf("unexpected first line %q", line)
		}
		d.addr, d.data = m[1], m[2]
	case <-timer.C:
		cancel()
		t.Fatal("dev did not print its address in time")
	}
	if withRegistry {
		select {
		case line := <-lines:
			m := registryRE.FindStringSubmatch(line)
			if m == nil {
				cancel()
				<-d.errc
				t.Fatalf("unexpected second line %q, want the registry's", line)
			}
			d.registry = m[1]
		case <-timer.C:
			cancel()
			t.Fatal("dev did not print its registry's address in time")
		}
	}
	return d
}

// stop cancels the dev command and checks that it returns nil.
func (d *devBroker) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	select {
	case err := <-d.errc:
		if err != nil {
			t.Fatalf("run returned %v\nstderr:\n%s", err, d.stderr)
		}
	case <-timer.C:
		t.Fatal("dev did not stop after cancel")
	}
}

func TestDev(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	d := startDev(t, "-addr", "127.0.0.1:0", "-data", dir, "-partitions", "2")
	if d.data != dir {
		t.Fatalf("printed data dir %q, want %q", d.data, dir)
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.addr),
		kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("dev-topic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The topic does not exist: -auto-create defaults to true.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dev-topic", Key: []byte("k"), Value: []byte("hello dev")}).FirstErr(); err != nil {
		cl.Close()
		t.Fatalf("produce: %v", err)
	}
	got := pollOne(ctx, t, cl)
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "dev-topic")
	cl.Close()
	if string(got.Value) != "hello dev" {
		t.Fatalf("consumed %q, want %q", got.Value, "hello dev")
	}
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if n := len(topics["dev-topic"].Partitions); n != 2 {
		t.Fatalf("auto-created topic has %d partitions, want 2 (-partitions)", n)
	}
	d.stop(t)

	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("data dir %s is empty after stop (err %v)", dir, err)
	}

	// Restarted on the same directory, the record is still there.
	d = startDev(t, "-addr", "127.0.0.1:0", "-data", dir)
	cl, err = kgo.NewClient(
		kgo.SeedBrokers(d.addr),
		kgo.ConsumeTopics("dev-topic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	got = pollOne(ctx, t, cl)
	cl.Close()
	if string(got.Value) != "hello dev" {
		t.Fatalf("after restart consumed %q, want %q", got.Value, "hello dev")
	}
	d.stop(t)
}

// kstream dev serves a Schema Registry API: an Avro serde registers its schema there and
// reads its records back; -registry "" serves none.
func TestDevSchemaRegistry(t *testing.T) {
	d := startDev(t, "-addr", "127.0.0.1:0", "-data", "", "-log-level", "none")
	defer d.stop(t)
	if d.registry == "" {
		t.Fatal("no registry address printed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rc, err := registry.NewClient(registry.Config{URLs: []string{d.registry}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type order struct {
		ID     string `avro:"id"`
		Amount int64  `avro:"amount"`
	}
	s, err := avro.New[order](rc, `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bound := s.Bind("orders", false)
	if err := bound.Check(ctx); err != nil {
		t.Fatalf("registering the schema with kstream dev's registry: %v", err)
	}
	b, err := bound.Serialize(order{ID: "o-1", Amount: 42})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Deserialize(b); err != nil || got != (order{ID: "o-1", Amount: 42}) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	none := startDev(t, "-addr", "127.0.0.1:0", "-data", "", "-log-level", "none", "-registry", "")
	defer none.stop(t)
	if none.registry != "" {
		t.Fatalf("-registry \"\": registry at %s", none.registry)
	}
}

// Without -data, kstream dev keeps its data in kstream/dev-<port> of the user's cache
// directory, not in the current directory.
func TestDevDefaultDataDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux and the BSDs
	t.Setenv("HOME", cache)           // macOS: ~/Library/Caches
	t.Setenv("LocalAppData", cache)   // Windows
	want, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	want = filepath.Join(want, "kstream", "dev-0")
	cwd := t.TempDir()
	t.Chdir(cwd)
	d := startDev(t, "-addr", "127.0.0.1:0", "-log-level", "none", "-registry", "")
	if d.data != want {
		t.Fatalf("printed data dir %q, want %q", d.data, want)
	}
	d.stop(t)
	if entries, err := os.ReadDir(want); err != nil || len(entries) == 0 {
		t.Fatalf("data dir %s is empty after stop (err %v)", want, err)
	}
	if entries, err := os.ReadDir(cwd); err != nil || len(entries) != 0 {
		t.Fatalf("the current directory holds %v (err %v), want nothing", entries, err)
	}
}

func TestDevInMemory(t *testing.T) {
	d := startDev(t, "-addr", "localhost:0", "-data", "", "-log-level", "none")
	if d.data != "in memory" {
		t.Fatalf("printed data %q, want %q", d.data, "in memory")
	}
	d.stop(t)
}

func pollOne(ctx context.Context, t *testing.T, cl *kgo.Client) *kgo.Record {
	t.Helper()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

func TestUsage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, tc := range []struct {
		args       []string
		ok         bool  // run must return nil
		wantErr    error // else, if set, run's error must match it
		wantStdout string
		wantStderr string
	}{
		{args: nil, wantErr: errUsage, wantStderr: "Commands:"},
		{args: []string{"help"}, ok: true, wantStdout: "  dev "},
		{args: []string{"--help"}, ok: true, wantStdout: "  help "},
		{args: []string{"help", "dev"}, ok: true, wantStdout: "-auto-create"},
		{args: []string{"help"}, ok: true, wantStdout: "  dlq replay "},
		{args: []string{"help", "lag"}, ok: true, wantStdout: "-json"},
		{args: []string{"help", "reset"}, ok: true, wantStdout: "-shift-by"},
		{args: []string{"help", "dlq"}, ok: true, wantStdout: "-source-topic"},
		{args: []string{"help", "describe"}, ok: true, wantStdout: "/api/describe"},
		{args: []string{"help", "upgrade-check"}, ok: true, wantStdout: "old.json new.json"},
		{args: []string{"help"}, ok: true, wantStdout: "  upgrade-check "},
		{args: []string{"lag", "-h"}, ok: true, wantStderr: "-app"},
		{args: []string{"reset", "-h"}, ok: true, wantStderr: "StreamsResetter"},
		{args: []string{"dlq", "replay", "-h"}, ok: true, wantStderr: "-dry-run"},
		{args: []string{"dlq", "-h"}, ok: true, wantStdout: "-limit"},
		{args: []string{"dlq"}, wantErr: errUsage, wantStderr: "kstream dlq replay"},
		{args: []string{"dlq", "purge"}, wantErr: errUsage, wantStderr: "only dlq command is replay"},
		{args: []string{"lag", "-brokers", "x:1"}, wantErr: errUsage, wantStderr: "-app is required"},
		{args: []string{"dlq", "replay"}, wantErr: errUsage, wantStderr: "-topic is required"},
		{args: []string{"describe", "extra"}, wantErr: errUsage, wantStderr: "unexpected arguments"},
		{args: []string{"help", "nope"}, wantErr: errUsage, wantStderr: `unknown command "nope"`},
		{args: []string{"dev", "-h"}, ok: true, wantStderr: "-partitions"},
		{args: []string{"nope"}, wantErr: errUsage, wantStderr: `unknown command "nope"`},
		{args: []string{"dev", "-bogus"}, wantErr: errUsage, wantStderr: "-bogus"},
		{args: []string{"dev", "extra"}, wantErr: errUsage, wantStderr: "unexpected arguments"},
		{args: []string{"dev", "-addr", "0.0.0.0:9092"}},
		{args: []string{"dev", "-addr", "127.0.0.1:http"}},
		{args: []string{"dev", "-log-level", "loud"}},
		{args: []string{"dev", "-partitions", "0", "-addr", "127.0.0.1:0", "-data", ""}},
	} {
		var stdout, stderr bytes.Buffer
		err := run(ctx, tc.args, &stdout, &stderr)
		name := strings.Join(tc.args, " ")
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: err = %v, want nil", name, err)
		case !tc.ok && err == nil:
			t.Errorf("%q: succeeded, want an error", name)
		case !tc.ok && tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("%q: err = %v, want %v", name, err, tc.wantErr)
		}
		if !strings.Contains(stdout.String(), tc.wantStdout) {
			t.Errorf("%q: stdout %q lacks %q", name, stdout.String(), tc.wantStdout)
		}
		if !strings.Contains(stderr.String(), tc.wantStderr) {
			t.Errorf("%q: stderr %q lacks %q", name, stderr.String(), tc.wantStderr)
		}
	}
}
