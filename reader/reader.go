package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/internal/trouble"
	"github.com/kafka2pg/kafka2pg/reader/internal/decompress"
	"github.com/kafka2pg/kafka2pg/stream"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Stats are the reader's counters since start.
type Stats struct {
	Records, Bytes, Batches, Fenced, WriteErrors, Rebalances, FetchErrors int64
	// SkippedRecords counts offsets that were never written: lost to
	// retention, or read and then truncated away by Kafka, and skipped
	// (Config.OnDataLoss skip).
	SkippedRecords int64
	// PositionsMovedBack counts the times a partition found its durable
	// position in Postgres behind the one it had made durable: Postgres
	// lost commits (a lossy failover, a restored backup), and the records
	// in between were read again.
	PositionsMovedBack int64
	// Truncations counts the times Kafka's log of an owned partition was
	// found truncated below what had been read (an unclean leader
	// election, a broker restored from an old disk).
	Truncations int64
	// DeferredBatches counts compressed record batches the client
	// fetched but did not decompress, because it already held its budget
	// of decompressed batches: each is fetched again.
	DeferredBatches int64
	Partitions      int
	// Halted counts partitions waiting to re-claim after a failed write
	// (Postgres unreachable, fenced): the bridge is in retry backoff.
	Halted int
	// Stopped lists partitions stopped by data loss, with the reason.
	Stopped []string
	// BufferedBytes is the memory of the records held across partitions,
	// queued or being written: key, value and recordOverhead each (bounded
	// by MaxBufferedBytes, give or take a fetch).
	BufferedBytes int64
}

// Reader consumes a group's topics and writes each partition's batches to
// a Store. Create it with New, drive it with Run, stop it with Close.
type Reader struct {
	cfg       Config
	log       *slog.Logger
	store     Store
	positions PositionReader // nil: no fence check
	checkNow  chan struct{}  // cap 1: CheckPositions
	cl        *kgo.Client
	dec       *decompress.Decompressor
	// refusals follows the batches dec refuses as too large until a poll
	// reports them (refused.go).
	refusals refusals

	// recs holds the []stream.Record of written batches for the next ones
	// (fill): under a backlog the memory limit paces the collector, so
	// every byte allocated is collector work.
	recs sync.Pool // of *[]stream.Record

	mu      sync.Mutex
	parts   map[TopicPartition]*partition
	durable map[TopicPartition]kgo.EpochOffset // durable in Postgres, to mirror to Kafka
	mirror  map[TopicPartition]int64           // last offset the Kafka group accepted
	dirty   map[TopicPartition]bool

	// wakeMu guards the poll loop's wake-up; a leaf lock, taken under
	// Reader.mu or partition.mu or alone, so that a partition can wake the
	// loop while it holds its own lock (accountLocked).
	wakeMu  sync.Mutex
	wakeFn  context.CancelFunc // interrupts the current poll; nil while not polling
	wakeDue bool               // wake came while not polling: skip the next wait

	seeks chan seekRequest // partition goroutines → poll loop

	// served maps each owned TopicPartition to its *partition, for the
	// fetch ordering (leastRecentlyServedFirst), which the client calls
	// from its fetch goroutines: it never takes mu.
	served sync.Map

	// The per-partition share of a fetch (fair.go): partitions owned and
	// the largest compressed record batch fetched, read without locks by
	// the client's hook and callbacks, and the share last set. The client
	// starts joining the group inside kgo.NewClient, so the assignment
	// callback can run before New has stored r.cl: share.cl is set under
	// share.mu by New, which then applies what came first.
	ownedCount   atomic.Int32
	largestBatch atomic.Int64
	share        struct {
		mu    sync.Mutex
		cl    *kgo.Client
		bytes int32
	}

	stats struct {
		records, bytes, batches, fenced, writeErrors, rebalances, fetchErrors, skipped atomic.Int64
		movedBack, truncations                                                         atomic.Int64
	}

	// fatal follows the trouble that ends Run once it lasts
	// FatalRetryTimeout (fatal.go). The trouble logs log, rate-limited,
	// what may heal (connTrouble: connections to brokers; fetchTrouble:
	// errors the polls return) and what will not (refusedTrouble).
	fatal                                     *fatalWatch
	connTrouble, fetchTrouble, refusedTrouble *trouble.Log

	// buffered is the record bytes all partitions hold (queued or being
	// written); overBudget is set while the poll loop waits for partitions to
	// bring it under MaxBufferedBytes.
	buffered   atomic.Int64
	overBudget atomic.Bool
	// pollLimit is how much the partitions may hold for the poll loop to
	// poll: MaxBufferedBytes, or less after a poll that brought only
	// batches deferred for want of room (decompress.Decompressor.PollLimit).
	pollLimit atomic.Int64
	// deferredLogged is when noteDeferred last logged (Unix nanoseconds).
	deferredLogged atomic.Int64
	// pausesDirty is set whenever a partition's paused flag changes; the
	// poll loop then brings the client's paused set in line with the flags.
	// Only the poll loop (and the revoke and lost callbacks, which cannot
	// run while it does) calls the client's Pause/ResumeFetchPartitions.
	pausesDirty atomic.Bool

	closeOnce  sync.Once
	settleOnce sync.Once
	settled    chan struct{}
}

