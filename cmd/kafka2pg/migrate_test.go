package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// The migrate and check commands on a database that an earlier release
// migrated (its history in public.kafka2pg_schema_migrations): check and
// version read it in place, up moves it without running a migration again,
// down removes everything.
func TestMigrateCommandOnAnEarlierReleasesInstall(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	migrate := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := dispatch(ctx, append([]string{"migrate"}, append(args, "--pg-url", url)...), &stdout, &stderr); code != exitOK {
			t.Fatalf("migrate %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	migrate("up")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The earlier releases' layout: the same golang-migrate table, in public.
	if _, err := conn.Exec(ctx, `ALTER TABLE kafka2pg.schema_migrations SET SCHEMA public;
		ALTER TABLE public.schema_migrations RENAME TO kafka2pg_schema_migrations`); err != nil {
		t.Fatal(err)
	}
	history := func() string {
		t.Helper()
		var table *string
		if err := conn.QueryRow(ctx, `SELECT coalesce(to_regclass('kafka2pg.schema_migrations'), to_regclass('public.kafka2pg_schema_migrations'))::text`).Scan(&table); err != nil {
			t.Fatal(err)
		}
		if table == nil {
			return ""
		}
		return *table
	}
	var report bytes.Buffer
	pool, err := bridge.OpenPool(ctx, url, "kafka2pg-check")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	(&checkReport{w: &report}).lines(admin.CheckPostgres(ctx, pool, admin.PostgresCheck{Migrate: true, CreateTables: true}, sinks.Set{}))
	for _, line := range []string{
		`note  kafka2pg schema: the migration history is in "public"."kafka2pg_schema_migrations", where earlier releases kept it`,
		fmt.Sprintf("ok    kafka2pg schema: version %d\n", migrations.Latest),
	} {
		if !strings.Contains(report.String(), line) {
			t.Errorf("check's report lacks %q:\n%s", line, report.String())
		}
	}
	want := fmt.Sprintf("kafka2pg schema: version %d (this binary knows version %d)", migrations.Latest, migrations.Latest)
	if out := migrate("version"); !strings.Contains(out, want) || history() != "kafka2pg_schema_migrations" {
		t.Fatalf("migrate version printed %q and left the history in %q; want %q, in place", out, history(), want)
	}
	if out := migrate("up"); !strings.Contains(out, want) || history() != "kafka2pg.schema_migrations" {
		t.Fatalf("migrate up printed %q, history in %q; want %q, in kafka2pg.schema_migrations", out, history(), want)
	}
	if out := migrate("down", "--yes"); !strings.Contains(out, "not installed") || history() != "" {
		t.Fatalf("migrate down printed %q and left the history in %q", out, history())
	}
	var schemas int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = 'kafka2pg'`).Scan(&schemas); err != nil || schemas != 0 {
		t.Fatalf("kafka2pg schemas after down: %d (%v)", schemas, err)
	}
}
