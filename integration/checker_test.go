package integration_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCheckerCatchesGapsDuplicatesAndWrongRows checks the checks: it writes a
// table by hand, the way the bridge should, spoils it in one way per case, and
// expects assertExactlyOnce and assertMatchesLedger to notice. It needs
// Postgres and Kafka but not the bridge.
func TestCheckerCatchesGapsDuplicatesAndWrongRows(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	s.produce(t, 300)
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)

	cases := []struct {
		name  string
		spoil string // SQL run on the filled table (%s: the table); "" leaves it intact
		want  string // a substring of the failure; "" means no failure
	}{
		{name: "an intact table passes"},
		{
			name:  "a missing row is reported with its offset",
			spoil: `DELETE FROM %s WHERE kafka_partition = 1 AND kafka_offset = 7`,
			want:  "partition 1 is missing offsets",
		},
		{
			name:  "a duplicated row is listed",
			spoil: `INSERT INTO %s SELECT * FROM %[1]s WHERE kafka_partition = 2 AND kafka_offset = 3`,
			want:  "duplicated (partition, offset, count)",
		},
		{
			name:  "a row of another topic is counted",
			spoil: `INSERT INTO %s SELECT 'other', kafka_partition, kafka_offset, kafka_timestamp, kafka_key, kafka_headers, value FROM %[1]s LIMIT 1`,
			want:  "of another topic",
		},
		{
			name:  "a row beyond the end offset is reported",
			spoil: `INSERT INTO %s SELECT kafka_topic, kafka_partition, kafka_offset + 1000, kafka_timestamp, kafka_key, kafka_headers, value FROM %[1]s WHERE kafka_partition = 0 AND kafka_offset = 0`,
			want:  "no record was produced there",
		},
		{
			name:  "a record written at the wrong offset is caught by its id",
			spoil: `UPDATE %s SET value = jsonb_set(value, '{id}', '999999') WHERE kafka_partition = 0 AND kafka_offset = 5`,
			want:  "value->>'id' = 999999",
		},
		{
			name:  "a changed value is caught by the sample",
			spoil: `UPDATE %s SET value = value || '{"amount": -1}' WHERE (value->>'id')::bigint %% 97 = 0`,
			want:  "differ from what was produced",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("%s_case%d", s.table, i)
			fillLikeTheBridge(t, s, table)
			if tc.spoil != "" {
				q := fmt.Sprintf(tc.spoil, tableName(table))
				if _, err := s.db.Exec(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			rec := &recordingTB{TB: t}
			rec.run(func() {
				assertExactlyOnce(rec, s.db, table, s.topic, ends)
				assertMatchesLedger(rec, s.db, table, s.topic, s.ledger, ends)
			})
			got := strings.Join(rec.failures, "\n")
			if got != "" {
				t.Logf("the checks said:\n%s", got)
			}
			switch {
			case tc.want == "" && got != "":
				t.Errorf("checks failed on a correct table:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("checks did not report %q; they said:\n%s", tc.want, got)
			}
		})
	}
}

// fillLikeTheBridge creates a table with the bridge's columns (without the
// primary key, so duplicates can be planted) and writes every ledgered record
// into it.
func fillLikeTheBridge(t testing.TB, s *scenario, table string) {
	t.Helper()
	ddl := `CREATE TABLE ` + tableName(table) + ` (
    kafka_topic text, kafka_partition integer, kafka_offset bigint, kafka_timestamp timestamptz,
    kafka_key bytea, kafka_headers jsonb, value jsonb)`
	if _, err := s.db.Exec(t.Context(), ddl); err != nil {
		t.Fatalf("%s: %v", ddl, err)
	}
	var parts []int32
	var offsets []int64
	var stamps []time.Time
	var keys [][]byte
	var values []string
	entries := s.ledger.entries()
	for _, pos := range sortedPositions(entries) {
		e := entries[pos]
		parts = append(parts, pos.partition)
		offsets = append(offsets, pos.offset)
		stamps = append(stamps, time.UnixMilli(e.timestampMs))
		keys = append(keys, recordKey(e.id))
		values = append(values, string(recordValue(e.id)))
	}
	insert := `INSERT INTO ` + tableName(table) + `
SELECT $1, p, o, ts, k, NULL, v::jsonb FROM unnest($2::int[], $3::bigint[], $4::timestamptz[], $5::bytea[], $6::text[]) AS r(p, o, ts, k, v)`
	if _, err := s.db.Exec(t.Context(), insert, s.topic, parts, offsets, stamps, keys, values); err != nil {
		t.Fatalf("%s: %v", insert, err)
	}
}

// recordingTB stands in for a test in checks of the checks: it records
// failures instead of failing, and turns Fatal into a panic that run
// recovers.
type recordingTB struct {
	testing.TB
	failures []string
}

var errRecordedFatal = errors.New("fatal failure recorded")

func (r *recordingTB) run(fn func()) {
	defer func() {
		if p := recover(); p != nil && p != errRecordedFatal {
			panic(p)
		}
	}()
	fn()
}

func (r *recordingTB) Helper()           {}
func (r *recordingTB) Fail()             { r.failures = append(r.failures, "Fail called") }
func (r *recordingTB) Failed() bool      { return len(r.failures) > 0 }
func (r *recordingTB) Error(args ...any) { r.failures = append(r.failures, fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(f string, a ...any) {
	r.failures = append(r.failures, fmt.Sprintf(f, a...))
}
func (r *recordingTB) FailNow()                  { r.Fail(); panic(errRecordedFatal) }
func (r *recordingTB) Fatal(args ...any)         { r.Error(args...); panic(errRecordedFatal) }
func (r *recordingTB) Fatalf(f string, a ...any) { r.Errorf(f, a...); panic(errRecordedFatal) }
