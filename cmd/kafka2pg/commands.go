package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/demo"
)

// The commands that take flags, each with its help and a function that
// defines its flags: --help, docs/CONFIGURATION.md (make docs) and the
// tests of both read this one table.

// command is a command that takes flags.
type command struct {
	name string // as typed after kafka2pg: "offsets reset"
	help *commandHelp
	// define adds the command's flags to fs, bound to throwaway targets,
	// for the help and the reference; the command itself binds the same
	// definitions to its options.
	define func(fs *pflag.FlagSet)
}

// flagSet is the command's flags, old spellings included.
func (c command) flagSet() *pflag.FlagSet {
	fs := newFlagSet(c.name)
	c.define(fs)
	addFlagAliases(fs)
	return fs
}

// commands lists every command with flags, in the order of the usage.
func commands() []command {
	return []command{
		{name: "run", help: runHelp, define: func(fs *pflag.FlagSet) { defineRunFlags(fs, &runOptions{}) }},
		{name: "check", help: checkHelp, define: func(fs *pflag.FlagSet) { defineRunFlags(fs, &runOptions{}) }},
		{name: "infer", help: inferHelp, define: func(fs *pflag.FlagSet) { defineInferFlags(fs, &inferOptions{}) }},
		{name: "migrate", help: migrateHelp, define: func(fs *pflag.FlagSet) { defineMigrateFlags(fs, &migrateFlags{}) }},
		{name: "status", help: statusHelp("status"), define: func(fs *pflag.FlagSet) { defineOffsetsFlags(fs, &offsetsFlags{}) }},
		{name: "offsets show", help: statusHelp("offsets show"), define: func(fs *pflag.FlagSet) { defineOffsetsFlags(fs, &offsetsFlags{}) }},
		{name: "offsets reset", help: resetHelp, define: func(fs *pflag.FlagSet) {
			defineRunFlags(fs, &runOptions{})
			defineResetFlags(fs, &resetFlags{})
		}},
		{name: "dead-letters list", help: deadLettersListHelp, define: func(fs *pflag.FlagSet) { defineDeadLettersFlags(fs, &deadLettersFlags{}) }},
		{name: "dead-letters replay", help: deadLettersReplayHelp, define: func(fs *pflag.FlagSet) {
			defineRunFlags(fs, &runOptions{})
			defineReplayFlags(fs, &replayFlags{})
		}},
		{name: "demo", help: demoHelp, define: func(fs *pflag.FlagSet) { defineDemoFlags(fs, &demo.Config{}) }},
	}
}

// newFlagSet is an empty FlagSet of a command: it returns errors rather
// than printing them, and keeps the flags in their order of definition.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// databaseURLEnv is the variable that sets --pg-url after KAFKA2PG_PG_URL.
var databaseURLEnv = map[string][]string{"pg-url": {"DATABASE_URL"}}

// parseFlags adds the old spellings to fs, parses args and applies the
// environment. --help prints help to stdout; an error is printed to stderr
// naming the command. Unless ok, the command returns code.
func parseFlags(name string, help *commandHelp, fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	addFlagAliases(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			help.print(stdout, fs)
			return exitOK, false
		}
		fmt.Fprintf(stderr, "kafka2pg %s: %v (see 'kafka2pg %s --help')\n", name, err, name)
		return exitUsage, false
	}
	if err := applyEnv(fs, databaseURLEnv); err != nil {
		fmt.Fprintf(stderr, "kafka2pg %s: %v\n", name, err)
		return exitUsage, false
	}
	return exitOK, true
}

// The sections every command with these flags shares.
var (
	kafkaSecuritySection = helpSection{"Kafka security", []string{
		"kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file", "kafka-tls-key-file", "kafka-tls-server-name",
		"kafka-tls-min-version", "kafka-sasl-mechanism", "kafka-sasl-user", "kafka-sasl-password",
		"kafka-sasl-password-file", "kafka-sasl-token-file"}}
	registrySection = helpSection{"Schema Registry", []string{
		"schema-registry-url", "schema-registry-user", "schema-registry-password", "schema-registry-password-file",
		"schema-registry-tls-ca-file", "schema-registry-tls-cert-file", "schema-registry-tls-key-file"}}
	pgURLSection = helpSection{"Postgres", []string{"pg-url", "pg-url-file"}}
)

