package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/bridge"
)

const flagSecret = "fl4g-S3cret"

func TestSecurityFlagsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("KAFKA2PG_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("KAFKA2PG_KAFKA_SASL_USER", "bridge")
	t.Setenv("KAFKA2PG_KAFKA_SASL_PASSWORD", flagSecret)
	t.Setenv("KAFKA2PG_KAFKA_TLS_CA_FILE", "/etc/kafka/ca.pem")
	_, o := parseRunForTest(t, "--kafka-tls-server-name", "kafka.internal")
	s := o.cfg.KafkaSecurity
	if s.SASLMechanism != "SCRAM-SHA-512" || s.SASLUser != "bridge" || s.SASLPassword != flagSecret ||
		s.TLSCAFile != "/etc/kafka/ca.pem" || s.TLSServerName != "kafka.internal" || s.TLSMinVersion != "1.2" {
		t.Fatalf("security from env and flags = %v (password set: %t)", s, s.SASLPassword == flagSecret)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestBadSecurityFlagsExitTwoNameTheFlagAndHideTheSecret(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	base := []string{"run", "--kafka-brokers", "127.0.0.1:9092", "--kafka-group", "g", "--topic", "t", "--pg-url", "postgres://x@127.0.0.1:1/db"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown mechanism", []string{"--kafka-sasl-mechanism", "KERBEROS", "--kafka-sasl-password", flagSecret}, "--kafka-sasl-mechanism"},
		{"SCRAM without a user", []string{"--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-password", flagSecret}, "--kafka-sasl-user"},
		{"a certificate without its key", []string{"--kafka-tls-cert-file", "/c.pem"}, "--kafka-tls-key-file"},
		{"a TLS version we do not know", []string{"--kafka-tls", "--kafka-tls-min-version", "1.0"}, "--kafka-tls-min-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), append(append([]string{}, base...), tc.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not name %s:\n%s", tc.want, stderr.String())
			}
			if strings.Contains(stderr.String()+stdout.String(), flagSecret) {
				t.Errorf("the password is in the output:\n%s", stderr.String())
			}
		})
	}
}

func TestResolvePGURL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("url", "postgres://bridge:"+flagSecret+"@db:5432/shop?sslmode=verify-full\n")
	for _, tc := range []struct {
		name    string
		o       runOptions
		wantURL string
		wantErr string
	}{
		{"no file leaves --pg-url alone", runOptions{cfg: bridge.Config{PostgresURL: "postgres://a@b/c"}}, "postgres://a@b/c", ""},
		{"the file gives the URL without its newline", runOptions{pgURLFile: good}, "postgres://bridge:" + flagSecret + "@db:5432/shop?sslmode=verify-full", ""},
		{"a file and a URL are one too many", runOptions{pgURLFile: good, cfg: bridge.Config{PostgresURL: "postgres://a@b/c"}}, "", "--pg-url-file and --pg-url are both set"},
		{"a missing file names the flag", runOptions{pgURLFile: filepath.Join(dir, "nope")}, "", "--pg-url-file: open "},
		{"an empty file is an error", runOptions{pgURLFile: write("empty", "\n")}, "", "is empty"},
		{"two lines are an error that does not print them", runOptions{pgURLFile: write("two", "postgres://u:"+flagSecret+"@a/b\npostgres://c@d/e\n")}, "", "several lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			err := resolvePGURL(&o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("resolvePGURL error = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), flagSecret) {
					t.Fatalf("the error shows the file's content: %v", err)
				}
				return
			}
			if err != nil || o.cfg.PostgresURL != tc.wantURL {
				t.Fatalf("resolvePGURL: pgURL %q, error %v; want %q", o.cfg.PostgresURL, err, tc.wantURL)
			}
		})
	}
}

func TestPGURLFileComesFromTheEnvironmentToo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(path, []byte("postgres://u@db/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("KAFKA2PG_PG_URL_FILE", path)
	_, o := parseRunForTest(t, "--topic", "t")
	if err := resolvePGURL(o); err != nil || o.cfg.PostgresURL != "postgres://u@db/x" {
		t.Fatalf("pg url = %q, err %v; want the file's", o.cfg.PostgresURL, err)
	}
}
