package migrations

import (
	"context"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// UpAsEarlierReleases migrates to version the way releases before the move
// did: golang-migrate's history in LegacyHistoryTable, in the connection's
// current schema.
func UpAsEarlierReleases(ctx context.Context, pgURL string, version uint) error {
	cc, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: LegacyHistoryTable})
	if err != nil {
		return fmt.Errorf("legacy layout: %w", err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return err
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Migrate(version)
}

// Steps runs n migrations up (n > 0) or down (n < 0) from the applied
// version; down leaves the history in place (run drops it after a full
// "down" only).
func Steps(ctx context.Context, pgURL string, n int) error {
	op := "steps down"
	if n > 0 {
		op = "up" // places the history on a fresh database
	}
	return run(ctx, pgURL, op, func(m *migrate.Migrate) error { return m.Steps(n) })
}