// runSections are the flags of run and check.
var runSections = []helpSection{
	{"Kafka", []string{
		"kafka-brokers", "kafka-group", "topic", "kafka-start", "kafka-client-id", "kafka-instance-id",
		"kafka-group-protocol", "kafka-balancers", "kafka-isolation-level", "kafka-session-timeout",
		"kafka-rebalance-timeout", "kafka-heartbeat-interval", "kafka-commit-interval", "kafka-metadata-max-age",
		"kafka-fetch-min-bytes", "kafka-fetch-max-bytes", "kafka-fetch-max-partition-bytes", "kafka-fetch-max-wait"}},
	kafkaSecuritySection,
	registrySection,
	{"Postgres", []string{
		"pg-url", "pg-url-file", "pg-max-conns", "migrate", "pg-write-timeout", "claim-lock-timeout", "fence-check-interval"}},
	{"Tables and mapping", []string{
		"config", "config-watch", "pg-schema", "pg-table", "value-format", "create-tables", "max-tables-per-sink", "notify"}},
	{"Batching and memory", []string{
		"batch-max-rows", "batch-max-bytes", "batch-max-wait", "batch-linger", "batch-wait-at-end", "table-writers",
		"max-buffered-bytes", "queue-capacity", "memory-limit"}},
	{"Errors", []string{
		"on-error", "on-data-loss", "max-record-bytes", "retry-backoff-max", "fatal-retry-timeout", "log-dead-letters"}},
	{"Operations", []string{
		"until-caught-up", "caught-up-timeout", "shutdown-timeout", "metrics-addr", "ready-stall-timeout", "pprof",
		"progress-interval", "log-format", "log-level"}},
}

const envNote = `Every flag is also an environment variable, KAFKA2PG_<FLAG> (KAFKA2PG_PG_URL), and a key of
--config; the command line wins, then the environment, then the file. Every flag in detail:
docs/CONFIGURATION.md.`

var runHelp = &commandHelp{
	usage: []string{
		"run --kafka-brokers H:P --kafka-group G --topic T --pg-url URL [flags]",
		"run --config FILE [flags]",
	},
	about: `Reads the topics and writes every record into its table, with the offsets in the same
Postgres transaction: exactly once. SIGINT or SIGTERM stops it gracefully; a second one at once.
Exit 0: stopped, or caught up (--until-caught-up); 1: failed; 2: bad flags or configuration;
3: caught up, but records of the run became dead letters or were skipped.`,
	examples: []helpExample{
		{"Each topic into a table of its own, the values as jsonb",
			"kafka2pg run --kafka-brokers localhost:9092 --kafka-group orders-pg --topic orders --pg-url postgres://app@localhost:5432/app"},
		{"Typed tables from a config file (kafka2pg infer writes one), the URL from the environment",
			"KAFKA2PG_PG_URL=postgres://app@db:5432/app kafka2pg run --config kafka2pg.yaml"},
		{"Load a backlog, then exit",
			"kafka2pg run --config kafka2pg.yaml --until-caught-up --metrics-addr ''"},
	},
	sections: runSections,
	notes:    envNote,
}

var checkHelp = &commandHelp{
	usage: []string{"check --config FILE [run's flags]"},
	about: `Checks run's configuration against Kafka and Postgres and prints the DDL run would execute;
writes nothing. It fails on what would refuse rows: a NOT NULL column the sink does not write,
a column narrower than the mapping's values, an upsert key without a unique index.
Exit 0: run would start and write; 1: a check failed; 2: bad flags or configuration.`,
	examples: []helpExample{
		{"Check a config file before the first run",
			"kafka2pg check --config kafka2pg.yaml --pg-url postgres://app@localhost:5432/app"},
		{"Infer typed columns from a topic, then check them",
			"kafka2pg infer --kafka-brokers localhost:9092 --topic orders > kafka2pg.yaml && kafka2pg check --config kafka2pg.yaml"},
	},
	sections: runSections,
	notes:    envNote,
}

