package integration_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/tlstest"
)

// failFast is how soon a bridge with wrong credentials or certificates must
// have exited: the connection check takes a second or two, the rest is slack.
const failFast = 30 * time.Second

// secureKfake is an in-process kfake cluster with TLS and SASL
// (SCRAM-SHA-512), one topic with records, and the files a bridge needs.
type secureKfake struct {
	broker, topic       string
	caFile, passFile    string
	user, password      string
	records             int
	ca                  *tlstest.CA
	dir                 string
	clientCert, clientK string
}

func newSecureKfake(t testing.TB, records int) *secureKfake {
	t.Helper()
	k := &secureKfake{dir: t.TempDir(), user: "bridge", password: secret("kafka-pw"), records: records,
		topic: fmt.Sprintf("kafka2pg-sec-%08x", rand.Uint32())}
	k.ca = tlstest.NewCA(t, "kafka2pg test CA (kfake)")
	k.caFile = tlstest.WriteFile(t, k.dir, "ca.pem", k.ca.PEM)
	k.passFile = tlstest.WriteFile(t, k.dir, "kafka-password", []byte(k.password+"\n"))
	server := k.ca.Issue(t, tlstest.Spec{})
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", k.user, k.password))
	if err != nil {
		t.Fatalf("start kfake with TLS and SASL: %v", err)
	}
	t.Cleanup(c.Close)
	k.broker = c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.broker),
		kgo.DialTLSConfig(&tls.Config{RootCAs: k.ca.Pool()}),
		kgo.SASL(scram.Auth{User: k.user, Pass: k.password}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, k.topic); err != nil {
		t.Fatalf("create topic %s over SASL_SSL: %v", k.topic, err)
	}
	produceN(t, cl, k.topic, records)
	return k
}

// produceN writes n small JSON records to topic.
func produceN(t testing.TB, cl *kgo.Client, topic string, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
}

// bridgeArgs is a `run` command line for a security test: no metrics
// server unless extra asks for one.
func bridgeArgs(brokers, topic, table string, extra ...string) []string {
	return append([]string{"run",
		"--kafka-brokers", brokers,
		"--kafka-group", "kafka2pg-sec-" + table,
		"--topic", topic,
		"--pg-table", table,
		"--kafka-fetch-max-wait", "250ms",
		"--metrics-addr=",
		"--log-level", "debug",
	}, extra...)
}

func randomTable() string { return fmt.Sprintf("sec_%08x", rand.Uint32()) }

