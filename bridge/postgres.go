package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/bridge/internal/pgsession"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// The sessions of tools beside a bridge (checks, offsets, dead letters)
// are the bridge's own: client_encoding UTF8, an application_name,
// statement_timeout and lock_timeout that outlast a write's deadline, and
// a transport that fails a connection which stops answering instead of
// hanging on it.

// ConfigureSession gives cc the session parameters and transport of a
// bridge's connections, with application_name app unless the URL names
// one, and statement_timeout and lock_timeout statementTimeout unless the
// URL sets them (0: those of a writer with the default configuration,
// ingest.Config.StatementTimeout). It fails when the URL sets a
// client_encoding other than UTF8.
func ConfigureSession(cc *pgconn.Config, app string, statementTimeout time.Duration) error {
	if statementTimeout == 0 {
		statementTimeout = ingest.Config{}.StatementTimeout()
	}
	return pgsession.Configure(cc, app, statementTimeout)
}

// CheckSessionURL checks the session settings a Postgres URL asks for,
// as ConfigureSession takes them (a client_encoding other than UTF8 is an
// error). An empty URL, or one that does not parse, passes: connecting
// reports it.
func CheckSessionURL(url string) error {
	cc, err := pgconn.ParseConfig(url)
	if url == "" || err != nil {
		return nil
	}
	return ConfigureSession(cc, "", 0)
}

// StatementTimeout is the statement_timeout and lock_timeout of the
// bridge's sessions: the longest write deadline its writer can give, as c
// configures it (ingest.Config.StatementTimeout, with the writer's batch
// size from Kafka.BatchMaxRows).
func (c Config) StatementTimeout() time.Duration {
	return c.withDefaults().Writer.StatementTimeout()
}

// SQLState is the SQLSTATE of the Postgres error in err's tree (42501 for
// a privilege the role lacks), or "" when none is.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// OpenPool is pgxpool.New with a bridge's sessions (ConfigureSession with
// the default timeouts).
func OpenPool(ctx context.Context, url, app string) (*pgxpool.Pool, error) {
	return pgsession.NewPool(ctx, url, app)
}

// RegisterCodecs is the AfterConnect of a pool that COPYs rows as a
// bridge does: the codecs of the values the decoders produce that pgx
// lacks or encodes slowly (numeric, timetz).
func RegisterCodecs(ctx context.Context, conn *pgx.Conn) error {
	return pgsession.RegisterCodecs(ctx, conn)
}

// EncodingProblems is the judgement Run makes at start on the database's
// encoding, for a check that runs no bridge: warn is a warning to give
// (empty: none); refuse says why Run would not start (nil: it would): a
// name of the group (a *stream.FieldError on reader.Config.Group) or of a
// sink's table that the encoding cannot hold. err is the question
// failing, connection trouble included.
func EncodingProblems(ctx context.Context, conn *pgx.Conn, group string, set sinks.Set) (warn string, refuse, err error) {
	warn, err = pgsession.EncodingProblems(ctx, conn, group, set)
	if _, ok := errors.AsType[*pgsession.NameError](err); ok {
		return warn, err, nil
	}
	return warn, nil, err
}