type seekRequest struct {
	p       *partition
	claim   stream.Position // the epoch to write with, and where to read: NextOffset, or from when it is -1
	from    int64           // where to read when claim.NextOffset is -1
	durable int64           // the stored position the owner expects from now on; -1: none
}

// New validates cfg and creates the Kafka client that feeds store. It
// does not contact the brokers yet. When store is a PositionReader, Run
// also checks the stored positions (Config.FenceCheckInterval).
func New(cfg Config, store Store) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("reader: New needs a Store")
	}
	cfg = cfg.withDefaults()
	positions, _ := store.(PositionReader)
	r := &Reader{
		cfg:            cfg,
		log:            cfg.Logger,
		store:          store,
		positions:      positions,
		parts:          make(map[TopicPartition]*partition),
		durable:        make(map[TopicPartition]kgo.EpochOffset),
		mirror:         make(map[TopicPartition]int64),
		dirty:          make(map[TopicPartition]bool),
		seeks:          make(chan seekRequest, 4096),
		checkNow:       make(chan struct{}, 1),
		settled:        make(chan struct{}),
		fatal:          newFatalWatch(cfg.FatalRetryTimeout),
		connTrouble:    trouble.New(cfg.Logger, "kafka unreachable; retrying", 0),
		fetchTrouble:   trouble.New(cfg.Logger, "kafka fetch failed; retrying", 0),
		refusedTrouble: trouble.New(cfg.Logger, "kafka refuses the bridge; retrying until reader.Config.FatalRetryTimeout, then stopping", 0),
	}
	dec, err := decompress.New(maxBatchBytes(&cfg), int64(cfg.MaxBufferedBytes))
	if err != nil {
		return nil, err
	}
	r.pollLimit.Store(int64(cfg.MaxBufferedBytes))
	r.dec = dec
	wanted := cfg.Balancers
	if cfg.GroupProtocol == GroupProtocolConsumer && wanted[0] == CooperativeSticky {
		// KIP-848 assigns on the broker, incrementally by design; the
		// client names its wish with sticky ("uniform") or range.
		wanted = []Balancer{Sticky}
	}
	balancers := make([]kgo.GroupBalancer, len(wanted))
	for i, b := range wanted {
		balancers[i] = b.kgo()
	}
	isolation := kgo.ReadCommitted()
	if cfg.IsolationLevel == ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.Balancers(balancers...),
		kgo.FetchIsolationLevel(isolation),
		// Transaction markers come to us so that a batch's span covers
		// them: otherwise the durable next_offset would stop short of the
		// end offset after a committed transaction, forever.
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),    // Postgres is the source of truth; we mirror it ourselves
		kgo.BlockRebalanceOnPoll(), // no revoke runs while a poll is being dispatched
		kgo.FetchMinBytes(cfg.FetchMinBytes),
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.MetadataMaxAge(cfg.MetadataMaxAge),
		kgo.MetadataMinAge(min(cfg.MetadataMaxAge, 5*time.Second)),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		// Never reset silently: a position below the log start is data
		// loss, reported to the partition, which applies OnDataLoss.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.AdjustFetchOffsetsFn(r.adjust),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.WithLogger(kgoLogger{cfg.Logger}),
		// Fairness: every fetch lists every partition, least recently
		// served first. A fetch session (KIP-227) leaves unchanged
		// partitions out of the request and the broker picks their order;
		// without one, a request costs some 20-40 bytes more per
		// partition and the order is ours (see fair.go).
		kgo.ConsumePreferringLagFn(r.leastRecentlyServedFirst),
		kgo.DisableFetchSessions(),
		kgo.WithHooks(batchSizes{r}, kafkaHealth{r}, refusedBatches{r}),
		// Memory is counted after decompression (decompress.go).
		kgo.WithDecompressor(dec),
	}
	if cfg.TopicsAreRegex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	if cfg.GroupProtocol == GroupProtocolConsumer {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(append(opts, cfg.ExtraOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("create Kafka client: %w", err)
	}
	r.cl = cl
	r.share.mu.Lock()
	r.share.cl = cl
	r.share.mu.Unlock()
	r.shareFetchBytes()
	return r, nil
}

// Client is the underlying franz-go client, for admin calls (kadm) that
// share its connections. Do not poll or commit with it.
func (r *Reader) Client() *kgo.Client { return r.cl }

// Stats returns a snapshot of the counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	n := len(r.parts)
	var stopped []string
	halted := 0
	for _, p := range r.parts {
		p.mu.Lock()
		switch p.life.phase {
		case phaseStopped:
			stopped = append(stopped, p.life.why)
		case phaseHalted:
			halted++
		}
		p.mu.Unlock()
	}
	r.mu.Unlock()
	return Stats{
		Records: r.stats.records.Load(), Bytes: r.stats.bytes.Load(), Batches: r.stats.batches.Load(),
		Fenced: r.stats.fenced.Load(), WriteErrors: r.stats.writeErrors.Load(),
		Rebalances: r.stats.rebalances.Load(), FetchErrors: r.stats.fetchErrors.Load(),
		SkippedRecords: r.stats.skipped.Load(), DeferredBatches: r.dec.Deferred(),
		PositionsMovedBack: r.stats.movedBack.Load(), Truncations: r.stats.truncations.Load(),
		Partitions: n, Stopped: stopped, Halted: halted,
		BufferedBytes: r.buffered.Load(),
	}
}

