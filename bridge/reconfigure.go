package bridge

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/bridge/internal/metrics"
	"github.com/kafka2pg/kafka2pg/bridge/internal/pgsession"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ErrNotRunning is Reconfigure's refusal before Run has joined the
// consumer group, and after it stopped: the sinks are Config.Sinks then.
var ErrNotRunning = errors.New("bridge: not running: the sinks change while Run writes (after it joined the consumer group, before it stops)")

// ConfigStatus is the generation of the bridge's sinks, and the last
// refused reload while no later one took effect.
type ConfigStatus struct {
	// Generation is 1 for Config.Sinks, one more for each Reconfigure that
	// took effect.
	Generation int64
	// Refused is why the last reload was refused (Reconfigure's error, or
	// what RefuseReload was told), nil when the last one took effect or
	// none was tried.
	Refused error
}

// reconfig is the state of Reconfigure. Its mu serializes reloads; it is
// never held with Bridge.mu, and a write never takes it: the writer
// loads its sinks from an atomic pointer (ingest.Writer.SetSinks).
type reconfig struct {
	mu        sync.Mutex
	live      *liveParts // nil unless Run is writing
	sinks.Set            // the sinks running now

	// status is guarded by statusMu alone, so that a readiness probe
	// never waits for a reload.
	statusMu sync.Mutex
	status   ConfigStatus
}

// setStatus changes the status under its lock and returns it.
func (rc *reconfig) setStatus(f func(s *ConfigStatus)) ConfigStatus {
	rc.statusMu.Lock()
	defer rc.statusMu.Unlock()
	f(&rc.status)
	rc.status.Generation = max(rc.status.Generation, 1)
	return rc.status
}

// liveParts are what Reconfigure changes in a running bridge.
type liveParts struct {
	rd   *reader.Reader
	w    *ingest.Writer
	pool *pgxpool.Pool
}

// goLive makes Reconfigure act on a running reader and writer.
func (b *Bridge) goLive(rd *reader.Reader, w *ingest.Writer, pool *pgxpool.Pool) {
	b.rc.mu.Lock()
	defer b.rc.mu.Unlock()
	if b.rc.live == nil && b.rc.Fixed == nil && b.rc.Patterns == nil {
		b.rc.Set = b.cfg.Sinks
	}
	b.rc.live = &liveParts{rd: rd, w: w, pool: pool}
}

// leaveLive ends Reconfigure's work on the reader and writer of a Run
// that is stopping; it waits for a Reconfigure under way.
func (b *Bridge) leaveLive() {
	b.rc.mu.Lock()
	defer b.rc.mu.Unlock()
	b.rc.live = nil
}

// ConfigStatus returns the generation of the running sinks and the last
// refused reload.
func (b *Bridge) ConfigStatus() ConfigStatus {
	return b.rc.setStatus(func(*ConfigStatus) {})
}

// RefuseReload records a reload that its caller refused before it could
// call Reconfigure (a config file that does not parse): it is counted,
// logged at ERROR and shown by ConfigStatus as Reconfigure's own
// refusals are, and the running sinks stay.
func (b *Bridge) RefuseReload(err error) {
	b.rc.mu.Lock()
	defer b.rc.mu.Unlock()
	b.refusedLocked(err)
}

func (b *Bridge) refusedLocked(err error) {
	s := b.rc.setStatus(func(s *ConfigStatus) { s.Refused = err })
	b.m.Reloaded(metrics.ReloadRefused, s.Generation)
	b.log.Error("configuration reload refused; the running configuration stays", "error", err, "generation", s.Generation)
}

// Reconfigure makes set the bridge's sinks while it runs: sinks can be
// added, removed and changed (a table, a column, a format). It returns
// once the new sinks are in effect, or the error that refused them; a
// refusal leaves the running sinks as they were.
//
// Partitions of a topic whose sink is unchanged (built from the same
// configuration, sinks.Set.DiffFrom) keep fetching and writing
// throughout, with the very same sink. A changed sink takes over at the
// next batch of each of its partitions: a batch in flight commits with
// the old sink, and the next one starts at the durable next_offset that
// commit left in kafka2pg.offsets, so each record is written once, by
// one of them. The tables of new and changed sinks are prepared first, as
// Run prepares them at start; a table that cannot be made to fit refuses
// the set. An added topic joins the subscription, and its partitions are
// claimed as at start; a removed topic leaves it, and the partitions of
// it this member owns finish what they queued (within
// reader.Config.FlushTimeout) and are given up, their positions kept in
// Postgres.
//
// With Kafka.TopicsAreRegex, the subscription cannot change (franz-go
// fixes a regex subscription at start): a set that adds or removes a
// topic, or a topic_regex, is refused; one that changes the mappings of
// the same topics and patterns takes effect. Without it, a set with a
// topic_regex sink is refused likewise, as is a set of other topics with
// UntilCaughtUp. Reconfigure calls are serialized.
func (b *Bridge) Reconfigure(ctx context.Context, set sinks.Set) error {
	b.rc.mu.Lock()
	defer b.rc.mu.Unlock()
	d, err := b.reconfigure(ctx, set)
	if err != nil {
		if !errors.Is(err, ErrNotRunning) {
			b.refusedLocked(err)
		}
		return err
	}
	s := b.rc.setStatus(func(s *ConfigStatus) { s.Generation, s.Refused = max(s.Generation, 1)+1, nil })
	b.m.Reloaded(metrics.ReloadOK, s.Generation)
	b.log.Info("configuration reloaded", "generation", s.Generation, "added", d.Added, "changed", d.Changed, "removed", d.Removed, "patterns_changed", d.PatternsChanged)
	return nil
}

