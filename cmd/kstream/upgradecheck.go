package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kstream-go/kstream/upgrade"
)

const upgradeCheckUsage = `Usage: kstream upgrade-check [-json] old.json new.json

Compares the topology fingerprint of the running version (old.json) with the new
version's (new.json), as Topology.Fingerprint writes them, and prints the verdict and one
line per difference with its reason:

  rolling-upgrade     restart the instances one at a time (exit status 0)
  stop-all            stop every old instance, then start the new version; no reset (3)
  reset               reset the application (kstream reset), or use a new application id (4)
  new-application-id  the new version runs under another application id (5)

A file that cannot be read or is not a fingerprint exits with 1, a bad command line with 2.
-json prints the report as JSON.

Flags:
`

// Exit statuses of kstream upgrade-check by verdict.
var verdictStatus = map[upgrade.Verdict]int{
	upgrade.RollingUpgrade:   0,
	upgrade.StopAll:          3,
	upgrade.Reset:            4,
	upgrade.NewApplicationID: 5,
}

// exitError is a result that main turns into an exit status without printing an error.
type exitError struct{ status int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.status) }

// runUpgradeCheck implements "kstream upgrade-check".
func runUpgradeCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("upgrade-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), upgradeCheckUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() != 2 {
		fmt.Fprintf(stderr, "kstream upgrade-check: want two fingerprint files, old and new; got %d arguments\n", fs.NArg())
		fs.Usage()
		return errUsage
	}
	old, err := upgrade.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("upgrade-check: old: %w", err)
	}
	new, err := upgrade.ReadFile(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("upgrade-check: new: %w", err)
	}
	r := upgrade.Check(old, new)
	if *asJSON {
		out := struct {
			Verdict  string           `json:"verdict"`
			Advice   string           `json:"advice"`
			Findings []upgradeFinding `json:"findings"`
		}{Verdict: r.Verdict.String(), Advice: r.Verdict.Advice(), Findings: []upgradeFinding{}}
		for _, f := range r.Findings {
			out.Findings = append(out.Findings, upgradeFinding{f.Verdict.String(), f.Subject, f.Reason})
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("upgrade-check: %w", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprint(stdout, r)
	}
	if status := verdictStatus[r.Verdict]; status != 0 {
		return exitError{status}
	}
	return nil
}

// upgradeFinding is a finding as -json prints it, with the verdict's name.
type upgradeFinding struct {
	Verdict string `json:"verdict"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}
