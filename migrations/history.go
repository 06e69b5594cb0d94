package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// Schema holds the kafka2pg tables and golang-migrate's history of them.
	Schema = "kafka2pg"
	// HistoryTable is the table in Schema where golang-migrate records the
	// applied version.
	HistoryTable = "schema_migrations"
	// LegacyHistoryTable is where earlier releases kept the history: in the
	// connection's current schema (public, usually), which is the user's
	// schema. Up, Down and the bridge's start move it into Schema.
	LegacyHistoryTable = "kafka2pg_schema_migrations"
)

// State is what a database records of the kafka2pg schema's migrations.
type State struct {
	// Applied is false when no version is recorded (nothing installed).
	Applied bool
	// Version is the applied version, when Applied.
	Version uint
	// Dirty means a migration failed half-way: someone must repair the
	// schema by hand and force the version.
	Dirty bool
	// Table is the quoted name of the history table ("" when there is none).
	Table string
	// Legacy means Table is the history's old place (LegacyHistoryTable in
	// the current schema), which Up moves into Schema.
	Legacy bool
}

// Queryer is what ReadState needs: a *pgx.Conn or a pgx.Tx.
type Queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// historyPlaces finds the history tables of both layouts in the catalog,
// which needs no privilege on them (to_regclass would need USAGE on their
// schemas). legacy_schema is NULL when there is no legacy table.
const historyPlaces = `SELECT
	EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')),
	(SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relname = $3 AND c.relkind IN ('r', 'p')),
	EXISTS (SELECT FROM pg_namespace WHERE nspname = $1),
	current_database(),
	current_schema()`

// places is what historyPlaces reads.
type places struct {
	current      bool    // Schema.HistoryTable exists
	legacySchema *string // the schema of the legacy table, nil when it does not exist
	schema       bool    // Schema exists
	database     string
	search       *string // current_schema(), nil when no schema of search_path exists
}

func readPlaces(ctx context.Context, q Queryer) (places, error) {
	var p places
	err := q.QueryRow(ctx, historyPlaces, Schema, HistoryTable, LegacyHistoryTable).
		Scan(&p.current, &p.legacySchema, &p.schema, &p.database, &p.search)
	return p, err
}

// ReadState reads the migration history without writing anything: from
// Schema.HistoryTable, or, on a database migrated by an earlier release and
// not yet moved, from LegacyHistoryTable in the current schema.
func ReadState(ctx context.Context, q Queryer) (State, error) {
	p, err := readPlaces(ctx, q)
	if err != nil {
		return State{}, fmt.Errorf("find the migration history: %w", err)
	}
	var s State
	switch {
	case p.current:
		s.Table = pgx.Identifier{Schema, HistoryTable}.Sanitize()
	case p.legacySchema != nil:
		s.Table = pgx.Identifier{*p.legacySchema, LegacyHistoryTable}.Sanitize()
		s.Legacy = true
	default:
		return s, nil
	}
	var version int64
	err = q.QueryRow(ctx, "SELECT version, dirty FROM "+s.Table+" LIMIT 1").Scan(&version, &s.Dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s, nil
	case err != nil:
		return State{}, fmt.Errorf("read the migration history in %s: %w", s.Table, err)
	}
	// golang-migrate records version -1, dirty, when the first migration's
	// down failed: nothing is cleanly applied, and someone must look.
	s.Applied = true
	if version >= 0 {
		s.Version = uint(version)
	}
	return s, nil
}

// lockKeys are the advisory locks that golang-migrate takes around the
// history table of each layout (its key is a hash of the database, schema
// and table names). Holding both serializes a move with a migration run by
// this release and by an earlier one.
func lockKeys(p places) []string {
	var keys []string
	if p.search != nil {
		legacy, _ := database.GenerateAdvisoryLockId(p.database, *p.search, LegacyHistoryTable)
		keys = append(keys, legacy)
	}
	current, _ := database.GenerateAdvisoryLockId(p.database, Schema, HistoryTable)
	return append(keys, current)
}

