package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// checkTimeout bounds each side of a check.
const checkTimeout = 30 * time.Second

// Level is how much a Finding matters.
type Level int

const (
	OK   Level = iota // as it should be
	Note              // worth knowing; run copes
	Warn              // run starts, but some records may fail
	Fail              // run would not start, or would not write as configured
)

// String is the level as `kafka2pg check` prints it: ok, note, warn, FAIL.
func (l Level) String() string {
	switch l {
	case Note:
		return "note"
	case Warn:
		return "warn"
	case Fail:
		return "FAIL"
	}
	return "ok"
}

// Finding is one thing a check found.
type Finding struct {
	Level Level
	// Subject is what it is about: "kafka", "postgres", "kafka2pg schema",
	// a topic's name, or a table's quoted, qualified name.
	Subject string
	// Message is the whole sentence, subject included.
	Message string
	// DDL are the statements run would execute for it, in order.
	DDL []string
	// Fix are statements that would fix it, which run does not execute.
	Fix []string
	// Err is the error the finding reports, when it reports one whose
	// fields a caller may render its own way (a *stream.FieldError names
	// the config field at fault); Message says the same with Subject's
	// prefix.
	Err error
}

// Failed counts the findings of level Fail.
func Failed(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Level == Fail {
			n++
		}
	}
	return n
}

func finding(l Level, subject, format string, args ...any) Finding {
	return Finding{Level: l, Subject: subject, Message: fmt.Sprintf(format, args...)}
}

// CheckKafka connects to k's brokers as the reader does and looks up the
// topics (with regex, the patterns they match now). It asks for metadata
// only: no group, no topic creation.
func CheckKafka(ctx context.Context, k Kafka, topics []string, regex bool) []Finding {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	brokers := strings.Join(k.Brokers, ",")
	fail := func(format string, args ...any) []Finding {
		return []Finding{finding(Fail, "kafka", "kafka %s: "+format, append([]any{brokers}, args...)...)}
	}
	if err := k.Security.CheckBrokers(ctx, k.Brokers, checkTimeout/2); err != nil {
		return fail("%v", err)
	}
	if _, err := k.Options(); err != nil {
		return fail("%v", err)
	}
	adm, closeAdm, err := k.Client()
	if err != nil {
		return fail("create client: %v", err)
	}
	defer closeAdm()
	topics = slices.Sorted(slices.Values(topics))
	connected := finding(OK, "kafka", "kafka %s: connected", brokers)
	if regex {
		all, err := adm.ListTopics(ctx)
		if err != nil {
			return fail("list topics: %v", err)
		}
		out := []Finding{connected}
		for _, pattern := range topics {
			re, err := regexp.Compile(pattern)
			if err != nil {
				out = append(out, finding(Fail, pattern, "subscription %s: %v", pattern, err))
				continue
			}
			var matched []string
			for _, name := range all.Names() {
				if re.MatchString(name) {
					matched = append(matched, name)
				}
			}
			out = append(out, finding(OK, pattern, "subscription %s matches %d topic(s) now %v; tables of topic_regex sinks are prepared when a matching topic is first consumed", pattern, len(matched), matched))
		}
		return out
	}
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fail("list topics: %v", err)
	}
	out := []Finding{connected}
	for _, t := range topics {
		td, ok := details[t]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			out = append(out, finding(Fail, t, "topic %q does not exist: create it, or fix the sink's topic", t))
		case td.Err != nil:
			out = append(out, finding(Fail, t, "topic %q: %v", t, td.Err))
		default:
			out = append(out, finding(OK, t, "topic %q: %d partition(s)", t, len(td.Partitions)))
		}
	}
	return out
}

// PostgresCheck is what CheckPostgres checks the database against.
type PostgresCheck struct {
	Group string // the consumer group, whose name the database must hold
	// Migrate says run installs or migrates the kafka2pg schema;
	// CreateTables that it creates missing tables (ingest.Writer's
	// EnsureTables create).
	Migrate, CreateTables bool
}

