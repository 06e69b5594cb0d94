package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// consistent reports whether a fault case's counts are those of a pass:
// nothing lost, nothing duplicated, nothing unexpected, and one row per
// produced record.
func consistent(r testreport.FaultResult) bool {
	return r.Lost == 0 && r.Duplicate == 0 && r.Unexpected == 0 && r.Rows == r.Produced
}

// renderFaults writes the Markdown page: a header, one table row per result
// (sorted by case number, the last result of a case winning when a case ran
// twice), then each case's notes. It returns an error when results is empty
// or a row fails, after writing the page, so a caller can both keep the page
// and fail the build.
func renderFaults(w io.Writer, results []testreport.FaultResult, meta pageMeta) error {
	if len(results) == 0 {
		return errors.New("render fault report: no results")
	}
	latest := make(map[string]testreport.FaultResult)
	for _, r := range results {
		latest[r.Case] = r
	}
	rows := make([]testreport.FaultResult, 0, len(latest))
	for _, r := range latest {
		if r.Result == "PASS" && !consistent(r) {
			r.Result = "FAIL"
			r.Notes = strings.TrimSpace(r.Notes + " (marked FAIL by the report: the counts do not add up)")
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b testreport.FaultResult) int { return compareCase(a.Case, b.Case) })

	var b strings.Builder
	writeHeader(&b, "Reliability: the fault matrix", "make faults", "tools/report", "results", meta)
	b.WriteString(`
Every case runs the real kafka2pg binary against a real PostgreSQL and ends
with SQL over the target table: each record that Kafka holds for the bridge
(read back from the topic with a read_committed consumer, and cross-checked
with what the test produced) must be there exactly once. *Produced* counts
those records, *rows* the rows found, *lost* the records without a row,
*duplicated* the rows beyond one per record, *unexpected* rows of records
that must not land (aborted, deleted by retention, or unknown).

When history moves back, exactly once means this. *Postgres* losing
commits (a failover to an asynchronous standby, a restored backup) loses
nothing: the records of the lost commits are still in Kafka, the bridge
finds its stored position behind the one it left and reads them again
(cases 23 and 24 count every record). *Kafka* losing records it
acknowledged (an unclean leader election, a broker restored from an old
disk) is another matter: records that no broker holds any more cannot be
written by anyone. The bridge then guarantees that the loss is reported,
with its offsets, and never skipped silently: with --on-data-loss=stop it
exits 1 naming them; with skip it logs and counts them and reads the new
log from where it diverged, so that every record Kafka holds after the
truncation lands once (as a dead letter where the table's key holds a
reused offset). Exactly once is then over what Kafka still holds.

| # | case | broker | injection | trials | produced | rows | lost | duplicated | unexpected | result | wall |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|
`)
	failed := 0
	for _, r := range rows {
		if r.Result != "PASS" {
			failed++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %d | **%s** | %.0fs |\n",
			r.Case, cell(r.Name), cell(r.Broker), cell(r.Injection), r.Trials, r.Produced, r.Rows,
			r.Lost, r.Duplicate, r.Unexpected, r.Result, r.WallSecs)
	}
	b.WriteString("\n## Notes\n\n")
	for _, r := range rows {
		if r.Notes == "" {
			continue
		}
		fmt.Fprintf(&b, "- **%s. %s**: %s\n", r.Case, r.Name, r.Notes)
	}
	var total float64
	for _, r := range rows {
		total += r.WallSecs
	}
	fmt.Fprintf(&b, "\n%d cases, %d failed; %.0f s in the cases.\n", len(rows), failed, total)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("render fault report: %w", err)
	}
	if failed > 0 {
		return fmt.Errorf("render fault report: %d of %d cases failed", failed, len(rows))
	}
	return nil
}

// compareCase orders "2" before "10" and "4" before "4b".
func compareCase(a, b string) int {
	na, sa := splitCase(a)
	nb, sb := splitCase(b)
	return cmp.Or(cmp.Compare(na, nb), strings.Compare(sa, sb))
}

func splitCase(c string) (int, string) {
	n, i := 0, 0
	for i < len(c) && c[i] >= '0' && c[i] <= '9' {
		n = n*10 + int(c[i]-'0')
		i++
	}
	return n, c[i:]
}
