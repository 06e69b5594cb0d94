package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
)

func TestUpDownUpRoundTrips(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := t.Context()
	if _, _, ok, err := migrations.Version(ctx, url); err != nil || ok {
		t.Fatalf("fresh database: version ok=%v err=%v, want nothing applied", ok, err)
	}
	conn := connect(t, url)
	if schemaExists(t, conn) {
		t.Fatal("version created the kafka2pg schema on a fresh database; it must only read")
	}
	for range 2 { // up is idempotent
		if err := migrations.Up(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	requireVersion(t, url, migrations.Latest)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'kafka2pg' AND tablename IN ('offsets', 'dead_letters', 'schema_migrations')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Fatalf("kafka2pg has %d of offsets, dead_letters and schema_migrations, want all three", tables)
	}
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatal(err)
	}
	if schemaExists(t, conn) {
		t.Fatal("down left the kafka2pg schema behind")
	}
	requireNothingOutsideKafka2pg(t, conn)
	if _, _, ok, err := migrations.Version(ctx, url); err != nil || ok {
		t.Fatalf("after down: version ok=%v err=%v, want nothing applied", ok, err)
	}
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatalf("down when nothing is installed: %v", err)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatalf("up after down: %v", err)
	}
	requireVersion(t, url, migrations.Latest)
}

func TestAFreshInstallPutsNothingOutsideTheKafka2pgSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if err := migrations.Up(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	requireNothingOutsideKafka2pg(t, conn)
	s := readState(t, conn)
	if s.Table != `"kafka2pg"."schema_migrations"` || s.Legacy || !s.Applied || s.Version != migrations.Latest {
		t.Fatalf("state %+v, want version %d in \"kafka2pg\".\"schema_migrations\"", s, migrations.Latest)
	}
}

func TestUpMovesTheHistoryOfAnEarlierRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version uint
	}{
		{"an install at the latest version keeps it", migrations.Latest},
		{"an install one version behind gets only the newer migration", migrations.Latest - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			url := pgtest.URL(t)
			if err := migrations.UpAsEarlierReleases(ctx, url, tc.version); err != nil {
				t.Fatal(err)
			}
			conn := connect(t, url)
			before := readState(t, conn)
			if before.Table != `"public"."kafka2pg_schema_migrations"` || !before.Legacy || before.Version != tc.version {
				t.Fatalf("the earlier release's layout reads as %+v, want version %d in public", before, tc.version)
			}
			// A row that a second run of the first migration would lose (it
			// would fail on CREATE TABLE first), and the table's identity.
			if _, err := conn.Exec(ctx, `INSERT INTO kafka2pg.offsets (consumer_group, topic, partition, next_offset) VALUES ('g', 't', 0, 42)`); err != nil {
				t.Fatal(err)
			}
			offsetsOID := relationOID(t, conn, "kafka2pg.offsets")
			if err := migrations.Up(ctx, url); err != nil {
				t.Fatalf("up on the earlier release's layout: %v", err)
			}
			requireNothingOutsideKafka2pg(t, conn)
			after := readState(t, conn)
			if after.Table != `"kafka2pg"."schema_migrations"` || after.Legacy || after.Dirty || after.Version != migrations.Latest {
				t.Fatalf("after up: %+v, want version %d, clean, in \"kafka2pg\".\"schema_migrations\"", after, migrations.Latest)
			}
			if oid := relationOID(t, conn, "kafka2pg.offsets"); oid != offsetsOID {
				t.Fatalf("kafka2pg.offsets was recreated (oid %d, was %d)", oid, offsetsOID)
			}
			var next int64
			if err := conn.QueryRow(ctx, `SELECT next_offset FROM kafka2pg.offsets WHERE consumer_group = 'g'`).Scan(&next); err != nil || next != 42 {
				t.Fatalf("the stored offset: %d, %v; want 42", next, err)
			}
			var statusView bool // migration 2's view
			if err := conn.QueryRow(ctx, `SELECT to_regclass('kafka2pg.partition_status') IS NOT NULL`).Scan(&statusView); err != nil || !statusView {
				t.Fatalf("kafka2pg.partition_status exists: %v, %v", statusView, err)
			}
			snapshot := catalogSnapshot(t, conn)
			if err := migrations.Up(ctx, url); err != nil {
				t.Fatalf("up again: %v", err)
			}
			if again := catalogSnapshot(t, conn); again != snapshot {
				t.Fatalf("up again changed the catalog:\nbefore:\n%s\nafter:\n%s", snapshot, again)
			}
			requireVersion(t, url, migrations.Latest)
		})
	}
}

