package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Config says how to reach the registry. The zero value of each optional
// field means the default written next to it.
type Config struct {
	// URLs of the registry (tried in order). Required.
	URLs []string
	// User and Password turn on HTTP basic auth when User is set.
	User, Password string
	// TLSCA is a PEM file of CAs to trust instead of the system's.
	TLSCA string
	// TLSCert and TLSKey are a PEM client certificate and key (mTLS);
	// both or neither.
	TLSCert, TLSKey string
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
}

// Validate checks the config without touching the network or files. Each
// error is a *stream.FieldError naming the field at fault
// (registry.Config.URLs); they are joined.
func (c Config) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, stream.FieldErrorf("registry.Config.URLs", "empty: give the registry's URL, e.g. http://localhost:8081"))
	}
	for _, u := range c.URLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, stream.FieldErrorf("registry.Config.URLs", "%q: the URL must start with http:// or https://", u))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, stream.FieldErrorf("registry.Config.TLSCert", "goes with registry.Config.TLSKey: give both, or neither"))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, stream.FieldErrorf("registry.Config.Password", "set without registry.Config.User: give the user too"))
	}
	if c.Timeout < 0 {
		errs = append(errs, stream.FieldErrorf("registry.Config.Timeout", "%s: use a positive duration", c.Timeout))
	}
	return errors.Join(errs...)
}

// Client fetches and caches schemas. Safe for concurrent use.
type Client struct {
	cl      *sr.Client
	timeout time.Duration

	mu   sync.Mutex
	byID map[int]decode.RegisteredSchema
}

// New checks cfg, reads its TLS files and returns a Client. It does not
// contact the registry.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLSCA != "" || cfg.TLSCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TLSCA != "" {
			pem, err := os.ReadFile(cfg.TLSCA)
			if err != nil {
				return nil, &stream.FieldError{Field: "registry.Config.TLSCA", Err: err}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, stream.FieldErrorf("registry.Config.TLSCA", "%s: no PEM certificate in the file", cfg.TLSCA)
			}
			tc.RootCAs = pool
		}
		if cfg.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
			if err != nil {
				return nil, stream.FieldErrorf("registry.Config.TLSCert", "with registry.Config.TLSKey: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{sr.URLs(cfg.URLs...), sr.HTTPClient(&http.Client{Transport: tr, Timeout: cfg.Timeout}), sr.UserAgent("kafka2pg")}
	if cfg.User != "" {
		opts = append(opts, sr.BasicAuth(cfg.User, cfg.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &Client{cl: cl, timeout: cfg.Timeout, byID: map[int]decode.RegisteredSchema{}}, nil
}

// ErrSubjectNotFound is wrapped when the registry has no such subject.
var ErrSubjectNotFound = errors.New("the schema registry has no such subject")

// notFound reports whether err is the registry's 404.
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// SchemaByID returns the schema of id with its references, from the cache
// when it was fetched before. An id the registry does not know is an error
// wrapping decode.ErrSchemaNotFound.
func (c *Client) SchemaByID(ctx context.Context, id int) (decode.RegisteredSchema, error) {
	c.mu.Lock()
	rs, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return rs, nil
	}
	s, err := c.cl.SchemaByID(ctx, id)
	if notFound(err) {
		return rs, fmt.Errorf("schema id %d: %w (%w)", id, decode.ErrSchemaNotFound, err)
	}
	if err != nil {
		return rs, fmt.Errorf("fetch schema id %d from the schema registry: %w", id, err)
	}
	rs, err = c.resolve(ctx, id, s)
	if err != nil {
		return rs, err
	}
	c.mu.Lock()
	c.byID[id] = rs
	c.mu.Unlock()
	return rs, nil
}

// Versions returns every live version of subject, oldest first.
func (c *Client) Versions(ctx context.Context, subject string) ([]decode.RegisteredSchema, error) {
	ss, err := c.cl.Schemas(ctx, subject)
	if notFound(err) {
		return nil, fmt.Errorf("subject %q: %w", subject, ErrSubjectNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list the versions of subject %q: %w", subject, err)
	}
	slices.SortFunc(ss, func(a, b sr.SubjectSchema) int { return a.Version - b.Version })
	out := make([]decode.RegisteredSchema, 0, len(ss))
	for _, s := range ss {
		rs, err := c.resolve(ctx, s.ID, s.Schema)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.byID[s.ID] = rs
		c.mu.Unlock()
		out = append(out, rs)
	}
	return out, nil
}

// maxReferences bounds the references one schema may pull in.
const maxReferences = 1000

// resolve fetches the references of s, transitively, dependencies first.
func (c *Client) resolve(ctx context.Context, id int, s sr.Schema) (decode.RegisteredSchema, error) {
	rs := decode.RegisteredSchema{ID: id, Type: s.Type.String(), Text: s.Schema}
	if s.Type == 0 {
		rs.Type = "AVRO"
	}
	seen := map[string]bool{}
	var visit func(refs []sr.SchemaReference) error
	visit = func(refs []sr.SchemaReference) error {
		for _, ref := range refs {
			if seen[ref.Name] {
				continue
			}
			seen[ref.Name] = true
			if len(seen) > maxReferences {
				return fmt.Errorf("schema id %d references more than %d schemas", id, maxReferences)
			}
			sub, err := c.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				return fmt.Errorf("schema id %d: fetch its reference %q (subject %q version %d): %w", id, ref.Name, ref.Subject, ref.Version, err)
			}
			if err := visit(sub.References); err != nil {
				return err
			}
			rs.References = append(rs.References, decode.SchemaReference{Name: ref.Name, Text: sub.Schema.Schema})
		}
		return nil
	}
	return rs, visit(s.References)
}

// Lookup returns a decode.SchemaLookup on c: each miss fetches with the
// ctx of its call (the batch's, from a mapper's ResolveSchemas) and the
// client's timeout.
func (c *Client) Lookup() decode.SchemaLookup {
	return func(ctx context.Context, id int) (decode.RegisteredSchema, error) {
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		return c.SchemaByID(ctx, id)
	}
}