// PartitionStats describes one owned partition.
type PartitionStats struct {
	Topic      string
	Partition  int32
	NextOffset int64 // durable in Postgres; -1 when nothing is stored
	LogEnd     int64 // last end offset seen in a fetch; -1 until one arrives
	Mirrored   int64 // last offset the Kafka group accepted from this member; -1 if none
	Queued     int   // records buffered, not yet written
	Paused     bool
	// LastCommit is when a write of the partition last committed, or when
	// it was claimed if none has since.
	LastCommit time.Time
	// WritingSince is when the write in flight began; zero when none is.
	WritingSince time.Time
	// Failures is the partition's failure streak: failed writes and
	// claims since its last committed write.
	Failures int
}

// Lag is LogEnd minus the durable offset, or -1 when either is unknown.
func (s PartitionStats) Lag() int64 {
	if s.LogEnd < 0 {
		return -1
	}
	return max(s.LogEnd-max(s.NextOffset, 0), 0)
}

// Partitions returns the state of every owned partition.
func (r *Reader) Partitions() []PartitionStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PartitionStats, 0, len(r.parts))
	for tp, p := range r.parts {
		next, mirrored := int64(-1), int64(-1)
		if eo, ok := r.durable[tp]; ok {
			next = eo.Offset
		}
		if m, ok := r.mirror[tp]; ok {
			mirrored = m
		}
		p.mu.Lock()
		out = append(out, PartitionStats{Topic: tp.Topic, Partition: tp.Partition, NextOffset: next,
			LogEnd: p.logEnd, Mirrored: mirrored, Queued: len(p.queue), Paused: p.paused,
			LastCommit: p.lastCommit, WritingSince: p.writingSince, Failures: p.failures})
		p.mu.Unlock()
	}
	return out
}

// Settled is closed once this member has joined the group and claimed its
// first assignment (possibly empty): from then on the durable positions it
// owns are known and will be mirrored to the group when it stops.
func (r *Reader) Settled() <-chan struct{} { return r.settled }

func (r *Reader) markSettled() { r.settleOnce.Do(func() { close(r.settled) }) }

func (r *Reader) isSettled() bool {
	select {
	case <-r.settled:
		return true
	default:
		return false
	}
}

// ownedPartitions returns the partitions owned now.
func (r *Reader) ownedPartitions() []*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]*partition, 0, len(r.parts))
	for _, p := range r.parts {
		parts = append(parts, p)
	}
	return parts
}