func TestTheHistoryMovesFromTheSchemaTheEarlierReleaseFoundOnItsSearchPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	conn := connect(t, url)
	exec(t, conn, `CREATE SCHEMA app`)
	appURL := withParam(t, url, "search_path", "app")
	if err := migrations.UpAsEarlierReleases(ctx, appURL, migrations.Latest); err != nil {
		t.Fatal(err)
	}
	if oid := relationOID(t, conn, "app.kafka2pg_schema_migrations"); oid == 0 {
		t.Fatal("the earlier release did not keep its history in app (the test's premise)")
	}
	if s := readState(t, conn); s.Applied {
		t.Fatalf("on search_path public the history in app reads as %+v, want nothing", s)
	}
	if err := migrations.Up(ctx, appURL); err != nil {
		t.Fatal(err)
	}
	if oid := relationOID(t, conn, "app.kafka2pg_schema_migrations"); oid != 0 {
		t.Fatal("the history is still in app")
	}
	requireNothingOutsideKafka2pg(t, conn)
	requireVersion(t, url, migrations.Latest)
}

func TestConcurrentStartsMoveTheHistoryOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	if err := migrations.UpAsEarlierReleases(ctx, url, migrations.Latest-1); err != nil {
		t.Fatal(err)
	}
	const starts = 4
	errs := make([]error, starts)
	var wg sync.WaitGroup
	for i := range starts {
		wg.Go(func() { errs[i] = migrations.Up(ctx, url) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent ups: %v", err)
	}
	conn := connect(t, url)
	requireNothingOutsideKafka2pg(t, conn)
	requireVersion(t, url, migrations.Latest)
}

func TestAnotherToolsHistoryInPublicIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	conn := connect(t, url)
	// Where another user of golang-migrate keeps its history by default.
	exec(t, conn, `CREATE TABLE public.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		`INSERT INTO public.schema_migrations VALUES (20240101, false)`)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, url, migrations.Latest)
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatal(err)
	}
	var version int64
	if err := conn.QueryRow(ctx, `SELECT version FROM public.schema_migrations`).Scan(&version); err != nil || version != 20240101 {
		t.Fatalf("the other tool's history: %d, %v; want 20240101", version, err)
	}
}

func TestDownOnAnEarlierReleasesInstallRemovesEverything(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	if err := migrations.UpAsEarlierReleases(ctx, url, migrations.Latest); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, url, migrations.Latest) // read in place: Version does not move it
	conn := connect(t, url)
	if !readState(t, conn).Legacy {
		t.Fatal("version moved the history; it must only read")
	}
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatal(err)
	}
	requireNothingOutsideKafka2pg(t, conn)
	if schemaExists(t, conn) {
		t.Fatal("down left the kafka2pg schema behind")
	}
}

// An administrator creates the kafka2pg schema for a role that may not
// create schemas (no CREATE on the database) nor anything in public.
func TestARoleWithoutCreateOnTheDatabaseMigratesIntoAnAdministratorsSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	admin := connect(t, url)
	role := newRole(t, admin, "k2p_migrator")
	r := pgx.Identifier{role}.Sanitize()
	var db string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	exec(t, admin,
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"REVOKE CREATE, TEMPORARY ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+r,
		"CREATE SCHEMA kafka2pg",
		"GRANT USAGE, CREATE ON SCHEMA kafka2pg TO "+r)
	roleURL := withUser(t, url, role, "pw")
	if err := migrations.Up(ctx, roleURL); err != nil {
		t.Fatalf("up as %s: %v", role, err)
	}
	requireVersion(t, roleURL, migrations.Latest)
	requireNothingOutsideKafka2pg(t, admin)
	if err := migrations.Down(ctx, roleURL); err != nil {
		t.Fatalf("down as %s: %v", role, err)
	}
	if !schemaExists(t, admin) {
		t.Fatal("down dropped the administrator's schema")
	}
	var objects int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'kafka2pg'`).Scan(&objects); err != nil || objects != 0 {
		t.Fatalf("down left %d relations in kafka2pg (%v)", objects, err)
	}
}

