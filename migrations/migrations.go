package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// Latest is the newest version this binary knows.
const Latest = 5

// Up applies every migration not yet applied to the database at pgURL,
// after moving an earlier release's history into the kafka2pg schema.
func Up(ctx context.Context, pgURL string) error {
	return run(ctx, pgURL, "up", func(m *migrate.Migrate) error { return m.Up() })
}

// Down reverts every migration: it drops the kafka2pg schema and the offsets
// in it. Callers must ask the user first.
func Down(ctx context.Context, pgURL string) error {
	return run(ctx, pgURL, "down", func(m *migrate.Migrate) error { return m.Down() })
}

// Version reports the applied version; ok is false when nothing is applied.
// It writes nothing (see ReadState).
func Version(ctx context.Context, pgURL string) (version uint, dirty, ok bool, err error) {
	conn, err := connect(ctx, pgURL, "version")
	if err != nil {
		return 0, false, false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s, err := ReadState(ctx, conn)
	if err != nil {
		return 0, false, false, fmt.Errorf("migrate version: %w", err)
	}
	return s.Version, s.Dirty, s.Applied, nil
}

func connect(ctx context.Context, pgURL, op string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: parse the Postgres URL: %w", op, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: connect to Postgres: %w", op, err)
	}
	return conn, nil
}

// run places the history (placeHistory), runs fn with golang-migrate on the
// history in the kafka2pg schema, and after a down drops what is left.
func run(ctx context.Context, pgURL, op string, fn func(*migrate.Migrate) error) error {
	conn, err := connect(ctx, pgURL, op)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	exists, err := placeHistory(ctx, conn, op == "up")
	if err != nil {
		return fmt.Errorf("migrate %s: %w", op, err)
	}
	if !exists {
		return nil // down on a database where nothing is installed
	}
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: Schema, MigrationsTable: HistoryTable})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", op, err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("migrate %s: read embedded migrations: %w", op, err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", op, err)
	}
	defer m.Close()
	// golang-migrate takes no context; stop it when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	if err := fn(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate %s: %w", op, err)
	}
	if op == "down" {
		if err := dropHistory(ctx, conn); err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
	}
	return nil
}
