package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The Applier applies staged events by key, as a batch of a change sink
// is applied (changes.go). A reader sees an apply transaction's end state
// only, so of what a chunk of the cursor does to a table, only the last
// change of each key matters (with a version, the newest: changeSet.keep).
// Each chunk is decoded, split by table, and each table's changes are
// applied as one changeSet (applyChanges: a COPY into the table or into
// the session's staging table, then one statement per kind of change).
// The chunks apply in order, in the one transaction, so a transaction of
// any size is applied whole while the Applier holds two chunks of it: each
// decodes while the one before it applies (applyAll).
//
// A table's changes that keep an unavailable column's stored value
// (Debezium's unchanged TOASTed columns) are applied change by change, in
// order, in one pipeline. When Postgres refuses a row of a set, the chunk
// is rolled back to its savepoint and applied again change by change, all
// its tables' changes in the source's order, so that the apply fails
// naming the statement Postgres refuses, or succeeds when it was the
// sets' order that failed: sets apply table by table, so a foreign key
// between two replicated tables can refuse a set (a child's row deleted
// after its parent's) that the source's order applies.

// eventApplier applies the staged events of one apply transaction,
// decoded by their topics' sinks.
type eventApplier struct {
	w     *Writer
	stmts map[string]*changeStatements // by qualified table name
	types map[string][]uint32          // each table's column types, by stageName
	// schemas put the staged keys and values back together (txschemas.go).
	schemas schemaCache
	// stale counts, by qualified table name, the changes the version
	// guard skipped in the chunks applied so far.
	stale map[string]int
	// stages are the staging tables the apply transaction filled
	// (batchTx.stages).
	stages map[string]bool
	// topics are the staged events' topics read so far (topic).
	topics map[string]string
}

func newEventApplier(w *Writer, schemas schemaCache) *eventApplier {
	return &eventApplier{w: w, stmts: map[string]*changeStatements{}, types: map[string][]uint32{}, stale: map[string]int{},
		stages: map[string]bool{}, schemas: schemas, topics: map[string]string{}}
}

// chunk is one FETCH of the cursor: the staged events as they came, and
// once decoded, their changes split by table in the order each table
// first comes (tables), and listed in the source's order (order).
type chunk struct {
	recs    []stream.Record
	tids    []pgtype.TID // the staged rows of recs
	digests [][]byte     // of recs' schemas, key and value (txschemas.go)
	// schemas are the schemas of recs' values, whose Value is then the
	// payload alone; nil for a value staged whole.
	schemas [][]byte
	tables  []*tableChanges
	order   []chunkChange
}

// tableChanges are a chunk's changes of one table, in order.
type tableChanges struct {
	sink    Sink
	changes []keyedChange
}

// chunkChange is a change of a chunk, in the source's order: the i-th
// change of its table's tableChanges.
type chunkChange struct {
	tc *tableChanges
	i  int
}

// applyAll applies the cursor's chunks in order, and returns how many
// events it fetched. Decoding is Go's work and the rest Postgres', so
// each chunk decodes while the connection works on its neighbours: the
// next FETCH runs while a chunk decodes, and the chunk after decodes
// while this one's changes apply. Two chunks are held at a time.
func (e *eventApplier) applyAll(ctx context.Context, tx pgx.Tx, fetch fetchSize) (int64, error) {
	cur := &chunk{}
	if err := e.read(ctx, tx, &fetch, cur); err != nil {
		return 0, err
	}
	decoded := e.decodeAhead(ctx, cur)
	spare := &chunk{}
	events := int64(0)
	for len(cur.recs) > 0 {
		next := spare
		err := e.read(ctx, tx, &fetch, next)
		// The chunk's own error comes first: it is the earlier in the
		// source's order (a table change among them).
		if derr := <-decoded; derr != nil {
			return events, derr
		}
		if err != nil {
			return events, err
		}
		decodedNext := e.decodeAhead(ctx, next)
		if err := e.applyChunk(ctx, tx, cur); err != nil {
			<-decodedNext
			return events, err
		}
		events += int64(len(cur.recs))
		spare, cur, decoded = cur, next, decodedNext
	}
	return events, <-decoded
}

