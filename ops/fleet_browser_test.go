package ops_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// fleetView is what the test reads from the page's fleet view.
type fleetView struct {
	Shown     bool              `json:"shown"`     // the fleet section is shown, this instance's tables hidden
	Members   map[string]string `json:"members"`   // endpoint -> member id of its row
	States    map[string]string `json:"states"`    // endpoint -> state badge of its row
	Classes   map[string]string `json:"classes"`   // endpoint -> class of its row
	Active    map[string]string `json:"active"`    // endpoint -> its assigned active tasks
	Standby   map[string]string `json:"standby"`   // endpoint -> its assigned standby tasks
	Tasks     []string          `json:"tasks"`     // "endpoint task" of the lag table
	Standbys  []string          `json:"standbys"`  // "endpoint task" of the standby table
	DLQ       []string          `json:"dlq"`       // "endpoint|kind|operator" of the dead-letter table
	Losses    []string          `json:"losses"`    // "endpoint|operator|what|reason|count"
	Instances int               `json:"instances"` // rows of the instance table
	SelfRows  int               `json:"self_rows"` // instance cells marked as this instance
}

const readFleet = `(() => {
  const v = {shown: !document.getElementById("fleet-section").hidden && document.getElementById("tasks-section").hidden,
    members: {}, states: {}, classes: {}, active: {}, standby: {}, tasks: [], standbys: [], dlq: [], losses: [], instances: 0, self_rows: 0};
  const cells = tr => [...tr.children].map(td => td.textContent);
  for (const tr of document.querySelectorAll("#fleet-instances tbody tr")) {
    const c = cells(tr), ep = tr.dataset.endpoint;
    v.instances++;
    v.members[ep] = c[1]; v.states[ep] = c[2]; v.classes[ep] = tr.className; v.active[ep] = c[3]; v.standby[ep] = c[4];
  }
  for (const tr of document.querySelectorAll("#fleet-tasks tbody tr")) { const c = cells(tr); v.tasks.push(c[0] + " " + c[1]); }
  for (const tr of document.querySelectorAll("#fleet-standbys tbody tr")) { const c = cells(tr); v.standbys.push(c[0] + " " + c[1]); }
  for (const tr of document.querySelectorAll("#fleet-dlq tbody tr")) { const c = cells(tr); v.dlq.push([c[0], c[2], c[3]].join("|")); }
  for (const tr of document.querySelectorAll("#fleet-losses tbody tr")) v.losses.push(cells(tr).join("|"));
  v.self_rows = document.querySelectorAll("#fleet-instances .inst.self").length;
  return v;
})()`

// Three instances of one application, each with its query server and ops handler on its
// ApplicationServer: the fleet view of the first one's page (<base>/#fleet), in headless
// Chromium, shows a row for each instance (RUNNING, with its assigned active and standby
// tasks and its member id), the lag rows of all six tasks and the standby rows, each under the instance it
// comes from, the dead letter of each and its record skipped at the source, by operator and
// reason. The test saves a screenshot (a PNG). Then the third instance stops: its row says
// unreachable and its tasks leave the lag table, while the page keeps working, without a
// console error.
func TestFleetPageInBrowser(t *testing.T) {
	exe := chromium(t)
	t.Parallel()
	f := startFleet(t)
	one, three := f.members[0], f.members[2]

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

	pageURL := one.srv.URL + "/ops/#fleet"
	if err := chromedp.Do(bctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("loading %s: %v", pageURL, err)
	}
	read := func(what string, ok func(fleetView) bool) fleetView {
		t.Helper()
		var v fleetView
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			v, err = chromedp.Run(bctx, chromedp.Evaluate[fleetView](readFleet))
			if err != nil {
				t.Fatalf("reading the page: %v", err)
			}
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Errorf("the fleet view does not show %s; it shows %+v", what, v)
				return v
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	memberIDs := map[string]string{}
	for _, m := range one.app.Metadata() {
		memberIDs[m.Host] = m.MemberID
	}
	var wantTasks, wantStandbys, wantDLQ, wantLosses []string
	for _, m := range f.members {
		for _, id := range f.active[m.addr] {
			wantTasks = append(wantTasks, m.addr+" "+id)
		}
		for _, id := range f.standby[m.addr] {
			wantStandbys = append(wantStandbys, m.addr+" "+id)
		}
		wantDLQ = append(wantDLQ, m.addr+"|deserialization|numbers")
		wantLosses = append(wantLosses, m.addr+"|numbers|records dropped|skipped_deserialization_error|1")
	}
	for _, s := range [][]string{wantTasks, wantStandbys, wantDLQ, wantLosses} {
		slices.Sort(s)
	}
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	all := func(v fleetView) bool {
		if !v.Shown || v.Instances != 3 || v.SelfRows < 1 {
			return false
		}
		for _, m := range f.members {
			if v.States[m.addr] != "RUNNING" || v.Members[m.addr] != memberIDs[m.addr] || v.Classes[m.addr] != "" ||
				v.Active[m.addr] != strings.Join(f.active[m.addr], " ") || v.Standby[m.addr] != strings.Join(f.standby[m.addr], " ") {
				return false
			}
		}
		return slices.Equal(sorted(v.Tasks), wantTasks) && slices.Equal(sorted(v.Standbys), wantStandbys) &&
			slices.Equal(sorted(v.DLQ), wantDLQ) && slices.Equal(sorted(v.Losses), wantLosses)
	}
	read("the three instances and their rows", all)

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("the screenshot is not a PNG: %d bytes, starting %q", len(png), png[:min(len(png), 8)])
	}
	shot := filepath.Join(t.TempDir(), "ops-fleet.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() != int64(len(png)) {
		t.Errorf("the screenshot file %s: %v", shot, err)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", pageURL, shot, len(png))
	if keep := os.Getenv("KSTREAM_OPS_FLEET_SCREENSHOT"); keep != "" { // a copy that outlives the test (CI artifacts)
		if err := os.WriteFile(keep, png, 0o644); err != nil {
			t.Errorf("keeping the screenshot: %v", err)
		}
	}

	three.stop()
	read("the third instance unreachable", func(v fleetView) bool {
		if v.Instances != 3 || v.States[three.addr] != "unreachable" || v.Classes[three.addr] != "unreachable" ||
			v.Active[three.addr] != strings.Join(f.active[three.addr], " ") {
			return false
		}
		for _, task := range v.Tasks {
			if strings.HasPrefix(task, three.addr+" ") {
				return false
			}
		}
		return v.States[one.addr] == "RUNNING" && v.States[f.members[1].addr] == "RUNNING" && len(v.Tasks) == 4
	})

	bcancel()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors or exceptions:\n%s", strings.Join(problems, "\n"))
	}
}
