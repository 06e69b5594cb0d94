package reader

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka2pg/kafka2pg/internal/tlstest"
	"github.com/kafka2pg/kafka2pg/stream"
)

const testSecret = "s3cret-Pa55word"

func TestSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  Security
		want string // a substring of the error; "" for none
	}{
		{"the zero value is plaintext without SASL", Security{}, ""},
		{"SCRAM with a user and a password is fine", Security{SASLMechanism: "SCRAM-SHA-512", SASLUser: "u", SASLPassword: "p"}, ""},
		{"a lower-case mechanism is fine", Security{SASLMechanism: "scram-sha-256", SASLUser: "u", SASLPasswordFile: "/f"}, ""},
		{"OAUTHBEARER with a token file is fine", Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: "/t"}, ""},
		{"mTLS with a cert and a key is fine", Security{TLSCertFile: "c", TLSKeyFile: "k", TLSMinVersion: "1.3"}, ""},
		{"a cert without its key names both flags", Security{TLSCertFile: "c"}, "reader.Security.TLSCertFile: goes with reader.Security.TLSKeyFile"},
		{"an unknown TLS version names the flag", Security{TLS: true, TLSMinVersion: "1.1"}, `reader.Security.TLSMinVersion: "1.1" is not 1.2 or 1.3`},
		{"a TLS version without TLS says to turn it on", Security{TLSMinVersion: "1.3"}, "reader.Security.TLSMinVersion: set but TLS is off"},
		{"an unknown mechanism names the flag", Security{SASLMechanism: "GSSAPI"}, `reader.Security.SASLMechanism: "GSSAPI" is not`},
		{"PLAIN without a user asks for one", Security{SASLMechanism: "PLAIN", SASLPassword: "p"}, "reader.Security.SASLUser: empty: SASL PLAIN needs a user"},
		{"SCRAM without a password says where to put it", Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: "u"}, "reader.Security.SASLPassword: empty: SASL SCRAM-SHA-256 needs a password: set it or reader.Security.SASLPasswordFile"},
		{"a password and a password file are one too many", Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPassword: "p", SASLPasswordFile: "f"}, "reader.Security.SASLPasswordFile: set with reader.Security.SASLPassword"},
		{"OAUTHBEARER without a token file asks for one", Security{SASLMechanism: "OAUTHBEARER"}, "reader.Security.SASLTokenFile: empty: SASL OAUTHBEARER needs a token file"},
		{"a user without a mechanism asks for the mechanism", Security{SASLUser: "u"}, "reader.Security.SASLMechanism: empty, but a SASL user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sec.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate(%#v) = %v, want nil", tc.sec, err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate(%#v) = nil, want an error with %q", tc.sec, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate(%#v) = %q, want it to contain %q", tc.sec, err, tc.want)
			case tc.want != "":
				if fe, ok := errors.AsType[*stream.FieldError](err); !ok || !strings.HasPrefix(tc.want, fe.Field+":") {
					t.Fatalf("Validate(%#v) = %q, want a *stream.FieldError on the field %q begins with", tc.sec, err, tc.want)
				}
			}
		})
	}
}

func TestSecurityNeverPrintsSecrets(t *testing.T) {
	s := Security{TLS: true, SASLMechanism: "SCRAM-SHA-256", SASLUser: "bridge", SASLPassword: testSecret}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "security", s, "config", Config{Brokers: []string{"b:9092"}})
	for _, out := range []string{s.String(), fmt.Sprintf("%v", s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), logged.String()} {
		if strings.Contains(out, testSecret) {
			t.Errorf("the password leaked: %s", out)
		}
	}
	if got := s.String(); !strings.Contains(got, "user=bridge") || !strings.Contains(got, "secret=redacted") {
		t.Errorf("String() = %q, want the user and secret=redacted", got)
	}
}

func TestSecurityOptionsReadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "files CA")
	caFile := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	expired := ca.Issue(t, tlstest.Spec{CommonName: "old-client", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	expiredCert := tlstest.WriteFile(t, dir, "expired.pem", expired.CertPEM)
	expiredKey := tlstest.WriteFile(t, dir, "expired.key", expired.KeyPEM)
	empty := tlstest.WriteFile(t, dir, "empty", nil)
	notPEM := tlstest.WriteFile(t, dir, "not.pem", []byte(testSecret))
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name string
		sec  Security
		want string
	}{
		{"a missing CA file names the flag", Security{TLSCAFile: missing}, "reader.Security.TLSCAFile: open " + missing},
		{"a CA file without PEM says so", Security{TLSCAFile: notPEM}, "no PEM certificate in it"},
		{"an expired client certificate fails before any connection", Security{TLSCAFile: caFile, TLSCertFile: expiredCert, TLSKeyFile: expiredKey}, `the client certificate "old-client" expired at`},
		{"a key that is not PEM names the flags", Security{TLSCertFile: expiredCert, TLSKeyFile: notPEM}, "reader.Security.TLSCertFile: with reader.Security.TLSKeyFile: "},
		{"a missing password file names the flag", Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPasswordFile: missing}, "reader.Security.SASLPasswordFile: open " + missing},
		{"an empty password file is an error", Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPasswordFile: empty}, "is empty"},
		{"an empty token file is an error", Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: empty}, "reader.Security.SASLTokenFile: " + empty + " is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.sec.Options()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Options() error = %v, want it to contain %q", err, tc.want)
			}
			if _, ok := errors.AsType[*stream.FieldError](err); !ok {
				t.Fatalf("Options() error = %v, want a *stream.FieldError", err)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Fatalf("Options() error shows the content of a file: %v", err)
			}
		})
	}
	if opts, err := (Security{}).Options(); err != nil || len(opts) != 0 {
		t.Fatalf("zero Security: Options() = %d options, %v; want none, nil", len(opts), err)
	}
}

// kfakeCluster starts a one-broker kfake cluster with opts.
func kfakeCluster(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// checkWith builds a client for broker with sec and runs CheckBrokers.
func checkWith(t testing.TB, broker string, sec Security) error {
	t.Helper()
	start := time.Now()
	err := sec.CheckBrokers(t.Context(), []string{broker}, 10*time.Second)
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("CheckBrokers took %v: a security failure must not wait for the timeout", took)
	}
	return err
}