// Assigned lists the partitions this member owns now.
func (r *Reader) Assigned() []TopicPartition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]TopicPartition, 0, len(r.parts))
	for tp := range r.parts {
		out = append(out, tp)
	}
	return out
}

// Run polls and dispatches records until ctx ends, then returns nil, or
// until trouble that retrying cannot fix has lasted FatalRetryTimeout, then
// returns it as a *FatalError. It also runs the loop that mirrors durable
// offsets to the Kafka group. After Run returns, call Shutdown to flush,
// commit and leave the group within a deadline, or Close to abandon.
func (r *Reader) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	commitCtx, stopCommits := context.WithCancel(ctx)
	wg.Go(func() { every(commitCtx, r.cfg.CommitInterval, nil, r.commitDirty) })
	if r.positions != nil {
		wg.Go(func() { every(commitCtx, r.cfg.FenceCheckInterval, r.checkNow, r.checkFences) })
	}
	defer func() {
		stopCommits()
		wg.Wait()
	}()
	for {
		pollCtx, wake := context.WithTimeout(ctx, time.Second)
		r.wakeMu.Lock()
		if r.wakeDue {
			r.wakeDue = false
			wake() // return what is buffered at once
		} else {
			r.wakeFn = wake
		}
		r.wakeMu.Unlock()
		var fs kgo.Fetches
		if r.waitForBudget() {
			// Woken by the partition that frees budget, or by the timeout.
			<-pollCtx.Done()
		} else {
			fs = r.cl.PollRecords(pollCtx, r.cfg.BatchMaxRows)
		}
		r.wakeMu.Lock()
		r.wakeFn = nil
		r.wakeMu.Unlock()
		wake()
		if err := r.fatal.fatal(); err != nil {
			return err
		}
		if fs.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fetchFailed := false
		drained := fs.NumRecords() > 0 // a poll that returns records or a fetch's errors drained a fetch
		deferred, others := false, false
		moves := offsetMoves{}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return // our own wake-up
			}
			drained = true
			if errors.Is(err, decompress.ErrDeferred) {
				// The partition's first batch in the response did not
				// fit in the budget; the client fetches it again.
				deferred = true
				r.noteDeferred(t, p, err)
				return
			}
			others = true
			if lost, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
				r.truncated(lost)
				return
			}
			if tooLarge, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
				r.unreadableBatch(tooLarge, moves)
				return
			}
			if errors.Is(err, kerr.OffsetOutOfRange) {
				if part := r.owner(TopicPartition{t, p}); part != nil && part.outOfRange() {
					r.log.Warn("fetch position out of range; checking for data loss", "topic", t, "partition", p)
				}
				return
			}
			r.stats.fetchErrors.Add(1)
			fetchFailed = true
			r.noteFetchError(t, p, err)
		})
		if !fetchFailed && fs.NumRecords() > 0 {
			r.fetchTrouble.OK()
		}
		r.mu.Lock()
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			p := r.parts[TopicPartition{fp.Topic, fp.Partition}]
			if p == nil {
				return // BlockRebalanceOnPoll makes this unreachable; stay safe
			}
			end := fp.HighWatermark
			if r.cfg.IsolationLevel == ReadCommitted && fp.LastStableOffset >= 0 {
				end = fp.LastStableOffset
			}
			p.noteLogEnd(end)
			if len(fp.Records) > 0 {
				p.enqueue(fp.Records)
			}
		})
		r.mu.Unlock()
		if drained && r.cl.BufferedFetchRecords() == 0 {
			// What the client held is the reader's now, counted in
			// r.buffered, or was dropped (decompress.Decompressor.Release).
			r.dec.Release()
		}
		if fs != nil {
			r.pollLimit.Store(r.dec.PollLimit(deferred && !others && fs.NumRecords() == 0))
			r.rearmRefused(ctx, moves)
		}
		r.applySeeks(moves)
		r.move(ctx, moves)
		if r.pausesDirty.Swap(false) {
			r.reconcilePauses()
		}
		r.cl.AllowRebalance()
	}
}

