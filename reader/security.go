package reader

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka2pg/kafka2pg/stream"
)

// SASL mechanisms that Security accepts (sasl.mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
)

// DefaultTLSMinVersion is the oldest TLS version Security accepts unless
// TLSMinVersion says otherwise.
const DefaultTLSMinVersion = "1.2"

// Security is how the bridge connects to Kafka: TLS, and SASL
// authentication. Where a field corresponds to a setting of Kafka's Java
// clients, its comment names it; the zero value is a plaintext,
// unauthenticated connection (security.protocol PLAINTEXT).
//
// Secrets (SASLPassword, and what the files hold) never appear in String,
// LogValue, or any error that Validate, Options or CheckBrokers return.
type Security struct {
	// TLS turns TLS on with the system's CA pool (security.protocol SSL,
	// or SASL_SSL with SASLMechanism). Any of the TLS files or
	// TLSServerName turns it on too.
	TLS bool
	// TLSCAFile is a PEM file of the CAs that sign the brokers' certificates
	// (ssl.truststore.location, in PEM); empty: the system's CA pool.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the PEM client certificate (chain) and
	// key for mutual TLS (ssl.keystore.location, in PEM); both or
	// neither.
	TLSCertFile string
	TLSKeyFile  string
	// TLSServerName is the name the brokers' certificates must carry
	// (TLS's SNI and verified name); empty: each broker's host name.
	TLSServerName string
	// TLSMinVersion is the oldest TLS version accepted, "1.2" (default) or
	// "1.3" (ssl.enabled.protocols' oldest).
	TLSMinVersion string

	// SASLMechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
	// (sasl.mechanism); empty: no SASL.
	SASLMechanism string
	// SASLUser is the user of PLAIN and SCRAM (sasl.jaas.config's
	// username).
	SASLUser string
	// SASLPassword is the password of PLAIN and SCRAM (sasl.jaas.config's
	// password). A program should read it from a secret store or a file
	// (SASLPasswordFile), not from its command line, which ps shows.
	SASLPassword string
	// SASLPasswordFile holds the password instead, read at start; one
	// trailing newline is ignored.
	SASLPasswordFile string
	// SASLTokenFile holds the OAUTHBEARER token.
	// It is read again for every new connection, so a sidecar may rotate
	// it in place.
	SASLTokenFile string
}

// Principal is the principal that Kafka's ACLs name for these settings,
// User:<SASLUser> with PLAIN and SCRAM; empty when the broker makes it of
// what the client cannot see (an OAUTHBEARER token's subject, a client
// certificate's DN as the broker maps it, an anonymous connection).
func (s Security) Principal() string {
	if s.SASLUser == "" || s.SASLMechanism == "OAUTHBEARER" {
		return ""
	}
	return "User:" + s.SASLUser
}

// tlsOn reports whether the connection uses TLS.
func (s Security) tlsOn() bool {
	return s.TLS || s.TLSCAFile != "" || s.TLSCertFile != "" || s.TLSKeyFile != "" || s.TLSServerName != ""
}

// Validate checks the combination of settings, without reading any file.
// Each error is a *stream.FieldError naming the field at fault and saying
// what to do; they are joined.
func (s Security) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, stream.FieldErrorf("reader.Security."+field, format, args...))
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		add("TLSCertFile", "goes with reader.Security.TLSKeyFile: give both for mutual TLS, or neither")
	}
	if _, err := tlsVersion(s.TLSMinVersion); err != nil {
		errs = append(errs, err)
	}
	if !s.tlsOn() && s.TLSMinVersion == "1.3" {
		add("TLSMinVersion", "set but TLS is off: set reader.Security.TLS (or reader.Security.TLSCAFile)")
	}
	hasPassword := s.SASLPassword != "" || s.SASLPasswordFile != ""
	switch strings.ToUpper(s.SASLMechanism) {
	case "":
		if s.SASLUser != "" || hasPassword || s.SASLTokenFile != "" {
			add("SASLMechanism", "empty, but a SASL user, password or token file is set: give PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.SASLUser == "" {
			add("SASLUser", "empty: SASL %s needs a user", s.SASLMechanism)
		}
		switch {
		case !hasPassword:
			add("SASLPassword", "empty: SASL %s needs a password: set it or reader.Security.SASLPasswordFile", s.SASLMechanism)
		case s.SASLPassword != "" && s.SASLPasswordFile != "":
			add("SASLPasswordFile", "set with reader.Security.SASLPassword: give one")
		}
		if s.SASLTokenFile != "" {
			add("SASLTokenFile", "is for OAUTHBEARER, not %s", s.SASLMechanism)
		}
	case SASLOAuthBearer:
		if s.SASLTokenFile == "" {
			add("SASLTokenFile", "empty: SASL OAUTHBEARER needs a token file")
		}
		if s.SASLUser != "" || hasPassword {
			add("SASLUser", "OAUTHBEARER uses no user or password: remove them")
		}
	default:
		add("SASLMechanism", "%q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", s.SASLMechanism)
	}
	return errors.Join(errs...)
}

