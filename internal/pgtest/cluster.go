package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pgCtlTimeout bounds one pg_ctl run; pg_ctl itself waits up to 60 s.
const pgCtlTimeout = 90 * time.Second

// cluster is what scripts/pg-up.sh records in .tmp/pg/env.
type cluster struct {
	data   string // PGDATA: the data directory
	bin    string // PGBIN: the directory of pg_ctl, postgres, ...
	port   string // PGPORT: the TCP port on 127.0.0.1
	log    string // PGLOG: the server log
	osUser string // PGOSUSER: the OS user that owns the data directory
}

// Env returns the data directory and the server bin directory of the cluster
// that scripts/pg-up.sh started, for tests that stop and restart the server.
// ok is false when the tests' server is not that cluster (KAFKA2PG_TEST_PG_URL
// points elsewhere); the reason is logged. Without any server it skips or
// fails the test like URL.
func Env(t testing.TB) (pgdata, pgbin string, ok bool) {
	t.Helper()
	c, err := recordedCluster(AdminURL(t))
	if err != nil {
		t.Logf("pgtest: no cluster of scripts/pg-up.sh to stop and start: %v", err)
		return "", "", false
	}
	return c.data, c.bin, true
}

// PgCtl runs `pg_ctl -D PGDATA -l PGLOG args...` on the cluster of
// scripts/pg-up.sh, as the OS user that owns it, and fails the test with
// pg_ctl's output when it fails. pg_ctl waits for start and stop to finish.
// Call Env first: PgCtl fails the test when Env would not be ok.
func PgCtl(t testing.TB, args ...string) {
	t.Helper()
	c, err := recordedCluster(AdminURL(t))
	if err != nil {
		t.Fatalf("pgtest: pg_ctl %s: %v", strings.Join(args, " "), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), pgCtlTimeout)
	defer cancel()
	if err := c.pgCtl(ctx, args...); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// pgCtl runs pg_ctl. Its output goes to a file, not a pipe: a server that
// pg_ctl starts would keep a pipe open for its whole life.
func (c cluster) pgCtl(ctx context.Context, args ...string) error {
	name := "pg_ctl " + strings.Join(args, " ")
	argv := append([]string{filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-l", c.log}, args...)
	if os.Geteuid() == 0 && c.osUser != "root" {
		argv = append([]string{"runuser", "-u", c.osUser, "--"}, argv...)
	}
	out, err := os.CreateTemp("", "kafka2pg-pg-ctl-*.log")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer os.Remove(out.Name())
	defer out.Close()

	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/" // the OS user may not be able to enter the working directory
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		output, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s: %w: %s", name, err, lastLines(string(output), 15))
	}
	return nil
}

// recordedCluster reads .tmp/pg/env and checks that admin points at the
// cluster it describes.
func recordedCluster(admin string) (cluster, error) {
	root, err := repoRoot()
	if err != nil {
		return cluster{}, err
	}
	path := filepath.Join(root, ".tmp", "pg", "env")
	data, err := os.ReadFile(path)
	if err != nil {
		return cluster{}, fmt.Errorf("read the record of scripts/pg-up.sh: %w", err)
	}
	vars, err := parseEnvFile(string(data))
	if err != nil {
		return cluster{}, fmt.Errorf("parse %s: %w", path, err)
	}
	c := cluster{
		data:   vars["PGDATA"],
		bin:    vars["PGBIN"],
		port:   vars["PGPORT"],
		log:    vars["PGLOG"],
		osUser: vars["PGOSUSER"],
	}
	if c.data == "" || c.bin == "" || c.port == "" || c.log == "" || c.osUser == "" {
		return cluster{}, fmt.Errorf("parse %s: want PGDATA, PGBIN, PGPORT, PGLOG and PGOSUSER, got %v", path, vars)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return cluster{}, fmt.Errorf("parse admin URL: %w", err)
	}
	if (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") || u.Port() != c.port {
		return cluster{}, fmt.Errorf("%s points at %s, but scripts/pg-up.sh's cluster listens on %s",
			EnvURL, u.Host, net.JoinHostPort("127.0.0.1", c.port))
	}
	return c, nil
}

// parseEnvFile reads KEY=VALUE lines as scripts/pg-up.sh writes them: values
// in single quotes, a quote inside a value written as a closing quote, an
// escaped quote and an opening quote. Blank lines and # comments are skipped.
// It does not expand anything.
func parseEnvFile(text string) (map[string]string, error) {
	vars := make(map[string]string)
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, raw, found := strings.Cut(line, "=")
		if !found || key == "" || strings.ContainsAny(key, " \t'\"") {
			return nil, fmt.Errorf("line %d: want KEY=VALUE, got %q", i+1, line)
		}
		value, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		vars[key] = value
	}
	return vars, nil
}

// unquote undoes shell quoting made of single-quoted parts and
// backslash-escaped characters.
func unquote(raw string) (string, error) {
	var b strings.Builder
	for s := raw; s != ""; {
		switch s[0] {
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote in %q", raw)
			}
			b.WriteString(s[1 : 1+end])
			s = s[2+end:]
		case '\\':
			if len(s) < 2 {
				return "", fmt.Errorf("trailing backslash in %q", raw)
			}
			b.WriteByte(s[1])
			s = s[2:]
		case '"', '$', '`', ' ', '\t':
			return "", fmt.Errorf("want a single-quoted value, got %q", raw)
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String(), nil
}
