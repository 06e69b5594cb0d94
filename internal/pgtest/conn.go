package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Conn returns a connection to a new database (see URL), closed when the
// test ends.
func Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), URL(t))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
