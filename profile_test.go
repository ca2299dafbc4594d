package kstream_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
)

// With Config.ProfileOperators, processing runs under the pprof labels task, subtopology
// and operator: a goroutine profile taken while an operator blocks shows them on its
// stack, and go tool pprof -tags on a CPU profile of a pipeline with a CPU-burning
// operator puts most samples under that operator's label.
func TestOperatorProfileLabels(t *testing.T) {
	// Not parallel: the CPU profile is the process's, and parallel tests only start
	// once the sequential ones are done.
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	blocked, release := make(chan struct{}), make(chan struct{})
	b := kstream.NewBuilder()
	burned := kstream.MapValues(strs(b, in), func(v string) string {
		if v == "block" {
			close(blocked)
			<-release
			return v
		}
		// Burn about 2 ms of CPU.
		end := time.Now().Add(2 * time.Millisecond)
		x := 0
		for time.Now().Before(end) {
			for i := 0; i < 1000; i++ {
				x += i * i
			}
		}
		return fmt.Sprint(v, x%2)
	}, kstream.Named("burn"))
	kstream.MapValues(burned, strings.ToUpper, kstream.Named("upper")).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.ProfileOperators = true
	start(t, newApp(t, b, cfg))

	// The goroutine profile while "burn" blocks.
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "k", "block", 0))
	select {
	case <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the operator did not get the record")
	}
	var gp bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&gp, 1); err != nil {
		t.Fatal(err)
	}
	close(release)
	var stack string
	for _, s := range strings.Split(gp.String(), "\n\n") {
		if strings.Contains(s, "TestOperatorProfileLabels.func1") {
			stack = s
		}
	}
	if want := `# labels: {"operator":"burn", "subtopology":"0", "task":"0_0"}`; !strings.Contains(stack, want) {
		t.Errorf("the blocked operator's goroutine: want %s in\n%s", want, stack)
	}

	// The CPU profile of 300 records, 2 ms each in "burn".
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(prof)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatalf("starting the CPU profile: %v", err)
	}
	const n = 300
	for i := 0; i < n; i++ {
		kafkatest.Produce(t, kafkatest.Client(t), rec(in, "k", fmt.Sprint("v", i), i+1))
	}
	got := kafkatest.Consume(t, out, n+1, 60*time.Second)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if v := string(got[n].Value); v != "V2990" && v != "V2991" {
		t.Fatalf("last output %q, want V299 and a digit", v)
	}
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "tool", "pprof", "-tags", prof)
	outp, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -tags: %v\n%s", err, outp)
	}
	// go tool pprof -tags prints, per label key, the samples by value, in percent of all
	// samples (the broker's and the test's too):
	//  operator: Total 430ms of 1.20s (35.83%)
	//            420ms (35.00%): burn
	total := func(key string) float64 {
		m := regexp.MustCompile(`(?m)^ ` + key + `: Total .* \(\s*([0-9.]+)%\)$`).FindStringSubmatch(string(outp))
		if m == nil {
			return -1
		}
		var p float64
		fmt.Sscan(m[1], &p)
		return p
	}
	share := func(value string) float64 {
		m := regexp.MustCompile(`(?m)\(\s*([0-9.]+)%\): ` + regexp.QuoteMeta(value) + `$`).FindStringSubmatch(string(outp))
		if m == nil {
			return -1
		}
		var p float64
		fmt.Sscan(m[1], &p)
		return p
	}
	ops, burn, task := total("operator"), share("burn"), share("0_0")
	if ops <= 0 || burn < 0.8*ops {
		t.Errorf("operator burn has %.1f%% of the samples, operators %.1f%%: want burn over 80%% of the operators'; go tool pprof -tags:\n%s", burn, ops, outp)
	}
	if task < ops || total("subtopology") != task {
		t.Errorf("task 0_0 has %.1f%% of the samples, sub-topology 0 %.1f%%, operators %.1f%%: want the task's = the sub-topology's >= the operators'; go tool pprof -tags:\n%s", task, total("subtopology"), ops, outp)
	}
	t.Logf("go tool pprof -tags:\n%s", outp)
}
