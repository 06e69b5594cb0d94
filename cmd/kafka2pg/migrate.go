package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/migrations"
)

// migrateFlags are the flags of kafka2pg migrate.
type migrateFlags struct {
	pgURL, pgURLFile string
	yes              bool
}

func defineMigrateFlags(fs *pflag.FlagSet, f *migrateFlags) {
	fs.StringVar(&f.pgURL, "pg-url", "", "PostgreSQL URL (also from DATABASE_URL)")
	definePGURLFileFlag(fs, &f.pgURLFile)
	fs.BoolVar(&f.yes, "yes", false, "confirm migrate down, which drops every stored offset")
}

func migrateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("migrate")
	var f migrateFlags
	defineMigrateFlags(fs, &f)
	if code, ok := parseFlags("migrate", migrateHelp, fs, args, stdout, stderr); !ok {
		return code
	}
	pgURL, yes := &f.pgURL, &f.yes
	if err := readPGURLFile(pgURL, f.pgURLFile); err != nil {
		fmt.Fprintf(stderr, "kafka2pg migrate: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "kafka2pg migrate: give one action: up, down or version (see 'kafka2pg migrate --help')")
		return exitUsage
	}
	if *pgURL == "" {
		fmt.Fprintln(stderr, "kafka2pg migrate: --pg-url is empty: give the PostgreSQL URL (or set KAFKA2PG_PG_URL or DATABASE_URL)")
		return exitUsage
	}
	switch fs.Arg(0) {
	case "up":
		if err := migrations.Up(ctx, *pgURL); err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
			return exitError
		}
	case "down":
		if !*yes {
			fmt.Fprintln(stderr, "kafka2pg migrate down drops the kafka2pg schema with every stored offset and dead letter; run again with --yes to do it")
			return exitUsage
		}
		if err := migrations.Down(ctx, *pgURL); err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
			return exitError
		}
	case "version":
	default:
		fmt.Fprintf(stderr, "kafka2pg migrate: unknown action %q: use up, down or version\n", fs.Arg(0))
		return exitUsage
	}
	v, dirty, ok, err := migrations.Version(ctx, *pgURL)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	switch {
	case !ok:
		fmt.Fprintf(stdout, "kafka2pg schema: not installed (this binary knows version %d)\n", migrations.Latest)
	case dirty:
		fmt.Fprintf(stdout, "kafka2pg schema: version %d, DIRTY (a migration failed half-way; fix it by hand, then force the version)\n", v)
		return exitError
	default:
		fmt.Fprintf(stdout, "kafka2pg schema: version %d (this binary knows version %d)\n", v, migrations.Latest)
	}
	return exitOK
}
