package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the bridge failed at run time
	exitUsage = 2 // bad flags or configuration: nothing was written
	// exitBadRecords: run --until-caught-up caught up, but records of the
	// run became dead letters (or were skipped): a cron job must notice.
	exitBadRecords = 3
)

// version is set with -ldflags "-X main.version=..." by make build and the
// Dockerfile; main resolves "dev" further (resolveVersion).
var version = "dev"

const usage = `kafka2pg materializes Kafka topics into PostgreSQL tables, exactly once.

Usage:
  kafka2pg COMMAND [flags]

Commands:
  run           read topics into tables until stopped (or until caught up)
  check         check run's configuration against Kafka and Postgres, print the DDL; write nothing
  infer         sample a topic and print a config file with typed columns
  migrate       install, upgrade, remove or show the kafka2pg schema
  status        the durable offset, lag and owner of every partition
  offsets       show or move a group's durable offsets (moving back deletes what is read again)
  dead-letters  list the records that could not be written, or replay them through their sinks
  demo          the whole path on an in-process Kafka with sample events
  version       print the version

Run 'kafka2pg COMMAND --help' for a command's examples and flags. Every flag is also an
environment variable, KAFKA2PG_<FLAG> (KAFKA2PG_PG_URL); the Postgres URL also comes from
DATABASE_URL. Every flag in detail: docs/CONFIGURATION.md.
`

// Exit codes of a hard stop (a second signal): 128 plus the signal's
// number, as a shell reports a process a signal killed.
const (
	exitInterrupted = 130 // SIGINT
	exitTerminated  = 143 // SIGTERM
)

func main() {
	version = resolveVersion(version, debug.ReadBuildInfo)
	ctx, stop := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go hardStop(sigs, stop, os.Stderr, os.Exit)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	stop()
	os.Exit(code)
}

// hardStop is shutdown as net/http and benthos do it: the first signal
// cancels the context (graceful: stop fetching, flush within
// --shutdown-timeout, commit, leave the group); a second one exits at once
// with 130 (SIGINT) or 143 (SIGTERM). Nothing is half-written then: the
// open transactions roll back when Postgres sees their connections close.
func hardStop(sigs <-chan os.Signal, graceful context.CancelFunc, stderr io.Writer, exit func(int)) {
	first := <-sigs
	fmt.Fprintf(stderr, "kafka2pg: %v: stopping gracefully (flushing within --shutdown-timeout); send it again to stop at once\n", first)
	graceful()
	second := <-sigs
	code := exitTerminated
	if second == os.Interrupt {
		code = exitInterrupted
	}
	fmt.Fprintf(stderr, "kafka2pg: second %v: stopping now; open transactions roll back, nothing half-written is kept\n", second)
	exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], stdout, stderr)
	case "check":
		return checkCommand(ctx, args[1:], stdout, stderr)
	case "infer":
		return inferCommand(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrateCommand(ctx, args[1:], stdout, stderr)
	case "demo":
		return demoCommand(ctx, args[1:], stdout, stderr)
	case "dead-letters":
		return deadLettersCommand(ctx, args[1:], stdout, stderr)
	case "status":
		return statusCommand(ctx, "status", args[1:], stdout, stderr)
	case "offsets":
		return offsetsCommand(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "kafka2pg %s\n", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "kafka2pg: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
