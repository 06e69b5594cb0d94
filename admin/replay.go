package admin

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// ReplayRequest says which dead letters a replay takes out of
// kafka2pg.dead_letters, and how.
type ReplayRequest struct {
	Filter deadletters.Filter
	// Writer is the writer's configuration as the bridge runs it, of
	// which a replay takes the Group (default "replay"), MaxRecordBytes,
	// WriteTimeout and WriteTimeoutRows (the bridge's batch size). It
	// writes each batch in a transaction of its own (no TableWriters).
	Writer ingest.Config
	// BatchSize is the number of letters per transaction. Default 1000.
	BatchSize int
	// Limit is how many letters to replay at most, oldest first; 0: all.
	Limit int
	// DryRun changes nothing: Replay maps the letters and says where they
	// would go.
	DryRun bool
	// Letters is how many per-letter outcomes the report keeps.
	Letters int
}

// writer is the writer's configuration of a replay: a transaction per
// batch, with the write deadline of the larger of run's batches and
// BatchSize letters.
func (r ReplayRequest) writer() ingest.Config {
	return ingest.Config{Group: cmp.Or(r.Writer.Group, "replay"), MaxRecordBytes: r.Writer.MaxRecordBytes,
		WriteTimeout: r.Writer.WriteTimeout, WriteTimeoutRows: max(r.Writer.WriteTimeoutRows, cmp.Or(r.BatchSize, 1000)), TableWriters: -1}
}

// OpenReplayPool opens the pool a replay of r writes through: a bridge's
// sessions (bridge.ConfigureSession), whose statement_timeout outlasts
// r's write deadline, and its codecs (bridge.RegisterCodecs), since a
// replay copies rows as run does. Its errors are those of the URL, its
// password redacted.
func OpenReplayPool(ctx context.Context, url string, r ReplayRequest) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, redact.Err(err)
	}
	if err := bridge.ConfigureSession(&pcfg.ConnConfig.Config, "kafka2pg-dead-letters", r.writer().StatementTimeout()); err != nil {
		return nil, err
	}
	pcfg.AfterConnect = bridge.RegisterCodecs
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, redact.Err(err)
	}
	return pool, nil
}

// Replay writes the dead letters r selects into their tables again, the
// way run would write their records now (ingest.Writer.Replay), and
// reports by table and letter what it did, or with DryRun would do.
//
// build gives the sinks of the topics the selected letters came from
// (a sinks.Config built for them); Replay calls it only when letters
// match. Only the sinks whose tables have letters to replay are prepared
// (created or evolved, as the sink says; not with DryRun); a letter whose
// table no sink writes is kept, and counted Kept. A replay stopped at any
// point replays each letter once when it runs again: the batches before
// committed, and the report says what they did.
func Replay(ctx context.Context, pool *pgxpool.Pool, r ReplayRequest, build func(ctx context.Context, topics []string) (sinks.Set, error)) (deadletters.Report, error) {
	selected, err := deadletters.Tables(ctx, pool, r.Filter)
	if err != nil || len(selected) == 0 {
		return deadletters.Report{}, err
	}
	set, err := build(ctx, slices.Sorted(maps.Keys(selected)))
	if err != nil {
		return deadletters.Report{}, err
	}
	// When no sink writes the letters' tables, the writer still reads
	// them, to keep them and say so: Resolve is always set.
	fixed := map[string]ingest.Sink{}
	for topic, s := range set.Fixed {
		if slices.Contains(selected[topic], s.Table.QualifiedName()) {
			fixed[topic] = s
		}
	}
	wcfg := r.writer()
	wcfg.Sinks, wcfg.Resolve = fixed, set.Resolve
	w, err := ingest.New(pool, wcfg)
	if err != nil {
		return deadletters.Report{}, err
	}
	if !r.DryRun {
		if err := w.EnsureTables(ctx, false); err != nil {
			return deadletters.Report{}, err
		}
	}
	res, err := w.Replay(ctx, r.Filter, ingest.ReplayOptions{BatchSize: r.BatchSize, Limit: r.Limit, DryRun: r.DryRun, Letters: r.Letters})
	if err != nil {
		return res, fmt.Errorf("%w (the batches before committed; run replay again for the rest)", err)
	}
	return res, nil
}
