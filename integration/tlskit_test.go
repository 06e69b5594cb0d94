package integration_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgserver"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/tlstest"
)

// saslEnv names the environment variable that runs the tests against a real
// Kafka broker with SSL, mutual-TLS and SASL_SSL listeners, which they start
// with scripts/kafka-up-sasl.sh (Java 17+, and Maven the first time).
const saslEnv = "KAFKA2PG_TEST_SASL"

// secret returns a random secret that is easy to grep for.
func secret(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// saslKafka is the broker of scripts/kafka-up-sasl.sh, started once per test
// process with certificates made here.
type saslKafka struct {
	listeners map[string]string // PLAINTEXT, SSL, MTLS, SASL_SSL → host:port
	ca        *tlstest.CA
	certDir   string // ca.pem, server.pem, client.pem, client.key
	user      string
	password  string
}

var saslOnce struct {
	once sync.Once
	k    *saslKafka
	err  error
}

// startSASLKafka returns the SASL_SSL broker, or skips the test naming
// KAFKA2PG_TEST_SASL when it is not set to 1. The broker keeps running
// after the tests; `scripts/kafka-up-sasl.sh down` stops it.
func startSASLKafka(t testing.TB) *saslKafka {
	t.Helper()
	if os.Getenv(saslEnv) != "1" {
		t.Skipf("set %s=1 to run this test against a real Kafka with SSL and SASL_SSL listeners (scripts/kafka-up-sasl.sh)", saslEnv)
	}
	saslOnce.once.Do(func() { saslOnce.k, saslOnce.err = launchSASLKafka(t) })
	if saslOnce.err != nil {
		t.Fatal(saslOnce.err)
	}
	return saslOnce.k
}

func launchSASLKafka(t testing.TB) (*saslKafka, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	k := &saslKafka{certDir: filepath.Join(root, ".tmp", "kafka-sasl-certs"), user: "kafka2pg-it", password: secret("kafka-pw")}
	if err := os.MkdirAll(k.certDir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s: %w", k.certDir, err)
	}
	k.ca = tlstest.NewCA(t, "kafka2pg test CA (Kafka)")
	tlstest.WriteFile(t, k.certDir, "ca.pem", k.ca.PEM)
	tlstest.WriteFile(t, k.certDir, "server.pem", k.ca.Issue(t, tlstest.Spec{CommonName: "kafka"}).Bundle())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "kafka-up-sasl.sh"), "up", k.certDir)
	cmd.Env = append(os.Environ(), "KAFKA_SASL_USER="+k.user, "KAFKA_SASL_PASSWORD="+k.password)
	logFile, err := os.CreateTemp("", "kafka2pg-kafka-up-sasl-*.log")
	if err != nil {
		return nil, err
	}
	defer os.Remove(logFile.Name())
	defer logFile.Close()
	cmd.Stderr = logFile
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		msg, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("scripts/kafka-up-sasl.sh up: %w\n%s", err, msg)
	}
	k.listeners = map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if name, addr, ok := strings.Cut(sc.Text(), "="); ok {
			k.listeners[name] = addr
		}
	}
	for _, name := range []string{"PLAINTEXT", "SSL", "MTLS", "SASL_SSL"} {
		if k.listeners[name] == "" {
			return nil, fmt.Errorf("scripts/kafka-up-sasl.sh up printed no %s listener: %q", name, out)
		}
	}
	return k, nil
}

// tlsPostgres is a throwaway PostgreSQL cluster of the test's own, with
// ssl=on, a server certificate for localhost and 127.0.0.1, SCRAM passwords
// over TLS, certificate authentication for the role certuser, and plain TCP
// refused.
type tlsPostgres struct {
	port     int
	ca       *tlstest.CA
	certDir  string // ca.pem, and the client files the test writes
	admin    string // superuser URL, sslmode=verify-full
	password string // of the superuser postgres
}

// certUser is the role that logs in with a client certificate (CN=certuser).
const certUser = "certuser"

