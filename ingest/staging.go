package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
)

// The staged half of the upsert path (upsert.go): a staging table of the
// session per upsert table, and the statements that apply it.

// applyStaged COPYs the change set into the session's staging table of t
// and applies it in one statement.
func (w *Writer) applyStaged(ctx context.Context, tx *batchTx, t schema.Table, key []string, st *upsertState, csp **changeSet, encode changeEncoder) (attempt, error) {
	stage, oids, err := stagingTable(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	cs := *csp
	if rowOIDs := oids[:len(oids)-2]; !slices.Equal(rowOIDs, cs.oids) {
		// The table's types are not those the sink declares (altered by
		// hand): encode for the staging table's.
		st.done(cs)
		if cs, _, err = encode(rowOIDs); err != nil {
			*csp = &changeSet{}
			return 0, err
		}
		*csp = cs
	}
	exact, err := w.exactKeys(ctx, tx, t, cs, st)
	if err != nil {
		return 0, err
	}
	cols := append(t.ColumnNames(), stageSeqCol, stageDelCol)
	if _, err := pgcopy.CopyTyped(ctx, tx, stage, cols, oids, &changeSource{cs: cs, stage: true}); err != nil {
		if rowError(err) {
			return attemptIsolated, nil
		}
		return 0, fmt.Errorf("copy into the staging table: %w", err)
	}
	apply := upsertGeneralSQL(t, key, stage)
	if exact {
		apply = upsertExactSQL(t, key, stage, cs.deletes > 0)
	}
	if cs.g.active() {
		err = applyGuarded(ctx, tx, t, key, stage, cs)
	} else {
		_, err = tx.Exec(ctx, apply)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return 0, nil
	case rowError(err):
		return attemptIsolated, nil
	case exact && errors.As(err, &pgErr) && pgErr.Code == "21000":
		// ON CONFLICT met one key twice: keys the binary form did not
		// tell apart. Keep the last operation of each key in SQL from now.
		st.mu.Lock()
		st.exact = false
		st.mu.Unlock()
		return attemptFast, nil
	}
	return 0, fmt.Errorf("upsert into %s: %w", t.QualifiedName(), err)
}

// stagingTable creates, unless the session has it, the staging table of t
// (stageSQL), and returns its name and column types: t's row, the
// operation's seq and whether it is a delete. The types come from a
// description pgx keeps with the connection, by the table's name, which
// changes with t's columns.
func stagingTable(ctx context.Context, tx *batchTx, t schema.Table) (pgx.Identifier, []uint32, error) {
	name := stageName(t)
	ident := pgx.Identifier{"pg_temp", name}
	create := stageSQL(t, name)
	if tx.stages != nil {
		if tx.stages[name] {
			// The set applied before this one in the transaction left
			// its rows, which ON COMMIT DELETE ROWS empties at COMMIT
			// only: applied again with this one's, they would undo
			// its changes.
			create += "; TRUNCATE " + ident.Sanitize()
		}
		tx.stages[name] = true
	}
	if _, err := tx.Exec(ctx, create); err != nil {
		return nil, nil, fmt.Errorf("create the staging table: %w", err)
	}
	sd, err := tx.Conn().Prepare(ctx, name, pgcopy.DescribeSQL(ident, append(t.ColumnNames(), stageSeqCol, stageDelCol)))
	if err != nil {
		return nil, nil, fmt.Errorf("column types of the staging table: %w", err)
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	return ident, oids, nil
}

// stageName names the staging table of t: by a hash of t's name and
// columns, so that a table whose columns change gets another.
func stageName(t schema.Table) string {
	h := fnv.New64a()
	h.Write([]byte(t.QualifiedName()))
	for _, c := range t.Columns {
		h.Write([]byte{0})
		h.Write([]byte(c.Name))
		h.Write([]byte{0})
		h.Write([]byte(c.Type))
	}
	return fmt.Sprintf("%s%016x", stagePrefix, h.Sum64())
}

// stageSQL creates the staging table name of t in the session, unless it
// exists: t's columns, all nullable (a delete holds only the key), then
// the operation's seq and whether it is a delete. Every COMMIT empties it.
func stageSQL(t schema.Table, name string) string {
	var defs []string
	for _, c := range t.Columns {
		defs = append(defs, pgx.Identifier{c.Name}.Sanitize()+" "+c.Type)
	}
	defs = append(defs, stageSeqCol+" bigint", stageDelCol+" boolean")
	return fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s (%s) ON COMMIT DELETE ROWS", pgx.Identifier{name}.Sanitize(), strings.Join(defs, ", "))
}

// exactKeys reports whether cs holds each key of t once: whether the key
// columns' types are exactKeyTypes, and text ones compared by
// deterministic collations, in the columns and in t's unique indexes.
// What it learns is kept for the key's types.
func (w *Writer) exactKeys(ctx context.Context, tx *batchTx, t schema.Table, cs *changeSet, st *upsertState) (bool, error) {
	keyOIDs := slices.Clone(cs.keyOIDs)
	text := false
	exact := true
	for _, oid := range keyOIDs {
		exact = exact && exactKeyTypes[oid]
		text = text || oid == pgtype.TextOID || oid == pgtype.VarcharOID
	}
	st.mu.Lock()
	if slices.Equal(st.keyOIDs, keyOIDs) {
		defer st.mu.Unlock()
		return st.exact, nil
	}
	st.mu.Unlock()
	if exact && text {
		err := tx.QueryRow(ctx, `SELECT NOT EXISTS (
    SELECT FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
    WHERE a.attrelid = $1::regclass AND a.attname = ANY($2) AND NOT c.collisdeterministic
) AND NOT EXISTS (
    SELECT FROM pg_index i CROSS JOIN LATERAL unnest(i.indcollation::oid[]) AS ic(coll) JOIN pg_collation c ON c.oid = ic.coll
    WHERE i.indrelid = $1::regclass AND i.indisunique AND NOT c.collisdeterministic
)`, t.QualifiedName(), keyColumns(t, cs.keyIdx)).Scan(&exact)
		if err != nil {
			return false, fmt.Errorf("collations of the key of %s: %w", t.QualifiedName(), err)
		}
	}
	st.mu.Lock()
	st.keyOIDs, st.exact = keyOIDs, exact
	st.mu.Unlock()
	return exact, nil
}

func keyColumns(t schema.Table, keyIdx []int) []string {
	names := t.ColumnNames()
	out := make([]string, len(keyIdx))
	for j, i := range keyIdx {
		out[j] = names[i]
	}
	return out
}

// conflictUpdate is the ON CONFLICT action of an upsert into t by key:
// every other column takes the new row's value.
func conflictUpdate(t schema.Table, key []string) string {
	var set []string
	for _, c := range t.ColumnNames() {
		if !slices.Contains(key, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
		}
	}
	if len(set) == 0 {
		return "DO NOTHING"
	}
	return "DO UPDATE SET " + strings.Join(set, ", ")
}

// keyMatch is the join of t's rows (t) and the staging table's (s) by key.
func keyMatch(key []string) string {
	var match []string
	for _, c := range key {
		q := pgx.Identifier{c}.Sanitize()
		match = append(match, fmt.Sprintf("t.%s = s.%s", q, q))
	}
	return strings.Join(match, " AND ")
}

// upsertExactSQL applies a staging table that holds each key once: the
// deletes (with deletes), then the upserts, in the staging table's order.
func upsertExactSQL(t schema.Table, key []string, stage pgx.Identifier, deletes bool) string {
	cols := schema.QuoteIdentList(t.ColumnNames())
	insert := fmt.Sprintf("INSERT INTO %s (%s)\nSELECT %s FROM %s WHERE NOT %s\nON CONFLICT (%s) %s",
		t.QualifiedName(), cols, cols, stage.Sanitize(), stageDelCol, schema.QuoteIdentList(key), conflictUpdate(t, key))
	if !deletes {
		return insert
	}
	return fmt.Sprintf("WITH d AS (\n    DELETE FROM %s t USING %s s WHERE s.%s AND %s\n)\n%s",
		t.QualifiedName(), stage.Sanitize(), stageDelCol, keyMatch(key), insert)
}

// upsertGeneralSQL applies a staging table that may hold a key more than
// once: it keeps the last operation of each key by seq, deletes the keys
// whose last operation is a delete, and upserts the rest.
func upsertGeneralSQL(t schema.Table, key []string, stage pgx.Identifier) string {
	k := schema.QuoteIdentList(key)
	cols := schema.QuoteIdentList(t.ColumnNames())
	return fmt.Sprintf(`WITH s AS (
    SELECT DISTINCT ON (%[1]s) * FROM %[2]s ORDER BY %[1]s, %[3]s DESC
), d AS (
    DELETE FROM %[4]s t USING s WHERE s.%[5]s AND %[6]s
)
INSERT INTO %[4]s (%[7]s)
SELECT %[7]s FROM s WHERE NOT s.%[5]s
ON CONFLICT (%[1]s) %[8]s`,
		k, stage.Sanitize(), stageSeqCol, t.QualifiedName(), stageDelCol, keyMatch(key), cols, conflictUpdate(t, key))
}