// decodeAhead decodes c in a goroutine of its own, and reports on the
// channel it returns when it is done.
func (e *eventApplier) decodeAhead(ctx context.Context, c *chunk) <-chan error {
	done := make(chan error, 1)
	if len(c.recs) == 0 {
		done <- nil
		return done
	}
	go func() { done <- e.decode(ctx, c) }()
	return done
}

// applyChunk applies the events of c, decoded.
func (e *eventApplier) applyChunk(ctx context.Context, tx pgx.Tx, c *chunk) error {
	if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_chunk"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	stale := map[string]int{}
	redo := false
	var err error
	for _, tc := range c.tables {
		if redo, err = e.applyTable(ctx, tx, tc, stale); err != nil {
			return err
		}
		if redo {
			break
		}
	}
	if redo {
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_chunk"); err != nil {
			return fmt.Errorf("rollback to savepoint: %w", err)
		}
		clear(stale)
		if err := e.applyInOrder(ctx, tx, c.order, stale); err != nil {
			return err
		}
	}
	// The chunk's staged events go by their row ids, which the cursor
	// read: a TID scan finds them whatever the staging's statistics,
	// which lag a table that fills and empties, say (noSeqScan).
	// The cursor's snapshot keeps them for its later chunks.
	q := &pgx.Batch{}
	q.Queue("RELEASE SAVEPOINT kafka2pg_chunk")
	queueProbe(q, "DELETE FROM kafka2pg.cdc_staged WHERE ctid = ANY($1::tid[])", c.tids)
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("release savepoint and delete the staged events: %w", err)
	}
	for table, n := range stale {
		e.stale[table] += n
	}
	return nil
}

// fetchSize bounds a FETCH of the cursor (ApplierConfig.FetchRows and
// FetchBytes).
type fetchSize struct {
	rows, bytes int
	// read and events are the bytes and the events the FETCHes so far
	// read.
	read, events int64
}

// firstFetch bounds the first FETCH, which no event has measured yet.
const firstFetch = 256

// next is the number of events the next FETCH reads: as many as fit in
// bytes at the events' mean size so far, within 1 and rows.
func (f *fetchSize) next() int {
	n := min(f.rows, firstFetch)
	if f.read > 0 {
		n = int(min(int64(f.rows), max(1, int64(f.bytes)*f.events/f.read)))
	}
	return n
}

// read reads the next chunk of the cursor into c: its keys joined back
// with their schemas, its values as staged, with their schemas in
// c.schemas.
func (e *eventApplier) read(ctx context.Context, tx pgx.Tx, fetch *fetchSize, c *chunk) error {
	c.recs, c.tids, c.digests, c.schemas, c.tables, c.order = c.recs[:0], c.tids[:0], c.digests[:0], c.schemas[:0], nil, nil
	rows, err := tx.Query(ctx, fmt.Sprintf("FETCH %d FROM kafka2pg_staged", fetch.next()))
	if err != nil {
		return fmt.Errorf("fetch staged events: %w", err)
	}
	// The bytes of a row (its topic, key, value and schema digests) are
	// copied from pgx's buffer into the chunk's blocks: a handful of
	// allocations a chunk instead of five a row. Scan's targets escape, so
	// they are declared once, not once a row.
	var mem byteBlocks
	var r stream.Record
	var ts pgtype.Timestamptz
	var tid pgtype.TID
	described := false
	for rows.Next() {
		if !described {
			// Known once a row came (a FETCH that fails has none).
			if err := rawBytea(rows.FieldDescriptions(), 4, 5, 7, 8); err != nil {
				rows.Close()
				return fmt.Errorf("fetch staged events: %w", err)
			}
			described = true
		}
		r = stream.Record{}
		if err := rows.Scan(&tid, nil, &r.Partition, &r.Offset, nil, nil, &ts, nil, nil); err != nil {
			rows.Close()
			return fmt.Errorf("fetch staged events: %w", err)
		}
		v := rows.RawValues()
		r.Topic = e.topic(v[1])
		r.Key, r.Value = mem.copy(v[4]), mem.copy(v[5])
		keySchema, valueSchema := mem.copy(v[7]), mem.copy(v[8])
		r.Timestamp = ts.Time
		c.recs, c.tids, c.digests = append(c.recs, r), append(c.tids, tid), append(c.digests, keySchema, valueSchema)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fetch staged events: %w", err)
	}
	if c.schemas, err = e.schemas.joinKeys(ctx, tx, c.recs, c.digests, c.schemas); err != nil {
		return err
	}
	fetch.read += c.held()
	fetch.events += int64(len(c.recs))
	return nil
}

