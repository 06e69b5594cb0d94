package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Transaction-consistent change sinks (Sink.Transactions). A source
// transaction's events are spread over the topics of its tables and over
// their partitions, and no member of the group need own all of them. So
// each member stages the events of its own partitions that carry a
// transaction (stream.Change.Tx) in kafka2pg.cdc_staged, in the batch's
// fenced transaction: staging is exactly once per partition, by the same
// protocol as any write. The transaction topic's END records, which count
// each transaction's events, are staged the same way in
// kafka2pg.cdc_tx_ends by a Boundaries sink. An Applier (txapply.go)
// applies each source transaction whose events are all staged, in one
// Postgres transaction, in the order of the END records.
//
// Changes without a transaction (snapshot reads, connectors without
// transaction metadata, heartbeats) are applied in the batch's
// transaction, as without Transactions.
//
// Both tables are queues; every lookup in them, the staging's and the
// Applier's, goes through queueProbe (below).

// Transactions configures a Sink whose changes are applied one source
// transaction at a time.
type Transactions struct {
	// Source names the source database's capture (Debezium's
	// topic.prefix): the staged events of all its tables and the END
	// records of its transaction topic meet under this name, and one
	// Applier applies them. Required.
	Source string
}

// Boundaries configures the sink of a source's transaction topic
// (Debezium's <topic.prefix>.transaction).
type Boundaries struct {
	// Source is the Transactions.Source of the source's change sinks.
	// Required.
	Source string
	// Parse reads one record of the topic (package cdc's ParseBoundary).
	// A record it refuses with an error wrapping decode.ErrBadRecord is a
	// bad record; ok false skips the record (a tombstone). Required.
	Parse func(r *stream.Record) (b stream.TxBoundary, ok bool, err error)
}

// boundariesTable names what a Boundaries sink writes, in logs and dead
// letters.
var boundariesTable = schema.Table{Schema: "kafka2pg", Name: "cdc_tx_ends"}

// BoundariesSink returns the Sink of a transaction topic.
func BoundariesSink(b Boundaries) Sink {
	return Sink{Table: boundariesTable, Boundaries: &b}
}

func validateTransactions(topic string, sink Sink) error {
	if t := sink.Transactions; t != nil {
		if sink.Changes == nil {
			return fmt.Errorf("ingest: the sink of topic %q has Transactions but no Changes: only change events carry a source transaction", topic)
		}
		if t.Source == "" {
			return fmt.Errorf("ingest: the sink of topic %q has Transactions without a Source", topic)
		}
	}
	if b := sink.Boundaries; b != nil {
		if sink.Changes != nil || sink.Mapper != nil || sink.Upsert != nil || sink.Transactions != nil {
			return fmt.Errorf("ingest: the sink of topic %q is a transaction topic's (Boundaries): it takes no Mapper, Changes, Upsert or Transactions", topic)
		}
		if b.Source == "" || b.Parse == nil {
			return fmt.Errorf("ingest: the transaction topic sink of topic %q needs a Source and a Parse", topic)
		}
	}
	return nil
}

// stageTransactions splits changes into those applied in the batch's
// transaction (returned) and those of a source transaction, which stage
// stages in it.
func (w *Writer) stageTransactions(b *stream.Batch, sink Sink, changes []keyedChange) ([]keyedChange, stageFunc) {
	n := 0
	for i := range changes {
		if changes[i].ch.Tx.ID != "" {
			n++
		}
	}
	// A batch is most often all of one kind: then changes serves as is
	// (a keyedChange is large, and copying every one was a tenth of the
	// bytes a staged event allocated).
	var direct, staged []keyedChange
	switch n {
	case 0:
		return changes, nil
	case len(changes):
		staged = changes
	default:
		direct, staged = make([]keyedChange, 0, len(changes)-n), make([]keyedChange, 0, n)
		for _, c := range changes {
			if c.ch.Tx.ID == "" {
				direct = append(direct, c)
			} else {
				staged = append(staged, c)
			}
		}
	}
	return direct, func(ctx context.Context, tx pgx.Tx) ([]badRecord, error) {
		return w.stage(ctx, tx, sink.Transactions.Source, b, staged)
	}
}

