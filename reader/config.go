package reader

import (
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Config configures a Reader. Where a field corresponds to a setting of
// Kafka's Java consumer, its comment names that setting; the zero value
// means the default written there. Defaults are filled in one place
// (withDefaults); DefaultConfig in package bridge shows them.
type Config struct {
	Brokers []string // bootstrap.servers; required
	Group   string   // group.id; required
	Topics  []string // the topics to consume; required
	// TopicsAreRegex makes Topics regular expressions (Go RE2, unanchored:
	// use ^ and $): every topic matching one is consumed, including topics
	// created later (noticed within MetadataMaxAge).
	TopicsAreRegex bool
	ClientID       string // client.id; default "kafka2pg"

	// Balancers in preference order (partition.assignment.strategy);
	// default CooperativeSticky. Mixing cooperative-sticky with an eager one
	// downgrades the whole group to eager rebalances.
	Balancers []Balancer
	// IsolationLevel is ReadCommitted (default) or ReadUncommitted
	// (isolation.level).
	IsolationLevel IsolationLevel
	// InstanceID makes this member static (KIP-345, group.instance.id):
	// a restart within SessionTimeout gets its partitions back without a
	// rebalance. Unique per running instance; "" (default) is dynamic.
	InstanceID string
	// GroupProtocol is GroupProtocolClassic (default: the client-side
	// balancers) or GroupProtocolConsumer (KIP-848, group.protocol):
	// the broker assigns partitions,
	// incrementally, with its "uniform" assignor (or "range" when
	// Balancers starts with Range). Needs Kafka 4.0 or newer; on an older
	// broker the client falls back to classic with cooperative-sticky
	// replaced by sticky.
	GroupProtocol GroupProtocol

	FetchMinBytes int32 // fetch.min.bytes; default 1
	// FetchMaxBytes bounds one fetch response, compressed
	// (fetch.max.bytes); default MaxBufferedBytes / 8, between
	// 1 MiB and 50 MiB. A fetch is taken whole before the budget can pause
	// anything, and decompressed it may be several times larger, so it is
	// sized from the budget.
	FetchMaxBytes int32
	// FetchMaxPartitionBytes (max.partition.fetch.bytes) bounds a
	// partition's share of one fetch. Unset, the share is FetchMaxBytes
	// over the partitions owned, at least twice the largest record batch
	// seen and at most 1 MiB (partitionShare).
	FetchMaxPartitionBytes int32
	sharePartitionBytes    bool          // FetchMaxPartitionBytes was unset: share
	FetchMaxWait           time.Duration // fetch.max.wait.ms; default 500ms

	// MetadataMaxAge is how often topic metadata is refreshed, and so how
	// soon partitions added to a topic are noticed and consumed
	// (metadata.max.age.ms, default 5m; the kafka-go Reader's
	// PartitionWatchInterval).
	MetadataMaxAge time.Duration

	SessionTimeout    time.Duration // session.timeout.ms; default 45s
	RebalanceTimeout  time.Duration // max.poll.interval.ms, as a rebalance's bound; default 60s
	HeartbeatInterval time.Duration // heartbeat.interval.ms; default 3s
	// CommitInterval is how often durable offsets are mirrored to the Kafka
	// group (auto.commit.interval.ms; default 1s). The mirror is for lag
	// tools: the reader never resumes from it.
	CommitInterval time.Duration

	// Start is where a partition with no stored position begins
	// (auto.offset.reset, plus the group's committed offset and a time).
	Start StartPolicy

	// OnDataLoss says what happens when Kafka no longer holds records the
	// stored position promises: retention deleted them before they were
	// read (the position is below the log start), or the log was
	// truncated below what was read (an unclean leader election, a broker
	// restored from an old disk). OnDataLossStop
	// (default) stops: the partition, for retention, or Run with a
	// *FatalError, for a truncation; each names the offsets.
	// OnDataLossSkip logs and counts them and goes on: at the log start,
	// or at the offset where the truncated log diverged.
	OnDataLoss OnDataLoss

	BatchMaxRows  int           // records in one transaction at most; default 10000
	BatchMaxBytes int           // key and value bytes in one transaction, about; default 16 MiB
	BatchMaxWait  time.Duration // how long a record waits for its batch to fill; default 200ms
	// A partition whose queue reaches the end offset of its last fetch
	// writes at once instead of waiting BatchMaxWait for records that have
	// not been produced yet: under a backlog batches fill by size, and
	// under a steady flow they hold what arrived during the previous
	// write, so latency is about one fetch and one commit. WaitAtEnd
	// waits anyway: fewer, larger transactions on slow topics, for more
	// latency.
	WaitAtEnd bool
	// BatchLinger (default 50ms; linger.ms's idea, on the consuming side)
	// spaces those writes at
	// the end: a partition at its end writes at once when its last batch
	// was taken BatchLinger ago or longer, else when that much time has
	// passed. A slow topic's record is written at once as before; a busy
	// partition writes at most one batch per BatchLinger, holding what
	// arrived meanwhile. Under a steady flow, batches taken at once are
	// small, and every transaction costs Postgres CPU beyond its rows (the
	// fence, the COPY statement, the COMMIT's WAL flush): fewer, larger
	// transactions leave Postgres more CPU for the rows. A negative
	// duration turns it off.
	BatchLinger time.Duration

	// MaxBufferedBytes bounds the record bytes buffered across all
	// partitions, queued or being written (default 64 MiB): at it, the reader polls nothing more (and the client so
	// fetches nothing more) until a write brings the total under it. With
	// thousands of partitions this, not QueueCapacity, bounds memory. The
	// record batches the client decompressed and the reader has not taken
	// yet have a budget of their own of this size: one that does not fit
	// is not decompressed but fetched again later. One record batch may
	// decompress to this much, or 16 MiB if that is more.
	MaxBufferedBytes int
	// QueueCapacity is how many records one partition may buffer before its
	// fetching pauses (default 2 × BatchMaxRows); fetching
	// resumes at half. Buffered bytes are bounded the same way at
	// 2 × BatchMaxBytes. Memory stays bounded under any backlog.
	QueueCapacity int

	// FlushTimeout bounds how long a revoke (and so a graceful shutdown) waits
	// for a partition's queued records to be written before abandoning them
	// (default 30s).
	FlushTimeout time.Duration

	// FenceCheckInterval is how often the reader compares the positions
	// stored in Postgres with its own, so that a partition fenced while
	// idle (an operator's offsets reset, a new owner), or whose position
	// Postgres lost (a lossy failover, a restored backup), re-claims
	// without waiting for its next write (default 5s; Reader.CheckPositions
	// asks for a check at once). Needs a Store that is a PositionReader; 0
	// uses the default.
	FenceCheckInterval time.Duration

	// RetryBackoffMax caps the backoff between re-claims after a failed write
	// (default 5s). The backoff belongs to the
	// partition's failure streak: about 100ms after the first failed write,
	// doubling with every consecutive failure (re-claims that succeed
	// included), with jitter, until a write commits.
	RetryBackoffMax time.Duration

	// FatalRetryTimeout is how long trouble that retrying cannot fix may
	// last before Run gives up and returns a *FatalError: credentials,
	// ACLs and privileges that Kafka or Postgres refuse (Permanent), a
	// certificate that does not verify, a topic that does not exist. A
	// rolling restart or a grant being rolled out can cause them for a
	// moment (default 30s).
	FatalRetryTimeout time.Duration
	// Permanent, if set, reports whether a failed claim or write will fail
	// the same way however often it is retried (in kafka2pg: Postgres
	// refused the role or a privilege). Such failures are retried for
	// FatalRetryTimeout, then end Run.
	Permanent func(error) bool
	// Principal is this client's principal as Kafka's ACLs name it
	// (User:alice; Security.Principal), for the fix that a denied ACL's
	// error names. Empty: the fix says User:NAME.
	Principal string

	// Logger receives the reader's logs. Default: discard.
	Logger *slog.Logger
	// ExtraOpts are appended to the franz-go options (TLS, SASL, hooks).
	ExtraOpts []kgo.Opt
	// OnOwned, if set, is called with the number of partitions owned after
	// every assignment change (kafka2pg sizes its memory limit with it).
	// It runs in the client's group goroutine and must not block.
	OnOwned func(partitions int)
}

// DefaultConfig returns the configuration a zero Config stands for:
// every default, and nothing of what has none (the brokers, the group, the
// topics). The fields whose default is derived from others
// (FetchMaxBytes, FetchMaxPartitionBytes, QueueCapacity) stay zero, as in
// a zero Config. The kafka2pg command's flags show these values.
func DefaultConfig() Config {
	return Config{
		ClientID:           "kafka2pg",
		Balancers:          []Balancer{CooperativeSticky},
		IsolationLevel:     ReadCommitted,
		GroupProtocol:      GroupProtocolClassic,
		FetchMinBytes:      1,
		FetchMaxWait:       500 * time.Millisecond,
		MetadataMaxAge:     5 * time.Minute,
		SessionTimeout:     45 * time.Second,
		RebalanceTimeout:   60 * time.Second,
		HeartbeatInterval:  3 * time.Second,
		CommitInterval:     time.Second,
		OnDataLoss:         OnDataLossStop,
		BatchMaxRows:       10000,
		BatchMaxBytes:      16 << 20,
		BatchMaxWait:       200 * time.Millisecond,
		BatchLinger:        50 * time.Millisecond,
		MaxBufferedBytes:   64 << 20,
		FlushTimeout:       30 * time.Second,
		FenceCheckInterval: 5 * time.Second,
		RetryBackoffMax:    5 * time.Second,
		FatalRetryTimeout:  30 * time.Second,
	}
}

// orDefault sets *p to def when *p is zero.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// withDefaults returns cfg with every zero field set to its default
// (DefaultConfig's), and the derived ones derived.
func (cfg Config) withDefaults() Config {
	def := DefaultConfig()
	orDefault(&cfg.ClientID, def.ClientID)
	if len(cfg.Balancers) == 0 {
		cfg.Balancers = def.Balancers
	}
	orDefault(&cfg.FetchMinBytes, def.FetchMinBytes)
	orDefault(&cfg.FetchMaxWait, def.FetchMaxWait)
	orDefault(&cfg.MetadataMaxAge, def.MetadataMaxAge)
	orDefault(&cfg.SessionTimeout, def.SessionTimeout)
	orDefault(&cfg.RebalanceTimeout, def.RebalanceTimeout)
	orDefault(&cfg.HeartbeatInterval, def.HeartbeatInterval)
	orDefault(&cfg.CommitInterval, def.CommitInterval)
	orDefault(&cfg.BatchMaxRows, def.BatchMaxRows)
	orDefault(&cfg.BatchMaxBytes, def.BatchMaxBytes)
	orDefault(&cfg.BatchMaxWait, def.BatchMaxWait)
	orDefault(&cfg.BatchLinger, def.BatchLinger)
	orDefault(&cfg.MaxBufferedBytes, def.MaxBufferedBytes)
	orDefault(&cfg.FlushTimeout, def.FlushTimeout)
	orDefault(&cfg.FenceCheckInterval, def.FenceCheckInterval)
	orDefault(&cfg.RetryBackoffMax, def.RetryBackoffMax)
	orDefault(&cfg.FatalRetryTimeout, def.FatalRetryTimeout)
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = int32(min(max(cfg.MaxBufferedBytes/8, 1<<20), 50<<20))
	}
	if cfg.FetchMaxPartitionBytes == 0 {
		cfg.FetchMaxPartitionBytes = min(1<<20, cfg.FetchMaxBytes)
		cfg.sharePartitionBytes = true
	}
	if cfg.QueueCapacity == 0 {
		cfg.QueueCapacity = 2 * cfg.BatchMaxRows
	}
	if cfg.Permanent == nil {
		cfg.Permanent = func(error) bool { return false }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Validate checks the configuration after defaults. Each error is a
// *stream.FieldError naming the field at fault (reader.Config.BatchMaxRows)
// and saying what to do; they are joined.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, stream.FieldErrorf("reader.Config."+field, format, args...))
	}
	if len(cfg.Brokers) == 0 {
		add("Brokers", "empty: give at least one host:port of a Kafka broker")
	}
	for _, b := range cfg.Brokers {
		if !strings.Contains(b, ":") || strings.HasPrefix(b, ":") || strings.HasSuffix(b, ":") {
			add("Brokers", "%q is not host:port (for example 127.0.0.1:9092)", b)
		}
	}
	if cfg.Group == "" {
		add("Group", "empty: name the consumer group (it also keys the offsets in Postgres)")
	}
	if len(cfg.Topics) == 0 {
		add("Topics", "empty: name at least one topic to consume")
	}
	for _, t := range cfg.Topics {
		if cfg.TopicsAreRegex {
			if _, err := regexp.Compile(t); err != nil {
				add("Topics", "pattern %q: %v", t, err)
			}
			continue
		}
		if t == "" || len(t) > 249 {
			add("Topics", "%q is not a valid Kafka topic name (1 to 249 characters)", t)
		}
	}
	for _, b := range cfg.Balancers {
		if !balancerNames.Valid(int(b)) {
			add("Balancers", "%s is not %s", b, balancerNames.List())
		}
	}
	if len(cfg.Balancers) > 1 && cfg.Balancers[0] == CooperativeSticky {
		for _, b := range cfg.Balancers[1:] {
			if b != CooperativeSticky {
				add("Balancers", "cooperative-sticky mixed with %q downgrades the group to eager rebalances; use cooperative-sticky alone", b)
			}
		}
	}
	if !isolationNames.Valid(int(cfg.IsolationLevel)) {
		add("IsolationLevel", "%s is not %s", cfg.IsolationLevel, isolationNames.List())
	}
	if !groupProtocolNames.Valid(int(cfg.GroupProtocol)) {
		add("GroupProtocol", "%s is not classic or consumer (KIP-848, Kafka 4.0 or newer)", cfg.GroupProtocol)
	}
	if cfg.GroupProtocol == GroupProtocolConsumer && cfg.Balancers[0] != CooperativeSticky && cfg.Balancers[0] != Sticky && cfg.Balancers[0] != Range {
		add("Balancers", "%q with reader.Config.GroupProtocol consumer: the broker assigns with uniform (sticky) or range: set sticky or range", cfg.Balancers[0])
	}
	if len(cfg.InstanceID) > 249 || strings.ContainsAny(cfg.InstanceID, "\x00\n") {
		add("InstanceID", "%q: use up to 249 printable characters, unique per running instance (e.g. the host or pod name)", cfg.InstanceID)
	}
	if cfg.MaxBufferedBytes < 0 {
		add("MaxBufferedBytes", "%d: use a positive number of bytes", cfg.MaxBufferedBytes)
	}
	if !onDataLossNames.Valid(int(cfg.OnDataLoss)) {
		add("OnDataLoss", "%s is not %s", cfg.OnDataLoss, onDataLossNames.List())
	}
	if cfg.FetchMinBytes < 0 {
		add("FetchMinBytes", "%d: use a positive number of bytes", cfg.FetchMinBytes)
	}
	if cfg.FetchMaxBytes < 0 {
		add("FetchMaxBytes", "%d: use a positive number of bytes", cfg.FetchMaxBytes)
	}
	if cfg.FetchMaxPartitionBytes < 0 {
		add("FetchMaxPartitionBytes", "%d: use a positive number of bytes", cfg.FetchMaxPartitionBytes)
	}
	if cfg.FetchMaxPartitionBytes > cfg.FetchMaxBytes {
		add("FetchMaxPartitionBytes", "%d is larger than reader.Config.FetchMaxBytes (%d): lower it or raise the other", cfg.FetchMaxPartitionBytes, cfg.FetchMaxBytes)
	}
	positive := []struct {
		field string
		d     time.Duration
	}{
		{"FetchMaxWait", cfg.FetchMaxWait}, {"SessionTimeout", cfg.SessionTimeout},
		{"MetadataMaxAge", cfg.MetadataMaxAge},
		{"RebalanceTimeout", cfg.RebalanceTimeout}, {"HeartbeatInterval", cfg.HeartbeatInterval},
		{"CommitInterval", cfg.CommitInterval}, {"BatchMaxWait", cfg.BatchMaxWait},
		{"FlushTimeout", cfg.FlushTimeout}, {"RetryBackoffMax", cfg.RetryBackoffMax},
		{"FenceCheckInterval", cfg.FenceCheckInterval}, {"FatalRetryTimeout", cfg.FatalRetryTimeout},
	}
	for _, p := range positive {
		if p.d < 0 {
			add(p.field, "%s: use a positive duration such as 500ms or 10s", p.d)
		}
	}
	if cfg.HeartbeatInterval >= cfg.SessionTimeout {
		add("HeartbeatInterval", "%s must be shorter than reader.Config.SessionTimeout (%s); a third of it is usual", cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	if cfg.BatchMaxRows < 0 {
		add("BatchMaxRows", "%d: use a positive number of rows", cfg.BatchMaxRows)
	}
	if cfg.BatchMaxBytes < 0 {
		add("BatchMaxBytes", "%d: use a positive number of bytes", cfg.BatchMaxBytes)
	}
	if cfg.QueueCapacity < 0 || (cfg.QueueCapacity > 0 && cfg.QueueCapacity < cfg.BatchMaxRows) {
		add("QueueCapacity", "%d: use at least reader.Config.BatchMaxRows (%d), or a batch can never fill", cfg.QueueCapacity, cfg.BatchMaxRows)
	}
	if err := cfg.Start.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
