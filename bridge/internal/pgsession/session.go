// Package pgsession is how kafka2pg connects to Postgres: the session
// parameters every connection gets (client_encoding UTF8,
// application_name, statement_timeout and lock_timeout), the transport
// (connect timeout, keepalives, TCP_USER_TIMEOUT, discarding sessions that
// can no longer write), the numeric codec of the pools that COPY, and the
// start-time check that the database's encoding holds the names the bridge
// keys rows and creates tables by. The bridge uses it, and exports what
// tools beside a bridge need of it (bridge.OpenPool, ConfigureSession,
// RegisterCodecs, EncodingProblems); it has no goroutines.
package pgsession

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Params sets the session parameters of kafka2pg's connections to
// Postgres: client_encoding UTF8, and application_name app unless the URL
// names one.
//
// kafka2pg sends UTF-8: records' text is UTF-8, and pgx reads and writes
// text as UTF-8. Postgres takes client_encoding from the database's
// encoding when the client does not set it, so on a LATIN1 database "é"
// was stored as "Ã©", and a character LATIN1 lacks as the LATIN1 reading of
// its bytes. With UTF8 Postgres converts the text, a character the
// database's encoding lacks fails its row with SQLSTATE 22P05 (a dead
// letter of kind untranslatable_character), and even a SQL_ASCII database
// refuses bytes that are not UTF-8, as the unchecked jsonb rows of the
// zero-config table need (ingest.UncheckedAppender).
func Params(cc *pgconn.Config, app string) error {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if ce, ok := cc.RuntimeParams["client_encoding"]; ok && !isUTF8Name(ce) {
		return fmt.Errorf("client_encoding is %q: kafka2pg sends UTF-8 text, which Postgres converts to the database's encoding; remove client_encoding from the URL, or set it to UTF8", ce)
	}
	cc.RuntimeParams["client_encoding"] = "UTF8"
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = app
	}
	return nil
}

// Timeouts sets statement_timeout and lock_timeout, each unless
// the URL sets it (as a parameter or in options), to d: the longest
// deadline the writer gives a transaction or a claim
// (ingest.Config.StatementTimeout). A database's or role's default meant
// for interactive queries (1s, or 30s, which a large COPY may need) would
// otherwise cancel kafka2pg's statements, and a short lock_timeout fail
// every write behind a lock at once; the write deadline, which starts
// earlier, ends them first. As startup parameters they cost no round trip.
// d 0 leaves both to Postgres.
func Timeouts(cc *pgconn.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	ms := strconv.FormatInt(d.Milliseconds(), 10) // both settings count milliseconds
	for _, name := range []string{"statement_timeout", "lock_timeout"} {
		if _, ok := cc.RuntimeParams[name]; !ok && !strings.Contains(cc.RuntimeParams["options"], name) {
			cc.RuntimeParams[name] = ms
		}
	}
}

// isUTF8Name says name is how Postgres may spell UTF-8: case and
// punctuation do not count (utf8, UTF-8, Unicode).
func isUTF8Name(name string) bool {
	name = strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(name))
	return name == "utf8" || name == "unicode"
}

// NewPool is pgxpool.New with kafka2pg's session parameters (the timeouts
// of a writer with the default configuration) and transport.
func NewPool(ctx context.Context, url, app string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if err := Configure(&cfg.ConnConfig.Config, app, ingest.Config{}.StatementTimeout()); err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// CheckEncoding looks at the database's encoding once at start. On one
// that is not UTF-8 it refuses a name the encoding lacks a character of:
// the consumer group's (kafka2pg.offsets keys the offsets by it, and every
// claim would fail with SQLSTATE 22P05 and be retried), and the configured
// sinks' schema, table and column names (their DDL would fail with
// Postgres' message alone), those of pattern sinks as built for a sample
// topic (sinks.Pattern.Sample). On SQL_ASCII it warns: text is stored there as
// the UTF-8 bytes it came as, but jsonb cannot store a \u escape of a
// character beyond ASCII (Postgres fails the row with SQLSTATE 0A000, which
// the writer makes a dead letter of kind untranslatable_character). Only
// names beyond ASCII cost a round trip (ingest.Holds). Connection trouble
// is returned as it is, for the caller's retry.
func CheckEncoding(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, group string, set sinks.Set) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	warn, err := EncodingProblems(ctx, c.Conn(), group, set)
	if warn != "" {
		log.Warn(warn, "server_encoding", c.Conn().PgConn().ParameterStatus("server_encoding"))
	}
	return err
}