// countRows returns the number of rows of public.table.
func countRows(t testing.TB, db *pgxpool.Pool, table string) int {
	t.Helper()
	q := "SELECT count(*) FROM " + pgx.Identifier{"public", table}.Sanitize()
	var n int
	if err := db.QueryRow(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func connect(t testing.TB, pgURL string) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(t.Context(), pgURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// logOf returns everything the bridge wrote to stdout and stderr.
func logOf(t testing.TB, b *bridge) string {
	t.Helper()
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		t.Fatalf("read log of bridge %s: %v", b.name, err)
	}
	return string(data)
}

// requireFailsFast waits for the bridge to exit with status 1 (a run-time
// error: no crash, no panic) within failFast, with a log that contains every
// one of want. It returns the log.
func requireFailsFast(t testing.TB, b *bridge, want ...string) string {
	t.Helper()
	if !b.wait(failFast) {
		b.kill(t)
		t.Fatalf("bridge %s still running %v after it was given bad credentials; killed it", b.name, failFast)
	}
	out := logOf(t, b)
	if code := b.state.ExitCode(); code != 1 {
		t.Fatalf("bridge %s: %s, want exit status 1; log:\n%s", b.name, b.status(), out)
	}
	for _, bad := range []string{"panic:", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Fatalf("bridge %s crashed (%q in its log):\n%s", b.name, bad, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("bridge %s log lacks %q:\n%s", b.name, w, out)
		}
	}
	t.Logf("bridge %s failed after %v as it should: %s", b.name, time.Since(b.started).Round(time.Millisecond), lastLine(out))
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// assertNoSecret fails the test when text holds any of the secrets.
func assertNoSecret(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			i := strings.Index(text, s)
			t.Errorf("%s shows a secret (%.12s...) at byte %d: ...%s...", where, s, i, text[max(0, i-120):min(len(text), i+len(s)+40)])
		}
	}
}

func TestKafkaSASLAndTLSOnKfake(t *testing.T) {
	parallel(t)
	pgURL := pgtest.URL(t)
	db := connect(t, pgURL)
	k := newSecureKfake(t, 300)
	secure := []string{"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", k.passFile}

	t.Run("SCRAM-SHA-512 over TLS lands every record", func(t *testing.T) {
		table := randomTable()
		b := startBridge(t, "scram512-tls", append(bridgeArgs(k.broker, k.topic, table, "--pg-url", pgURL, "--until-caught-up"), secure...)...)
		b.requireExitZero(t, 2*time.Minute)
		if n := countRows(t, db, table); n != k.records {
			t.Fatalf("%d rows in %s, want %d", n, table, k.records)
		}
	})
	t.Run("status reads the lag over SCRAM-SHA-512 and TLS", func(t *testing.T) {
		table := randomTable()
		b := startBridge(t, "status-scram512-tls", append(bridgeArgs(k.broker, k.topic, table, "--pg-url", pgURL, "--until-caught-up"), secure...)...)
		b.requireExitZero(t, 2*time.Minute)
		group := "kafka2pg-sec-" + table
		code, out := cli(t, append([]string{"status", "--json", "--pg-url", pgURL, "--kafka-brokers", k.broker, "--kafka-group", group}, secure...)...)
		var rows []statusRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 {
			t.Fatalf("status over SASL_SSL: exit %d, want two partitions:\n%s", code, out)
		}
		var end int64
		for _, r := range rows {
			if r.EndOffset == nil || r.Lag == nil || *r.Lag != 0 {
				t.Fatalf("status over SASL_SSL has no end offset or a lag: %+v\n%s", r, out)
			}
			end += *r.EndOffset
		}
		if end != int64(k.records) {
			t.Errorf("status over SASL_SSL: end offsets sum to %d, want %d", end, k.records)
		}
	})
	t.Run("a wrong password fails fast and says so", func(t *testing.T) {
		wrong := tlstest.WriteFile(t, t.TempDir(), "wrong", []byte("not-the-password\n"))
		b := startBridge(t, "wrong-password", bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", pgURL,
			"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
			"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", wrong)...)
		out := requireFailsFast(t, b, "refused the SASL credentials")
		assertNoSecret(t, "the log", out, "not-the-password", k.password)
	})
	t.Run("an unknown CA fails fast and names the CA flag", func(t *testing.T) {
		other := tlstest.WriteFile(t, t.TempDir(), "other.pem", tlstest.NewCA(t, "other").PEM)
		b := startBridge(t, "wrong-ca", append(bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", pgURL), append(secure[2:],
			"--kafka-tls-ca-file", other)...)...)
		requireFailsFast(t, b, "certificate signed by unknown authority", "--kafka-tls-ca-file")
	})
	t.Run("an expired broker certificate fails fast and says expired", func(t *testing.T) {
		expired := k.ca.Issue(t, tlstest.Spec{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{expired.TLS}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		b := startBridge(t, "expired-broker-cert", bridgeArgs(c.ListenAddrs()[0], k.topic, randomTable(), "--pg-url", pgURL,
			"--kafka-tls-ca-file", k.caFile)...)
		requireFailsFast(t, b, "certificate has expired", "renew it")
	})
}

// TestSecretsNeverLeak runs the bridge at debug level with known secrets (a
// SASL password, the Postgres password in the URL) through a good run, a
// scrape of /metrics, /healthz and /readyz, and error paths, and greps
// everything it printed and served for them.
func TestSecretsNeverLeak(t *testing.T) {
	parallel(t)
	admin := pgtest.URL(t)
	db := connect(t, admin)
	k := newSecureKfake(t, 200)
	pgPassword := secret("pg-pw")
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	// The test cluster trusts local connections: the password is carried
	// everywhere the URL goes, and checked by no one, which is all this
	// test needs. TestPostgresVerifyFull checks real passwords.
	u.User = url.UserPassword(u.User.Username(), pgPassword)
	pgURL := u.String()
	secrets := []string{k.password, pgPassword}
	table := randomTable()
	metricsPort := freeTCPPort(t)
	var everything strings.Builder

	// A good run, with the Postgres password on the command line and the
	// SASL password in a file.
	b := startBridge(t, "good", bridgeArgs(k.broker, k.topic, table, "--pg-url", pgURL,
		"--metrics-addr", "127.0.0.1:"+strconv.Itoa(metricsPort),
		"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", k.passFile)...)
	pollUntil(t, time.Minute, "every record in the table", func() (bool, string) {
		requireRunning(t, b)
		var n int
		err := db.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{"public", table}.Sanitize()).Scan(&n)
		if err != nil {
			return false, err.Error()
		}
		return n == k.records, fmt.Sprintf("%d rows", n)
	})
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d%s", metricsPort, path))
		if path == "/metrics" && !strings.Contains(body, "kafka2pg_reader_records_total") {
			t.Errorf("/metrics lacks kafka2pg_reader_records_total:\n%.500s", body)
		}
		everything.WriteString(body)
		assertNoSecret(t, path, body, secrets...)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)

	// Error paths: a wrong SASL password; an unreachable Postgres (retried
	// with warnings, then stopped); a malformed URL with the password in it;
	// a password file that is not there.
	wrongPass := tlstest.WriteFile(t, t.TempDir(), "wrong", []byte(secrets[0]+"-wrong\n"))
	wrong := startBridge(t, "wrong-sasl-password", bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", pgURL,
		"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", wrongPass)...)
	requireFailsFast(t, wrong, "refused the SASL credentials")

	down := *u
	down.Host = "127.0.0.1:1"
	unreachable := startBridge(t, "postgres-unreachable", bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", down.String(),
		"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", k.passFile)...)
	if !unreachable.waitLog("retrying", failFast) {
		t.Fatalf("the bridge with Postgres down logged no retry:\n%s", logOf(t, unreachable))
	}
	unreachable.signal(t, syscall.SIGTERM)
	if !unreachable.wait(time.Minute) {
		t.Fatal("the bridge with Postgres down did not stop on SIGTERM")
	}

	malformed := "postgres://" + u.User.Username() + ":" + pgPassword + "@127.0.0.1:notaport/db"
	bad := startBridge(t, "malformed-url", bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", malformed,
		"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", k.passFile)...)
	if !bad.wait(failFast) {
		bad.kill(t)
		t.Fatal("the bridge with a malformed URL did not stop")
	}
	// The error quotes the URL: with the password replaced, which shows
	// that the grep below looks where a leak would be.
	if out := logOf(t, bad); !strings.Contains(out, u.User.Username()+":xxxxx@") {
		t.Errorf("the malformed-URL error does not show the redacted URL:\n%s", out)
	}

	missing := startBridge(t, "missing-password-file", bridgeArgs(k.broker, k.topic, randomTable(), "--pg-url", pgURL,
		"--kafka-tls-ca-file", k.caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
		"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", filepath.Join(t.TempDir(), "nope"))...)
	requireFailsFast(t, missing, "--kafka-sasl-password-file")

	for _, br := range []*bridge{b, wrong, unreachable, bad, missing} {
		out := logOf(t, br)
		everything.WriteString(out)
		assertNoSecret(t, "the log of bridge "+br.name, out, secrets...)
	}
	if !strings.Contains(everything.String(), "level=DEBUG") {
		t.Error("no debug line in the logs: the test did not run at debug level")
	}
	t.Logf("grepped %d bytes of logs and HTTP answers for %d secrets", everything.Len(), len(secrets))
}