// Options validates s, reads its files and returns the franz-go options
// that apply it: DialTLSConfig and SASL. A zero Security returns none.
// Errors name the flag of the file that is wrong.
func (s Security) Options() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.tlsOn() {
		cfg, err := s.tlsConfig(time.Now())
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.SASLMechanism != "" {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s Security) tlsConfig(now time.Time) (*tls.Config, error) {
	minVersion, _ := tlsVersion(s.TLSMinVersion) // checked by Validate
	cfg := &tls.Config{MinVersion: minVersion, ServerName: s.TLSServerName}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, &stream.FieldError{Field: "reader.Security.TLSCAFile", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, stream.FieldErrorf("reader.Security.TLSCAFile", "%s: no PEM certificate in it", s.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if s.TLSCertFile != "" {
		pair, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			// The error names the files, never their content.
			return nil, stream.FieldErrorf("reader.Security.TLSCertFile", "with reader.Security.TLSKeyFile: %w", err)
		}
		// An expired client certificate would only show up as a vague
		// handshake failure on the broker's side: say it here.
		if leaf := pair.Leaf; leaf != nil {
			if now.After(leaf.NotAfter) {
				return nil, stream.FieldErrorf("reader.Security.TLSCertFile", "%s: the client certificate %q expired at %s: renew it",
					s.TLSCertFile, leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
			}
			if now.Before(leaf.NotBefore) {
				return nil, stream.FieldErrorf("reader.Security.TLSCertFile", "%s: the client certificate %q is not valid before %s: check the clock",
					s.TLSCertFile, leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(time.RFC3339))
			}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func tlsVersion(v string) (uint16, error) {
	switch v {
	case "", DefaultTLSMinVersion:
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, stream.FieldErrorf("reader.Security.TLSMinVersion", "%q is not 1.2 or 1.3", v)
}

func (s Security) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.SASLMechanism) {
	case SASLOAuthBearer:
		path := s.SASLTokenFile
		if _, err := readSecretFile(path); err != nil {
			return nil, &stream.FieldError{Field: "reader.Security.SASLTokenFile", Err: err}
		}
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			token, err := readSecretFile(path)
			if err != nil {
				return oauth.Auth{}, &stream.FieldError{Field: "reader.Security.SASLTokenFile", Err: err}
			}
			return oauth.Auth{Token: token}, nil
		}), nil
	}
	pass := s.SASLPassword
	if s.SASLPasswordFile != "" {
		p, err := readSecretFile(s.SASLPasswordFile)
		if err != nil {
			return nil, &stream.FieldError{Field: "reader.Security.SASLPasswordFile", Err: err}
		}
		pass = p
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case SASLPlain:
		return plain.Auth{User: s.SASLUser, Pass: pass}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: s.SASLUser, Pass: pass}.AsSha256Mechanism(), nil
	default: // SASLScramSHA512; Validate rejected the rest
		return scram.Auth{User: s.SASLUser, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// readSecretFile returns the content of a password or token file without
// its trailing line break. An empty file is an error. The content never
// appears in an error.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError: the path and the reason, no content
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// String describes the settings with the secrets left out, so that %v on a
// Security (or a Config holding one) cannot leak them.
func (s Security) String() string {
	var parts []string
	if s.tlsOn() {
		t := "tls"
		if s.TLSCertFile != "" {
			t = "mtls"
		}
		if s.TLSCAFile != "" {
			t += " ca=" + s.TLSCAFile
		}
		if s.TLSServerName != "" {
			t += " server-name=" + s.TLSServerName
		}
		parts = append(parts, t)
	}
	if s.SASLMechanism != "" {
		sa := "sasl=" + strings.ToUpper(s.SASLMechanism)
		if s.SASLUser != "" {
			sa += " user=" + s.SASLUser
		}
		if s.SASLPassword != "" || s.SASLPasswordFile != "" || s.SASLTokenFile != "" {
			sa += " secret=redacted"
		}
		parts = append(parts, sa)
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, " ")
}

// GoString is String, for %#v.
func (s Security) GoString() string { return "reader.Security{" + s.String() + "}" }

// LogValue is String, for slog.
func (s Security) LogValue() slog.Value { return slog.StringValue(s.String()) }

// CheckBrokers connects to the brokers with these settings once, with a
// short-lived client of its own, and returns an error that says what to fix
// when the attempt shows a TLS or authentication problem: a wrong password,
// an unknown CA, an expired or refused certificate, a listener that does not
// speak TLS. Those never heal by retrying, so the bridge should stop with
// the error before it joins the group. Any other trouble (a broker down, a
// timeout) returns nil: the reader retries it as usual. It waits at most
// timeout.
func (s Security) CheckBrokers(ctx context.Context, brokers []string, timeout time.Duration) error {
	opts, err := s.Options()
	if err != nil {
		return err
	}
	var hook checkHook
	cl, err := kgo.NewClient(append(opts,
		kgo.SeedBrokers(brokers...),
		kgo.DialTimeout(min(timeout, 10*time.Second)),
		kgo.RequestRetries(0),
		kgo.WithHooks(&hook),
	)...)
	if err != nil {
		return fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A few tries: a broker that closes every connection we open, right
	// after opening it, is refusing us; one that did it once may have been
	// restarting.
	for try := 1; ; try++ {
		err = cl.Ping(ctx)
		if err == nil {
			return nil
		}
		if hint := securityHint(err, s, hook.saslCut.Load()); hint != "" {
			return fmt.Errorf("connect to Kafka %s: %w (%s)", strings.Join(brokers, ","), err, hint)
		}
		if try == 3 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if s.tlsOn() && hook.handshakeCut.Load() >= 3 {
		return fmt.Errorf("connect to Kafka %s: %w (the broker closes the connection during every TLS handshake: "+
			"the listener does not speak TLS (use its SSL or SASL_SSL port, or drop reader.Security.TLS), or refuses reader.Security.TLSMinVersion)", strings.Join(brokers, ","), err)
	}
	if hook.connected.Load() >= 3 && hook.cut.Load() >= 3 && s.SASLMechanism == "" {
		return fmt.Errorf("connect to Kafka %s: %w (the broker closes every connection right after it opens: "+
			"the listener may require SASL (reader.Security.SASLMechanism) or TLS (reader.Security.TLS))", strings.Join(brokers, ","), err)
	}
	return nil
}

// checkHook notices a connection that the broker closed while we were
// authenticating: how a broker that refuses the credentials may answer
// (kfake always does; Kafka sends SASL_AUTHENTICATION_FAILED first).
// It also counts connections opened, handshakes and reads cut by the broker
// closing the connection.
type checkHook struct {
	saslCut                      atomic.Bool
	connected, cut, handshakeCut atomic.Int32
}

func (h *checkHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	switch {
	case err == nil:
		h.connected.Add(1)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		// The TCP connection opened (a refused one is ECONNREFUSED), then
		// the broker closed it during the TLS handshake.
		h.handshakeCut.Add(1)
	}
}

func (h *checkHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		return
	}
	if key == int16(kmsg.SASLAuthenticate) || key == int16(kmsg.SASLHandshake) {
		h.saslCut.Store(true)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		h.cut.Add(1)
	}
}

// securityHint returns what to fix when err is a TLS or SASL failure, or ""
// when it is not one. saslCut says the broker closed a connection during
// authentication.
func securityHint(err error, s Security, saslCut bool) string {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		recordHdr tls.RecordHeaderError
		verifyErr *tls.CertificateVerificationError
	)
	msg := err.Error()
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), saslCut:
		return "the broker refused the SASL credentials: check reader.Security.SASLMechanism, reader.Security.SASLUser and the password or token"
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return "the broker does not accept this SASL mechanism on this listener: check reader.Security.SASLMechanism and the broker's sasl.enabled.mechanisms"
	case errors.As(err, &unknownCA):
		return "the broker's certificate is not signed by a trusted CA: give the CA that signed it with reader.Security.TLSCAFile"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the broker's certificate is expired or not valid yet: renew it on the broker, or check the clock"
	case errors.As(err, &invalid):
		return "the broker's certificate is not valid for a TLS server: check the broker's keystore"
	case errors.As(err, &hostname):
		return "the broker's certificate does not name the host we dialed: use the advertised host name, or reader.Security.TLSServerName"
	case errors.As(err, &verifyErr):
		return "the broker's certificate did not verify: check reader.Security.TLSCAFile and reader.Security.TLSServerName"
	case strings.Contains(msg, "remote error: tls:"):
		if s.TLSCertFile == "" {
			return "the broker ended the TLS handshake: it may require a client certificate (reader.Security.TLSCertFile, reader.Security.TLSKeyFile)"
		}
		return "the broker refused the client certificate (reader.Security.TLSCertFile): expired, revoked, or not signed by a CA it trusts"
	case errors.As(err, &recordHdr):
		return "the listener does not speak TLS: drop reader.Security.TLS, or use the broker's SSL or SASL_SSL port"
	}
	return ""
}
