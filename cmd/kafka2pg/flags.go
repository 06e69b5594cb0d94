package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// runOptions is everything `kafka2pg run` is told: the bridge's
// configuration, which the flags set field by field (defineRunFlags), and
// what the command itself does with the rest (the sinks, the HTTP server,
// the memory limit, the logs).
type runOptions struct {
	cfg bridge.Config

	configPath      string          // --config
	sinks           []sinks.Sink    // from the config file
	pgURLFile       string          // --pg-url-file, read by resolvePGURL
	registry        registryOptions // --schema-registry-*
	pgSchema        string
	table           string
	valueFormat     decode.ValueFormat
	metricsAddr     string
	pprof           bool
	memoryLimit     string // --memory-limit: auto, off or a size such as 256MiB
	memoryLimitN    int64  // a size, parsed by validate
	memoryLimitAuto bool   // auto, and GOMEMLIMIT is not set
	logFormat       string
	logLevel        string
	oldNames        []string // notices of the old flag names given (aliases.go)

	// A command that does not consume (runLoad.offline) leaves Kafka's
	// brokers, group and topics optional; onlyTopics and onlyTable are the
	// --topic and --pg-table it was given, which select what it works on.
	offline    bool
	onlyTopics []string
	onlyTable  string

	// What a reload of the config file needs (reload.go).
	configWatch bool                 // --config-watch
	fileFlags   map[string]flagValue // the config file's keys but sinks
	args        []string             // the command's arguments, read again by a reload
}