func httpGet(t testing.TB, u string) string {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	var body string
	pollUntil(t, 30*time.Second, "GET "+u, func() (bool, string) {
		resp, err := cl.Get(u)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		body = string(b)
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %.200s", resp.Status, body)
	})
	return body
}

// TestLeastPrivilegeRole runs the bridge as a role with only the grants
// docs/SECURITY.md lists, then shows that a missing CREATE is
// reported with the GRANT that fixes it, and that granting it is enough.
func TestLeastPrivilegeRole(t *testing.T) {
	parallel(t)
	admin := pgtest.URL(t)
	db := connect(t, admin)
	kafka := kafkatest.New(t)
	topic := kafka.CreateTopic(t, "kafka2pg-lp", 2)
	rs := make([]*kgo.Record, 100)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	kafka.Produce(t, rs...)

	role := fmt.Sprintf("k2p_bridge_%08x", rand.Uint32())
	password := secret("role-pw")
	dbName := strings.TrimPrefix(mustParseURL(t, admin).Path, "/")
	table := randomTable()
	exec := func(stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := db.Exec(t.Context(), s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	r := pgx.Identifier{role}.Sanitize()
	exec("CREATE ROLE " + r + " LOGIN PASSWORD '" + password + "'")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		for _, s := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := db.Exec(ctx, s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	// As docs/SECURITY.md says: the owner migrates and creates the table; the
	// bridge role gets DML only.
	// (a run of the bridge as the owner over an empty topic creates the
	// table, and migrates).
	empty := kafka.CreateTopic(t, "kafka2pg-lp-empty", 1)
	owner := startBridge(t, "owner-creates-table", bridgeArgs(kafka.Brokers(), empty, table, "--pg-url", admin, "--until-caught-up")...)
	owner.requireExitZero(t, time.Minute)
	exec("REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+pgx.Identifier{dbName}.Sanitize()+" TO "+r,
		"GRANT USAGE ON SCHEMA kafka2pg TO "+r,
		"GRANT SELECT, INSERT, UPDATE ON kafka2pg.offsets TO "+r,
		"GRANT SELECT, INSERT, DELETE ON kafka2pg.dead_letters TO "+r,
		"GRANT USAGE ON SCHEMA public TO "+r,
		"GRANT INSERT, UPDATE ON "+pgx.Identifier{"public", table}.Sanitize()+" TO "+r)
	ru := mustParseURL(t, admin)
	ru.User = url.UserPassword(role, password)
	roleURL := ru.String()

	t.Run("with DML grants only, the bridge writes every record", func(t *testing.T) {
		b := startBridge(t, "least-privilege", bridgeArgs(kafka.Brokers(), topic, table, "--pg-url", roleURL,
			"--migrate=false", "--create-tables=false", "--until-caught-up")...)
		b.requireExitZero(t, 2*time.Minute)
		if n := countRows(t, db, table); n != len(rs) {
			t.Fatalf("%d rows, want %d", n, len(rs))
		}
	})
	newTable := randomTable()
	t.Run("without CREATE, creating a table is refused with the GRANT that fixes it", func(t *testing.T) {
		b := startBridge(t, "no-create", bridgeArgs(kafka.Brokers(), topic, newTable, "--pg-url", roleURL,
			"--migrate=false", "--until-caught-up")...)
		out := requireFailsFast(t, b, "permission denied for schema public", "GRANT CREATE ON SCHEMA public TO "+role, "--create-tables=false")
		assertNoSecret(t, "the log", out, password)
	})
	t.Run("with --migrate (the default), the bridge says the owner must migrate", func(t *testing.T) {
		b := startBridge(t, "no-migrate-privilege", bridgeArgs(kafka.Brokers(), topic, table, "--pg-url", roleURL,
			"--create-tables=false", "--until-caught-up")...)
		requireFailsFast(t, b, "run `kafka2pg migrate up` as the database owner", "--migrate=false")
	})
	t.Run("with CREATE on the schema, the bridge creates its table", func(t *testing.T) {
		exec("GRANT CREATE ON SCHEMA public TO " + r)
		b := startBridge(t, "with-create", bridgeArgs(kafka.Brokers(), topic, newTable, "--pg-url", roleURL,
			"--migrate=false", "--until-caught-up")...)
		b.requireExitZero(t, 2*time.Minute)
		if n := countRows(t, db, newTable); n != len(rs) {
			t.Fatalf("%d rows, want %d", n, len(rs))
		}
	})
}

func mustParseURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("parse URL: %v", err)
	}
	return u
}

// TestPostgresVerifyFull runs the bridge against a Postgres that accepts
// TLS only: verify-full with a password from --pg-url-file, and a client
// certificate (sslcert, sslkey); a wrong CA and a wrong password are
// reported without showing the password.
func TestPostgresVerifyFull(t *testing.T) {
	parallel(t)
	pg := startTLSPostgres(t)
	kafka := kafkatest.New(t)
	topic := kafka.CreateTopic(t, "kafka2pg-pgtls", 2)
	rs := make([]*kgo.Record, 50)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	kafka.Produce(t, rs...)
	bridgePassword := secret("bridge-pg-pw")
	pg.exec(t, "postgres",
		"CREATE DATABASE shop",
		"CREATE ROLE bridge LOGIN PASSWORD '"+bridgePassword+"'",
		"CREATE ROLE "+certUser+" LOGIN",
		"ALTER DATABASE shop OWNER TO bridge")
	// certuser logs in with its certificate and acts as bridge.
	pg.exec(t, "postgres", "GRANT bridge TO "+certUser)
	db := connect(t, pg.url("postgres", pg.password, "shop", nil))
	dir := t.TempDir()

	t.Run("verify-full with the URL from --pg-url-file", func(t *testing.T) {
		table := randomTable()
		urlFile := tlstest.WriteFile(t, dir, "pg-url", []byte(pg.url("bridge", bridgePassword, "shop", nil)+"\n"))
		b := startBridge(t, "verify-full", bridgeArgs(kafka.Brokers(), topic, table, "--pg-url-file", urlFile, "--until-caught-up")...)
		b.requireExitZero(t, 2*time.Minute)
		if n := countRows(t, db, table); n != len(rs) {
			t.Fatalf("%d rows, want %d", n, len(rs))
		}
		assertNoSecret(t, "the log", logOf(t, b), bridgePassword)
		var ssl bool
		if err := db.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
			t.Fatalf("the test's own connection: ssl %t, %v; want TLS", ssl, err)
		}
	})
	t.Run("a client certificate instead of a password", func(t *testing.T) {
		client := pg.ca.Issue(t, tlstest.Spec{CommonName: certUser})
		cert := tlstest.WriteFile(t, dir, "client.crt", client.CertPEM)
		key := tlstest.WriteFile(t, dir, "client.key", client.KeyPEM)
		table := randomTable()
		b := startBridge(t, "client-cert", bridgeArgs(kafka.Brokers(), topic, table,
			"--pg-url", pg.url(certUser, "", "shop", map[string]string{"sslcert": cert, "sslkey": key}), "--until-caught-up")...)
		b.requireExitZero(t, 2*time.Minute)
		if n := countRows(t, db, table); n != len(rs) {
			t.Fatalf("%d rows, want %d", n, len(rs))
		}
	})
	t.Run("a wrong password is refused and not shown", func(t *testing.T) {
		wrong := bridgePassword + "-wrong"
		b := startBridge(t, "wrong-pg-password", bridgeArgs(kafka.Brokers(), topic, randomTable(),
			"--pg-url", pg.url("bridge", wrong, "shop", nil), "--until-caught-up")...)
		out := requireFailsFast(t, b, "password authentication failed")
		assertNoSecret(t, "the log", out, wrong, bridgePassword)
	})
	t.Run("an unknown CA is reported", func(t *testing.T) {
		other := tlstest.WriteFile(t, dir, "other-ca.pem", tlstest.NewCA(t, "other").PEM)
		b := startBridge(t, "wrong-pg-ca", bridgeArgs(kafka.Brokers(), topic, randomTable(),
			"--pg-url", pg.url("bridge", bridgePassword, "shop", map[string]string{"sslrootcert": other}), "--until-caught-up")...)
		// A connection error is retried (the server may be restarting), but
		// the log must say why.
		if !b.waitLog("certificate signed by unknown authority", failFast) {
			b.kill(t)
			t.Fatalf("the log does not explain the TLS failure:\n%s", logOf(t, b))
		}
		b.signal(t, syscall.SIGTERM)
		b.wait(time.Minute)
		assertNoSecret(t, "the log", logOf(t, b), bridgePassword)
	})
	t.Run("sslmode=disable is refused by the server", func(t *testing.T) {
		b := startBridge(t, "no-tls", bridgeArgs(kafka.Brokers(), topic, randomTable(),
			"--pg-url", pg.url("bridge", bridgePassword, "shop", map[string]string{"sslmode": "disable", "sslrootcert": ""}), "--until-caught-up")...)
		requireFailsFast(t, b, "no encryption")
	})
}

