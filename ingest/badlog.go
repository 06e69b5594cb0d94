package ingest

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// badLog reports bad records in the log by table, not by record: a topic
// whose every record fails would otherwise write one line per record (a
// million lines for a million records) and bury the one thing to know, that
// nothing lands. A table gets at most one line per interval: the first bad
// record of a quiet table is logged at once, the ones after it are counted
// by kind and told in the table's next line, once the interval has passed.
//
// When every record of allBadBatches committed batches in a row of a table
// was bad, the line is an ERROR naming the first reason and the count, at
// once the first time (whatever the interval) and then once per interval
// while it lasts: the table's mapping or constraints refuse everything, and
// that wants a person, not a retry.
//
// note is called after each batch's COMMIT, so a batch retried after a
// failed transaction is counted once. Safe for concurrent use.
type badLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	tables map[string]*tableBad // by qualified table name
}

// allBadBatches is how many batches in a row, every record of them bad,
// make the table's line an ERROR: "several", so that one batch of garbage
// among good ones stays a WARN.
const allBadBatches = 3

// tableBad is what one table's bad records did since its last line.
type tableBad struct {
	lastLine time.Time // zero: no line yet
	count    int       // bad records since the last line
	kinds    map[string]int
	first    badRecord // the first bad record since the last line

	streak      int       // committed batches in a row whose every record was bad
	streakCount int       // bad records of the streak
	streakFirst badRecord // the streak's first bad record
	erred       bool      // the streak's ERROR was logged
}

func newBadLog(log *slog.Logger, every time.Duration) *badLog {
	if every <= 0 {
		every = 10 * time.Second
	}
	return &badLog{log: log, every: every, now: time.Now, tables: map[string]*tableBad{}}
}

// note accounts one committed batch of records to table, bad among them;
// skipped says the bad records were only skipped (OnError "skip"), not
// dead-lettered.
func (l *badLog) note(table string, records int, bad []badRecord, skipped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tables[table]
	if t == nil {
		if len(bad) == 0 {
			return // a good batch of a table that never had a bad record
		}
		t = &tableBad{kinds: map[string]int{}}
		l.tables[table] = t
	}
	now := l.now()
	if len(bad) > 0 {
		if t.count == 0 {
			t.first = bad[0]
		}
		t.count += len(bad)
		for _, b := range bad {
			t.kinds[b.kind]++
		}
	}
	switch {
	case records > 0 && len(bad) == records:
		if t.streak == 0 {
			t.streakFirst, t.streakCount = bad[0], 0
		}
		t.streak++
		t.streakCount += len(bad)
	case records > 0:
		t.streak, t.streakCount, t.erred = 0, 0, false
	}
	due := t.lastLine.IsZero() || now.Sub(t.lastLine) >= l.every
	switch {
	case t.streak >= allBadBatches && (!t.erred || due):
		l.logAllBad(table, t, skipped)
		t.erred = true
	case due && t.count > 0:
		l.logSome(table, t, skipped)
	default:
		return
	}
	t.lastLine = now
	t.count, t.first = 0, badRecord{}
	clear(t.kinds)
}

func (l *badLog) logAllBad(table string, t *tableBad, skipped bool) {
	what, fix := "became a dead letter", "fix the table or the mapping (kafka2pg check --config shows why), then kafka2pg dead-letters replay"
	if skipped {
		what, fix = "was skipped (ingest.Config.OnError=skip): lost to this table", "fix the table or the mapping (kafka2pg check --config shows why), then re-ingest with kafka2pg offsets reset"
	}
	f := t.streakFirst
	l.log.Error(fmt.Sprintf("every record of the table's last %d batches %s", t.streak, what),
		"table", table, "records", t.streakCount, "first_kind", f.kind, "first_error", f.err.Error(),
		"first_topic", f.rec.Topic, "first_partition", f.rec.Partition, "first_offset", f.rec.Offset,
		"kinds_since_last_line", formatKinds(t.kinds), "fix", fix)
}

func (l *badLog) logSome(table string, t *tableBad, skipped bool) {
	msg := "dead letters"
	if skipped {
		msg = "bad records skipped (ingest.Config.OnError=skip)"
	}
	f := t.first
	l.log.Warn(msg, "table", table, "records", t.count, "kinds", formatKinds(t.kinds),
		"first_kind", f.kind, "first_error", f.err.Error(),
		"first_topic", f.rec.Topic, "first_partition", f.rec.Partition, "first_offset", f.rec.Offset,
		"next_line_within", l.every)
}

// formatKinds is "invalid_json=3 not_null_violation=120", by kind name.
func formatKinds(kinds map[string]int) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(kinds)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, kinds[k])
	}
	return b.String()
}
