package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
)

func TestUpDownUpRoundTrips(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	if _, _, ok, err := migrations.Version(ctx, url); err != nil || ok {
		t.Fatalf("fresh database: version ok=%v err=%v, want nothing applied", ok, err)
	}
	for range 2 { // up is idempotent
		if err := migrations.Up(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	v, dirty, ok, err := migrations.Version(ctx, url)
	if err != nil || !ok || dirty || v != migrations.Latest {
		t.Fatalf("after up: version %d dirty=%v ok=%v err=%v, want %d", v, dirty, ok, err, migrations.Latest)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'kafka2pg' AND tablename IN ('offsets', 'dead_letters')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 2 {
		t.Fatalf("kafka2pg has %d of offsets and dead_letters, want both", tables)
	}
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatal(err)
	}
	var schemas int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = 'kafka2pg'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 {
		t.Fatal("down left the kafka2pg schema behind")
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}
