package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/migrations"
)

// MigratedPool returns a new database (see URL) with the kafka2pg schema
// migrated, and a pool on it that closes when the test ends.
func MigratedPool(t testing.TB) (url string, pool *pgxpool.Pool) {
	t.Helper()
	url = URL(t)
	return url, migratedPool(t, url)
}

// MigratedPoolWithEncoding is MigratedPool on a database of the given
// server encoding (see URLWithEncoding), whose sessions talk UTF-8 to it
// (client_encoding UTF8), as kafka2pg's do.
func MigratedPoolWithEncoding(t testing.TB, encoding string) (url string, pool *pgxpool.Pool) {
	t.Helper()
	url = URLWithEncoding(t, encoding)
	return url, migratedPool(t, url)
}

func migratedPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	if err := migrations.Up(t.Context(), url); err != nil {
		t.Fatalf("pgtest: migrate %s: %v", url, err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["client_encoding"] = "UTF8"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
