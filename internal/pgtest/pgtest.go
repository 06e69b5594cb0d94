package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable holding the admin URL of the
// PostgreSQL server that tests use.
const EnvURL = "KAFKA2PG_TEST_PG_URL"

// DatabasePrefix starts the name of every database that URL creates.
const DatabasePrefix = "k2p_test_"

const (
	// sqlTimeout bounds each statement pgtest runs itself.
	sqlTimeout = 30 * time.Second
	// pgUpTimeout bounds scripts/pg-up.sh, which may install the server
	// package first.
	pgUpTimeout = 10 * time.Minute
)

// URL returns the URL of a new, empty database on the test cluster, created
// for this test and dropped WITH (FORCE) when it and its subtests end.
// Without a cluster it skips the test, or fails it when CI=true (see the
// package doc).
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "")
}

// URLWithEncoding is URL for a database of the given server encoding
// (LATIN1, SQL_ASCII, ...), with the C locale, which takes any encoding.
func URLWithEncoding(t testing.TB, encoding string) string {
	t.Helper()
	return newDatabase(t, " TEMPLATE template0 ENCODING "+quoteLiteral(encoding)+" LC_COLLATE 'C' LC_CTYPE 'C'")
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func newDatabase(t testing.TB, options string) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), sqlTimeout)
	defer cancel()
	u, drop, err := createDatabase(ctx, admin, options)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), sqlTimeout)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return u
}

// Database is URL for code that has no testing.TB, such as a TestMain
// that prepares an Example: it finds the cluster as AdminURL does and
// returns the URL of a new, empty database and the function that drops
// it. An error says why there is none; the caller skips (naming EnvURL)
// or fails.
func Database(ctx context.Context) (url string, drop func(context.Context) error, err error) {
	admin := os.Getenv(EnvURL)
	if admin != "" {
		err = checkURL(admin)
	} else {
		admin, err = discoveredURL(ctx)
	}
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, sqlTimeout)
	defer cancel()
	return createDatabase(ctx, admin, "")
}

// createDatabase creates a database named k2p_test_<random> on the
// cluster of admin, and returns its URL and the function that drops it.
func createDatabase(ctx context.Context, admin, options string) (string, func(context.Context) error, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("parse admin URL: %w", err)
	}
	name := DatabasePrefix + randomHex(8)
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + options
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
	if err := execAdmin(ctx, admin, create); err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), func(ctx context.Context) error { return execAdmin(ctx, admin, drop) }, nil
}

// AdminURL returns the URL of the test cluster's administrative database,
// found as the package doc says. Tests that only need a database should
// call URL instead.
func AdminURL(t testing.TB) string {
	t.Helper()
	if admin := os.Getenv(EnvURL); admin != "" {
		// Asked for by name: a bad value fails rather than skips.
		if err := checkURL(admin); err != nil {
			t.Fatalf("pgtest: %s: %v", EnvURL, err)
		}
		return admin
	}
	admin, err := discoveredURL(t.Context())
	if err != nil {
		unavailable(t, err)
	}
	return admin
}

// unavailable ends a test that cannot get a server: a skip that names the
// setting to change, or a failure under CI.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: no PostgreSQL, and CI=true does not allow skipping: %v", err)
	}
	t.Skipf("no PostgreSQL: set %s or install the PostgreSQL server binaries (%v)", EnvURL, err)
}

// discovery holds the one result of finding or starting the cluster of
// scripts/pg-up.sh in this process.
var discovery struct {
	once sync.Once
	url  string
	err  error
}

// discoveredURL returns the URL of the pg-up.sh cluster, starting it on the
// first call of the process when it does not answer.
func discoveredURL(ctx context.Context) (string, error) {
	discovery.once.Do(func() {
		// The first caller's test may end; the result serves the others.
		ctx := context.WithoutCancel(ctx)
		discovery.url, discovery.err = findOrStartCluster(ctx)
	})
	return discovery.url, discovery.err
}

func findOrStartCluster(ctx context.Context) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	urlFile := filepath.Join(root, ".tmp", "pg", "url")
	if admin, err := readURL(urlFile); err == nil && ping(ctx, admin) == nil {
		return admin, nil
	}
	if err := runPgUp(ctx, root); err != nil {
		return "", err
	}
	admin, err := readURL(urlFile)
	if err != nil {
		return "", fmt.Errorf("read the URL scripts/pg-up.sh wrote: %w", err)
	}
	if err := ping(ctx, admin); err != nil {
		return "", err
	}
	return admin, nil
}

// runPgUp runs scripts/pg-up.sh in the repository root. Its output goes to a
// file, not a pipe: the server it starts must not keep our pipe open.
func runPgUp(ctx context.Context, root string) error {
	script := filepath.Join(root, "scripts", "pg-up.sh")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("start a cluster: %w", err)
	}
	out, err := os.CreateTemp("", "kafka2pg-pg-up-*.log")
	if err != nil {
		return fmt.Errorf("start a cluster: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()

	ctx, cancel := context.WithTimeout(ctx, pgUpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = root
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		output, _ := os.ReadFile(out.Name())
		return fmt.Errorf("run scripts/pg-up.sh: %w: %s", err, lastLines(string(output), 15))
	}
	return nil
}

// repoRoot returns the nearest directory at or above the working directory
// that holds go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("find the repository root: no go.mod at or above %s", wd)
		}
	}
}

// readURL reads a URL written by scripts/pg-up.sh.
func readURL(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	admin := strings.TrimSpace(string(data))
	if err := checkURL(admin); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return admin, nil
}

// checkURL accepts postgres:// and postgresql:// URLs, the only form URL can
// point at another database.
func checkURL(admin string) error {
	u, err := url.Parse(admin)
	if err != nil {
		return err
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("want a postgres://user@host:port/database URL, got %q", redact(admin))
	}
	return nil
}

// ping connects to admin and closes the connection.
func ping(ctx context.Context, admin string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(admin), err)
	}
	return conn.Close(ctx)
}

// execAdmin runs one statement on a connection of its own to admin.
func execAdmin(ctx context.Context, admin, sql string) (err error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(admin), err)
	}
	defer func() {
		err = errors.Join(err, conn.Close(ctx))
	}()
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// redact hides a password in a URL meant for a message.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never returns an error
	return hex.EncodeToString(b)
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
