package pgtest_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

func TestURLGivesEachCallAFreshEmptyDatabase(t *testing.T) {
	first := pgtest.URL(t)
	second := pgtest.URL(t)
	if first == second {
		t.Fatalf("two calls of URL gave the same URL %s", first)
	}

	conn := connect(t, first)
	var one int
	if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 gave %d, %v; want 1, nil", one, err)
	}

	want := databaseName(t, first)
	if !strings.HasPrefix(want, pgtest.DatabasePrefix) {
		t.Errorf("URL %s names database %q; want the prefix %q", first, want, pgtest.DatabasePrefix)
	}
	var got string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&got); err != nil {
		t.Fatalf("SELECT current_database(): %v", err)
	}
	if got != want {
		t.Errorf("connected to database %q; want %q, the one in the URL", got, want)
	}

	const userRelations = `SELECT count(*) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%'`
	var relations int
	if err := conn.QueryRow(t.Context(), userRelations).Scan(&relations); err != nil {
		t.Fatalf("%s: %v", userRelations, err)
	}
	if relations != 0 {
		t.Errorf("the new database has %d relations outside the catalogs; want 0", relations)
	}
}

func TestURLDropsTheDatabaseWhenTheTestEnds(t *testing.T) {
	admin := connect(t, pgtest.AdminURL(t)) // skips here, not in the subtest, without a server
	var name string
	var open *pgx.Conn
	t.Run("a test that leaves a connection open", func(t *testing.T) {
		dbURL := pgtest.URL(t)
		name = databaseName(t, dbURL)
		// Connected on behalf of the outer test, so still open when the
		// inner test's cleanup drops the database: WITH (FORCE) must end it.
		var err error
		open, err = pgx.Connect(t.Context(), dbURL)
		if err != nil {
			t.Fatalf("connect to %s: %v", dbURL, err)
		}
		if _, err := open.Exec(t.Context(), "CREATE TABLE kept (id int)"); err != nil {
			t.Fatalf("CREATE TABLE kept (id int): %v", err)
		}
	})
	if open != nil {
		t.Cleanup(func() {
			// The server ended this connection; closing reports nothing useful.
			_ = open.Close(context.WithoutCancel(t.Context()))
		})
	}
	if name == "" {
		t.Fatal("the subtest got no database")
	}

	const query = "SELECT count(*) FROM pg_database WHERE datname = $1"
	var count int
	if err := admin.QueryRow(t.Context(), query, name).Scan(&count); err != nil {
		t.Fatalf("%s [%s]: %v", query, name, err)
	}
	if count != 0 {
		t.Errorf("database %q still exists after its test ended", name)
	}
}

func TestEnvDescribesTheClusterOfPgUp(t *testing.T) {
	pgdata, pgbin, ok := pgtest.Env(t)
	if !ok {
		t.Skipf("%s points at a server that scripts/pg-up.sh did not start; unset it to test Env", pgtest.EnvURL)
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); err != nil {
		t.Errorf("Env gave data directory %s without PG_VERSION: %v", pgdata, err)
	}
	if _, err := os.Stat(filepath.Join(pgbin, "pg_ctl")); err != nil {
		t.Errorf("Env gave bin directory %s without pg_ctl: %v", pgbin, err)
	}
	// Stopping the server here would break the tests of other packages
	// that run at the same time; status exercises the same path.
	pgtest.PgCtl(t, "status")
}

// connect opens a connection that the test closes when it ends.
func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), connString)
	if err != nil {
		t.Fatalf("connect to %s: %v", connString, err)
	}
	t.Cleanup(func() {
		if err := conn.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("close the connection to %s: %v", connString, err)
		}
	})
	return conn
}

// databaseName returns the database a URL names.
func databaseName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse %s: %v", dbURL, err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