// noSeqScan comes before each lookup of the Applier and of the staging in
// kafka2pg.cdc_staged and cdc_tx_ends, and seqScanAsConfigured after it,
// in the same round trip (queueProbe), so that the transaction's other
// statements are planned as configured. Those tables are queues, filled
// and emptied faster than autovacuum analyzes them: with the statistics
// of an emptied staging, Postgres planned the count of each pending
// transaction's staged events as a sequential scan, run once per END, and
// a bench run spent 109 s of Postgres CPU on it before its first row.
// Every such lookup is a probe of a key or a range of one, which an index
// serves whatever the table's size.
const noSeqScan = "SET LOCAL enable_seqscan = off"

// seqScanAsConfigured ends noSeqScan, for the statements of the
// transaction that come after the probes.
const seqScanAsConfigured = "SET LOCAL enable_seqscan = DEFAULT"

// queueProbe queues sql, a lookup in the staging or the ENDs, between
// noSeqScan and seqScanAsConfigured, in a transaction, and returns it.
func queueProbe(q *pgx.Batch, sql string, args ...any) *pgx.QueuedQuery {
	q.Queue(noSeqScan)
	qq := q.Queue(sql, args...)
	q.Queue(seqScanAsConfigured)
	return qq
}

// KindLateEvent is the dead letter kind of an event of a source
// transaction the Applier applied without it (IncompleteApply).
const KindLateEvent = "transaction_applied_without_it"

// appliedTxsSQL reads which of a batch's source transactions ($3, each
// once) have their END staged, whether the Applier applied them (the END
// is before its position), and whether without all their events
// (IncompleteApply): it looks them up by the ENDs' key, one probe each.
// (txid = ANY($3) would have Postgres filter each of the source's ENDs
// against the array when the statistics do not know the source yet.)
const appliedTxsSQL = `SELECT e.txid, e.tx_offset < ` + appliedPosition + `, e.applied_events < e.event_count
FROM unnest($3::text[]) AS t(txid)
CROSS JOIN LATERAL (SELECT e.* FROM kafka2pg.cdc_tx_ends e
                    WHERE e.consumer_group = $1 AND e.source = $2 AND e.txid = t.txid OFFSET 0) e`

// stageEventsSQL stages a batch's events of source transactions not
// applied yet, leaving an event staged already. It is the way round a
// copy: stage COPYs, and only a COPY that meets one (a Connect restart
// wrote an event again while its original waits staged) is undone to
// its savepoint and done again with this statement. unnest of several
// arrays materializes them, which a batch of large events spills to
// disk.
const stageEventsSQL = `INSERT INTO kafka2pg.cdc_staged
    (consumer_group, source, txid, data_collection, collection_order, total_order, topic, partition, kafka_offset, key, value, kafka_timestamp,
     key_schema, value_schema)
SELECT $1, $2, s.txid, s.coll, s.coll_order, s.total_order, $3, $4, s.off, s.k, s.v, s.ts, s.ks, s.vs
FROM unnest($5::text[], $6::text[], $7::int8[], $8::int8[], $9::int8[], $10::bytea[], $11::bytea[], $12::timestamptz[],
            $13::bytea[], $14::bytea[])
    AS s(txid, coll, coll_order, total_order, off, k, v, ts, ks, vs)
ON CONFLICT DO NOTHING`

// stagedTable and stagedColumns are what stage COPYs into, and
// stagedTypes their types.
var (
	stagedTable   = pgx.Identifier{"kafka2pg", "cdc_staged"}
	stagedColumns = []string{"consumer_group", "source", "txid", "data_collection", "collection_order", "total_order",
		"topic", "partition", "kafka_offset", "key", "value", "kafka_timestamp", "key_schema", "value_schema"}
	stagedTypes = []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID,
		pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.ByteaOID, pgtype.ByteaOID, pgtype.TimestamptzOID,
		pgtype.ByteaOID, pgtype.ByteaOID}
)

// stageFunc stages what a batch holds of source transactions, in the
// batch's transaction; the records it returns are dead letters.
type stageFunc = func(ctx context.Context, tx pgx.Tx) ([]badRecord, error)