// EncodingProblems is CheckEncoding's judgement on conn, for run and
// check: a warning to give (empty: none), and an error when run must not
// start (a *NameError, in a *stream.FieldError when a configuration field
// holds the name) or the question failed.
func EncodingProblems(ctx context.Context, conn *pgx.Conn, group string, set sinks.Set) (warn string, err error) {
	enc := conn.PgConn().ParameterStatus("server_encoding")
	if enc == "SQL_ASCII" {
		return "the database's encoding is SQL_ASCII: text is stored as the UTF-8 it came as, but jsonb cannot store a \\u escape of a character beyond ASCII, and a record with one becomes a dead letter (untranslatable_character); a UTF8 database has neither problem", nil
	}
	for _, n := range namesToHold(group, set) {
		ok, err := ingest.Holds(ctx, conn, n.name)
		if err != nil {
			return "", err
		}
		if !ok {
			n.encoding = enc
			if n.field != "" {
				return "", &stream.FieldError{Field: n.field, Err: &n}
			}
			return "", &n
		}
	}
	return "", nil
}

// namesToHold are the names the database must be able to store: the
// group's, then each sink's (by topic, then topic_regex sinks as built for
// a sample topic) schema, table and column names.
func namesToHold(group string, set sinks.Set) []NameError {
	out := []NameError{{field: "reader.Config.Group", subject: strconv.Quote(group), of: "it", name: group,
		fix: "choose a group name %[1]s can hold, or use a UTF8 database (kafka2pg.offsets keys the offsets by the group)"}}
	for _, topic := range slices.Sorted(maps.Keys(set.Fixed)) {
		t := set.Fixed[topic].Table
		out = append(out, namesOfTable(t, fmt.Sprintf("table %s for topic %q", t.QualifiedName(), topic),
			"(ingest.Sink.Table)")...)
	}
	for _, p := range set.Patterns {
		if p.Sample.Table.Name == "" {
			continue // its columns come from the registry: no sample
		}
		out = append(out, namesOfTable(p.Sample.Table, fmt.Sprintf("the table %q of the sink of topic_regex %q", p.Table, p.Regex),
			"(the sink's table in the config; ${topic} is always ASCII)")...)
	}
	return out
}

// namesOfTable are the schema, table and column names of t, which subject
// names; where says where the table's name is set.
func namesOfTable(t schema.Table, subject, where string) []NameError {
	var out []NameError
	if t.Schema != "" {
		out = append(out, NameError{subject: "the schema of " + subject, of: "its name", name: t.Schema,
			fix: "name a schema %[1]s can hold (ingest.Sink.Table's schema), or use a UTF8 database"})
	}
	out = append(out, NameError{subject: subject, of: "its name", name: t.Name,
		fix: "name the table with characters %[1]s has " + where + ", or use a UTF8 database"})
	for _, c := range t.Columns {
		out = append(out, NameError{subject: fmt.Sprintf("column %q of %s", c.Name, subject), of: "its name", name: c.Name,
			fix: "name the column with characters %[1]s has (the sink's columns in the config), or use a UTF8 database"})
	}
	return out
}

// NameError is a name the database's encoding cannot hold.
type NameError struct {
	field    string // the configuration field that holds the name, if one does
	subject  string // what the name is named as, to begin the message
	of       string // what lacks the character: "it" (the subject), "its name"
	name     string
	encoding string
	fix      string // a format with the encoding as %[1]s
}

func (e *NameError) Error() string {
	return fmt.Sprintf("%s: the database's encoding, %s, lacks a character of %s: %s", e.subject, e.encoding, e.of, fmt.Sprintf(e.fix, e.encoding))
}