// A role that does not own an earlier release's history cannot move it:
// Up fails with Postgres' permission error, and nothing changes.
func TestMovingNeedsTheOwnerOfTheEarlierHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	if err := migrations.UpAsEarlierReleases(ctx, url, migrations.Latest); err != nil {
		t.Fatal(err)
	}
	admin := connect(t, url)
	role := newRole(t, admin, "k2p_bridge")
	exec(t, admin, "GRANT USAGE ON SCHEMA kafka2pg TO "+pgx.Identifier{role}.Sanitize())
	err := migrations.Up(ctx, withUser(t, url, role, "pw"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(err.Error(), "move the migration history") {
		t.Fatalf("up as a role that does not own the history: %v; want a permission error (42501) naming the move", err)
	}
	if s := readState(t, admin); !s.Legacy || s.Version != migrations.Latest {
		t.Fatalf("after the refused move: %+v, want the history untouched in public", s)
	}
}

// newRole creates a login role (password pw) dropped with what it owns when
// the test ends.
func newRole(t *testing.T, admin *pgx.Conn, prefix string) string {
	t.Helper()
	role := fmt.Sprintf("%s_%08x", prefix, rand.Uint32())
	r := pgx.Identifier{role}.Sanitize()
	exec(t, admin, "CREATE ROLE "+r+" LOGIN PASSWORD 'pw'")
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, s := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := admin.Exec(ctx, s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	return role
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func withUser(t *testing.T, raw, user, password string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func readState(t *testing.T, conn *pgx.Conn) migrations.State {
	t.Helper()
	s, err := migrations.ReadState(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func requireVersion(t *testing.T, url string, want uint) {
	t.Helper()
	v, dirty, ok, err := migrations.Version(t.Context(), url)
	if err != nil || !ok || dirty || v != want {
		t.Fatalf("version %d dirty=%v ok=%v err=%v, want %d", v, dirty, ok, err, want)
	}
}

func schemaExists(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'kafka2pg'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// relationOID is the oid of a relation, 0 when it does not exist.
func relationOID(t *testing.T, conn *pgx.Conn, name string) uint32 {
	t.Helper()
	var oid *uint32
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass($1)::oid`, name).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	if oid == nil {
		return 0
	}
	return *oid
}

// requireNothingOutsideKafka2pg fails when a relation exists in any schema
// but kafka2pg and the system's: the databases are fresh, so anything else
// came from the migrations.
func requireNothingOutsideKafka2pg(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('kafka2pg', 'pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'`)
	if err != nil {
		t.Fatal(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("relations outside the kafka2pg schema: %v", found)
	}
}

// catalogSnapshot describes the kafka2pg schema: each relation with its
// oid, each column, and the recorded version.
func catalogSnapshot(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT format('%s %s oid=%s', c.relkind, c.relname, c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'kafka2pg'
		UNION ALL
		SELECT format('column %s.%s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod))
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'kafka2pg' AND a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT format('history %s %s', version, dirty) FROM kafka2pg.schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
