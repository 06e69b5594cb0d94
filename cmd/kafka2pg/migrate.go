package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/migrations"
)

func migrateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pgURL := fs.String("pg-url", "", "PostgreSQL URL (env KAFKA2PG_PG_URL or DATABASE_URL)")
	var pgURLFile string
	definePGURLFileFlag(fs, &pgURLFile)
	yes := fs.Bool("yes", false, "confirm 'migrate down', which drops the kafka2pg schema and every stored offset")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kafka2pg migrate up|down|version --pg-url URL\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "kafka2pg migrate: %v (see 'kafka2pg migrate --help')\n", err)
		return exitUsage
	}
	if err := applyEnv(fs, map[string][]string{"pg-url": {"DATABASE_URL"}}); err != nil {
		fmt.Fprintf(stderr, "kafka2pg migrate: %v\n", err)
		return exitUsage
	}
	if err := readPGURLFile(pgURL, pgURLFile); err != nil {
		fmt.Fprintf(stderr, "kafka2pg migrate: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	if *pgURL == "" {
		fmt.Fprintln(stderr, "kafka2pg migrate: --pg-url is empty: give the PostgreSQL URL (or set KAFKA2PG_PG_URL or DATABASE_URL)")
		return exitUsage
	}
	switch fs.Arg(0) {
	case "up":
		if err := migrations.Up(ctx, *pgURL); err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
			return exitError
		}
	case "down":
		if !*yes {
			fmt.Fprintln(stderr, "kafka2pg migrate down drops the kafka2pg schema with every stored offset and dead letter; run again with --yes to do it")
			return exitUsage
		}
		if err := migrations.Down(ctx, *pgURL); err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
			return exitError
		}
	case "version":
	default:
		fmt.Fprintf(stderr, "kafka2pg migrate: unknown action %q: use up, down or version\n", fs.Arg(0))
		return exitUsage
	}
	v, dirty, ok, err := migrations.Version(ctx, *pgURL)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
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
