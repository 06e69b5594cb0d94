package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// kafka2pg check takes run's flags and config, checks them against the
// broker and the database, and prints the DDL run would execute. It writes
// nothing: Kafka is asked for metadata only (no group, no topic creation),
// and Postgres is read in one READ ONLY transaction that is rolled back.
// The migration history is read with migrations.ReadState, which writes
// nothing.

// checkTimeout bounds each side of the check.
const checkTimeout = 30 * time.Second

func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := loadRunOptions("check", checkHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	r := &checkReport{w: stdout}
	for _, n := range o.oldNames {
		r.line("note", "%s", n)
	}
	set, n := checkSinks(ctx, r, o)
	if n > 0 {
		r.line("ok", "schema registry: the subjects of %d avro/protobuf sink(s) fold into tables", n)
	}
	r.line("ok", "configuration: %d sink(s), group %q", len(set.Fixed), o.cfg.Kafka.Group)
	checkKafka(ctx, r, o)
	checkPostgres(ctx, r, o, set)
	if r.failed > 0 {
		fmt.Fprintf(stdout, "\ncheck FAILED: %d problem(s); run would not start or would not write as configured\n", r.failed)
		return exitError
	}
	if r.ddl > 0 {
		fmt.Fprintf(stdout, "\ncheck passed: run would execute the %d statement(s) above before consuming\n", r.ddl)
	} else {
		fmt.Fprintln(stdout, "\ncheck passed: run would execute no DDL")
	}
	return exitOK
}

// checkReport prints one line per finding and counts failures and planned
// statements.
type checkReport struct {
	w      io.Writer
	failed int
	ddl    int
}

// line prints a finding; status is ok, note, warn or FAIL.
func (r *checkReport) line(status, format string, args ...any) {
	if status == "FAIL" {
		r.failed++
	}
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(r.w, "%-4s  %s%s\n", status, line, flagHint(line))
}

// statements prints planned DDL, indented, each ending with a semicolon.
func (r *checkReport) statements(stmts []string) {
	r.ddl += len(stmts)
	for _, s := range stmts {
		for _, l := range strings.Split(s+";", "\n") {
			fmt.Fprintf(r.w, "        %s\n", l)
		}
	}
}

// checkKafka connects as run does and lists the sinks' topics.
func checkKafka(ctx context.Context, r *checkReport, o *runOptions) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	brokers := strings.Join(o.cfg.Kafka.Brokers, ",")
	if err := o.cfg.KafkaSecurity.CheckBrokers(ctx, o.cfg.Kafka.Brokers, checkTimeout/2); err != nil {
		r.line("FAIL", "kafka %s: %v", brokers, err)
		return
	}
	opts, err := o.cfg.KafkaSecurity.Options()
	if err != nil {
		r.line("FAIL", "kafka %s: %v", brokers, err)
		return
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(o.cfg.Kafka.Brokers...), kgo.ClientID(o.cfg.Kafka.ClientID))...)
	if err != nil {
		r.line("FAIL", "kafka %s: create client: %v", brokers, err)
		return
	}
	defer cl.Close()
	topics := slices.Sorted(slices.Values(o.cfg.Kafka.Topics))
	if o.cfg.Kafka.TopicsAreRegex {
		all, err := kadm.NewClient(cl).ListTopics(ctx)
		if err != nil {
			r.line("FAIL", "kafka %s: list topics: %v", brokers, err)
			return
		}
		r.line("ok", "kafka %s: connected", brokers)
		for _, pattern := range topics {
			re := regexp.MustCompile(pattern)
			var matched []string
			for _, name := range all.Names() {
				if re.MatchString(name) {
					matched = append(matched, name)
				}
			}
			r.line("ok", "subscription %s matches %d topic(s) now %v; tables of topic_regex sinks are prepared when a matching topic is first consumed", pattern, len(matched), matched)
		}
		return
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		r.line("FAIL", "kafka %s: list topics: %v", brokers, err)
		return
	}
	r.line("ok", "kafka %s: connected", brokers)
	for _, t := range topics {
		td, ok := details[t]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			r.line("FAIL", "topic %q does not exist: create it, or fix the sink's topic", t)
		case td.Err != nil:
			r.line("FAIL", "topic %q: %v", t, td.Err)
		default:
			r.line("ok", "topic %q: %d partition(s)", t, len(td.Partitions))
		}
	}
}

