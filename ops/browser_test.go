package ops_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// chromium returns the path of the Chromium binary to drive: $KSTREAM_CHROMIUM, or
// /usr/bin/chromium (Debian's chromium package). It skips the test when there is none, or
// fails it if KSTREAM_TEST_BROWSER=required (as .ci/run sets, after installing chromium).
func chromium(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("KSTREAM_TEST_BROWSER") == "required" {
		skip = t.Fatalf
	}
	path := os.Getenv("KSTREAM_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		skip("no Chromium at %s (%v): install Debian's chromium package, or set KSTREAM_CHROMIUM to a Chromium or Chrome binary, to run the browser test", path, err)
	}
	return path
}

// pageView is what the test reads from the rendered page.
type pageView struct {
	State     string            `json:"state"`
	Nodes     []string          `json:"nodes"`     // names drawn in the topology graph
	Instances map[string]string `json:"instances"` // endpoint -> active task ids, space-separated
	Standbys  map[string]string `json:"standbys"`  // endpoint -> standby task ids, space-separated
	Self      string            `json:"self"`      // endpoint of the instance marked as this one
	Charts    int               `json:"charts"`    // sparklines with points
	Tasks     []string          `json:"tasks"`     // task ids in the lag table
	DLQ       []string          `json:"dlq"`       // rows of the dead-letter table, cells joined by "|"
}

const readPage = `(() => {
  const v = {state: document.getElementById("state").textContent, nodes: [], instances: {}, standbys: {}, self: "", charts: 0, tasks: [], dlq: []};
  for (const g of document.querySelectorAll("#topology svg g.node")) v.nodes.push(g.querySelector("text.name").textContent);
  for (const inst of document.querySelectorAll("#instances .instance")) {
    const ids = [...inst.querySelectorAll(".active-tasks .task")].map(e => e.textContent);
    v.instances[inst.dataset.endpoint] = ids.join(" ");
    v.standbys[inst.dataset.endpoint] = [...inst.querySelectorAll(".standby-tasks .task")].map(e => e.textContent).join(" ");
    if (inst.dataset.self === "true") v.self = inst.dataset.endpoint;
  }
  for (const p of document.querySelectorAll("#charts polyline")) if (p.getAttribute("points").trim() !== "") v.charts++;
  for (const e of document.querySelectorAll("#tasks .task")) v.tasks.push(e.textContent);
  for (const tr of document.querySelectorAll("#dlq tbody tr")) v.dlq.push([...tr.children].slice(1).map(td => td.textContent).join("|"));
  return v;
})()`

// Two instances of one application over 4 partitions, with a standby of each task, each
// serving the ops handler: the page of the first, in headless Chromium, loads without any
// console error or uncaught exception, draws every node of the topology, lists the active
// and standby tasks of both instances (0_0 to 0_3, two active and two standby each) under
// their endpoints and the first one's tasks in its lag table, and shows the dead-letter
// record that the first one wrote. The test saves a screenshot.
func TestPageInBrowser(t *testing.T) {
	exe := chromium(t)
	t.Parallel()
	in := kafkatest.CreateTopic(t, "numbers", 4, nil)
	out := kafkatest.CreateTopic(t, "counts", 4, nil)
	appID := kafkatest.Name(t, "app")
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%7), Value: binary.BigEndian.AppendUint64(nil, uint64(i))})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	tweak := func(c *kstream.Config) {
		c.NumStandbys = 1
		c.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	}
	one := startInstance(t, appID, testTopology(in, out), tweak)
	two := startInstance(t, appID, testTopology(in, out), tweak)

	// Wait for the group to settle: two members with two tasks and two standbys each, both
	// running.
	want, wantStandby := map[string][]string{}, map[string][]string{}
	kafkatest.Eventually(t, 90*time.Second, "two instances with two tasks and two standbys each", func() bool {
		if one.app.State().String() != "RUNNING" || two.app.State().String() != "RUNNING" {
			return false
		}
		md := one.app.Metadata()
		if len(md) != 2 {
			return false
		}
		clear(want)
		clear(wantStandby)
		var all []string
		for _, m := range md {
			if len(m.Active) != 2 || len(m.Standby) != 2 {
				return false
			}
			for _, id := range m.Standby {
				wantStandby[m.Host] = append(wantStandby[m.Host], id.String())
			}
			for _, id := range m.Active {
				want[m.Host] = append(want[m.Host], id.String())
				all = append(all, id.String())
			}
		}
		slices.Sort(all)
		return slices.Equal(all, []string{"0_0", "0_1", "0_2", "0_3"}) && want[one.addr] != nil && want[two.addr] != nil
	})
	// A record that cannot be decoded, on a partition of the first instance: it writes the
	// dead letter.
	var p int32
	fmt.Sscanf(want[one.addr][0], "0_%d", &p)
	kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Partition: p, Key: []byte("bad"), Value: []byte("xyz")})
	kafkatest.Eventually(t, 30*time.Second, "the dead letter written", func() bool { return one.app.Status().DeadLettersTotal == 1 })
	dl := one.app.Status().DeadLetters[0]
	wantDLQ := fmt.Sprintf("deserialization|numbers|%s|%d|%d|%s|%s-0@0", in, p, dl.Offset, dl.Error, dlq)

	var wantNodes []string
	wantNodes = append(wantNodes, nodeNames(one.app.Topology())...)
	wantNodes = append(wantNodes, "counts") // the store
	slices.Sort(wantNodes)

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.WindowSize(1400, 1800)}
	opts = append(opts, chromedp.DefaultExecAllocatorOptions[:]...)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(bctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			t.Logf("browser console: %s", m)
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	defer func() { bcancel(); <-consoleDone }() // no t.Logf after the test ends

	pageURL := one.srv.URL + "/ops/"
	if err := chromedp.Do(bctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("loading %s: %v", pageURL, err)
	}
	var view pageView
	matches := func() bool {
		if len(view.Instances) != 2 || view.Self != one.addr || view.State != "RUNNING" || view.Charts < 4 {
			return false
		}
		for host, ids := range want {
			if view.Instances[host] != strings.Join(ids, " ") || view.Standbys[host] != strings.Join(wantStandby[host], " ") {
				return false
			}
		}
		if len(view.DLQ) != 1 || view.DLQ[0] != wantDLQ {
			return false
		}
		nodes := slices.Sorted(slices.Values(view.Nodes))
		return slices.Equal(nodes, wantNodes) && slices.Equal(view.Tasks, want[one.addr])
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[pageView](readPage))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		view = v
		// The charts need two samples (a rate is a difference): at least a second.
		if matches() || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "ops-page.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", pageURL, shot, len(png))
	if keep := os.Getenv("KSTREAM_OPS_SCREENSHOT"); keep != "" { // a copy that outlives the test (CI artifacts)
		if err := os.WriteFile(keep, png, 0o644); err != nil {
			t.Errorf("keeping the screenshot: %v", err)
		}
	}
	if !matches() {
		t.Errorf("the page shows %+v;\nwant nodes %v, instances %v, standbys %v, self %s, state RUNNING, 4 charts, tasks %v, dead letter %s",
			view, wantNodes, want, wantStandby, one.addr, want[one.addr], wantDLQ)
	}
	bcancel()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors or exceptions:\n%s", strings.Join(problems, "\n"))
	}
}