// startTLSPostgres starts the cluster from the installed server binaries
// (those of scripts/pg-up.sh, or the newest under /usr/lib/postgresql) and
// stops and deletes it when the test ends. Without binaries it skips, or
// fails when CI=true.
func startTLSPostgres(t testing.TB) *tlsPostgres {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no PostgreSQL server binaries (initdb, pg_ctl) for the TLS cluster, and CI=true does not allow skipping")
		}
		t.Skipf("no PostgreSQL server binaries for a TLS cluster: install the postgresql package (or set %s to use scripts/pg-up.sh's)", pgtest.EnvURL)
	}
	base, err := os.MkdirTemp("", "kafka2pg-tlspg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	osUser := ""
	if os.Geteuid() == 0 {
		osUser = "postgres" // the server refuses to run as root
		chownTo(t, osUser, base)
	}
	p := &tlsPostgres{port: freeTCPPort(t), ca: tlstest.NewCA(t, "kafka2pg test CA (Postgres)"), password: secret("pg-admin-pw")}
	p.certDir = filepath.Join(base, "client")
	if err := os.Mkdir(p.certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tlstest.WriteFile(t, p.certDir, "ca.pem", p.ca.PEM)
	server := p.ca.Issue(t, tlstest.Spec{CommonName: "localhost"})
	data := filepath.Join(base, "data")
	serverDir := filepath.Join(base, "server")
	if err := os.Mkdir(serverDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tlstest.WriteFile(t, serverDir, "server.crt", server.CertPEM)
	tlstest.WriteFile(t, serverDir, "server.key", server.KeyPEM)
	tlstest.WriteFile(t, serverDir, "ca.crt", p.ca.PEM)
	tlstest.WriteFile(t, serverDir, "pwfile", []byte(p.password+"\n"))
	if osUser != "" {
		chownTo(t, osUser, serverDir, filepath.Join(serverDir, "server.crt"), filepath.Join(serverDir, "server.key"),
			filepath.Join(serverDir, "ca.crt"), filepath.Join(serverDir, "pwfile"))
	}
	run := func(name string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		argv := append([]string{filepath.Join(bin, name)}, args...)
		if osUser != "" {
			argv = append([]string{"runuser", "-u", osUser, "--"}, argv...)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = "/"
		// A file, not a pipe: the server pg_ctl starts would keep a pipe open.
		out, err := os.CreateTemp("", "kafka2pg-tlspg-cmd-*.log")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(out.Name())
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			msg, _ := os.ReadFile(out.Name())
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, msg)
		}
	}
	run("initdb", "-D", data, "-U", "postgres", "--pwfile", filepath.Join(serverDir, "pwfile"),
		"--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--no-sync")
	conf := fmt.Sprintf(`listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
ssl = on
ssl_cert_file = '%s/server.crt'
ssl_key_file = '%s/server.key'
ssl_ca_file = '%s/ca.crt'
fsync = off
`, p.port, serverDir, serverDir, serverDir, serverDir)
	hba := `# Written by the kafka2pg TLS test: TLS or nothing.
local   all       all                      trust
hostssl all       ` + certUser + ` 127.0.0.1/32 cert
hostssl all       all      127.0.0.1/32    scram-sha-256
host    all       all      127.0.0.1/32    reject
`
	appendFile(t, filepath.Join(data, "postgresql.conf"), conf)
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if osUser != "" {
		chownTo(t, osUser, filepath.Join(data, "pg_hba.conf"))
	}
	run("pg_ctl", "-D", data, "-l", filepath.Join(serverDir, "postgres.log"), "-w", "-t", "60", "start")
	t.Cleanup(func() {
		run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
	})
	p.admin = p.url("postgres", p.password, "postgres", nil)
	return p
}

// url returns a URL of the cluster for user (password may be empty) and
// database, with sslmode=verify-full and sslrootcert set, plus params.
func (p *tlsPostgres) url(user, password, database string, params map[string]string) string {
	u := &url.URL{Scheme: "postgres", Host: net.JoinHostPort("localhost", strconv.Itoa(p.port)), Path: "/" + database}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else {
		u.User = url.User(user)
	}
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(p.certDir, "ca.pem")}}
	for k, v := range params {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// exec runs statements as the superuser in database.
func (p *tlsPostgres) exec(t testing.TB, database string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url("postgres", p.password, database, nil))
	if err != nil {
		t.Fatalf("connect to the TLS cluster as postgres: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// pgBinDir returns the server bin directory: PGBIN of .tmp/pg/env, else
// pgserver's (the newest /usr/lib/postgresql/*/bin with the server
// binaries), else "".
func pgBinDir() string {
	ok := func(dir string) bool {
		for _, f := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return false
			}
		}
		return true
	}
	if root, err := repoRoot(); err == nil {
		if data, err := os.ReadFile(filepath.Join(root, ".tmp", "pg", "env")); err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if v, found := strings.CutPrefix(line, "PGBIN="); found && ok(strings.Trim(v, "'")) {
					return strings.Trim(v, "'")
				}
			}
		}
	}
	return pgserver.BinDir()
}

// chownTo gives paths to the OS user name.
func chownTo(t testing.TB, name string, paths ...string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up OS user %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// freeTCPPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freeTCPPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// unsecuredJWT returns an unsigned JWT ("alg":"none") for subject: what
// Kafka's default OAUTHBEARER validator accepts (never in production).
func unsecuredJWT(subject string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d,"scope":"kafka"}`, subject, now, now+3600)) + "."
}