// reconcilePauses makes the client's paused partitions those whose own
// flag says paused: it pauses the newly paused, and resumes the others,
// including any partition the client still holds paused that this reader no
// longer owns (the client keeps pauses across revocation and re-assignment).
// Only the poll goroutine calls it, before AllowRebalance, so no assignment
// or revoke runs meanwhile. A flag that changes after it read the flags
// sets pausesDirty again and wakes the poll, so the next round sees it:
// there is no window in which a decision and the client can disagree for
// good.
func (r *Reader) reconcilePauses() {
	have := make(map[TopicPartition]bool)
	for topic, ps := range r.cl.PauseFetchPartitions(nil) {
		for _, n := range ps {
			have[TopicPartition{topic, n}] = true
		}
	}
	var pause, resume map[string][]int32
	add := func(m *map[string][]int32, tp TopicPartition) {
		if *m == nil {
			*m = make(map[string][]int32)
		}
		(*m)[tp.Topic] = append((*m)[tp.Topic], tp.Partition)
	}
	r.mu.Lock()
	for tp, p := range r.parts {
		p.mu.Lock()
		want := p.paused
		p.mu.Unlock()
		if want && !have[tp] {
			add(&pause, tp)
		}
		if !want && have[tp] {
			add(&resume, tp)
		}
	}
	for tp := range have {
		if r.parts[tp] == nil {
			add(&resume, tp)
		}
	}
	r.mu.Unlock()
	if pause != nil {
		// Records of a paused partition still buffered in the client are
		// dropped from polls and refetched after resume: nothing is lost.
		r.cl.PauseFetchPartitions(pause)
	}
	if resume != nil {
		r.cl.ResumeFetchPartitions(resume)
	}
}

// pausesChanged tells the poll loop that some partition's paused flag
// changed; call it without any partition's lock held.
func (r *Reader) pausesChanged() {
	r.pausesDirty.Store(true)
	r.wake()
}

// waitForBudget reports whether the partitions together hold
// MaxBufferedBytes or more (pollLimit: less after a poll that brought
// only deferred batches), so that the poll loop must wait until some is
// freed (underBudget) instead of polling. Every partition stops fetching
// then, not only those that just received records: with a thousand
// partitions each would otherwise bring one more fetch's worth, a thousand
// times the budget. Waiting, rather than pausing every partition, keeps
// what the client fetched (at most one fetch a broker: it fetches again
// only once its buffered records are all taken) and hands it over as soon
// as the budget frees. Pausing would drop it: franz-go strips a paused
// partition's buffered records and fetches them again after the resume,
// so every record would be fetched, decompressed and decoded more than
// once.
func (r *Reader) waitForBudget() bool {
	if r.buffered.Load() < r.pollLimit.Load() {
		return false
	}
	r.overBudget.Store(true)
	// Bytes freed before the flag was set did not wake this loop: look
	// again after setting it (accountLocked changes the total before
	// underBudget looks at the flag, so one of the two sees the other).
	if r.buffered.Load() < r.pollLimit.Load() {
		r.overBudget.Store(false)
		return false
	}
	return true
}

// underBudget wakes the poll loop if it waits for the budget and the total
// is under it now. accountLocked calls it whenever a partition holds less:
// a write, a halt, a stop or a revoke.
func (r *Reader) underBudget() {
	if r.overBudget.Load() && r.buffered.Load() < r.pollLimit.Load() && r.overBudget.CompareAndSwap(true, false) {
		r.wake()
	}
}

// wake interrupts the current poll, or the wait for budget, so that the
// poll loop goes round at once: to apply seeks and pause changes, or to
// poll again once budget is freed.
func (r *Reader) wake() {
	r.wakeMu.Lock()
	if r.wakeFn != nil {
		r.wakeFn()
		r.wakeFn = nil
	} else {
		r.wakeDue = true
	}
	r.wakeMu.Unlock()
}

// applySeeks moves each re-claimed partition to its durable position
// (added to moves, which the poll goroutine applies right after, before
// AllowRebalance, where SetOffsets is safe).
func (r *Reader) applySeeks(moves offsetMoves) {
	for {
		select {
		case s := <-r.seeks:
			tp := s.p.tp
			if r.owner(tp) != s.p {
				continue // revoked or lost meanwhile
			}
			// The stored leader epoch goes with the stored position, so
			// that the client checks the log was not truncated below it
			// (KIP-320; a truncation comes back as a *kgo.ErrDataLoss).
			at, epoch := s.claim.NextOffset, s.claim.LeaderEpoch
			if at < 0 {
				at, epoch = s.from, -1
			}
			moves.add(tp, kgo.EpochOffset{Epoch: epoch, Offset: at})
			s.p.resumeAt(s.claim.Epoch, at, s.durable)
			if s.claim.NextOffset >= 0 {
				// What Postgres holds, even behind what was mirrored
				// before (Postgres lost commits): lag tools see the truth.
				r.markDurableClaimed(tp, kgo.EpochOffset{Epoch: epoch, Offset: s.claim.NextOffset})
			}
			r.log.Info("partition resumed at its durable position", "topic", tp.Topic, "partition", tp.Partition,
				"next_offset", at, "epoch", s.claim.Epoch)
		default:
			return
		}
	}
}

