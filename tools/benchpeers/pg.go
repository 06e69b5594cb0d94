package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// db is the harness's own connection to the Postgres both systems write to.
type db struct {
	conn *pgx.Conn
	url  string
}

// tableDDL creates table with the 12 fields' columns, the same for both
// systems; with upsert, id is the primary key (the conflict target of both).
func tableDDL(table string, upsert bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", pgx.Identifier{table}.Sanitize())
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", pgx.Identifier{f.name}.Sanitize(), f.column)
		if !f.optional {
			b.WriteString(" NOT NULL")
		}
	}
	if upsert {
		b.WriteString(", PRIMARY KEY (id)")
	}
	b.WriteString(")")
	return b.String()
}

// reset drops and creates table (drops only with ownTable: the system
// creates it), then runs CHECKPOINT, so that no run pays for the dirty
// pages of the one before.
func (d *db) reset(ctx context.Context, table string, upsert, ownTable bool) error {
	if err := d.drop(ctx, table); err != nil {
		return err
	}
	if !ownTable {
		if _, err := d.conn.Exec(ctx, tableDDL(table, upsert)); err != nil {
			return fmt.Errorf("create table %s: %w", table, err)
		}
	}
	if _, err := d.conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("CHECKPOINT (the harness runs it before every run; it needs superuser or pg_checkpoint): %w", err)
	}
	return nil
}

func (d *db) drop(ctx context.Context, table string) error {
	if _, err := d.conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
		return fmt.Errorf("drop table %s: %w", table, err)
	}
	return nil
}

func (d *db) scalar(ctx context.Context, sql string, args ...any) (int64, error) {
	var n int64
	if err := d.conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", sql, err)
	}
	return n, nil
}

// hasRows tells whether table holds a row yet (none while it does not
// exist).
func (d *db) hasRows(ctx context.Context, table string) (bool, error) {
	n, err := d.scalar(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" LIMIT 1) t")
	if missingTable(err) {
		return false, nil
	}
	return n > 0, err
}

// missingTable tells whether err is Postgres' undefined_table: a system
// that creates its table has not yet.
func missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

func (d *db) count(ctx context.Context, table string) (int64, error) {
	return d.scalar(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize())
}

// progress is how many records are in table. Without updates that is its
// row count. With updates (rows are keys) it is, summed over the
// partitions, the position in its partition of the highest seq of the
// partition's rows: the last record a sink wrote from a partition is in
// the table as its key's row (no later record of that key came, and no
// other partition has the key), and a sink writes a partition in order.
// (With changes, when that record was a delete, the count stops at the
// partition's latest row still in the table: a few records fewer.)
func (d *db) progress(ctx context.Context, table string, data dataset) (int64, error) {
	if !data.keyed() {
		return d.count(ctx, table)
	}
	rows, err := d.conn.Query(ctx, fmt.Sprintf("SELECT id %% %d, max(seq) FROM %s GROUP BY 1", partitions, pgx.Identifier{table}.Sanitize()))
	if err != nil {
		return 0, fmt.Errorf("read the progress of %s: %w", table, err)
	}
	seqs := data.partitionSeqs()
	var n int64
	var p, maxSeq int64
	_, err = pgx.ForEachRow(rows, []any{&p, &maxSeq}, func() error {
		// The records of p up to maxSeq: its position + 1.
		n += int64(sort.Search(len(seqs[p]), func(i int) bool { return seqs[p][i] > maxSeq }))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the progress of %s: %w", table, err)
	}
	return n, nil
}

// lastRowsIn counts the rows of an upsert table that hold the last record
// of their partition (by primary key, so a few index lookups).
func (d *db) lastRowsIn(ctx context.Context, table string, last []keySeq) (int64, error) {
	ids, seqs := make([]int64, len(last)), make([]int64, len(last))
	for i, ks := range last {
		ids[i], seqs[i] = ks.id, ks.seq
	}
	n, err := d.scalar(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+
		" t JOIN unnest($1::bigint[], $2::bigint[]) AS l(id, seq) ON t.id = l.id AND t.seq = l.seq", ids, seqs)
	if missingTable(err) {
		return 0, nil
	}
	return n, err
}

// foldMismatches compares an upsert table with the fold of its records
// (the seq of each key's row): it counts the keys whose row is missing,
// holds another seq, or should not be there (deleted, or never sent).
func (d *db) foldMismatches(ctx context.Context, table string, fold map[int64]int64) (int64, error) {
	ids, seqs := make([]int64, 0, len(fold)), make([]int64, 0, len(fold))
	for id, seq := range fold {
		ids, seqs = append(ids, id), append(seqs, seq)
	}
	return d.scalar(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+
		" t FULL JOIN unnest($1::bigint[], $2::bigint[]) AS f(id, seq) ON t.id = f.id"+
		" WHERE t.id IS NULL OR f.id IS NULL OR t.seq IS DISTINCT FROM f.seq", ids, seqs)
}

// tableState is what a table holds after a run.
type tableState struct {
	rows, distinct, seqSum int64
}

func (d *db) state(ctx context.Context, table string) (tableState, error) {
	var s tableState
	err := d.conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT seq), coalesce(sum(seq), 0)::bigint FROM "+pgx.Identifier{table}.Sanitize()).
		Scan(&s.rows, &s.distinct, &s.seqSum)
	if err != nil {
		return s, fmt.Errorf("count the rows of %s: %w", table, err)
	}
	return s, nil
}

