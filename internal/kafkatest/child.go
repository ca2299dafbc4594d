package kafkatest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvChild names the child function a test binary started by [StartChild] runs instead of
// its tests.
const EnvChild = "KSTREAM_TEST_CHILD"

// EnvChildLogs, when set to a directory, keeps the output of every child there (one file
// per child, named after its test), passed or failed.
const EnvChildLogs = "KSTREAM_TEST_CHILD_LOGS"

var children = map[string]func() error{}

// RegisterChild registers fn as the child process named name (call it from init). A test
// starts it with [StartChild]; the child then runs fn in a new process of the same test
// binary, which can be killed, stopped and resumed for real.
func RegisterChild(name string, fn func() error) { children[name] = fn }

// runChild runs the child named by EnvChild, if any, and exits with its status.
func runChild() {
	name := os.Getenv(EnvChild)
	if name == "" {
		return
	}
	fn := children[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "kafkatest: no child %q registered\n", name)
		os.Exit(2)
	}
	if err := fn(); err != nil {
		fmt.Fprintf(os.Stderr, "kafkatest: child %q: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Child is a child process running a registered function.
type Child struct {
	Name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// lockedWriter serializes the child's stdout and stderr into one buffer.
type lockedWriter struct{ c *Child }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(p)
}

// StartChild runs the child registered as name in a new process of this test binary, with
// env (KEY=VALUE) added to the environment, including the shared broker's address. The
// child is killed at the end of the test if still running; its output is logged if the test
// failed.
func StartChild(t testing.TB, name string, env ...string) *Child {
	t.Helper()
	c := &Child{Name: name, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), EnvChild+"="+name, EnvBrokers+"="+joinBrokers(Brokers(t)))
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stdout, c.cmd.Stderr = lockedWriter{c}, lockedWriter{c}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting child %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Kill(t)
		if t.Failed() {
			t.Logf("output of child %s:\n%s", name, c.Output())
		}
		if dir := os.Getenv(EnvChildLogs); dir != "" {
			f, err := os.CreateTemp(dir, strings.NewReplacer("/", "_").Replace(t.Name())+"-"+name+"-*.log")
			if err == nil {
				_, _ = f.WriteString(c.Output())
				_ = f.Close()
			}
		}
	})
	return c
}

func joinBrokers(bs []string) string {
	var b bytes.Buffer
	for i, s := range bs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Output returns what the child wrote so far.
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Kill sends SIGKILL (no cleanup of any kind in the child) and waits for the process to end.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once resumed
	if err := c.cmd.Process.Kill(); err != nil {
		t.Logf("killing child %s: %v", c.Name, err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("child %s did not die within 30s of SIGKILL", c.Name)
	}
}

// Stop sends SIGSTOP: the child freezes (no heartbeats, no writes) until Cont.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping child %s: %v", c.Name, err)
	}
}

// Cont sends SIGCONT to a child stopped with Stop.
func (c *Child) Cont(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resuming child %s: %v", c.Name, err)
	}
}

// Pid returns the child's process id: the process that runs the registered function (the
// test binary itself, not a wrapper), which Kill sends SIGKILL to.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited reports whether the child ended, and its error if so.
func (c *Child) Exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}