// stage stages the records of staged as they came, their Connect schemas
// kept apart (txschemas.go): the Applier decodes them again when it
// applies their transaction, with the table as it is then. An
// event of a transaction applied already is left: a copy, when all its
// events were applied; when the Applier applied it without them
// (IncompleteApply), a late event, which becomes a dead letter.
func (w *Writer) stage(ctx context.Context, tx pgx.Tx, source string, b *stream.Batch, staged []keyedChange) ([]badRecord, error) {
	var schemas schemaSplitter
	events := make([]stagedEvent, len(staged))
	for i := range staged {
		e := &events[i]
		e.keyedChange = &staged[i]
		e.key, e.keySchema = schemas.split(e.rec.Key)
		e.value, e.valueSchema = schemas.split(e.rec.Value)
	}
	// One round trip stages the events' schemas, sets the savepoint a
	// COPY that meets a copy goes back to, and finds which of their
	// transactions were applied already.
	q := &pgx.Batch{}
	schemas.queue(q)
	q.Queue("SAVEPOINT kafka2pg_stage")
	applied := queueAppliedTxs(q, w.cfg.Group, source, staged)
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return nil, fmt.Errorf("stage %d events of source %q: find the transactions applied already: %w", len(staged), source, err)
	}
	var bad []badRecord
	if len(applied) > 0 {
		pending := events[:0]
		for _, e := range events {
			partial, done := applied[e.ch.Tx.ID]
			switch {
			case !done:
				pending = append(pending, e)
			case partial:
				bad = append(bad, badRecord{rec: e.rec, kind: KindLateEvent,
					err: fmt.Errorf("source transaction %q was applied without this event after waiting for it (OnIncomplete apply)", e.ch.Tx.ID)})
			}
		}
		events = pending
	}
	if len(events) == 0 {
		return bad, nil
	}
	rows := &stagedRows{group: w.cfg.Group, source: source, b: b, events: events, i: -1}
	err := copyLeavingCopies(ctx, tx, "kafka2pg_stage", stagedTable, stagedColumns, stagedTypes, rows, func() error {
		return w.stageLeavingCopies(ctx, tx, source, b, events)
	})
	if err != nil {
		return nil, fmt.Errorf("stage %d events of source %q: %w", len(events), source, err)
	}
	return bad, nil
}

// copyLeavingCopies COPYs rows into one of the queues (kafka2pg.cdc_staged,
// cdc_tx_ends), in tx after the savepoint sp its caller set. Their rows
// are new but for copies (a connector's restart writes records again), so
// COPY is the way for them; a COPY that meets a row staged already
// (unique_violation) is undone to sp, and leave stages the rows with an
// INSERT that leaves the staged ones as they are.
func copyLeavingCopies(ctx context.Context, tx pgx.Tx, sp string, table pgx.Identifier, cols []string, oids []uint32, rows pgx.CopyFromSource, leave func() error) error {
	_, err := pgcopy.CopyTyped(ctx, tx, table, cols, oids, rows)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" { // unique_violation: a copy of a staged row
		return err
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp); err != nil {
		return err
	}
	return leave()
}

// stagedEvent is an event of a source transaction as stage writes it:
// its key and value split from their Connect schemas, once
// (schemaSplitter.split; a digest is nil for what is staged whole).
type stagedEvent struct {
	*keyedChange
	key, keySchema     []byte
	value, valueSchema []byte
}

// stageLeavingCopies stages events with stageEventsSQL.
func (w *Writer) stageLeavingCopies(ctx context.Context, tx pgx.Tx, source string, b *stream.Batch, events []stagedEvent) error {
	n := len(events)
	txids, colls := make([]string, n), make([]string, n)
	collOrders, totalOrders, offs := make([]int64, n), make([]int64, n), make([]int64, n)
	keys, values, keySchemas, valueSchemas := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	stamps := make([]pgtype.Timestamptz, n)
	for i, e := range events {
		txids[i], colls[i] = e.ch.Tx.ID, e.ch.Tx.Collection
		collOrders[i], totalOrders[i], offs[i] = e.ch.Tx.CollectionOrder, e.ch.Tx.TotalOrder, e.rec.Offset
		keys[i], keySchemas[i], values[i], valueSchemas[i] = e.key, e.keySchema, e.value, e.valueSchema
		stamps[i] = stampOf(e.rec)
	}
	_, err := tx.Exec(ctx, stageEventsSQL, w.cfg.Group, source, b.Topic, b.Partition,
		txids, colls, collOrders, totalOrders, offs, keys, values, stamps, keySchemas, valueSchemas)
	return err
}