var inferHelp = &commandHelp{
	usage: []string{"infer --kafka-brokers H:P --topic T [--pg-url URL] [--mode upsert --key-path P] [flags]"},
	about: `Samples a topic and prints a config file with typed columns that run --config takes as is, with
the CREATE TABLE it leads to as a comment. It is a guess from the samples: read, edit and check it.
With --pg-url it never proposes a table that exists with columns the sink cannot write (the
topic's zero-config table): it picks <table>_typed, or, with --pg-table, fails naming a free name.`,
	examples: []helpExample{
		{"A config for the topic orders, next to its zero-config table",
			"kafka2pg infer --kafka-brokers localhost:9092 --topic orders --pg-url postgres://app@localhost:5432/app > kafka2pg.yaml"},
		{"One row per order id, kept up to date",
			"kafka2pg infer --kafka-brokers localhost:9092 --topic orders --mode upsert --key-path id"},
	},
	sections: []helpSection{
		{"Sampling", []string{"kafka-brokers", "topic", "sample", "timeout"}},
		{"Output", []string{"pg-table", "mode", "key-path", "nested", "kafka-group"}},
		pgURLSection,
		kafkaSecuritySection,
		registrySection,
	},
	notes: "Every flag is also an environment variable, KAFKA2PG_<FLAG>.",
}

var migrateHelp = &commandHelp{
	usage: []string{"migrate up|down|version --pg-url URL"},
	about: `Installs or upgrades (up), removes (down, with every stored offset and dead letter) or shows
(version) the kafka2pg schema. run migrates on start unless --migrate=false.`,
	examples: []helpExample{
		{"Migrate as the database owner, before running the bridge as a less privileged role",
			"kafka2pg migrate up --pg-url postgres://owner@db:5432/app"},
	},
	sections: []helpSection{pgURLSection, {"Options", []string{"yes"}}},
	notes:    "The Postgres URL also comes from KAFKA2PG_PG_URL or DATABASE_URL.",
}

// statusHelp is the help of status and of offsets show, the same view.
func statusHelp(name string) *commandHelp {
	return &commandHelp{
		usage: []string{name + " --pg-url URL [--kafka-brokers H:P] [--kafka-group G] [--topic T] [--json]"},
		about: `Lists the partitions in kafka2pg.offsets: the offset durable in Postgres, its epoch and last commit;
with --kafka-brokers also the end offset, the lag, the group's Kafka offset and the owner, reaching
the brokers with the same TLS and SASL flags as run.`,
		examples: []helpExample{
			{"Every group's partitions with their lag",
				"kafka2pg " + name + " --pg-url postgres://app@db:5432/app --kafka-brokers kafka:9092"},
		},
		sections: []helpSection{
			pgURLSection,
			{"Kafka", []string{"kafka-brokers"}},
			kafkaSecuritySection,
			{"Filters", []string{"kafka-group", "topic", "partition"}},
			{"Output", []string{"json"}},
		},
		notes: "Every flag is also an environment variable, KAFKA2PG_<FLAG>.",
	}
}

var resetHelp = &commandHelp{
	usage: []string{
		"offsets reset --config FILE --to POSITION [--topic T] [--partition P] [--yes] [flags]",
		"offsets reset --pg-url URL --kafka-brokers H:P --kafka-group G --to POSITION [flags]",
	},
	about: `Moves the group's durable offsets in Postgres, the source of truth, and bumps each partition's
epoch: running bridges are fenced, re-claim and go on from the new offset (a partition being
written three heartbeats after its fenced write; an idle one within --fence-check-interval, then
the same). Then it mirrors the offsets to the Kafka group (Kafka accepts that only while the group
has no members). Without --yes it prints the plan and exits 0.

Moving back is exactly once: the same transaction deletes what the records read again wrote, the
rows of an append table with partition and offset columns (the zero-config table has them) and the
dead letters. Give reset run's --config (or --pg-table) so it finds the tables. Upsert tables and
tables with a unique index need no deletion; any other is refused without --allow-duplicates
(exit 1).`,
	examples: []helpExample{
		{"Show what moving the group back to offset 500 would delete",
			"kafka2pg offsets reset --config kafka2pg.yaml --to 500"},
		{"Re-ingest partition 3 of orders from the last hour, for real",
			"kafka2pg offsets reset --config kafka2pg.yaml --topic orders --partition 3 --to 2026-11-30T09:00:00Z --yes"},
	},
	sections: append([]helpSection{
		{"Reset", []string{"to", "partition", "yes", "delete-rewound-rows", "allow-duplicates"}},
	}, runSections...),
	notes: `--kafka-brokers and --kafka-group are required (from --config or flags); --topic selects topics
(default: the group's), --pg-table names the zero-config table as in run.
` + envNote,
}

