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
	if err := migrations.Up(t.Context(), url); err != nil {
		t.Fatalf("pgtest: migrate %s: %v", url, err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return url, pool
}
