package deadletters

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A replay writes letters to their tables again, after the user fixed the
// table or the configuration, and removes those that went in, in the
// transaction that writes their rows: Oldest reads a page of letters with
// lock, the caller writes them, and Settle removes the replayed ones and
// stores the new reason of those refused again. A replay killed at any
// point and run again replays each letter exactly once.

const oldestSQL = selectSQL + `
WHERE id > $7 AND ` + where + `
ORDER BY id
LIMIT $8`

// Oldest returns the first n letters f selects whose id is above afterID,
// oldest first, headers included. With lock, it locks them in tx (FOR
// UPDATE SKIP LOCKED): letters another transaction holds, another
// replay's, are skipped, and those returned are tx's to Settle.
func Oldest(ctx context.Context, tx pgx.Tx, f Filter, afterID int64, n int, lock bool) ([]Letter, error) {
	query := oldestSQL
	if lock {
		query += "\nFOR UPDATE SKIP LOCKED"
	}
	rows, err := tx.Query(ctx, query, f.args(afterID, n)...)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	out, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return out, nil
}

// Settle ends the replay of letters that Oldest locked in tx: it deletes
// those whose ids are in replayed, and stores the Kind and Message of
// those in refused, refused again, in place of what they held.
func Settle(ctx context.Context, tx pgx.Tx, replayed []int64, refused []Letter) error {
	text := textFor(tx.Conn().PgConn()) // as Insert writes them
	for _, l := range refused {
		if _, err := tx.Exec(ctx, `UPDATE kafka2pg.dead_letters SET error_kind = $2, error_message = $3 WHERE id = $1`,
			l.ID, l.Kind, text.message(l.Message)); err != nil {
			return fmt.Errorf("keep dead letter %d: %w", l.ID, err)
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM kafka2pg.dead_letters WHERE id = ANY($1)`, replayed)
	if err != nil {
		return fmt.Errorf("delete the replayed dead letters: %w", err)
	}
	if int(tag.RowsAffected()) != len(replayed) {
		// Each was locked FOR UPDATE by this transaction.
		return errors.New("delete the replayed dead letters: some were gone (a bug)")
	}
	return nil
}

// Result is what a replay did, or would do, with one letter.
type Result string

// The Results.
const (
	Replayed Result = "replayed"  // written to its table, and deleted
	StillBad Result = "still_bad" // refused again: kept, with the new reason
	Kept     Result = "kept"      // no sink of the replay writes its table: kept as it is
)

// Report counts what a replay did, or would do.
type Report struct {
	Replayed, StillBad, Kept int
	// Tables has the counts by target table, in name order.
	Tables []TableReport
	// Letters has the outcomes of the first letters, by id, as many as
	// the replay was asked to keep.
	Letters []Outcome
}

// TableReport is what a replay did with the letters of one target table.
type TableReport struct {
	Table                    string // "" when the letters recorded none
	Topics                   []string
	Sink                     bool // a sink of the replay writes the table
	Replayed, StillBad, Kept int
	Kinds                    map[string]int // the new kinds of the StillBad ones
}

// Outcome is what a replay did with one letter.
type Outcome struct {
	Letter Letter // as it was filed
	Result Result
	Kind   string // with StillBad: the new kind
	Reason string // with StillBad: the new reason
}