// rawBytea checks that the columns cols of a result come in bytea's
// binary format, whose raw value is the bytes themselves (pgx asks for it
// in the extended protocol that kafka2pg's pools use).
func rawBytea(fds []pgconn.FieldDescription, cols ...int) error {
	for _, i := range cols {
		if i >= len(fds) || fds[i].DataTypeOID != pgtype.ByteaOID || fds[i].Format != pgx.BinaryFormatCode {
			return fmt.Errorf("column %d of the staged events is not bytea in binary format (%+v)", i, fds)
		}
	}
	return nil
}

// topic is the topic named by b, one string per topic the apply reads.
func (e *eventApplier) topic(b []byte) string {
	if t, ok := e.topics[string(b)]; ok {
		return t
	}
	t := string(b)
	e.topics[t] = t
	return t
}

// byteBlocks hands out copies of byte slices from blocks of at least
// byteBlockSize, which never move: a copy stays valid as long as it is
// held, and holds its block.
type byteBlocks struct{ free []byte }

const byteBlockSize = 256 << 10

// copy returns a copy of b; nil stays nil (NULL), and empty stays empty.
func (m *byteBlocks) copy(b []byte) []byte {
	switch {
	case b == nil:
		return nil
	case len(b) == 0:
		return []byte{}
	}
	if len(b) > cap(m.free) {
		m.free = make([]byte, 0, max(byteBlockSize, len(b)))
	}
	out := append(m.free, b...)[:len(b):len(b)]
	m.free = m.free[len(b):len(b)]
	return out
}

// held is the size of what the Applier holds of c's events, which the
// FETCH sizes measure: their keys and values as staged. A value's schema
// is held once, in the cache (schemaCache), whatever the events that
// share it: counted in each event, a large schema would shrink the
// chunks of small payloads far below FetchBytes, and each chunk applies
// its own last change of a key.
func (c *chunk) held() int64 {
	n := 0
	for _, r := range c.recs {
		n += len(r.Key) + len(r.Value)
	}
	return int64(n)
}

// payloadDecoder is a ChangeDecoder that decodes an event whose value
// came apart from its schema (cdc.Decoder.DecodePayload): the value of a
// staged event is decoded as staged, and its schema, held once in the
// Applier's schemaCache, is not copied into each event again.
type payloadDecoder interface {
	DecodePayload(r *stream.Record, schema []byte, ch *stream.Change) error
}