func stampOf(r *stream.Record) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: r.Timestamp, Valid: !r.Timestamp.IsZero()}
}

// stagedRows are the rows of cdc_staged of a batch's events, for COPY.
// They write their fields straight into the COPY stream (NextTuple), in
// stagedColumns' order: every event of a source transaction passes here,
// and a row of 14 values boxed for Values cost 6 allocations.
type stagedRows struct {
	group, source string
	b             *stream.Batch
	events        []stagedEvent
	i             int
}

func (r *stagedRows) AppendsTuples() bool { return true }

func (r *stagedRows) NextTuple(dst []byte, _ []uint32, _ pgcopy.FieldEncoder) ([]byte, bool) {
	if r.i++; r.i >= len(r.events) {
		return dst, false
	}
	e := &r.events[r.i]
	dst = pgvalue.AppendBytesField(dst, r.group)
	dst = pgvalue.AppendBytesField(dst, r.source)
	dst = pgvalue.AppendBytesField(dst, e.ch.Tx.ID)
	dst = pgvalue.AppendBytesField(dst, e.ch.Tx.Collection)
	dst = pgvalue.AppendInt8Field(dst, e.ch.Tx.CollectionOrder)
	dst = pgvalue.AppendInt8Field(dst, e.ch.Tx.TotalOrder)
	dst = pgvalue.AppendBytesField(dst, r.b.Topic)
	dst = pgvalue.AppendInt4Field(dst, r.b.Partition)
	dst = pgvalue.AppendInt8Field(dst, e.rec.Offset)
	dst = pgvalue.AppendBytesOrNull(dst, e.key)
	dst = pgvalue.AppendBytesOrNull(dst, e.value)
	if ts := stampOf(e.rec); ts.Valid {
		dst = pgvalue.AppendTimestamptzField(dst, ts.Time)
	} else {
		dst = pgvalue.AppendNull(dst)
	}
	dst = pgvalue.AppendBytesOrNull(dst, e.keySchema)
	return pgvalue.AppendBytesOrNull(dst, e.valueSchema), true
}

// Next, Values and Err make a pgx.CopyFromSource; pgcopy writes the rows
// with NextTuple instead.
func (r *stagedRows) Next() bool             { return false }
func (r *stagedRows) Values() ([]any, error) { return nil, nil }
func (r *stagedRows) Err() error             { return nil }

