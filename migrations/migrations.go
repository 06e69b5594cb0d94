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

// HistoryTable is where golang-migrate records the applied version.
const HistoryTable = "kafka2pg_schema_migrations"

// Latest is the newest version this binary knows.
const Latest = 2

// Up applies every migration not yet applied to the database at pgURL.
func Up(ctx context.Context, pgURL string) error {
	return run(ctx, pgURL, "up", func(m *migrate.Migrate) error { return m.Up() })
}

// Down reverts every migration: it drops the kafka2pg schema and the offsets
// in it. Callers must ask the user first.
func Down(ctx context.Context, pgURL string) error {
	return run(ctx, pgURL, "down", func(m *migrate.Migrate) error { return m.Down() })
}

// Version reports the applied version; ok is false when nothing is applied.
func Version(ctx context.Context, pgURL string) (version uint, dirty, ok bool, err error) {
	err = run(ctx, pgURL, "version", func(m *migrate.Migrate) error {
		v, d, err := m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			return nil
		}
		if err != nil {
			return err
		}
		version, dirty, ok = v, d, true
		return nil
	})
	return version, dirty, ok, err
}

func run(ctx context.Context, pgURL, op string, fn func(*migrate.Migrate) error) error {
	cc, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return fmt.Errorf("migrate %s: parse the Postgres URL: %w", op, err)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("migrate %s: connect to Postgres: %w", op, err)
	}
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: HistoryTable})
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
	return nil
}
