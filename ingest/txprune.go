package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/stream"
)

// What the Applier keeps, and for how long. An applied END stays in
// kafka2pg.cdc_tx_ends while the applied position is less than
// RetainEnds offsets of the transaction topic past it: the apply
// transaction deletes the ENDs that fall behind (pruneEndsSQL). While it
// stays, it tells a copy of its transaction from a new one: a connector
// restarted after a crash sends again what came after the last source
// offset it flushed, and those copies come right after the originals on
// the transaction topic, a few offset.flush.interval.ms of transactions
// later, so an END copied within RetainEnds meets its original and is
// left (stageEndSQL), and so do the copies of its events (stageEventsSQL);
// a late event of a transaction applied partially becomes a dead letter.
//
// A staged event whose transaction has no END, neither waiting nor
// applied, after OrphanAfter, is an orphan: the copy of an event whose
// END was pruned already, or an event whose END never came (the
// transaction topic started after it). The Applier moves orphans to the
// dead letters (KindTransactionEndMissing), at most every OrphanAfter/4,
// so that nothing stays staged for ever and nothing is dropped unseen.

// KindTransactionEndMissing is the dead letter kind of a staged event
// whose transaction's END was not staged within OrphanAfter.
const KindTransactionEndMissing = "transaction_end_missing"

// sweepOrphansSQL deletes the orphans of a source ($3: OrphanAfter) and
// returns them.
const sweepOrphansSQL = `DELETE FROM kafka2pg.cdc_staged s
WHERE s.consumer_group = $1 AND s.source = $2 AND s.staged_at < now() - $3::interval
  AND NOT EXISTS (SELECT FROM kafka2pg.cdc_tx_ends e
                  WHERE e.consumer_group = s.consumer_group AND e.source = s.source AND e.txid = s.txid)
RETURNING s.topic, s.partition, s.kafka_offset, s.key, s.value, s.kafka_timestamp, s.txid, s.key_schema, s.value_schema`

// fenceApplierSQL checks, and holds until COMMIT, the Applier's turn.
const fenceApplierSQL = `UPDATE kafka2pg.cdc_appliers SET updated_at = now()
WHERE consumer_group = $1 AND source = $2 AND epoch = $3`

// sweepOrphans moves the source's orphans to the dead letters, in a
// transaction fenced as an apply is, unless it did within OrphanAfter/4.
// It returns how many it moved.
func (a *Applier) sweepOrphans(ctx context.Context) (int, error) {
	if time.Since(a.lastSweep) < a.cfg.OrphanAfter/4 {
		return 0, nil
	}
	what := fmt.Sprintf("apply source %q: move the events staged without an END to the dead letters", a.cfg.Source)
	tx, err := a.w.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, fenceApplierSQL, a.w.cfg.Group, a.cfg.Source, a.epoch)
	if err != nil {
		return 0, fmt.Errorf("%s: fence: %w", what, err)
	}
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("%s with epoch %d: %w", what, a.epoch, ErrApplierFenced)
	}
	rows, err := tx.Query(ctx, sweepOrphansSQL, a.w.cfg.Group, a.cfg.Source, a.cfg.OrphanAfter)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	var recs []stream.Record
	var txids []string
	var digests [][]byte
	for rows.Next() {
		var r stream.Record
		var ts pgtype.Timestamptz
		var txid string
		var keySchema, valueSchema []byte
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Key, &r.Value, &ts, &txid, &keySchema, &valueSchema); err != nil {
			rows.Close()
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		r.Timestamp = ts.Time
		recs, txids, digests = append(recs, r), append(txids, txid), append(digests, keySchema, valueSchema)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	// The dead letters hold the events as they came.
	if err := a.schemas.joinRecords(ctx, tx, recs, digests); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	letters := make([]deadletters.Letter, len(recs))
	for i, r := range recs {
		letters[i] = deadletters.Letter{Group: a.w.cfg.Group, Record: r, Table: a.w.TableName(r.Topic),
			Kind: KindTransactionEndMissing,
			Message: fmt.Sprintf("staged for %s without the END of its source transaction %q: a copy of an event of a transaction applied and pruned already (ApplierConfig.RetainEnds), or one whose END never came",
				a.cfg.OrphanAfter, txids[i])}
	}
	if err := deadletters.Insert(ctx, tx, letters); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("%s: commit (outcome unknown): %w", what, err)
	}
	a.lastSweep = time.Now()
	if len(letters) > 0 {
		a.log.Warn("staged events without the END of their source transaction moved to the dead letters",
			"events", len(letters), "older_than", a.cfg.OrphanAfter, "kind", KindTransactionEndMissing)
	}
	return len(letters), nil
}