// checkPostgres reads, in one READ ONLY transaction, the migration state and
// each sink's table, and prints what run would do to them.
func checkPostgres(ctx context.Context, r *checkReport, o *runOptions, set sinks.Set) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cc, err := pgx.ParseConfig(o.cfg.PostgresURL)
	if err != nil {
		r.line("FAIL", "postgres: --pg-url: %v", redact.Err(err))
		return
	}
	if err := bridge.ConfigureSession(&cc.Config, "kafka2pg-check", o.writerConfig().StatementTimeout()); err != nil {
		r.line("FAIL", "postgres: --pg-url: %v", err)
		return
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		r.line("FAIL", "postgres: connect: %v", redact.Err(err))
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	warn, refuse, err := bridge.EncodingProblems(ctx, conn, o.cfg.Kafka.Group, set)
	switch enc := conn.PgConn().ParameterStatus("server_encoding"); {
	case refuse != nil:
		r.line("FAIL", "postgres: %s", cliMessage(refuse))
	case err != nil:
		r.line("FAIL", "postgres: check the database's encoding: %v", redact.Err(err))
		return
	case warn != "":
		r.line("warn", "postgres: %s", warn)
	default:
		r.line("ok", "postgres: the database's encoding, %s, holds the group's and the tables' names", enc)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		r.line("FAIL", "postgres: begin a read-only transaction: %v", redact.Err(err))
		return
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // read only: nothing to keep
	r.line("ok", "postgres: connected (read only)")
	if err := checkMigrations(ctx, r, tx, !o.cfg.SkipMigrations); err != nil {
		r.line("FAIL", "postgres: %v", redact.Err(err))
		return
	}
	fixed := set.Fixed
	for _, topic := range slices.Sorted(maps.Keys(fixed)) {
		if fixed[topic].Changes != nil {
			r.line("note", "table %s for topic %q: created, and evolved, from the schema of the events as they come", fixed[topic].Table.QualifiedName(), topic)
			continue
		}
		if err := checkSinkTable(ctx, r, tx, topic, fixed[topic], !o.cfg.SkipCreateTables); err != nil {
			r.line("FAIL", "table %s for topic %q: %v", fixed[topic].Table.QualifiedName(), topic, redact.Err(err))
		}
	}
}

// checkMigrations reads the migration history (migrations.ReadState)
// without creating or moving it.
func checkMigrations(ctx context.Context, r *checkReport, tx pgx.Tx, migrate bool) error {
	state, err := migrations.ReadState(ctx, tx)
	if err != nil {
		return fmt.Errorf("read the kafka2pg schema version: %w", err)
	}
	version, dirty, applied := state.Version, state.Dirty, state.Applied
	if state.Legacy {
		r.line("note", "kafka2pg schema: the migration history is in %s, where earlier releases kept it; run (with --migrate) or kafka2pg migrate up moves it to %s",
			state.Table, pgx.Identifier{migrations.Schema, migrations.HistoryTable}.Sanitize())
	}
	switch {
	case applied && dirty:
		r.line("FAIL", "kafka2pg schema: version %d is DIRTY (a migration failed half-way): fix it by hand, then force the version", version)
	case applied && version > migrations.Latest:
		r.line("FAIL", "kafka2pg schema: version %d is newer than this binary knows (%d): upgrade kafka2pg", version, migrations.Latest)
	case applied && version == migrations.Latest:
		r.line("ok", "kafka2pg schema: version %d", version)
	case !migrate:
		r.line("FAIL", "kafka2pg schema: at version %d, not %d, and --migrate=false is set: run kafka2pg migrate up first", version, migrations.Latest)
	case applied:
		r.line("note", "kafka2pg schema: version %d; run will migrate it to %d", version, migrations.Latest)
	default:
		r.line("note", "kafka2pg schema: not installed; run will install it (version %d)", migrations.Latest)
	}
	return nil
}

// checkSinkTable mirrors ingest's EnsureTables without running anything:
// a missing table is created (or an error), an existing one is evolved (or
// its missing columns are errors), and an upsert table needs a unique index
// on its key. Beyond what run checks at start, it fails on what would make
// rows fail once they come (fitTable): a NOT NULL column the sink does not
// write, a column too narrow for the mapping's values.
func checkSinkTable(ctx context.Context, r *checkReport, tx pgx.Tx, topic string, sink ingest.Sink, createTables bool) error {
	t := sink.Table
	name := t.QualifiedName()
	have, err := readCatalogColumns(ctx, tx, name)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		if !createTables || sink.NoCreate {
			r.line("FAIL", "table %s for topic %q does not exist and creating it is off: create it, or turn on create (--create-tables, or create: true in the sink)", name, topic)
			return nil
		}
		plan := schema.PlanCreate(t)
		if t.Schema != "" {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", pgx.Identifier{t.Schema}.Sanitize()).Scan(&exists); err != nil {
				return fmt.Errorf("look up schema %s: %w", pgx.Identifier{t.Schema}.Sanitize(), err)
			}
			if exists { // run skips it too
				plan = slices.DeleteFunc(plan, func(s string) bool { return strings.HasPrefix(s, "CREATE SCHEMA") })
			}
		}
		r.line("ok", "table %s for topic %q does not exist; run will create it:", name, topic)
		r.statements(plan)
		return nil
	}
	fit := fitTable(sink, have, typedName(t.Name))
	for _, p := range fit.problems {
		r.line("FAIL", "table %s for topic %q: %s", name, topic, p)
	}
	switch {
	case len(fit.problems) > 0:
	case len(fit.plan) == 0:
		r.line("ok", "table %s for topic %q exists with the columns the mapping writes", name, topic)
	case sink.Evolve:
		r.line("ok", "table %s for topic %q exists; run will evolve it (evolve: true):", name, topic)
		r.statements(fit.plan)
	default:
		if len(fit.missing) > 0 {
			r.line("FAIL", "table %s for topic %q lacks column(s) %s that kafka2pg writes: add them, or set evolve: true in the sink", name, topic, strings.Join(fit.missing, ", "))
		}
		if len(fit.narrow) > 0 {
			r.line("FAIL", "table %s for topic %q: column(s) %s cannot hold every value the mapping writes (their type is narrower), so such records would become dead letters: set evolve: true in the sink (run widens them), or alter them as below", name, topic, strings.Join(fit.narrow, ", "))
		}
		if len(fit.nullable) > 0 {
			r.line("warn", "table %s for topic %q: column(s) %s are NOT NULL and the mapping may leave them null: such records become dead letters (evolve: true would drop NOT NULL)", name, topic, strings.Join(fit.nullable, ", "))
		}
		for _, s := range fit.plan {
			fmt.Fprintf(r.w, "        -- %s\n", strings.ReplaceAll(s, "\n", "\n        -- "))
		}
	}
	if sink.Upsert != nil {
		ok, err := hasUniqueKey(ctx, tx, t, sink.Upsert.Key)
		if err != nil {
			return err
		}
		if !ok {
			r.line("FAIL", "table %s for topic %q has no unique index on the upsert key (%s): create one, e.g. CREATE UNIQUE INDEX ON %s (%s)",
				name, topic, strings.Join(sink.Upsert.Key, ", "), name, schema.QuoteIdentList(sink.Upsert.Key))
		} else {
			r.line("ok", "table %s for topic %q has a unique index on the upsert key (%s)", name, topic, strings.Join(sink.Upsert.Key, ", "))
		}
	}
	return nil
}

// hasUniqueKey is ingest's checkUniqueKey query: a unique, non-partial
// index (or primary key) on exactly the key columns.
func hasUniqueKey(ctx context.Context, tx pgx.Tx, t schema.Table, key []string) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, ingest.UniqueKeySQL, t.QualifiedName(), key).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check the upsert key: %w", err)
	}
	return ok, nil
}

// checkSinks builds the sinks, reading the schema registry for those of
// formats avro, protobuf and json_schema (their table is the fold of the
// subject's versions), and reports those it cannot build. It returns the
// set and how many of the registry's sinks it built.
func checkSinks(ctx context.Context, r *checkReport, o *runOptions) (sinks.Set, int) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	set, err := o.buildSinks(ctx)
	if err != nil {
		r.line("FAIL", "schema registry: %v", redact.Err(err))
	}
	n := 0
	for _, s := range o.sinks {
		if _, ok := set.Fixed[s.Topic]; ok && s.NeedsRegistry() {
			n++
		}
	}
	return set, n
}