// defineRunFlags binds each of run's flags to its field of o, with the
// library's default (bridge.DefaultConfig): the flags show the defaults a
// program that embeds the bridge gets too.
func defineRunFlags(fs *pflag.FlagSet, o *runOptions) {
	def := bridge.DefaultConfig()
	rc, rd, wd := &o.cfg.Kafka, def.Kafka, def.Writer
	fs.StringVar(&o.configPath, "config", "", "YAML file of sinks (topics → typed tables) and flags as keys")
	fs.BoolVar(&o.configWatch, "config-watch", false, "reload --config when it changes, as SIGHUP does")
	fs.StringSliceVar(&rc.Brokers, "kafka-brokers", nil, "bootstrap brokers, host:port[,host:port]")
	fs.StringVar(&rc.Group, "kafka-group", "", "consumer group; also keys the offsets kept in Postgres")
	fs.StringSliceVar(&rc.Topics, "topic", nil, "topic to consume (repeat for several)")
	fs.StringVar(&rc.ClientID, "kafka-client-id", rd.ClientID, "client id the brokers see")
	balancersVar(fs, &rc.Balancers, "kafka-balancers", rd.Balancers, "balancers, preferred first")
	textVar(fs, &rc.IsolationLevel, "kafka-isolation-level", rd.IsolationLevel, "read_committed, read_uncommitted")
	fs.StringVar(&rc.InstanceID, "kafka-instance-id", "", "static membership id (KIP-345), unique per instance")
	textVar(fs, &rc.GroupProtocol, "kafka-group-protocol", rd.GroupProtocol, "classic, or consumer (KIP-848)")
	bytesVar(fs, &rc.FetchMinBytes, "kafka-fetch-min-bytes", rd.FetchMinBytes, "bytes a fetch waits for")
	bytesVar(fs, &rc.FetchMaxBytes, "kafka-fetch-max-bytes", rd.FetchMaxBytes, "bytes of one fetch response (default: derived)")
	bytesVar(fs, &rc.FetchMaxPartitionBytes, "kafka-fetch-max-partition-bytes", rd.FetchMaxPartitionBytes, "bytes per partition in a fetch (default: derived)")
	fs.DurationVar(&rc.FetchMaxWait, "kafka-fetch-max-wait", rd.FetchMaxWait, "longest a fetch waits for its min bytes")
	fs.DurationVar(&rc.MetadataMaxAge, "kafka-metadata-max-age", rd.MetadataMaxAge, "topic metadata refresh interval")
	fs.DurationVar(&rc.SessionTimeout, "kafka-session-timeout", rd.SessionTimeout, "group session timeout")
	fs.DurationVar(&rc.RebalanceTimeout, "kafka-rebalance-timeout", rd.RebalanceTimeout, "group rebalance timeout")
	fs.DurationVar(&rc.HeartbeatInterval, "kafka-heartbeat-interval", rd.HeartbeatInterval, "group heartbeat interval")
	fs.DurationVar(&rc.CommitInterval, "kafka-commit-interval", rd.CommitInterval, "how often Kafka gets the durable offsets")
	textVar(fs, &rc.Start, "kafka-start", rd.Start, "earliest, latest, committed or a time")
	textVar(fs, &rc.OnDataLoss, "on-data-loss", rd.OnDataLoss, "records lost to retention: stop, or skip them")
	fs.IntVar(&rc.BatchMaxRows, "batch-max-rows", rd.BatchMaxRows, "rows per transaction, at most")
	bytesVar(fs, &rc.BatchMaxBytes, "batch-max-bytes", rd.BatchMaxBytes, "record bytes per transaction, about at most")
	fs.DurationVar(&rc.BatchMaxWait, "batch-max-wait", rd.BatchMaxWait, "longest a record waits for its batch to fill")
	fs.DurationVar(&rc.BatchLinger, "batch-linger", rd.BatchLinger, "spacing of a caught-up partition's batches")
	zeroMeansOff(fs, "batch-linger", &rc.BatchLinger)
	fs.BoolVar(&rc.WaitAtEnd, "batch-wait-at-end", false, "a caught-up partition waits --batch-max-wait too")
	bytesVar(fs, &rc.MaxBufferedBytes, "max-buffered-bytes", rd.MaxBufferedBytes, "buffered records of all partitions, at most")
	fs.IntVar(&rc.QueueCapacity, "queue-capacity", rd.QueueCapacity, "records buffered per partition (default: 2 × --batch-max-rows)")
	fs.DurationVar(&rc.FlushTimeout, "shutdown-timeout", rd.FlushTimeout, "deadline of a stop or revoke (flush, commit, leave)")
	fs.DurationVar(&rc.FenceCheckInterval, "fence-check-interval", rd.FenceCheckInterval, "how often idle partitions look for a newer epoch")
	fs.DurationVar(&rc.RetryBackoffMax, "retry-backoff-max", rd.RetryBackoffMax, "longest backoff of a partition's failed writes")
	fs.DurationVar(&rc.FatalRetryTimeout, "fatal-retry-timeout", rd.FatalRetryTimeout, "retry refused access, a missing topic, this long")
	defineSecurityFlags(fs, &o.cfg.KafkaSecurity)
	defineRegistryFlags(fs, &o.registry)

	fs.StringVar(&o.cfg.PostgresURL, "pg-url", "", "PostgreSQL URL (also from DATABASE_URL)")
	definePGURLFileFlag(fs, &o.pgURLFile)
	fs.StringVar(&o.pgSchema, "pg-schema", "public", "schema of the target tables")
	fs.Int32Var(&o.cfg.PostgresMaxConns, "pg-max-conns", def.PostgresMaxConns, "Postgres connections, at most")
	fs.IntVar(&o.cfg.Writer.TableWriters, "table-writers", wd.TableWriters, "transactions writing one table at once; 0: one per batch")
	zeroMeansOff(fs, "table-writers", &o.cfg.Writer.TableWriters)
	fs.IntVar(&o.cfg.Writer.MaxTablesPerSink, "max-tables-per-sink", wd.MaxTablesPerSink, "tables one sink routed by content may fill; 0: no limit")
	zeroMeansOff(fs, "max-tables-per-sink", &o.cfg.Writer.MaxTablesPerSink)
	fs.StringVar(&o.table, "pg-table", "", "target table of every topic (default: the topic's name)")
	textVar(fs, &o.valueFormat, "value-format", decode.ValueJSON, "value column type: json (jsonb), text or bytes (bytea)")
	negatedBoolVar(fs, &o.cfg.SkipCreateTables, "create-tables", !def.SkipCreateTables, "create missing target tables")
	fs.BoolVar(&o.cfg.Writer.Notify, "notify", false, "NOTIFY \"kafka2pg_<table>\" at each batch's commit")
	textVar(fs, &o.cfg.Writer.OnError, "on-error", wd.OnError, "bad records: dead-letter, stop or skip")
	bytesVar(fs, &o.cfg.Writer.MaxRecordBytes, "max-record-bytes", wd.MaxRecordBytes, "larger records are bad records; 0: no limit")
	zeroMeansOff(fs, "max-record-bytes", &o.cfg.Writer.MaxRecordBytes)
	negatedBoolVar(fs, &o.cfg.SkipMigrations, "migrate", !def.SkipMigrations, "migrate the kafka2pg schema on start")
	fs.DurationVar(&o.cfg.Writer.ClaimLockTimeout, "claim-lock-timeout", wd.ClaimLockTimeout, "wait for an old owner's transaction, then end it")
	fs.DurationVar(&o.cfg.Writer.WriteTimeout, "pg-write-timeout", wd.WriteTimeout, "ceiling of a full batch's write; steps adapt below")
	fs.BoolVar(&o.cfg.UntilCaughtUp, "until-caught-up", false, "exit 0 once every partition is written up to its end at start")
	fs.DurationVar(&o.cfg.CaughtUpTimeout, "caught-up-timeout", def.CaughtUpTimeout, "exit 1 after this long without a write; 0: never")
	zeroMeansOff(fs, "caught-up-timeout", &o.cfg.CaughtUpTimeout)
	fs.DurationVar(&o.cfg.ReadyStallTimeout, "ready-stall-timeout", def.ReadyStallTimeout, "/readyz fails on a stall this long; 0: off")
	zeroMeansOff(fs, "ready-stall-timeout", &o.cfg.ReadyStallTimeout)
	fs.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9187", "/metrics and probes address; '': off")
	fs.StringVar(&o.memoryLimit, "memory-limit", "auto", "Go's soft memory limit: auto, off, or a size (400MiB)")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on --metrics-addr")
	fs.DurationVar(&o.cfg.ProgressInterval, "progress-interval", def.ProgressInterval, "how often a progress line is logged; 0: never")
	zeroMeansOff(fs, "progress-interval", &o.cfg.ProgressInterval)
	fs.DurationVar(&o.cfg.Writer.BadRecordLogInterval, "log-dead-letters", wd.BadRecordLogInterval, "a table's dead letters: one log line per this long")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// validate checks the flags: what the command owns here, naming the
// flags, then the bridge's configuration (bridge.Config.Validate), whose
// errors carry their fields, which cliMessage prints as flags.
func (o *runOptions) validate() error {
	var errs []error
	if err := bridge.CheckSessionURL(o.cfg.PostgresURL); err != nil {
		errs = append(errs, fmt.Errorf("--pg-url: %w", err))
	}
	switch o.memoryLimit {
	case "auto", "":
		o.memoryLimitAuto = os.Getenv("GOMEMLIMIT") == ""
	case "off":
	default:
		n, err := parseByteSize(o.memoryLimit)
		if err != nil || n < 32<<20 {
			errs = append(errs, fmt.Errorf("--memory-limit %q: give auto, off or a size of at least 32MiB, such as 256MiB or 1GiB", o.memoryLimit))
		}
		o.memoryLimitN = n
	}
	if err := schema.ValidateIdent("--pg-schema", o.pgSchema); err != nil {
		errs = append(errs, err)
	}
	if o.table != "" {
		if err := schema.ValidateIdent("--pg-table", o.table); err != nil {
			errs = append(errs, err)
		}
	}
	if o.cfg.Writer.MaxRecordBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-record-bytes is %d: use 0 for no limit or a positive number of bytes", o.cfg.Writer.MaxRecordBytes))
	}
	if o.cfg.PostgresMaxConns < 1 {
		errs = append(errs, fmt.Errorf("--pg-max-conns is %d: use at least 1", o.cfg.PostgresMaxConns))
	}
	if o.cfg.Writer.ClaimLockTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--claim-lock-timeout is %s: use a positive duration such as 10s", o.cfg.Writer.ClaimLockTimeout))
	}
	if o.cfg.Writer.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--pg-write-timeout is %s: use a positive duration such as 2m", o.cfg.Writer.WriteTimeout))
	}
	if o.cfg.Writer.BadRecordLogInterval <= 0 {
		errs = append(errs, fmt.Errorf("--log-dead-letters is %s: use a positive duration such as 10s", o.cfg.Writer.BadRecordLogInterval))
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q is not text or json", o.logFormat))
	}
	if _, err := parseLevel(o.logLevel); err != nil {
		errs = append(errs, err)
	}
	if len(o.sinks) > 0 {
		if len(o.cfg.Kafka.Topics) > 0 || o.table != "" {
			errs = append(errs, errors.New("--topic and --pg-table cannot be combined with sinks in --config: name the topics in the sinks"))
		}
		topics, regex := o.sinkConfig().Topics()
		o.cfg.Kafka.TopicsAreRegex = o.cfg.Kafka.TopicsAreRegex || regex
		for _, t := range topics {
			if !slices.Contains(o.cfg.Kafka.Topics, t) {
				o.cfg.Kafka.Topics = append(o.cfg.Kafka.Topics, t)
			}
		}
	}
	c := o.cfg
	if o.offline {
		// Left out, they are not needed: fill in what passes the reader's
		// checks of the rest.
		if len(c.Kafka.Brokers) == 0 {
			c.Kafka.Brokers = []string{"offline:9092"}
		}
		c.Kafka.Group = cmp.Or(c.Kafka.Group, "offline")
		if len(c.Kafka.Topics) == 0 {
			c.Kafka.Topics = []string{"offline"}
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(s))); err != nil {
		return 0, fmt.Errorf("--log-level %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// byteSize is a flag of bytes: a number of bytes, or a size such as 64MiB
// (parseByteSize), as --memory-limit takes; the config file and KAFKA2PG_*
// variables set it the same way.
type byteSize[T int | int32] struct{ p *T }

// bytesVar defines a byteSize flag with default def.
func bytesVar[T int | int32](fs *pflag.FlagSet, p *T, name string, def T, usage string) {
	*p = def
	fs.Var(byteSize[T]{p}, name, usage)
}

func (b byteSize[T]) Type() string { return "size" }

func (b byteSize[T]) String() string {
	if b.p == nil {
		return "0"
	}
	return formatByteSize(int64(*b.p))
}

func (b byteSize[T]) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return fmt.Errorf("%q is not a size: give a number of bytes or a size such as 64MiB or 1GiB", s)
	}
	if int64(T(n)) != n {
		return fmt.Errorf("%s is too large: this flag takes at most %d bytes", s, math.MaxInt32)
	}
	*b.p = T(n)
	return nil
}

// formatByteSize writes n as parseByteSize reads it, in the largest binary
// unit that divides it.
func formatByteSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseByteSize reads a size such as 512MiB, 1GiB, 300MB or 1048576.
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}
