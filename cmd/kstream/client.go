package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// requestTimeout bounds each broker request of the admin commands (lag, reset, dlq).
const requestTimeout = 30 * time.Second

// newClient returns a client of the comma-separated seed brokers.
func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("-brokers: no broker given")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("kstream-cli")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", brokers, err)
	}
	return cl, nil
}

// newAdmin returns an admin client of the brokers; close the kgo client when done. Its
// metadata (kadm caches it for MetadataMinAge, 5s by default) is at most 100ms old, so
// that reset sees its topic deletions.
func newAdmin(brokers string) (*kgo.Client, *kadm.Client, error) {
	cl, err := newClient(brokers, kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(requestTimeout / time.Millisecond))
	return cl, adm, nil
}

// withTimeout returns ctx bounded by requestTimeout.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseFlags parses args into fs, whose usage says what the command does. It returns
// (true, nil) when the usage was asked for (-h), and errUsage on a bad command line.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kstream %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return false, errUsage
	}
	return false, nil
}

// usageError prints msg and the command's usage and returns errUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "kstream %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return errUsage
}