func (b *Bridge) reconfigure(ctx context.Context, set sinks.Set) (d sinks.Diff, err error) {
	live := b.rc.live
	if live == nil {
		return d, ErrNotRunning
	}
	if len(set.Fixed) == 0 && len(set.Patterns) == 0 {
		return d, stream.FieldErrorf("bridge.Config.Sinks", "empty: give every topic a sink, or a pattern for the topics it matches")
	}
	cur := b.rc.Set
	d = set.DiffFrom(cur)
	if err := b.subscriptionStays(cur, set, d); err != nil {
		return d, err
	}
	if !slices.Equal(cur.Appliers, set.Appliers) {
		return d, stream.FieldErrorf("bridge.Config.Sinks", "the sources with transactions: true, or their on_incomplete settings, changed: their appliers start with the bridge; restart to change them")
	}
	next := set.Keep(cur, d)
	if err := pgsession.CheckEncoding(ctx, live.pool, b.log, b.cfg.Kafka.Group, next); err != nil {
		return d, err
	}
	prepare := next.FixedOf(append(slices.Clone(d.Added), d.Changed...))
	if d.PatternsChanged {
		// The topics the old patterns matched get their new sinks at
		// their next batch; their tables are checked now, so that a
		// pattern that cannot run refuses the set.
		for _, topic := range live.w.ResolvedTopics() {
			if _, fixed := next.Fixed[topic]; fixed {
				continue
			}
			sink, ok, err := next.Resolve(ctx, topic)
			if err != nil {
				return d, err
			}
			if ok {
				prepare[topic] = sink
			}
		}
	}
	if err := live.w.PrepareSinks(ctx, prepare); err != nil {
		if missing, ok := errors.AsType[*ingest.MissingTableError](err); ok {
			return d, stream.FieldErrorf("bridge.Config.SkipCreateTables", "table %s for topic %q does not exist: create it, or let the bridge create it", missing.Table, missing.Topic)
		}
		return d, err
	}
	b.m.InitTables(next.Fixed)
	resolve := resolveOf(next)
	// The removed topics keep their sinks until their partitions are
	// given up: what they queued is written into their tables.
	during := maps.Clone(next.Fixed)
	for _, t := range d.Removed {
		during[t] = cur.Fixed[t]
	}
	live.w.SetSinks(during, resolve, !d.PatternsChanged)
	if err := live.rd.AddTopics(d.Added...); err != nil {
		return d, err
	}
	if err := live.rd.RemoveTopics(ctx, d.Removed...); err != nil {
		return d, err
	}
	live.w.SetSinks(next.Fixed, resolve, true)
	b.rc.Set = next
	return d, nil
}

// subscriptionStays refuses a set whose subscription the reader cannot
// take live: a regex subscription that would change, a topic_regex sink
// in a literal one, or other topics for a run until caught up with those
// of its start.
func (b *Bridge) subscriptionStays(cur, next sinks.Set, d sinks.Diff) error {
	if b.cfg.UntilCaughtUp && len(d.Added)+len(d.Removed) > 0 {
		return stream.FieldErrorf("bridge.Config.UntilCaughtUp", "the topics to catch up with are those of the start: keep the same topics, or restart to change them")
	}
	if !b.cfg.Kafka.TopicsAreRegex {
		if len(next.Patterns) > 0 {
			return stream.FieldErrorf("bridge.Config.Sinks", "topic_regex %q: the running bridge subscribes to topics by name, and a regex subscription needs a restart: restart to add it", next.Patterns[0].Regex)
		}
		return nil
	}
	regexes := func(s sinks.Set) []string {
		var out []string
		for _, p := range s.Patterns {
			out = append(out, p.Regex)
		}
		return out
	}
	if len(d.Added)+len(d.Removed) > 0 || !slices.Equal(regexes(cur), regexes(next)) {
		return stream.FieldErrorf("bridge.Config.Sinks", "the subscription is a set of regular expressions (a topic_regex sink), which franz-go fixes at start: keep the same topics and topic_regex patterns, or restart to change them")
	}
	return nil
}

// resolveOf is the writer's Resolve of set: nil without patterns.
func resolveOf(set sinks.Set) func(ctx context.Context, topic string) (ingest.Sink, bool, error) {
	if len(set.Patterns) == 0 {
		return nil
	}
	return set.Resolve
}
