package integration_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// maxListed bounds how many offending rows a failure message lists.
const maxListed = 20

// tableName is the quoted name of a target table in schema public.
func tableName(table string) string {
	return pgx.Identifier{"public", table}.Sanitize()
}

// assertExactlyOnce checks that the table holds, for every partition p of the
// topic, exactly one row for each offset in [0, ends[p]) and nothing else:
// count == end, distinct offsets == end, min == 0, max == end-1. A failure
// names the query and lists duplicated and missing offsets.
func assertExactlyOnce(t testing.TB, db *pgxpool.Pool, table, topic string, ends map[int32]int64) {
	t.Helper()
	ctx := t.Context()
	tbl := tableName(table)
	var want int64
	for _, end := range ends {
		want += end
	}

	totals := `SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)),
       count(*) FILTER (WHERE kafka_topic IS DISTINCT FROM $1)
FROM ` + tbl
	var total, distinct, otherTopic int64
	if err := db.QueryRow(ctx, totals, topic).Scan(&total, &distinct, &otherTopic); err != nil {
		t.Fatalf("exactly-once check: %s: %v", totals, err)
	}
	t.Logf("exactly-once check: %d rows, %d distinct (partition, offset), %d produced", total, distinct, want)
	if total != want || distinct != want || otherTopic != 0 {
		t.Errorf("exactly-once check: %s\n  = %d rows, %d distinct (partition, offset), %d of another topic; want %d, %d, 0",
			totals, total, distinct, otherTopic, want, want)
	}

	perPartition := `SELECT kafka_partition, count(*), count(DISTINCT kafka_offset), min(kafka_offset), max(kafka_offset)
FROM ` + tbl + ` WHERE kafka_topic = $1 GROUP BY kafka_partition ORDER BY kafka_partition`
	type stats struct{ count, distinct, min, max int64 }
	got := make(map[int32]stats)
	rows, err := db.Query(ctx, perPartition, topic)
	if err != nil {
		t.Fatalf("exactly-once check: %s: %v", perPartition, err)
	}
	for rows.Next() {
		var p int32
		var s stats
		if err := rows.Scan(&p, &s.count, &s.distinct, &s.min, &s.max); err != nil {
			t.Fatalf("exactly-once check: scan %s: %v", perPartition, err)
		}
		got[p] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("exactly-once check: %s: %v", perPartition, err)
	}
	var short []int32
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		end, s := ends[p], got[p]
		wantStats := stats{end, end, 0, end - 1}
		if end == 0 {
			wantStats = stats{} // no rows: count 0, and min/max read as 0 above
		}
		if s != wantStats {
			t.Errorf("exactly-once check, partition %d (end offset %d): %s\n  = count %d, distinct %d, min %d, max %d; want %d, %d, %d, %d",
				p, end, perPartition, s.count, s.distinct, s.min, s.max,
				wantStats.count, wantStats.distinct, wantStats.min, wantStats.max)
		}
		if s.distinct < end {
			short = append(short, p)
		}
	}
	for p, s := range got {
		if _, ok := ends[p]; !ok {
			t.Errorf("exactly-once check: %d rows for partition %d, which the topic does not have", s.count, p)
		}
	}

	dups := `SELECT kafka_partition, kafka_offset, count(*) FROM ` + tbl + `
WHERE kafka_topic = $1 GROUP BY kafka_partition, kafka_offset HAVING count(*) > 1
ORDER BY kafka_partition, kafka_offset LIMIT ` + strconv.Itoa(maxListed)
	if listed := listRows(t, db, dups, topic); listed != "" {
		t.Errorf("exactly-once check: duplicated (partition, offset, count), first %d:\n%s\n  query: %s", maxListed, listed, dups)
	}

	gaps := `SELECT o FROM generate_series(0::bigint, $3::bigint - 1) AS o
WHERE NOT EXISTS (SELECT 1 FROM ` + tbl + ` t
                  WHERE t.kafka_topic = $1 AND t.kafka_partition = $2 AND t.kafka_offset = o)
ORDER BY o LIMIT ` + strconv.Itoa(maxListed)
	for _, p := range short {
		if listed := listRows(t, db, gaps, topic, p, ends[p]); listed != "" {
			t.Errorf("exactly-once check: partition %d is missing offsets, first %d:\n%s\n  query: %s", p, maxListed, listed, gaps)
		}
	}
}