// CheckPostgres reads, in one READ ONLY transaction that it rolls back,
// the database's encoding, the migration state (migrations.ReadState) and
// each of set's fixed sinks' table (ingest.PlanTable, the plan EnsureTables
// applies), and says what run would do to them: the DDL of each finding
// is what run would execute.
func CheckPostgres(ctx context.Context, pool *pgxpool.Pool, pc PostgresCheck, set sinks.Set) []Finding {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	fail := func(format string, args ...any) Finding {
		return finding(Fail, "postgres", "postgres: "+format, args...)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return []Finding{fail("connect: %v", redact.Err(err))}
	}
	defer c.Release()
	conn := c.Conn()
	var out []Finding
	warn, refuse, err := bridge.EncodingProblems(ctx, conn, pc.Group, set)
	switch enc := conn.PgConn().ParameterStatus("server_encoding"); {
	case refuse != nil:
		f := fail("%v", refuse)
		f.Err = refuse
		out = append(out, f)
	case err != nil:
		return append(out, fail("check the database's encoding: %v", redact.Err(err)))
	case warn != "":
		out = append(out, finding(Warn, "postgres", "postgres: %s", warn))
	default:
		out = append(out, finding(OK, "postgres", "postgres: the database's encoding, %s, holds the group's and the tables' names", enc))
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return append(out, fail("begin a read-only transaction: %v", redact.Err(err)))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // read only: nothing to keep
	out = append(out, finding(OK, "postgres", "postgres: connected (read only)"))
	ms, err := checkMigrations(ctx, tx, pc.Migrate)
	if err != nil {
		return append(out, fail("%v", redact.Err(err)))
	}
	out = append(out, ms...)
	for _, topic := range slices.Sorted(maps.Keys(set.Fixed)) {
		sink := set.Fixed[topic]
		name := sink.Table.QualifiedName()
		if sink.Changes != nil {
			out = append(out, finding(Note, name, "table %s for topic %q: created, and evolved, from the schema of the events as they come", name, topic))
			continue
		}
		if sink.Boundaries != nil {
			out = append(out, finding(Note, name, "topic %q: the transaction topic of the sinks with transactions: true; its END records are staged in %s", topic, name))
			continue
		}
		if sink.Router != nil {
			out = append(out, finding(Note, name, "tables %s for topic %q: routed by content, each created (and evolved) on its first record, at most the limit of tables per sink", name, topic))
			continue
		}
		tables := []ingest.Sink{sink}
		for _, c := range sink.Children {
			// A child table is created and evolved with its parent's.
			tables = append(tables, ingest.Sink{Table: c.Table, NoCreate: sink.NoCreate, Evolve: sink.Evolve})
		}
		for _, t := range tables {
			name := t.Table.QualifiedName()
			p, err := ingest.PlanTable(ctx, tx, topic, t, pc.CreateTables)
			if err != nil {
				out = append(out, finding(Fail, name, "table %s for topic %q: %v", name, topic, redact.Err(err)))
				continue
			}
			out = append(out, tableFindings(p)...)
		}
	}
	return out
}

// checkMigrations reads the migration history (migrations.ReadState)
// without creating or moving it.
func checkMigrations(ctx context.Context, tx pgx.Tx, migrate bool) ([]Finding, error) {
	state, err := migrations.ReadState(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("read the kafka2pg schema version: %w", err)
	}
	const subject = "kafka2pg schema"
	var out []Finding
	version, dirty, applied := state.Version, state.Dirty, state.Applied
	if state.Legacy {
		out = append(out, finding(Note, subject, "kafka2pg schema: the migration history is in %s, where earlier releases kept it; run (with --migrate) or kafka2pg migrate up moves it to %s",
			state.Table, schema.QuoteIdent(migrations.Schema, migrations.HistoryTable)))
	}
	switch {
	case applied && dirty:
		out = append(out, finding(Fail, subject, "kafka2pg schema: version %d is DIRTY (a migration failed half-way): fix it by hand, then force the version", version))
	case applied && version > migrations.Latest:
		out = append(out, finding(Fail, subject, "kafka2pg schema: version %d is newer than this binary knows (%d): upgrade kafka2pg", version, migrations.Latest))
	case applied && version == migrations.Latest:
		out = append(out, finding(OK, subject, "kafka2pg schema: version %d", version))
	case !migrate:
		out = append(out, finding(Fail, subject, "kafka2pg schema: at version %d, not %d, and --migrate=false is set: run kafka2pg migrate up first", version, migrations.Latest))
	case applied:
		out = append(out, finding(Note, subject, "kafka2pg schema: version %d; run will migrate it to %d", version, migrations.Latest))
	default:
		out = append(out, finding(Note, subject, "kafka2pg schema: not installed; run will install it (version %d)", migrations.Latest))
	}
	return out, nil
}

// tableFindings reports the plan of one sink's table as EnsureTables would
// apply it: a missing table is created (or a failure), an existing one is
// evolved (or its missing columns are failures), and an upsert table needs
// a unique index on its key. Beyond what EnsureTables checks, it fails on
// what would make rows fail once they come (Fit): a NOT NULL column the
// sink does not write, a column too narrow for the mapping's values.
func tableFindings(p ingest.TablePlan) []Finding {
	sink, topic := p.Sink, p.Topic
	t := sink.Table
	name := t.QualifiedName()
	add := func(out []Finding, l Level, format string, args ...any) []Finding {
		return append(out, finding(l, name, "table %s for topic %q"+format, append([]any{name, topic}, args...)...))
	}
	var out []Finding
	if !p.Catalog.Exists() {
		if len(p.Create) == 0 {
			return add(out, Fail, " does not exist and creating it is off: create it, or turn on create (--create-tables, or create: true in the sink)")
		}
		out = add(out, OK, " does not exist; run will create it:")
		out[len(out)-1].DDL = p.Statements()
		return out
	}
	fit := Fit(sink, p.Catalog.Columns, TypedName(t.Name))
	for _, problem := range fit.Problems {
		out = add(out, Fail, ": %s", problem)
	}
	switch {
	case len(fit.Problems) > 0:
	case len(fit.Plan) == 0:
		out = add(out, OK, " exists with the columns the mapping writes")
	case sink.Evolve:
		out = add(out, OK, " exists; run will evolve it (evolve: true):")
		out[len(out)-1].DDL = fit.Plan
	default:
		n := len(out)
		if len(fit.Missing) > 0 {
			out = add(out, Fail, " lacks column(s) %s that kafka2pg writes: add them, or set evolve: true in the sink", strings.Join(fit.Missing, ", "))
		}
		if len(fit.Narrow) > 0 {
			out = add(out, Fail, ": column(s) %s cannot hold every value the mapping writes (their type is narrower), so such records would become dead letters: set evolve: true in the sink (run widens them), or alter them as below", strings.Join(fit.Narrow, ", "))
		}
		if len(fit.Nullable) > 0 {
			out = add(out, Warn, ": column(s) %s are NOT NULL and the mapping may leave them null: such records become dead letters (evolve: true would drop NOT NULL)", strings.Join(fit.Nullable, ", "))
		}
		if len(out) > n {
			out[len(out)-1].Fix = fit.Plan
		}
	}
	partErr := p.PartitionErr()
	if partErr != nil {
		out = append(out, finding(Fail, name, "%v", partErr))
	} else if len(p.Partitions) > 0 {
		out = add(out, OK, " is partitioned by %s; run will create the partitions it keeps ready that are missing:", p.Catalog.PartitionKeyDef)
		out[len(out)-1].DDL = p.Partitions
	}
	var keyErr *ingest.PartitionKeyError
	if sink.Upsert != nil && !errors.As(partErr, &keyErr) {
		key := sink.Upsert.Key
		if !p.Catalog.HasUniqueKey(key) {
			out = add(out, Fail, " has no unique index on the upsert key (%s): create one, e.g. CREATE UNIQUE INDEX ON %s (%s)",
				strings.Join(key, ", "), name, schema.QuoteIdentList(key))
		} else {
			out = add(out, OK, " has a unique index on the upsert key (%s)", strings.Join(key, ", "))
		}
	}
	return out
}
