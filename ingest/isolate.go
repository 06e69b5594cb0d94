package ingest

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// KindTooLarge is the error kind of a record over Config.MaxRecordBytes.
const KindTooLarge = "too_large"

// KindBatchTooLarge is the error kind of a record that could not be read
// because its record batch decompresses to more than the reader may hold
// (stream.Record.Unreadable). Its dead letter holds no key or value, and a
// replay leaves it: the record is still in Kafka, to be read with a larger
// reader.Config.MaxBufferedBytes after an offsets reset.
const KindBatchTooLarge = "batch_too_large"

// rowError reports whether err is Postgres refusing a row for its data (a
// data exception or an integrity constraint), as opposed to trouble with the
// connection, the server or the statement. Of the program limits (class
// 54), 54000 is one a row meets in a COPY: an index row over btree's 2,704
// bytes (an indexed value too long), a row too big for a page; without it
// here such a record failed its batch on every retry instead of becoming a
// dead letter. The other limits (statement too complex, too many columns
// or arguments) are the statement's. And on a SQL_ASCII database jsonb
// cannot store a \u escape of a character beyond ASCII: Postgres refuses
// the value with 0A000 from pg_unicode_to_server (unescapeSQLASCII), which
// none of kafka2pg's statements can raise but through a row's value.
func rowError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23":
		return true
	}
	return pgErr.Code == "54000" || unescapeSQLASCII(pgErr)
}

// unescapeSQLASCII says e is Postgres failing to turn a \u escape into the
// database's encoding, SQL_ASCII ("conversion between UTF8 and SQL_ASCII is
// not supported"; SQLSTATE 0A000 is feature_not_supported, so the routine,
// which is not translated, tells it from other unsupported things).
func unescapeSQLASCII(e *pgconn.PgError) bool {
	return e.Code == "0A000" && e.Routine == "pg_unicode_to_server"
}

// sqlstateNames names the row errors users meet most; others are
// "sql_<code>".
var sqlstateNames = map[string]string{
	"22001": "string_data_right_truncation",
	"22003": "numeric_value_out_of_range",
	"22007": "invalid_datetime_format",
	"22008": "datetime_field_overflow",
	"22012": "division_by_zero",
	"22021": "character_not_in_repertoire",
	"22023": "invalid_parameter_value",
	"22P02": "invalid_text_representation",
	"22P05": "untranslatable_character",
	"23502": "not_null_violation",
	"23503": "foreign_key_violation",
	"23505": "unique_violation",
	"23514": "check_violation",
	"23P01": "exclusion_violation",
	"54000": "program_limit_exceeded",
}

func sqlstateKind(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return decode.KindInvalidValue
	}
	if unescapeSQLASCII(pgErr) {
		return sqlstateNames["22P05"] // what a LATIN1 database says of a character it lacks
	}
	if name, ok := sqlstateNames[pgErr.Code]; ok {
		return name
	}
	return "sql_" + pgErr.Code
}

type mappedRow struct {
	rec    *stream.Record
	values []any
}

// materialize maps every record, for the isolating path, which may copy a
// row more than once.
func materialize(records []stream.Record, m RowMapper, maxBytes int) ([]mappedRow, []badRecord, error) {
	rows := make([]mappedRow, 0, len(records))
	bad, err := decodeRecords(records, maxBytes, func(r *stream.Record, _ int) error {
		values, err := m.Row(r, nil)
		if err == nil {
			rows = append(rows, mappedRow{rec: r, values: values})
		}
		return err
	})
	if err != nil {
		return nil, nil, err // not about the record: the batch is retried
	}
	return rows, bad, nil
}

// rowByRowBelow is the size under which a failing set is copied one row at a
// time instead of being halved again.
const rowByRowBelow = 8

// copyIsolating copies rows under savepoints, halving every set Postgres
// refuses, until the refused rows are single; it returns them and the number
// of rows copied. Any error that is not about a row aborts.
func copyIsolating(ctx context.Context, tx pgx.Tx, t schema.Table, rows []mappedRow) (refused []badRecord, copied int, err error) {
	if len(rows) == 0 {
		return nil, 0, nil
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_rows"); err != nil {
		return nil, 0, err
	}
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = r.values
	}
	n, copyErr := pgcopy.CopyFrom(ctx, tx, t.Ident(), t.ColumnNames(), pgx.CopyFromRows(values))
	if copyErr == nil {
		_, err := tx.Exec(ctx, "RELEASE SAVEPOINT kafka2pg_rows")
		return nil, int(n), err
	}
	if !rowError(copyErr) {
		return nil, 0, copyErr
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_rows; RELEASE SAVEPOINT kafka2pg_rows"); err != nil {
		return nil, 0, err
	}
	if len(rows) == 1 {
		return []badRecord{{rec: rows[0].rec, kind: sqlstateKind(copyErr), err: copyErr}}, 0, nil
	}
	if len(rows) <= rowByRowBelow {
		for i := range rows {
			r, c, err := copyIsolating(ctx, tx, t, rows[i:i+1])
			if err != nil {
				return nil, 0, err
			}
			refused, copied = append(refused, r...), copied+c
		}
		return refused, copied, nil
	}
	mid := len(rows) / 2
	for _, half := range [][]mappedRow{rows[:mid], rows[mid:]} {
		r, c, err := copyIsolating(ctx, tx, t, half)
		if err != nil {
			return nil, 0, err
		}
		refused, copied = append(refused, r...), copied+c
	}
	return refused, copied, nil
}