// queueAppliedTxs queues into q the lookup of the source transactions of
// staged that the Applier applied already, and returns their set, filled
// when q's results are read: true for those applied without all their
// events.
func queueAppliedTxs(q *pgx.Batch, group, source string, staged []keyedChange) map[string]bool {
	seen := map[string]bool{}
	var ids []string
	for _, c := range staged {
		if id := c.ch.Tx.ID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	applied := map[string]bool{}
	queueProbe(q, appliedTxsSQL, group, source, ids).Query(func(rows pgx.Rows) error {
		var id string
		var done bool
		var partial pgtype.Bool
		_, err := pgx.ForEachRow(rows, []any{&id, &done, &partial}, func() error {
			if done {
				applied[id] = partial.Bool
			}
			return nil
		})
		return err
	})
	return applied
}

// stageEndsSQL stages a batch's END records; one seen already (a Connect
// restart wrote it again) keeps its first place.
const stageEndsSQL = `INSERT INTO kafka2pg.cdc_tx_ends
    (consumer_group, source, txid, tx_partition, tx_offset, event_count, data_collections)
SELECT $1, $2, e.txid, $3, e.off, e.n, e.colls
FROM unnest($4::text[], $5::int8[], $6::int8[], $7::jsonb[]) AS e(txid, off, n, colls)
ON CONFLICT DO NOTHING`

// writeBoundaries writes a batch of a transaction topic: its END records
// into kafka2pg.cdc_tx_ends, with the fenced offsets. BEGIN records and
// tombstones move only the offsets.
func (w *Writer) writeBoundaries(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	type end struct {
		rec *stream.Record
		b   stream.TxBoundary
	}
	var ends []end
	var bad []badRecord
	for i := range b.Records {
		r := &b.Records[i]
		if br := tooLarge(r, w.cfg.MaxRecordBytes); br != nil {
			bad = append(bad, *br)
			continue
		}
		tb, ok, err := sink.Boundaries.Parse(r)
		if err != nil {
			br, err := classify(r, err)
			if err != nil {
				return outcome{}, err
			}
			bad = append(bad, *br)
			continue
		}
		if ok && tb.End {
			ends = append(ends, end{rec: r, b: tb})
		}
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		if len(ends) > 0 {
			n := len(ends)
			rows := endRows{group: w.cfg.Group, source: sink.Boundaries.Source, partition: b.Partition, i: -1,
				ids: make([]string, 0, n), offs: make([]int64, 0, n), counts: make([]int64, 0, n), colls: make([]string, 0, n)}
			for _, e := range ends {
				c, err := json.Marshal(e.b.Collections)
				if err != nil {
					return outcome{}, fmt.Errorf("stage the END of transaction %q: %w", e.b.ID, err)
				}
				rows.ids, rows.offs = append(rows.ids, e.b.ID), append(rows.offs, e.rec.Offset)
				rows.counts, rows.colls = append(rows.counts, e.b.EventCount), append(rows.colls, string(c))
			}
			if err := stageEnds(ctx, tx, &rows); err != nil {
				return outcome{}, fmt.Errorf("stage %d END records of source %q: %w", len(ends), sink.Boundaries.Source, err)
			}
		}
		return outcome{rows: len(ends), bad: bad}, nil
	})
}

// stageEnds stages a batch's ENDs into kafka2pg.cdc_tx_ends
// (copyLeavingCopies): an END staged already, a copy of the transaction
// topic's record at a later offset, is left as it was staged first. On
// bench-peers (125,000 ENDs a run) the INSERT over the batch's arrays
// took 24 µs an END of Postgres' time, the COPY 16 µs.
func stageEnds(ctx context.Context, tx pgx.Tx, rows *endRows) error {
	if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_ends"); err != nil {
		return err
	}
	return copyLeavingCopies(ctx, tx, "kafka2pg_ends", endsTable, endsColumns, endsTypes, rows, func() error {
		_, err := tx.Exec(ctx, stageEndsSQL, rows.group, rows.source, rows.partition, rows.ids, rows.offs, rows.counts, rows.colls)
		return err
	})
}

// endsTable, endsColumns and endsTypes are what stageEnds COPYs into.
var (
	endsTable   = pgx.Identifier{"kafka2pg", "cdc_tx_ends"}
	endsColumns = []string{"consumer_group", "source", "txid", "tx_partition", "tx_offset", "event_count", "data_collections"}
	endsTypes   = []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.JSONBOID}
)

// endRows are a batch's ENDs, as the COPY of stageEnds reads them (its
// fields written straight into the stream, in endsColumns' order) and
// stageEndsSQL's arrays.
type endRows struct {
	group, source string
	partition     int32
	ids           []string
	offs, counts  []int64
	colls         []string
	i             int
}

func (r *endRows) AppendsTuples() bool { return true }

func (r *endRows) NextTuple(dst []byte, _ []uint32, _ pgcopy.FieldEncoder) ([]byte, bool) {
	if r.i++; r.i >= len(r.ids) {
		return dst, false
	}
	dst = pgvalue.AppendBytesField(dst, r.group)
	dst = pgvalue.AppendBytesField(dst, r.source)
	dst = pgvalue.AppendBytesField(dst, r.ids[r.i])
	dst = pgvalue.AppendInt4Field(dst, r.partition)
	dst = pgvalue.AppendInt8Field(dst, r.offs[r.i])
	dst = pgvalue.AppendInt8Field(dst, r.counts[r.i])
	return pgvalue.AppendJSONBField(dst, r.colls[r.i]), true
}

// Next, Values and Err make a pgx.CopyFromSource; pgcopy writes the rows
// with NextTuple instead.
func (r *endRows) Next() bool             { return false }
func (r *endRows) Values() ([]any, error) { return nil, nil }
func (r *endRows) Err() error             { return nil }
