package bridge

import (
	"errors"
	"time"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Config configures a Bridge. The zero value of every field but
// Kafka.Brokers, Kafka.Group, Kafka.Topics, Sinks and PostgresURL is its
// default.
type Config struct {
	// Kafka is the reader's configuration: the brokers, the consumer
	// group, the topics, how batches are cut, the memory budget, and the
	// graceful stop's deadline (FlushTimeout). The bridge sets its Logger
	// and Permanent, and adds its metrics hooks to ExtraOpts.
	Kafka reader.Config
	// KafkaSecurity is TLS and SASL to the brokers. Zero: plain text,
	// unauthenticated.
	KafkaSecurity reader.Security
	// Sinks are the topics' tables and mappings: a sinks.Config built
	// (sinks.Config.Build), or a Set of ingest sinks made by hand.
	// Required.
	Sinks sinks.Set
	// Writer is the writer's configuration: what a bad record does, the
	// write deadline, cross-partition batches. The bridge sets its Sinks
	// and Resolve from Sinks, its Group from Kafka.Group, its Logger and
	// Tracer.
	Writer ingest.Config

	// PostgresURL is the database: a URL or a key=value connection
	// string, as pgx takes it. Required.
	PostgresURL string
	// PostgresMaxConns bounds the connections to Postgres. Default 4.
	PostgresMaxConns int32
	// SkipMigrations leaves the kafka2pg schema as it is at start, for a
	// role that may not change it (migrate it beforehand).
	SkipMigrations bool
	// SkipCreateTables refuses to create the target tables that are
	// missing: Run fails naming them instead.
	SkipCreateTables bool

	// UntilCaughtUp makes Run stop gracefully, and return nil, once every
	// partition's durable offset in Postgres has reached the end offset
	// the topic had when Run began (for backfills and cron jobs).
	UntilCaughtUp bool
	// CaughtUpTimeout gives up UntilCaughtUp when no write has committed
	// for this long: Run returns an error naming what failed. Default 10m;
	// a negative duration never gives up.
	CaughtUpTimeout time.Duration
	// ReadyStallTimeout makes Ready fail while a partition with lag has
	// committed no write for this long, or a write has been in flight
	// this long. Default 60s; a negative duration turns the check off.
	// Whatever it is, Ready fails while a partition with lag has failed
	// writes or claims since its last commit: a write that gets no
	// answer fails at its step's deadline (ingest's estimates), seconds
	// on a database that answered fast.
	ReadyStallTimeout time.Duration
	// ProgressInterval is how often a progress line is logged (rates, lag,
	// dead letters, failed writes by cause). Default 10s; a negative duration
	// logs none.
	ProgressInterval time.Duration
}

// Validate checks the configuration, the sinks aside (New checks them).
// Each error is a *stream.FieldError naming the field at fault
// (bridge.Config.PostgresURL, reader.Config.Brokers) and saying what to
// do; they are joined.
func (c Config) Validate() error {
	var errs []error
	if c.PostgresURL == "" {
		errs = append(errs, stream.FieldErrorf("bridge.Config.PostgresURL", "empty: give the PostgreSQL URL, e.g. postgres://user@host:5432/db"))
	}
	if c.PostgresMaxConns < 0 {
		errs = append(errs, stream.FieldErrorf("bridge.Config.PostgresMaxConns", "%d: use at least 1", c.PostgresMaxConns))
	}
	if len(c.Writer.Sinks) > 0 || c.Writer.Resolve != nil {
		errs = append(errs, stream.FieldErrorf("bridge.Config.Writer", "Sinks or Resolve is set: give the sinks in bridge.Config.Sinks, which the bridge hands to the writer"))
	}
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.KafkaSecurity.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DefaultConfig returns the configuration a zero Config stands for: the
// reader's and the writer's defaults (reader.DefaultConfig,
// ingest.DefaultConfig) and the bridge's own, and nothing of what has none
// (the brokers, the group, the topics, the sinks, the URL). The writer's
// WriteTimeoutRows stays zero: it is Kafka.BatchMaxRows. The kafka2pg
// command's flags show these values.
func DefaultConfig() Config {
	c := Config{
		Kafka:             reader.DefaultConfig(),
		KafkaSecurity:     reader.Security{TLSMinVersion: reader.DefaultTLSMinVersion},
		Writer:            ingest.DefaultConfig(),
		PostgresMaxConns:  4,
		CaughtUpTimeout:   10 * time.Minute,
		ReadyStallTimeout: 60 * time.Second,
		ProgressInterval:  10 * time.Second,
	}
	c.Writer.WriteTimeoutRows = 0
	return c
}

// withDefaults is c with the default of every field left zero
// (DefaultConfig's; the reader and the writer fill theirs), and the
// writer's group and batch size from the Kafka side.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	orDefault(&c.PostgresMaxConns, def.PostgresMaxConns)
	orDefault(&c.CaughtUpTimeout, def.CaughtUpTimeout)
	orDefault(&c.ReadyStallTimeout, def.ReadyStallTimeout)
	orDefault(&c.ProgressInterval, def.ProgressInterval)
	orDefault(&c.Kafka.BatchMaxRows, def.Kafka.BatchMaxRows)
	orDefault(&c.Kafka.FlushTimeout, def.Kafka.FlushTimeout)
	c.Writer.Group = c.Kafka.Group
	c.Writer.Sinks, c.Writer.Resolve = c.Sinks.Fixed, nil
	if len(c.Sinks.Patterns) > 0 {
		c.Writer.Resolve = c.Sinks.Resolve
	}
	orDefault(&c.Writer.WriteTimeoutRows, c.Kafka.BatchMaxRows)
	return c
}

// orDefault sets *p to def when *p is zero.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