// owner is the partition this reader owns for tp, nil when none.
func (r *Reader) owner(tp TopicPartition) *partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[tp]
}

func (r *Reader) markDurable(tp TopicPartition, eo kgo.EpochOffset) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.parts[tp] == nil {
		return
	}
	if cur, ok := r.durable[tp]; ok && cur.Offset > eo.Offset {
		return // never move the mirror backwards
	}
	r.durable[tp] = eo
	r.dirty[tp] = true
}

// every calls fn every d, and whenever now delivers (a nil now never
// does), until ctx is done, on the caller's goroutine.
func every(ctx context.Context, d time.Duration, now <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-now:
		}
		fn(ctx)
	}
}

// CheckPositions asks the reader to compare every owned partition's
// stored position with its own now, rather than at the next
// Config.FenceCheckInterval: call it when Postgres may have lost commits,
// for example when a new connection finds a different server (a failover,
// a restored backup). A partition whose position moved back claims it
// again and reads the lost records again. It does not wait; safe for
// concurrent use.
func (r *Reader) CheckPositions() {
	select {
	case r.checkNow <- struct{}{}:
	default:
	}
}

// checkFences compares the stored positions with the partitions' own; a
// partition whose stored epoch moved on was fenced (by an offsets reset or
// another owner), and one whose position moved under it (Postgres lost
// commits) reads again from there: both re-claim.
func (r *Reader) checkFences(ctx context.Context) {
	byTopic := map[string][]*partition{}
	r.mu.Lock()
	for tp, p := range r.parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	r.mu.Unlock()
	for topic, parts := range byTopic {
		stored, err := r.positions.Positions(ctx, topic)
		if err != nil {
			r.log.Debug("fence check", "topic", topic, "error", err.Error())
			continue
		}
		for _, p := range parts {
			pos, ok := stored[p.tp.Partition]
			fenced, moved, expected := p.staleBy(pos, ok)
			switch {
			case fenced:
				r.log.Warn("partition fenced while idle (offsets reset or a new owner); re-claiming",
					"topic", topic, "partition", p.tp.Partition, "stored_epoch", pos.Epoch)
			case moved:
				r.log.Debug("the stored position moved under this owner; re-claiming", "topic", topic, "partition", p.tp.Partition,
					"expected_next_offset", expected, "stored_next_offset", pos.NextOffset, "stored_epoch", pos.Epoch, "row", ok)
			}
		}
	}
}

// commitDirty mirrors the durable offsets that moved to the Kafka group
// (Run calls it every CommitInterval, which coalesces them). Failures are
// harmless (Postgres is authoritative) and retried on the next tick while
// the partition is still owned.
func (r *Reader) commitDirty(ctx context.Context) {
	offs := r.takeDirty()
	if len(offs) == 0 {
		return
	}
	r.cl.CommitOffsets(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err == nil {
			err = commitResponseErr(resp)
		}
		if err == nil {
			r.noteMirrored(offs)
			return
		}
		r.log.Debug("kafka group commit failed; retrying on the next tick (Postgres is authoritative)", "error", err.Error())
		r.mu.Lock()
		for t, ps := range offs {
			for p := range ps {
				if r.parts[TopicPartition{t, p}] != nil {
					r.dirty[TopicPartition{t, p}] = true
				}
			}
		}
		r.mu.Unlock()
	})
}

// noteMirrored records offsets the Kafka group accepted.
func (r *Reader) noteMirrored(offs map[string]map[int32]kgo.EpochOffset) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range offs {
		for p, eo := range ps {
			tp := TopicPartition{t, p}
			if r.parts[tp] != nil {
				r.mirror[tp] = eo.Offset
			}
		}
	}
}

func (r *Reader) takeDirty() map[string]map[int32]kgo.EpochOffset {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]map[int32]kgo.EpochOffset)
	for tp := range r.dirty {
		if out[tp.Topic] == nil {
			out[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		out[tp.Topic][tp.Partition] = r.durable[tp]
	}
	clear(r.dirty)
	return out
}

func commitResponseErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
