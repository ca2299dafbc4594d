package kstream_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/upgrade"
)

// wordCounts is the topology of an application: version 1 counts into "counts", version 2
// renames the store.
func wordCounts(version int) *kstream.Builder {
	b := kstream.NewBuilder()
	words := kstream.Stream(b, "words", serde.String(), serde.String())
	store := "counts"
	if version == 2 {
		store = "word-counts"
	}
	kstream.Count(words.GroupByKey(), store).ToStream().To("word-counts", nil, nil)
	return b
}

// Save the fingerprint of the version you deploy (from its main, or a test run in CI), and
// check the next version against it before deploying: here in Go, or with
// "kstream upgrade-check v1.json v2.json", whose exit status tells CI the verdict.
func ExampleTopology_Fingerprint() {
	dir, err := os.MkdirTemp("", "fingerprints")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	v1, err := wordCounts(1).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	f := v1.Fingerprint()
	f.ApplicationID = "word-count" // optional: the check then notices a changed id
	path := filepath.Join(dir, "v1.json")
	if err := f.WriteFile(path); err != nil {
		fmt.Println(err)
		return
	}

	// Later, for version 2:
	old, err := upgrade.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	v2, err := wordCounts(2).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	next := v2.Fingerprint()
	next.ApplicationID = "word-count"
	report := upgrade.Check(old, next)
	fmt.Println(report.Verdict)
	for _, finding := range report.Findings {
		fmt.Println(finding.Subject)
	}
	// Output:
	// reset
	// store "counts"
}
