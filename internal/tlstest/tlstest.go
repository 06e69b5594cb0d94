// Package tlstest makes certificates for tests with crypto/x509: a CA, and
// server and client certificates it signs (expired ones too), written as PEM
// files that Go, PostgreSQL and Kafka (ssl.keystore.type=PEM) all read.
//
// Keys are ECDSA P-256, in PKCS #8: fast to make, and accepted by all three.
// Only tests import tlstest.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for a trust store or an sslrootcert.
	PEM []byte
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kafka2pg tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: create CA %q: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse CA %q: %v", name, err)
	}
	return &CA{Cert: cert, key: key, PEM: pemBlock("CERTIFICATE", der)}
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is a certificate signed by a CA, with its key.
type Leaf struct {
	CertPEM []byte // the certificate
	KeyPEM  []byte // its key, PKCS #8
	TLS     tls.Certificate
}

// Bundle is the key followed by the certificate: a Kafka PEM keystore.
func (l *Leaf) Bundle() []byte { return append(append([]byte{}, l.KeyPEM...), l.CertPEM...) }

// Spec says what certificate Issue makes. The zero value is a server and
// client certificate for localhost and 127.0.0.1, valid from an hour ago
// for a day.
type Spec struct {
	CommonName string
	// Hosts are DNS names and IP addresses (default localhost, 127.0.0.1).
	Hosts []string
	// NotBefore and NotAfter default to an hour ago and a day from now. An
	// expired certificate: NotAfter in the past.
	NotBefore, NotAfter time.Time
}

// Issue makes a certificate that ca signs.
func (ca *CA) Issue(t testing.TB, spec Spec) *Leaf {
	t.Helper()
	if spec.CommonName == "" {
		spec.CommonName = "localhost"
	}
	if spec.Hosts == nil {
		spec.Hosts = []string{"localhost", "127.0.0.1"}
	}
	if spec.NotBefore.IsZero() {
		spec.NotBefore = time.Now().Add(-time.Hour)
	}
	if spec.NotAfter.IsZero() {
		spec.NotAfter = time.Now().Add(24 * time.Hour)
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: []string{"kafka2pg tests"}},
		NotBefore:    spec.NotBefore,
		NotAfter:     spec.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range spec.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: issue %q: %v", spec.CommonName, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: marshal key of %q: %v", spec.CommonName, err)
	}
	l := &Leaf{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", pkcs8)}
	l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatalf("tlstest: load key pair of %q: %v", spec.CommonName, err)
	}
	return l
}

// WriteFile writes data to dir/name with mode 0600 and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("tlstest: serial number: %v", err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
