// Command kstream is the kstream command-line tool.
//
// Usage:
//
//	kstream <command> [flags]
//
// Commands:
//
//	dev         run a local single-node Kafka-protocol broker for development
//	describe    print a running application's topology and live assignment (from its ops handler)
//	lag         print an application's lag per task and partition (from the broker)
//	reset       reset an application to reprocess its input, as Kafka's StreamsResetter
//	dlq replay  send dead-letter records back to the topic they failed from
//	upgrade-check  say whether a new topology can be rolled out over the running one's state
//	help        show help for kstream or for a command
//
// Run "kstream help <command>" for a command's flags and what it does exactly.
//
// kstream lag -brokers host:port -app <application.id> [-wide|-json] prints, per input
// partition, the group's committed offset, the end offset and the lag, with the task
// ("<sub-topology>_<partition>") and the member that owns it, in a table that fits in 100
// columns (-wide: every column in full).
//
// kstream reset -brokers host:port -app <application.id> -input-topics a,b
// [-to-earliest|-to-latest|-to-offset N|-to-datetime T|-by-duration D|-shift-by N]
// [-intermediate-topics c] [-state-dir DIR] [-dry-run] refuses while the group has
// members, commits the input topics' new offsets, deletes the application's internal
// topics and, with -state-dir, its local state.
//
// kstream dlq replay -brokers host:port -topic <dead-letter topic> [-to topic] [-kind k]
// [-source-topic t] [-partition p] [-from-offset n] [-to-offset n] [-since t] [-limit n]
// [-dry-run] sends the selected dead-letter records back, without their error headers.
//
// kstream upgrade-check [-json] old.json new.json compares two topology fingerprints
// (Topology.Fingerprint) and prints the verdict with a reason per difference; its exit
// status is 0 for a rolling upgrade, 3 to stop every instance first, 4 for a reset, 5 for
// a new application id, 1 for files it cannot read.
//
// kstream describe -url http://host:port/<ops prefix> prints what GET <url>/api/describe
// of the application's ops handler answers: the topology and every instance's tasks.
//
// kstream dev runs the embedded broker of package
// github.com/kstream-go/kstream/embedded as a standalone process that any
// Kafka client (kcat, franz-go, sarama, the Java client, ...) can use:
//
//	kstream dev [-addr 127.0.0.1:9092] [-data DIR] [-partitions 1] [-auto-create=true] [-log-level warn] [-registry 127.0.0.1:8081]
//
// It keeps its data in the -data directory, by default kstream/dev-<port> in the user's
// cache directory (os.UserCacheDir, so ~/.cache/kstream/dev-9092 on Linux), and prints it;
// -data "" keeps it in memory. It serves a Schema Registry API (in memory) on -registry
// (-registry "" serves none), creates topics on first use unless -auto-create=false, and
// stops cleanly on SIGINT or SIGTERM; a second signal while it is saving its state kills
// it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kstream-go/kstream/embedded"
)

// errUsage reports a command line that could not be understood; the usage
// text has already been printed.
var errUsage = errors.New("usage error")

