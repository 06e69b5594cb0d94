package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/reader"
)

// defineSecurityFlags defines the Kafka TLS and SASL flags of `run`. Like
// every flag, each is mirrored by KAFKA2PG_<FLAG>; secrets belong there or
// in a file, not on the command line, where ps shows them.
func defineSecurityFlags(fs *pflag.FlagSet, s *reader.Security) {
	fs.BoolVar(&s.TLS, "kafka-tls", false, "TLS to the brokers (implied by any --kafka-tls-* flag)")
	fs.StringVar(&s.TLSCAFile, "kafka-tls-ca-file", "", "PEM file of the brokers' CAs (default: the system's)")
	fs.StringVar(&s.TLSCertFile, "kafka-tls-cert-file", "", "PEM client certificate, for mutual TLS")
	fs.StringVar(&s.TLSKeyFile, "kafka-tls-key-file", "", "PEM key of --kafka-tls-cert-file")
	fs.StringVar(&s.TLSServerName, "kafka-tls-server-name", "", "name the brokers' certificates carry (default: the host)")
	fs.StringVar(&s.TLSMinVersion, "kafka-tls-min-version", reader.DefaultTLSMinVersion, "oldest TLS version accepted: 1.2 or 1.3")
	fs.StringVar(&s.SASLMechanism, "kafka-sasl-mechanism", "", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	fs.StringVar(&s.SASLUser, "kafka-sasl-user", "", "SASL user (PLAIN, SCRAM)")
	fs.StringVar(&s.SASLPassword, "kafka-sasl-password", "", "SASL password; better in the environment or a file")
	fs.StringVar(&s.SASLPasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password")
	fs.StringVar(&s.SASLTokenFile, "kafka-sasl-token-file", "", "file holding the OAUTHBEARER token, read per connection")
}

// definePGURLFileFlag defines --pg-url-file, the Postgres URL read from a
// file (a mounted secret) instead of --pg-url.
func definePGURLFileFlag(fs *pflag.FlagSet, path *string) {
	fs.StringVar(path, "pg-url-file", "", "file holding the PostgreSQL URL, instead of --pg-url")
}

// resolvePGURL reads o.pgURLFile into o.cfg.PostgresURL. Call it after the environment
// is applied and before validate. Its errors name the file, never its content.
func resolvePGURL(o *runOptions) error { return readPGURLFile(&o.cfg.PostgresURL, o.pgURLFile) }

// readPGURLFile sets *url from file when file is given; every command that
// takes --pg-url also takes --pg-url-file through it.
func readPGURLFile(url *string, file string) error {
	if file == "" {
		return nil
	}
	if *url != "" {
		return errors.New("--pg-url-file and --pg-url are both set (--pg-url may come from KAFKA2PG_PG_URL or DATABASE_URL): give one")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--pg-url-file: %w", err)
	}
	u := strings.TrimSpace(string(b))
	if u == "" {
		return fmt.Errorf("--pg-url-file %s is empty: put the PostgreSQL URL in it", file)
	}
	if strings.ContainsAny(u, "\n\r") {
		return fmt.Errorf("--pg-url-file %s holds several lines: put only the PostgreSQL URL in it", file)
	}
	*url = u
	return nil
}