// TestKafkaSecurityOnARealBroker is the issue's matrix against Apache Kafka
// with SSL, mutual-TLS and SASL_SSL listeners (scripts/kafka-up-sasl.sh):
// TLS only, mTLS, SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER land
// every record exactly once; a wrong password, a wrong CA and an expired
// client certificate each fail fast with a clear error.
func TestKafkaSecurityOnARealBroker(t *testing.T) {
	k := startSASLKafka(t)
	// The scenario's own client (topics, records, checks) uses the
	// broker's PLAINTEXT listener.
	t.Setenv(kafkatest.BrokersEnv, k.listeners["PLAINTEXT"])
	s := newScenario(t, 3)
	s.produce(t, 3000)
	dir := t.TempDir()
	client := k.ca.Issue(t, tlstest.Spec{CommonName: "kafka2pg"})
	clientCert := tlstest.WriteFile(t, dir, "client.pem", client.CertPEM)
	clientKey := tlstest.WriteFile(t, dir, "client.key", client.KeyPEM)
	caFile := filepath.Join(k.certDir, "ca.pem")
	passFile := tlstest.WriteFile(t, dir, "password", []byte(k.password+"\n"))
	tokenFile := tlstest.WriteFile(t, dir, "token", []byte(unsecuredJWT(k.user)+"\n"))
	sasl := func(mech string) []string {
		return []string{"--kafka-tls-ca-file", caFile, "--kafka-sasl-mechanism", mech, "--kafka-sasl-user", k.user, "--kafka-sasl-password-file", passFile}
	}

	// run runs the bridge until caught up on listener with flags, as a
	// scenario of its own (group, table) over the shared topic, and checks
	// exactly-once.
	run := func(t *testing.T, name, listener string, flags ...string) {
		sc := *s
		sc.group = "kafka2pg-it-" + name + fmt.Sprintf("-%08x", rand.Uint32())
		sc.table = randomTable()
		args := append([]string{"run",
			"--kafka-brokers", k.listeners[listener],
			"--kafka-group", sc.group,
			"--topic", sc.topic,
			"--pg-url", sc.pgURL,
			"--pg-table", sc.table,
			"--kafka-fetch-max-wait", "250ms",
			"--metrics-addr=",
			"--until-caught-up",
		}, flags...)
		b := startBridge(t, name, args...)
		b.requireExitZero(t, 2*time.Minute)
		sc.verifyFinalState(t)
		assertNoSecret(t, "the log", logOf(t, b), k.password)
	}
	t.Run("TLS only", func(t *testing.T) { run(t, "tls", "SSL", "--kafka-tls-ca-file", caFile) })
	t.Run("mutual TLS", func(t *testing.T) {
		run(t, "mtls", "MTLS", "--kafka-tls-ca-file", caFile, "--kafka-tls-cert-file", clientCert, "--kafka-tls-key-file", clientKey, "--kafka-tls-min-version", "1.3")
	})
	t.Run("SASL_SSL SCRAM-SHA-256", func(t *testing.T) { run(t, "scram256", "SASL_SSL", sasl("SCRAM-SHA-256")...) })
	t.Run("SASL_SSL SCRAM-SHA-512", func(t *testing.T) { run(t, "scram512", "SASL_SSL", sasl("SCRAM-SHA-512")...) })
	t.Run("SASL_SSL PLAIN", func(t *testing.T) { run(t, "plain", "SASL_SSL", sasl("PLAIN")...) })
	t.Run("SASL_SSL OAUTHBEARER from a token file", func(t *testing.T) {
		run(t, "oauth", "SASL_SSL", "--kafka-tls-ca-file", caFile, "--kafka-sasl-mechanism", "OAUTHBEARER", "--kafka-sasl-token-file", tokenFile)
	})

	fail := func(t *testing.T, name, listener string, flags []string, want ...string) string {
		args := append(bridgeArgs(k.listeners[listener], s.topic, randomTable(), "--pg-url", s.pgURL), flags...)
		return requireFailsFast(t, startBridge(t, name, args...), want...)
	}
	t.Run("a wrong password fails fast", func(t *testing.T) {
		wrongFile := tlstest.WriteFile(t, t.TempDir(), "wrong", []byte(k.password+"-wrong\n"))
		out := fail(t, "wrong-password", "SASL_SSL", []string{"--kafka-tls-ca-file", caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-256",
			"--kafka-sasl-user", k.user, "--kafka-sasl-password-file", wrongFile}, "refused the SASL credentials", "SASL_AUTHENTICATION_FAILED")
		assertNoSecret(t, "the log", out, k.password)
	})
	t.Run("a wrong CA fails fast", func(t *testing.T) {
		other := tlstest.WriteFile(t, t.TempDir(), "other.pem", tlstest.NewCA(t, "other").PEM)
		fail(t, "wrong-ca", "SASL_SSL", append(sasl("SCRAM-SHA-512"), "--kafka-tls-ca-file", other),
			"certificate signed by unknown authority", "--kafka-tls-ca-file")
	})
	t.Run("an expired client certificate fails fast", func(t *testing.T) {
		old := k.ca.Issue(t, tlstest.Spec{CommonName: "kafka2pg-old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
		d := t.TempDir()
		fail(t, "expired-client-cert", "MTLS", []string{"--kafka-tls-ca-file", caFile,
			"--kafka-tls-cert-file", tlstest.WriteFile(t, d, "old.pem", old.CertPEM),
			"--kafka-tls-key-file", tlstest.WriteFile(t, d, "old.key", old.KeyPEM)},
			"expired at", "--kafka-tls-cert-file")
	})
	t.Run("mTLS without a client certificate fails fast", func(t *testing.T) {
		fail(t, "no-client-cert", "MTLS", []string{"--kafka-tls-ca-file", caFile}, "--kafka-tls-cert-file")
	})
	t.Run("TLS to the plaintext listener fails fast", func(t *testing.T) {
		fail(t, "tls-to-plaintext", "PLAINTEXT", []string{"--kafka-tls-ca-file", caFile}, "TLS")
	})
	t.Run("SASL_SSL without SASL fails fast", func(t *testing.T) {
		fail(t, "no-sasl", "SASL_SSL", []string{"--kafka-tls-ca-file", caFile}, "SASL")
	})
}