const usage = `Usage: kstream <command> [flags]

Commands:
  dev         run a local single-node Kafka-protocol broker for development
  describe    print a running application's topology and live assignment (from its ops handler)
  lag         print an application's lag per task and partition (from the broker)
  reset       reset an application to reprocess its input, as Kafka's StreamsResetter
  dlq replay  send dead-letter records back to the topic they failed from
  upgrade-check  say whether a new topology can be rolled out over the running one's state
  help        show help for kstream or for a command

Run 'kstream help <command>' or 'kstream <command> -h' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second one terminates a shutdown that takes too long.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if status := exitStatus(err, os.Stderr); status != 0 {
		os.Exit(status)
	}
}

// exitStatus returns the exit status of a command that returned err, and prints err to
// stderr when it is a failure to report: 0 for nil, 2 for a usage error, the status an
// exitError carries (kstream upgrade-check's verdicts), 1 for other errors.
func exitStatus(err error, stderr io.Writer) int {
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.status
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "kstream: %v\n", err)
		return 1
	}
}

// run runs the kstream command line args (without the program name) until
// the command finishes or ctx is done. Normal output goes to stdout;
// diagnostics, usage and logs go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "dev":
		return runDev(ctx, rest, stdout, stderr)
	case "describe":
		return runDescribe(ctx, rest, stdout, stderr)
	case "lag":
		return runLag(ctx, rest, stdout, stderr)
	case "reset":
		return runReset(ctx, rest, stdout, stderr)
	case "dlq":
		return runDLQ(ctx, rest, stdout, stderr)
	case "upgrade-check":
		return runUpgradeCheck(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "kstream: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}

// runHelp prints the general usage, or a command's usage when named.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "dev":
		// Usage of a flag set goes to its output; send it to stdout, since
		// it was asked for.
		return runDev(ctx, []string{"-h"}, stdout, stdout)
	case "describe":
		return runDescribe(ctx, []string{"-h"}, stdout, stdout)
	case "lag":
		return runLag(ctx, []string{"-h"}, stdout, stdout)
	case "reset":
		return runReset(ctx, []string{"-h"}, stdout, stdout)
	case "dlq":
		return runDLQReplay(ctx, []string{"-h"}, stdout, stdout)
	case "upgrade-check":
		return runUpgradeCheck(ctx, []string{"-h"}, stdout, stdout)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "kstream help: unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

// runDev implements "kstream dev".
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9092", "`host:port` to listen on; the host must be 127.0.0.1 or localhost, port 0 picks a free port")
	dataDir := fs.String("data", "", "`directory` keeping topics, records and committed offsets across restarts; empty keeps everything in memory (default "+devDataDirHelp()+")")
	partitions := fs.Int("partitions", embedded.DefaultPartitions, "partition count of auto-created topics")
	autoCreate := fs.Bool("auto-create", true, "create topics when a client first uses them")
	logLevel := fs.String("log-level", "warn", "broker log level on stderr: none, error, warn, info or debug")
	registry := fs.String("registry", "127.0.0.1:8081", "`host:port` of the Schema Registry API to serve (in memory), for the Avro, Protobuf and JSON Schema serdes; the host must be 127.0.0.1 or localhost, port 0 picks a free port; empty serves none")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: kstream dev [flags]

Runs a single-node Kafka-protocol broker for local development, usable by
kcat or any Kafka client, until interrupted (SIGINT or SIGTERM).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kstream dev: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return errUsage
	}

	port, err := parseLoopbackAddr(*addr)
	if err != nil {
		return fmt.Errorf("dev: -addr: %w", err)
	}
	dataSet := false
	fs.Visit(func(f *flag.Flag) { dataSet = dataSet || f.Name == "data" })
	if !dataSet {
		*dataDir = devDataDir(port)
	}
	level, err := parseLogLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("dev: -log-level: %w", err)
	}

	opts := []embedded.Option{
		embedded.Port(port),
		embedded.DataDir(*dataDir),
		embedded.Partitions(*partitions),
		embedded.AutoCreateTopics(*autoCreate),
	}
	if level != nil {
		opts = append(opts, embedded.Logger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *level}))))
	}
	if *registry != "" {
		rport, err := parseLoopbackAddr(*registry)
		if err != nil {
			return fmt.Errorf("dev: -registry: %w", err)
		}
		opts = append(opts, embedded.SchemaRegistry(rport))
	}
	broker, err := embedded.Start(opts...)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}

	data := *dataDir
	if data == "" {
		data = "in memory"
	}
	fmt.Fprintf(stdout, "kstream dev broker listening on %s (data: %s)\n", broker.Addr(), data)
	if url := broker.RegistryURL(); url != "" {
		fmt.Fprintf(stdout, "kstream dev schema registry at %s (in memory)\n", url)
	}

	<-ctx.Done()
	fmt.Fprintln(stderr, "kstream dev: shutting down")
	if err := broker.Close(); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	return nil
}

// devDataDir is the data directory of kstream dev without -data: "kstream/dev-<port>" in
// the user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux,
// ~/Library/Caches on macOS, %LocalAppData% on Windows), else in the OS temp directory. It
// is outside the current directory, so that a checkout gets no data files, and survives
// reboots (a temp directory may not); the port keeps two dev brokers apart.
func devDataDir(port int) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "kstream", "dev-"+strconv.Itoa(port))
}

// devDataDirHelp describes devDataDir's choice for the flag's help.
func devDataDirHelp() string {
	return filepath.Join("<user cache dir>", "kstream", "dev-<port>") + ", here " + devDataDir(9092) + " for port 9092"
}

// parseLoopbackAddr returns the port of a host:port whose host is a loopback
// name the embedded broker can listen on: it always listens on, and
// advertises, 127.0.0.1.
func parseLoopbackAddr(addr string) (int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	switch host {
	case "", "127.0.0.1", "localhost":
	default:
		return 0, fmt.Errorf("host %q: the dev broker listens on 127.0.0.1 only", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("invalid port %q", portStr)
	}
	return port, nil
}

// parseLogLevel maps a -log-level value to a slog level; nil means none.
func parseLogLevel(s string) (*slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "none", "off", "":
		return nil, nil
	case "error":
		l = slog.LevelError
	case "warn", "warning":
		l = slog.LevelWarn
	case "info":
		l = slog.LevelInfo
	case "debug":
		l = slog.LevelDebug
	default:
		return nil, fmt.Errorf("unknown level %q (want none, error, warn, info or debug)", s)
	}
	return &l, nil
}