// assertMatchesLedger checks that every row holds the record the test
// produced at its (partition, offset): same id and key for every row, same
// value (as jsonb) and timestamp for a sample; that the ids are distinct; and
// that the topic holds nothing but the ledger's records.
func assertMatchesLedger(t testing.TB, db *pgxpool.Pool, table, topic string, l *ledger, ends map[int32]int64) {
	t.Helper()
	ctx := t.Context()
	tbl := tableName(table)
	entries := l.entries()
	var inKafka int64
	for _, end := range ends {
		inKafka += end
	}
	if int64(len(entries)) != inKafka {
		t.Errorf("ledger check: the test produced %d acknowledged records, but the end offsets %s add up to %d",
			len(entries), formatOffsets(ends), inKafka)
	}

	all := `SELECT kafka_partition, kafka_offset, value->>'id', kafka_key FROM ` + tbl + ` WHERE kafka_topic = $1`
	rows, err := db.Query(ctx, all, topic)
	if err != nil {
		t.Fatalf("ledger check: %s: %v", all, err)
	}
	seen := make(map[position]bool, len(entries))
	var wrong []string
	for rows.Next() {
		var pos position
		var id *string
		var key []byte
		if err := rows.Scan(&pos.partition, &pos.offset, &id, &key); err != nil {
			t.Fatalf("ledger check: scan %s: %v", all, err)
		}
		seen[pos] = true
		want, ok := entries[pos]
		switch {
		case !ok:
			wrong = append(wrong, fmt.Sprintf("partition %d offset %d: no record was produced there (id %s)", pos.partition, pos.offset, deref(id)))
		case id == nil || *id != strconv.FormatInt(want.id, 10):
			wrong = append(wrong, fmt.Sprintf("partition %d offset %d: value->>'id' = %s, want %d", pos.partition, pos.offset, deref(id), want.id))
		case !bytes.Equal(key, recordKey(want.id)):
			wrong = append(wrong, fmt.Sprintf("partition %d offset %d: kafka_key = %q, want %q", pos.partition, pos.offset, key, recordKey(want.id)))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("ledger check: %s: %v", all, err)
	}
	var missing []string
	for _, pos := range sortedPositions(entries) {
		if !seen[pos] {
			missing = append(missing, fmt.Sprintf("partition %d offset %d (id %d)", pos.partition, pos.offset, entries[pos].id))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("ledger check: %d rows do not hold the produced record (%s), first %d:\n  %s",
			len(wrong), all, maxListed, strings.Join(wrong[:min(len(wrong), maxListed)], "\n  "))
	}
	if len(missing) > 0 {
		t.Errorf("ledger check: %d produced records have no row, first %d:\n  %s",
			len(missing), maxListed, strings.Join(missing[:min(len(missing), maxListed)], "\n  "))
	}

	distinctIDs := `SELECT count(DISTINCT value->>'id') FROM ` + tbl + ` WHERE kafka_topic = $1`
	var ids int64
	if err := db.QueryRow(ctx, distinctIDs, topic).Scan(&ids); err != nil {
		t.Fatalf("ledger check: %s: %v", distinctIDs, err)
	}
	if ids != int64(len(entries)) {
		t.Errorf("ledger check: %s = %d, want %d produced ids", distinctIDs, ids, len(entries))
	}

	assertSampleValues(t, db, tbl, topic, entries)
}

// assertSampleValues compares the whole value (as jsonb, so key order and
// spacing do not matter) and the timestamp of about 1% of the rows with what
// was produced.
func assertSampleValues(t testing.TB, db *pgxpool.Pool, tbl, topic string, entries map[position]produced) {
	t.Helper()
	var parts []int32
	var offsets, timestamps []int64
	var values []string
	for _, pos := range sortedPositions(entries) {
		e := entries[pos]
		if e.id%97 != 0 {
			continue
		}
		parts = append(parts, pos.partition)
		offsets = append(offsets, pos.offset)
		values = append(values, string(recordValue(e.id)))
		timestamps = append(timestamps, e.timestampMs)
	}
	sample := `SELECT e.p, e.o, t.value::text, (extract(epoch FROM t.kafka_timestamp) * 1000)::bigint, e.ts
FROM unnest($2::int[], $3::bigint[], $4::text[], $5::bigint[]) AS e(p, o, v, ts)
LEFT JOIN ` + tbl + ` t ON t.kafka_topic = $1 AND t.kafka_partition = e.p AND t.kafka_offset = e.o
WHERE t.value IS DISTINCT FROM e.v::jsonb
   OR (extract(epoch FROM t.kafka_timestamp) * 1000)::bigint IS DISTINCT FROM e.ts
ORDER BY e.p, e.o LIMIT ` + strconv.Itoa(maxListed)
	rows, err := db.Query(t.Context(), sample, topic, parts, offsets, values, timestamps)
	if err != nil {
		t.Fatalf("value check: %s: %v", sample, err)
	}
	var wrong []string
	for rows.Next() {
		var p int32
		var o, wantTS int64
		var value *string
		var ts *int64
		if err := rows.Scan(&p, &o, &value, &ts, &wantTS); err != nil {
			t.Fatalf("value check: scan %s: %v", sample, err)
		}
		gotTS := "NULL"
		if ts != nil {
			gotTS = strconv.FormatInt(*ts, 10)
		}
		wrong = append(wrong, fmt.Sprintf("partition %d offset %d: value %s, timestamp ms %s (want %d)", p, o, deref(value), gotTS, wantTS))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("value check: %s: %v", sample, err)
	}
	if len(wrong) > 0 {
		t.Errorf("value check: of %d sampled rows these differ from what was produced:\n  %s\n  query: %s",
			len(parts), strings.Join(wrong, "\n  "), sample)
	}
}

// assertHeaders checks that exactly the records produced with a trace-id
// header have it in kafka_headers. It does not assume the jsonb shape, only
// that header names appear in it as text.
func assertHeaders(t testing.TB, db *pgxpool.Pool, table, topic string, l *ledger) {
	t.Helper()
	var want int64
	for _, e := range l.entries() {
		if hasTraceHeader(e.id) {
			want++
		}
	}
	q := `SELECT count(*) FILTER (WHERE kafka_headers::text LIKE '%trace-id%'),
       count(*) FILTER (WHERE kafka_headers::text LIKE '%trace-id%' AND (value->>'id')::bigint % 10 = 0)
FROM ` + tableName(table) + ` WHERE kafka_topic = $1`
	var with, right int64
	if err := db.QueryRow(t.Context(), q, topic).Scan(&with, &right); err != nil {
		t.Fatalf("header check: %s: %v", q, err)
	}
	if with != want || right != want {
		t.Errorf("header check: %s\n  = %d rows with a trace-id header, %d of them on the right records; want %d, %d", q, with, right, want, want)
	}
}

// assertDurableOffsets checks that kafka2pg.offsets holds next_offset =
// ends[p] for every partition of the group and topic, and no other partition.
func assertDurableOffsets(t testing.TB, db *pgxpool.Pool, group, topic string, ends map[int32]int64) {
	t.Helper()
	q := `SELECT "partition", next_offset FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2 ORDER BY "partition"`
	rows, err := db.Query(t.Context(), q, group, topic)
	if err != nil {
		t.Fatalf("durable offsets check: %s: %v", q, err)
	}
	got := make(map[int32]*int64)
	for rows.Next() {
		var p int32
		var next *int64
		if err := rows.Scan(&p, &next); err != nil {
			t.Fatalf("durable offsets check: scan %s: %v", q, err)
		}
		got[p] = next
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("durable offsets check: %s: %v", q, err)
	}
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		next, ok := got[p]
		switch {
		case !ok && ends[p] == 0, ok && next == nil && ends[p] == 0:
			// Nothing to consume and nothing written: fine.
		case !ok:
			diffs = append(diffs, fmt.Sprintf("partition %d: no row, want next_offset %d", p, ends[p]))
		case next == nil:
			diffs = append(diffs, fmt.Sprintf("partition %d: next_offset NULL, want %d", p, ends[p]))
		case *next != ends[p]:
			diffs = append(diffs, fmt.Sprintf("partition %d: next_offset %d, want %d", p, *next, ends[p]))
		}
	}
	for p := range got {
		if _, ok := ends[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("partition %d: a row for a partition the topic does not have", p))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("durable offsets check: %s (group %q, topic %q):\n  %s", q, group, topic, strings.Join(diffs, "\n  "))
	}
}

// assertGroupOffsets checks that the group's committed Kafka offsets for the
// topic equal want (a partition with want 0 may have no commit).
func assertGroupOffsets(t testing.TB, k *kafkatest.Kafka, group, topic string, want map[int32]int64) {
	t.Helper()
	got := k.GroupOffsets(t, group, topic)
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		at, ok := got[p]
		if !ok && want[p] == 0 {
			continue
		}
		if !ok || at != want[p] {
			committed := "none"
			if ok {
				committed = strconv.FormatInt(at, 10)
			}
			diffs = append(diffs, fmt.Sprintf("partition %d: committed %s, want %d", p, committed, want[p]))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("partition %d: a commit for a partition the topic does not have", p))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("group offsets check (kadm FetchOffsets, group %q, topic %q): committed %s, want %s:\n  %s",
			group, topic, formatOffsets(got), formatOffsets(want), strings.Join(diffs, "\n  "))
	}
}

// listRows runs a query and formats its rows one per line, or returns "" when
// it has none.
func listRows(t testing.TB, db *pgxpool.Pool, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var lines []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("read %s: %v", q, err)
		}
		lines = append(lines, "  "+strings.Trim(fmt.Sprint(vals), "[]"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(lines, "\n")
}

func sortedPositions(entries map[position]produced) []position {
	ps := slices.Collect(maps.Keys(entries))
	slices.SortFunc(ps, func(a, b position) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
	return ps
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