// decode decodes the events of c into c.tables and c.order. It touches
// nothing of e but its Writer, so that it runs while e applies another
// chunk.
func (e *eventApplier) decode(ctx context.Context, c *chunk) error {
	byTable := map[string]*tableChanges{}
	for i := range c.recs {
		r := &c.recs[i]
		sink, err := e.w.sinkFor(ctx, r.Topic)
		if err != nil {
			return err
		}
		if sink.Changes == nil {
			return fmt.Errorf("staged event %s/%d@%d: its topic's sink is no change sink", r.Topic, r.Partition, r.Offset)
		}
		// Each change gets its own slices: the chunk's changes are all
		// held until they are applied.
		var ch stream.Change
		if pd, ok := sink.Changes.(payloadDecoder); ok {
			err = pd.DecodePayload(r, c.schemas[i], &ch)
		} else {
			if c.schemas[i] != nil {
				r.Value, c.schemas[i] = joinEnvelope(nil, c.schemas[i], r.Value), nil
			}
			err = sink.Changes.Decode(r, &ch)
		}
		if errors.Is(err, decode.ErrTableChanged) || err == nil && !hasColumns(sink.Changes, sink.Table) {
			return &tableChanged{topic: r.Topic, sink: sink}
		}
		if err != nil {
			return fmt.Errorf("decode staged event %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if ch.Op == stream.OpNone {
			continue
		}
		name := sink.Table.QualifiedName()
		tc := byTable[name]
		if tc == nil {
			tc = &tableChanges{sink: sink}
			byTable[name] = tc
			c.tables = append(c.tables, tc)
		}
		c.order = append(c.order, chunkChange{tc: tc, i: len(tc.changes)})
		tc.changes = append(tc.changes, keyedChange{rec: r, ch: ch})
	}
	return nil
}

// applyTable applies a chunk's changes of one table by key, after the
// TRUNCATE of its last truncate, and adds the changes the version guard
// skipped to stale. It reports redo when Postgres refused a row, or a
// value does not encode: the chunk is to be applied change by change.
func (e *eventApplier) applyTable(ctx context.Context, tx pgx.Tx, tc *tableChanges, stale map[string]int) (redo bool, err error) {
	t := tc.sink.Table
	key := t.PrimaryKey
	changes := tc.changes
	if slices.ContainsFunc(changes, func(c keyedChange) bool { return len(c.ch.Unavailable) > 0 }) {
		order := make([]chunkChange, len(changes))
		for i := range changes {
			order[i] = chunkChange{tc: tc, i: i}
		}
		return false, e.applyInOrder(ctx, tx, order, stale)
	}
	if i := lastTruncate(changes); i >= 0 {
		if _, err := tx.Exec(ctx, truncateSQL(t)); err != nil {
			return false, fmt.Errorf("truncate %s: %w", t.QualifiedName(), err)
		}
		changes = changes[i+1:]
	}
	if len(changes) == 0 {
		return false, nil
	}
	oids, err := e.typesOf(ctx, tx, t)
	if err != nil {
		return false, err
	}
	if len(key) == 0 {
		// The decoder takes only creates of a table without a key.
		rows := make([][]any, len(changes))
		for i, c := range changes {
			rows[i] = c.ch.Row
		}
		if _, err := pgcopy.CopyTyped(ctx, tx, t.Ident(), t.ColumnNames(), oids, pgx.CopyFromRows(rows)); err != nil {
			if rowError(err) {
				return true, nil
			}
			return false, fmt.Errorf("copy into %s: %w", t.QualifiedName(), err)
		}
		return false, nil
	}
	st := e.w.upsertStateOf(t.QualifiedName())
	encode := func(oids []uint32) (*changeSet, []badRecord, error) {
		return encodeChanges(changes, st, tx.Conn().TypeMap(), oids, keyIndexes(t, key), guardOf(tc.sink))
	}
	cs, bad, err := encode(oids)
	if err != nil {
		return false, err
	}
	defer func() { st.done(cs) }()
	if len(bad) > 0 {
		return true, nil
	}
	a, err := e.w.applyChanges(ctx, &batchTx{Tx: tx, oids: oids, stages: e.stages}, t, key, st, &cs, encode)
	if err != nil || a != 0 {
		return a != 0, err
	}
	stale[t.QualifiedName()] += cs.stale
	return false, nil
}

// typesOf reads the column types of t once per apply transaction: the
// changeSet encodes its rows for them, as a batch's are for the types
// its fence reads (fenceAndTypes).
func (e *eventApplier) typesOf(ctx context.Context, tx pgx.Tx, t schema.Table) ([]uint32, error) {
	name := stageName(t)
	if oids, ok := e.types[name]; ok {
		return oids, nil
	}
	oids, err := describeTable(ctx, tx, t)
	if err != nil {
		return nil, err
	}
	e.types[name] = oids
	return oids, nil
}

// applyInOrder applies changes one statement per change, in order, in
// one pipeline, and adds those the version guard skipped to stale, by
// table.
func (e *eventApplier) applyInOrder(ctx context.Context, tx pgx.Tx, changes []chunkChange, stale map[string]int) error {
	q := &pgx.Batch{}
	skipped := map[*changeStatements]int{}
	for _, c := range changes {
		t := c.tc.sink.Table
		st := e.stmts[t.QualifiedName()]
		if st == nil || !sameColumns(st.t, t) {
			st = &changeStatements{t: t, key: t.PrimaryKey, g: guardOf(c.tc.sink), upserts: map[string]string{}}
			e.stmts[t.QualifiedName()] = st
		}
		if _, ok := skipped[st]; !ok {
			skipped[st] = st.stale
		}
		kc := &c.tc.changes[c.i]
		st.queue(q, kc.rec, &kc.ch)
	}
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("apply %d staged events: %w", len(changes), err)
	}
	for st, before := range skipped {
		stale[st.t.QualifiedName()] += st.stale - before
	}
	return nil
}
