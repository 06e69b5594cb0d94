package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/internal/redact"
)

func TestBadFlagsExitTwoAndNameTheFlag(t *testing.T) {
	base := []string{"run", "--kafka-brokers", "127.0.0.1:9092", "--kafka-group", "g", "--topic", "t", "--pg-url", "postgres://x@127.0.0.1:1/db"}
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"an unknown flag", append(base, "--no-such-flag"), "--no-such-flag"},
		{"a bad start policy", append(base, "--kafka-start", "yesterday"), "--kafka-start"},
		{"a bad value format", append(base, "--value-format", "avro"), "--value-format"},
		{"a broker without a port", []string{"run", "--kafka-brokers", "kafka", "--kafka-group", "g", "--topic", "t", "--pg-url", "postgres://x@h/db"}, "--kafka-brokers"},
		{"no Postgres URL", []string{"run", "--kafka-brokers", "h:1", "--kafka-group", "g", "--topic", "t"}, "--pg-url"},
		{"a batch wait that is not a duration", append(base, "--batch-max-wait", "soon"), "batch-max-wait"},
		{"a table name Postgres would truncate", append(base, "--pg-table", strings.Repeat("x", 70)), "--pg-table"},
		{"a bad log level", append(base, "--log-level", "loud"), "--log-level"},
		{"a stray argument", append(base, "orders"), "--topic orders"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KAFKA2PG_PG_URL", "")
			t.Setenv("DATABASE_URL", "")
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), c.args, &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.flag) {
				t.Errorf("stderr does not name %s:\n%s", c.flag, stderr.String())
			}
		})
	}
}

func TestEnvironmentMirrorsFlagsAndFlagsWin(t *testing.T) {
	t.Setenv("KAFKA2PG_KAFKA_BROKERS", "10.0.0.1:9092,10.0.0.2:9092")
	t.Setenv("KAFKA2PG_BATCH_MAX_ROWS", "777")
	t.Setenv("KAFKA2PG_KAFKA_GROUP", "from-env")
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "postgres://u@db/x")
	_, o := parseRunForTest(t, "--kafka-group", "from-flag", "--topic", "t")

	if got := strings.Join(o.cfg.Kafka.Brokers, ","); got != "10.0.0.1:9092,10.0.0.2:9092" {
		t.Errorf("brokers = %q", got)
	}
	if o.cfg.Kafka.BatchMaxRows != 777 {
		t.Errorf("batch rows = %d, want 777 from the environment", o.cfg.Kafka.BatchMaxRows)
	}
	if o.cfg.Kafka.Group != "from-flag" {
		t.Errorf("group = %q: a flag must win over the environment", o.cfg.Kafka.Group)
	}
	if o.cfg.PostgresURL != "postgres://u@db/x" {
		t.Errorf("pg url = %q, want DATABASE_URL's", o.cfg.PostgresURL)
	}
	t.Setenv("KAFKA2PG_PG_URL", "postgres://u@primary/x")
	_, o = parseRunForTest(t, "--topic", "t")
	if o.cfg.PostgresURL != "postgres://u@primary/x" {
		t.Errorf("pg url = %q: KAFKA2PG_PG_URL must win over DATABASE_URL", o.cfg.PostgresURL)
	}
}

func TestABadEnvironmentValueNamesTheVariable(t *testing.T) {
	t.Setenv("KAFKA2PG_BATCH_MAX_ROWS", "lots")
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"run"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "KAFKA2PG_BATCH_MAX_ROWS") {
		t.Errorf("exit %d, stderr %q: want exit 2 naming KAFKA2PG_BATCH_MAX_ROWS", code, stderr.String())
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	for _, s := range []string{"postgres://app:s3cret@db:5432/x", "host=db password=s3cret user=app"} {
		if got := redact.URL(s); strings.Contains(got, "s3cret") {
			t.Errorf("redact.URL(%q) = %q", s, got)
		}
	}
	err := redact.Err(errFor("failed to connect to postgres://app:s3cret@db:5432/x: refused"))
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("redactErr kept the password: %v", err)
	}
}

type errFor string

func (e errFor) Error() string { return string(e) }

func parseRunForTest(t *testing.T, args ...string) (*pflag.FlagSet, *runOptions) {
	t.Helper()
	fs := newFlagSet("run")
	var o runOptions
	defineRunFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs, map[string][]string{"pg-url": {"DATABASE_URL"}}); err != nil {
		t.Fatal(err)
	}
	return fs, &o
}

func TestEveryCommandKeepsThePostgresPasswordOutOfItsErrors(t *testing.T) {
	const secret = "s3cret-Pa55word"
	url := "postgres://app:" + secret + "@127.0.0.1:1/db?connect_timeout=2"
	file := t.TempDir() + "/pg-url"
	if err := os.WriteFile(file, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{
		{"status", "--pg-url", url},
		{"status", "--pg-url-file", file, "--json"},
		{"offsets", "show", "--pg-url-file", file},
		{"offsets", "reset", "--pg-url", url, "--kafka-brokers", "127.0.0.1:1", "--kafka-group", "g", "--to", "earliest"},
		{"dead-letters", "list", "--pg-url-file", file},
		{"migrate", "version", "--pg-url-file", file},
		{"migrate", "up", "--pg-url", url},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code == exitOK {
			t.Errorf("%v succeeded against a closed port:\n%s", args, out)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%v printed the password:\n%s", args, out)
		}
	}
}
