package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// writeFingerprint builds a count of orders per key into store, preceded by a source of
// "refunds" when refundsFirst (which renumbers the count's sub-topology), counted in windows
// of window when window > 0, and writes its fingerprint, with appID, to a file in dir.
func writeFingerprint(t *testing.T, dir, file, store string, window time.Duration, refundsFirst bool, appID string) string {
	t.Helper()
	b := kstream.NewBuilder()
	if refundsFirst {
		kstream.Stream(b, "refunds", serde.String(), serde.String()).To("audit", nil, nil)
	}
	s := kstream.Stream(b, "orders", serde.String(), serde.String())
	if window > 0 {
		kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(window)), store)
	} else {
		kstream.Count(s.GroupByKey(), store).ToStream().To("counts", nil, nil)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	f := topo.Fingerprint()
	f.ApplicationID = appID
	path := filepath.Join(dir, file)
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUpgradeCheckExitStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	old := writeFingerprint(t, dir, "old.json", "counts", 0, false, "orders")
	same := writeFingerprint(t, dir, "same.json", "counts", 0, false, "orders")
	renumbered := writeFingerprint(t, dir, "renumbered.json", "counts", 0, true, "orders")
	renamed := writeFingerprint(t, dir, "renamed.json", "order-counts", 0, false, "orders")
	oldWindows := writeFingerprint(t, dir, "old-windows.json", "counts", time.Minute, false, "orders")
	newWindows := writeFingerprint(t, dir, "new-windows.json", "counts", 2*time.Minute, false, "orders")
	newApp := writeFingerprint(t, dir, "new-app.json", "counts", 0, false, "orders-v2")
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte(`{"stores": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		status     int
		wantStdout []string
		wantStderr string
	}{
		{args: []string{old, same}, status: 0, wantStdout: []string{"verdict: rolling-upgrade"}},
		{args: []string{old, renumbered}, status: 3, wantStdout: []string{"verdict: stop-all", `stop-all: store "counts": its tasks were 0_<partition> and are 1_<partition>`}},
		{args: []string{old, renamed}, status: 4, wantStdout: []string{"verdict: reset", `reset: store "counts": renamed to "order-counts"`}},
		{args: []string{oldWindows, newWindows}, status: 4, wantStdout: []string{`reset: store "counts": window size changed from 60000ms to 120000ms`}},
		{args: []string{old, newApp}, status: 5, wantStdout: []string{"verdict: new-application-id", `changed from "orders" to "orders-v2"`}},
		{args: []string{"-json", old, renamed}, status: 4, wantStdout: []string{`"verdict": "reset"`, `"subject": "store \"counts\""`}},
		{args: []string{old, garbage}, status: 1, wantStderr: "not a kstream topology fingerprint"},
		{args: []string{old, filepath.Join(dir, "missing.json")}, status: 1, wantStderr: "missing.json"},
		{args: []string{old}, status: 2, wantStderr: "want two fingerprint files"},
		{args: []string{"-h"}, status: 0, wantStderr: "new-application-id"},
	} {
		name := strings.Join(tc.args, " ")
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"upgrade-check"}, tc.args...), &stdout, &stderr)
		if status := exitStatus(err, &stderr); status != tc.status {
			t.Errorf("%s: exit status %d, want %d (err %v); stdout:\n%s", name, status, tc.status, err, stdout.String())
		}
		for _, w := range tc.wantStdout {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout lacks %q:\n%s", name, w, stdout.String())
			}
		}
		if !strings.Contains(stderr.String(), tc.wantStderr) {
			t.Errorf("%s: stderr lacks %q:\n%s", name, tc.wantStderr, stderr.String())
		}
		if slices.Contains(tc.args, "-json") {
			var v struct {
				Verdict  string
				Findings []struct{ Verdict, Subject, Reason string }
			}
			if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Verdict != "reset" || len(v.Findings) == 0 {
				t.Errorf("%s: JSON %+v, %v", name, v, err)
			}
		}
	}
}