// lockedTx begins a transaction on conn holding the advisory locks of
// lockKeys, and returns what the catalog says once they are held.
func lockedTx(ctx context.Context, conn *pgx.Conn) (pgx.Tx, places, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, places{}, err
	}
	p, err := readPlaces(ctx, tx)
	if err == nil {
		// Always in the same order (legacy first), so two starts cannot
		// deadlock on them.
		for _, key := range lockKeys(p) {
			if _, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", key); err != nil {
				break
			}
		}
	}
	if err == nil {
		p, err = readPlaces(ctx, tx) // again: another start may have moved it meanwhile
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, places{}, err
	}
	return tx, p, nil
}

// placeHistory makes Schema.HistoryTable the history, under the advisory
// locks: it moves an earlier release's history table there (keeping its
// version, so no migration runs again), and with create it creates Schema
// when it is missing, for golang-migrate to create the table in. It reports
// whether a history exists now (with create, or after a move, always).
//
// Schema is created only when it is missing: an administrator may have
// created it for a role that has no CREATE privilege on the database, and
// CREATE SCHEMA IF NOT EXISTS would need that privilege even then. A legacy
// table is left alone when Schema.HistoryTable exists already (an earlier
// release that started after the move recreated it; it records nothing that
// counts).
func placeHistory(ctx context.Context, conn *pgx.Conn, create bool) (exists bool, err error) {
	tx, p, err := lockedTx(ctx, conn)
	if err != nil {
		return false, fmt.Errorf("lock the migration history: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	move := !p.current && p.legacySchema != nil
	if (move || create) && !p.schema {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{Schema}.Sanitize()); err != nil {
			return false, fmt.Errorf("create the schema %s: %w", pgx.Identifier{Schema}.Sanitize(), err)
		}
	}
	if move {
		from := pgx.Identifier{*p.legacySchema, LegacyHistoryTable}.Sanitize()
		to := pgx.Identifier{Schema, HistoryTable}.Sanitize()
		stmts := []string{
			"ALTER TABLE " + pgx.Identifier{Schema, LegacyHistoryTable}.Sanitize() + " RENAME TO " + pgx.Identifier{HistoryTable}.Sanitize(),
		}
		if *p.legacySchema != Schema {
			stmts = append([]string{"ALTER TABLE " + from + " SET SCHEMA " + pgx.Identifier{Schema}.Sanitize()}, stmts...)
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return false, fmt.Errorf("move the migration history from %s to %s: %w", from, to, err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit the migration history's place: %w", err)
	}
	return p.current || move || create, nil
}

// dropHistory finishes Down once golang-migrate has reverted every
// migration: it drops the (empty) history table and then Schema, unless
// Schema holds something else or belongs to someone else (an administrator
// created it), in which case Schema stays. A history that records a version
// again (another instance migrated up meanwhile) is left alone.
func dropHistory(ctx context.Context, conn *pgx.Conn) error {
	tx, p, err := lockedTx(ctx, conn)
	if err != nil {
		return fmt.Errorf("lock the migration history: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	schema := pgx.Identifier{Schema}.Sanitize()
	table := pgx.Identifier{Schema, HistoryTable}.Sanitize()
	if p.current {
		var recorded bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+table+")").Scan(&recorded); err != nil {
			return fmt.Errorf("read the migration history in %s: %w", table, err)
		}
		if recorded {
			return nil
		}
		if _, err := tx.Exec(ctx, "DROP TABLE "+table); err != nil {
			return fmt.Errorf("drop the migration history %s: %w", table, err)
		}
	}
	if p.schema {
		if _, err := tx.Exec(ctx, "SAVEPOINT drop_schema"); err != nil {
			return fmt.Errorf("drop the schema %s: %w", schema, err)
		}
		if _, err := tx.Exec(ctx, "DROP SCHEMA "+schema); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || (pgErr.Code != pgerrcode.DependentObjectsStillExist && pgErr.Code != pgerrcode.InsufficientPrivilege) {
				return fmt.Errorf("drop the schema %s: %w", schema, err)
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT drop_schema"); err != nil {
				return fmt.Errorf("drop the schema %s: %w", schema, err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit the drop of the migration history: %w", err)
	}
	return nil
}