func TestCheckBrokersSASLOnKfake(t *testing.T) {
	broker := kfakeCluster(t, kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", testSecret),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", testSecret),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", testSecret))
	passFile := tlstest.WriteFile(t, t.TempDir(), "password", []byte(testSecret+"\n"))
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		user := map[string]string{"PLAIN": "plain-user", "SCRAM-SHA-256": "scram256-user", "SCRAM-SHA-512": "scram512-user"}[mech]
		t.Run(mech+" with the right password from a file connects", func(t *testing.T) {
			if err := checkWith(t, broker, Security{SASLMechanism: mech, SASLUser: user, SASLPasswordFile: passFile}); err != nil {
				t.Fatalf("CheckBrokers: %v", err)
			}
		})
		t.Run(mech+" with a wrong password fails fast and says so", func(t *testing.T) {
			const wrong = "wrong-Pa55word"
			err := checkWith(t, broker, Security{SASLMechanism: mech, SASLUser: user, SASLPassword: wrong})
			if err == nil || !strings.Contains(err.Error(), "refused the SASL credentials") {
				t.Fatalf("CheckBrokers = %v, want the SASL credentials refused", err)
			}
			if strings.Contains(err.Error(), wrong) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
	t.Run("no SASL against a SASL broker is refused", func(t *testing.T) {
		if err := checkWith(t, broker, Security{}); err == nil {
			t.Fatal("CheckBrokers = nil without credentials, want an error")
		} else {
			t.Logf("CheckBrokers without credentials: %v", err)
		}
	})
}

func TestCheckBrokersTLSOnKfake(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "kfake CA")
	caFile := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	other := tlstest.NewCA(t, "some other CA")
	otherFile := tlstest.WriteFile(t, dir, "other-ca.pem", other.PEM)
	server := ca.Issue(t, tlstest.Spec{})
	client := ca.Issue(t, tlstest.Spec{CommonName: "bridge"})
	clientCert := tlstest.WriteFile(t, dir, "client.pem", client.CertPEM)
	clientKey := tlstest.WriteFile(t, dir, "client.key", client.KeyPEM)
	expiredServer := ca.Issue(t, tlstest.Spec{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})

	tlsBroker := kfakeCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}}))
	mtlsBroker := kfakeCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}))
	expiredBroker := kfakeCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{expiredServer.TLS}}))
	saslTLSBroker := kfakeCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "bridge", testSecret))

	for _, tc := range []struct {
		name   string
		broker string
		sec    Security
		want   string // "" for success
	}{
		{"TLS with the right CA connects", tlsBroker, Security{TLSCAFile: caFile, TLSMinVersion: "1.3"}, ""},
		{"TLS with the wrong CA fails fast naming the CA flag", tlsBroker, Security{TLSCAFile: otherFile}, "reader.Security.TLSCAFile"},
		{"TLS with the wrong server name names the flag", tlsBroker, Security{TLSCAFile: caFile, TLSServerName: "kafka.example.com"}, "reader.Security.TLSServerName"},
		{"an expired broker certificate fails fast and says expired", expiredBroker, Security{TLSCAFile: caFile}, "expired"},
		{"mTLS with a client certificate connects", mtlsBroker, Security{TLSCAFile: caFile, TLSCertFile: clientCert, TLSKeyFile: clientKey}, ""},
		{"mTLS without a client certificate says one may be needed", mtlsBroker, Security{TLSCAFile: caFile}, "reader.Security.TLSCertFile"},
		{"SASL_SSL with SCRAM-SHA-512 connects", saslTLSBroker, Security{TLSCAFile: caFile, SASLMechanism: "SCRAM-SHA-512", SASLUser: "bridge", SASLPassword: testSecret}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWith(t, tc.broker, tc.sec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckBrokers: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("CheckBrokers = nil, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("CheckBrokers = %q, want it to contain %q", err, tc.want)
			}
			if err != nil {
				t.Logf("CheckBrokers: %v", err)
			}
		})
	}
}

func TestCheckBrokersIgnoresABrokerThatIsDown(t *testing.T) {
	if err := (Security{}).CheckBrokers(t.Context(), []string{"127.0.0.1:1"}, time.Second); err != nil {
		t.Fatalf("CheckBrokers with the broker down = %v, want nil (the reader retries)", err)
	}
}

func TestOAuthBearerRereadsTheTokenFile(t *testing.T) {
	path := tlstest.WriteFile(t, t.TempDir(), "token", []byte("first-token\n"))
	m, err := Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: path}.mechanism()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first-token", "second-token"} {
		tlstest.WriteFile(t, filepath.Dir(path), "token", []byte(want+"\n"))
		_, first, err := m.Authenticate(t.Context(), "broker:9092")
		if err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		if !strings.Contains(string(first), "auth=Bearer "+want+"\x01") {
			t.Fatalf("first message %q does not carry the token %q", first, want)
		}
	}
}

func TestThePrincipalIsTheSASLUserWhereTheClientKnowsIt(t *testing.T) {
	for _, tc := range []struct {
		s    Security
		want string
	}{
		{Security{SASLMechanism: "SCRAM-SHA-512", SASLUser: "alice"}, "User:alice"},
		{Security{SASLMechanism: "PLAIN", SASLUser: "bob"}, "User:bob"},
		{Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: "/t"}, ""},
		{Security{TLSCertFile: "/c.pem"}, ""},
		{Security{}, ""},
	} {
		if got := tc.s.Principal(); got != tc.want {
			t.Errorf("%v.Principal() = %q, want %q", tc.s, got, tc.want)
		}
	}
}