// committed is the number of records of topic kafka2pg's group made durable
// (the sum of next_offset: the topics start at 0 and hold no transaction
// markers).
func (d *db) committed(ctx context.Context, group, topic string) (int64, error) {
	n, err := d.scalar(ctx, `SELECT coalesce(sum(next_offset), 0)::bigint FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2`, group, topic)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return 0, nil // kafka2pg has not created its schema yet
	}
	return n, err
}

// forgetGroups deletes kafka2pg's offsets of the run's groups, and what
// their sinks with transactions staged.
func (d *db) forgetGroups(ctx context.Context, prefix string) error {
	_, err := d.conn.Exec(ctx, `DO $$ BEGIN
		IF to_regclass('kafka2pg.offsets') IS NOT NULL THEN
			DELETE FROM kafka2pg.offsets WHERE consumer_group LIKE `+quoteLiteral(prefix+"%")+`;
		END IF;
		IF to_regclass('kafka2pg.cdc_appliers') IS NOT NULL THEN
			DELETE FROM kafka2pg.cdc_staged WHERE consumer_group LIKE `+quoteLiteral(prefix+"%")+`;
			DELETE FROM kafka2pg.cdc_tx_ends WHERE consumer_group LIKE `+quoteLiteral(prefix+"%")+`;
			DELETE FROM kafka2pg.cdc_appliers WHERE consumer_group LIKE `+quoteLiteral(prefix+"%")+`;
		END IF; END $$`)
	if err != nil {
		return fmt.Errorf("delete kafka2pg's offsets of groups %s*: %w", prefix, err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal (a DO block takes no
// parameters).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// poll calls check until it reports done, every interval(elapsed) at most
// (at least 20 ms apart), until ctx ends or deadline passes.
func poll(ctx context.Context, deadline time.Time, interval func() time.Duration, check func() (bool, error)) error {
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return errDeadline
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(interval(), 20*time.Millisecond)):
		}
	}
}

var errDeadline = fmt.Errorf("deadline passed")

// tableWatch tells when a table holds every record: an upsert table by the
// last record of each partition (index lookups), an append table by its
// count, taken less often while much is missing (a count scans the table).
type tableWatch struct {
	lastRows  int64
	lastCheck time.Time
	rate      float64
}

func (w *tableWatch) done(ctx context.Context, d *db, table string, want finalState, upsert bool) (bool, error) {
	if upsert {
		n, err := d.lastRowsIn(ctx, table, want.last)
		return n == int64(len(want.last)), err
	}
	n, err := d.count(ctx, table)
	if err != nil {
		return false, err
	}
	now := time.Now()
	if !w.lastCheck.IsZero() && now.After(w.lastCheck) {
		w.rate = float64(n-w.lastRows) / now.Sub(w.lastCheck).Seconds()
	}
	w.lastRows, w.lastCheck = n, now
	return n >= want.rows, nil
}

// next is how long to wait before the next done: for an append table,
// about when the rows should be complete, halved.
func (w *tableWatch) next(want finalState, upsert bool) time.Duration {
	if upsert || w.rate <= 0 {
		return 50 * time.Millisecond
	}
	left := time.Duration(float64(want.rows-w.lastRows) / w.rate / 2 * float64(time.Second))
	return min(max(left, 50*time.Millisecond), 2*time.Second)
}