const offsetsUsage = `Usage:
  kafka2pg offsets show  --pg-url URL [--kafka-brokers H:P] [--kafka-group G] [flags]
  kafka2pg offsets reset --pg-url URL --kafka-brokers H:P --kafka-group G --to POSITION [flags]

show lists the durable offsets (as kafka2pg status does); reset moves them.
Run 'kafka2pg offsets show --help' or 'kafka2pg offsets reset --help' for their flags.
`

var deadLettersListHelp = &commandHelp{
	usage: []string{"dead-letters list --pg-url URL [--kafka-group G] [--topic T] [--since TIME] [--json]"},
	about: "Lists the records that could not be written (kafka2pg.dead_letters), newest first.",
	examples: []helpExample{
		{"The dead letters of the last hour",
			"kafka2pg dead-letters list --pg-url postgres://app@db:5432/app --since 1h"},
	},
	sections: []helpSection{
		pgURLSection,
		{"Filters", []string{"kafka-group", "topic", "since", "limit"}},
		{"Output", []string{"json"}},
	},
	notes: "Every flag is also an environment variable, KAFKA2PG_<FLAG>.",
}

var deadLettersReplayHelp = &commandHelp{
	usage: []string{
		"dead-letters replay --config FILE [--pg-table T] [--kind K] [--dry-run] [flags]",
		"dead-letters replay --pg-url URL [--kafka-group G] [--topic T] [--pg-table T] [flags]",
	},
	about: `Writes each dead letter through the sink that wrote it, after you fixed the table or the
configuration: give it what you give run (--config, or --topic, --pg-table, --value-format). A
letter goes only into the table it was written for, never another; one whose table no sink writes
is kept and named (exit 1). Each batch is one transaction: rows in, letters out, so a replay killed
and run again replays each letter once; one refused again stays, with its new error.`,
	examples: []helpExample{
		{"What would go where, then replay",
			"kafka2pg dead-letters replay --config kafka2pg.yaml --dry-run && kafka2pg dead-letters replay --config kafka2pg.yaml"},
		{"Replay the check violations of the zero-config table orders",
			"kafka2pg dead-letters replay --pg-url postgres://app@db:5432/app --topic orders --kind check_violation"},
	},
	sections: append([]helpSection{
		{"Replay", []string{"dry-run", "kind", "since", "id", "limit", "batch-size"}},
	}, runSections...),
	notes: `Of run's flags, --config, --kafka-group, --topic, --pg-table, --pg-schema, --value-format and
--max-record-bytes matter here; --topic and --pg-table also select the letters.
` + envNote,
}

const deadLettersUsage = `Usage:
  kafka2pg dead-letters list   --pg-url URL [--kafka-group G] [--topic T] [--since TIME] [flags]
  kafka2pg dead-letters replay --config FILE [--pg-table T] [--kind K] [--dry-run] [flags]

list shows the records that could not be written; replay writes those that fit now, each
through the sink that wrote it, exactly once.
Run 'kafka2pg dead-letters list --help' or 'kafka2pg dead-letters replay --help' for their flags.
`

var demoHelp = &commandHelp{
	usage: []string{"demo --pg-url URL [--duration D] [--rate N]"},
	about: `Runs the whole path on an in-process Kafka: a producer of page-view events, the bridge, then
queries that show what landed, exactly once. make demo starts a throwaway Postgres for it.`,
	examples: []helpExample{
		{"Ten seconds at 50,000 events a second",
			"kafka2pg demo --pg-url postgres://postgres@localhost:5432/postgres --duration 10s --rate 50000"},
	},
	sections: []helpSection{
		{"Postgres", []string{"pg-url"}},
		{"Demo", []string{"topic", "partitions", "duration", "rate"}},
	},
}
