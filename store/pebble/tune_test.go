package pebble_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/kstream-go/kstream/store/pebble"
)

// Options.Tune sees the package's own settings and what it sets is what Pebble opens with
// (Pebble writes the options it opened with into its OPTIONS file).
func TestTune(t *testing.T) {
	dir := t.TempDir()
	var sawMemTable uint64
	db := openDir(t, dir, pebble.Options{Tune: func(o *cpebble.Options) {
		sawMemTable = o.MemTableSize
		o.L0CompactionThreshold = 7
	}})
	defer db.Close()
	if sawMemTable != 1<<20 {
		t.Errorf("Tune saw MemTableSize %d, want the package's 1 MiB", sawMemTable)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if len(matches) == 0 {
		t.Fatal("no OPTIONS file")
	}
	b, err := os.ReadFile(matches[len(matches)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "l0_compaction_threshold=7") {
		t.Errorf("OPTIONS file lacks l0_compaction_threshold=7:\n%s", b)
	}
}
