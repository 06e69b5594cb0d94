package main

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

func TestAppendReadRender(t *testing.T) {
	results := []testreport.FaultResult{
		{Case: "10", Name: "data loss", Produced: 5, Rows: 5, Result: "PASS", Trials: 1},
		{Case: "2", Name: "pg | stop", Produced: 7, Rows: 7, Result: "PASS", Trials: 3, Notes: "readyz 503"},
		{Case: "4b", Name: "failover", Produced: 3, Rows: 3, Result: "PASS"},
		{Case: "4", Name: "restart", Produced: 3, Rows: 3, Result: "PASS"},
	}
	got := appendAndRead(t, results, "fault", nil)
	if len(got) != len(results) {
		t.Fatalf("read back %d results, want %d", len(got), len(results))
	}
	var page strings.Builder
	if err := renderFaults(&page, got, pageMeta{}); err != nil {
		t.Fatalf("renderFaults: %v\n%s", err, page.String())
	}
	s := page.String()
	order := []string{"| 2 | pg \\| stop", "| 4 | restart", "| 4b | failover", "| 10 | data loss"}
	last := -1
	for _, o := range order {
		i := strings.Index(s, o)
		if i < 0 || i < last {
			t.Fatalf("row %q missing or out of order in:\n%s", o, s)
		}
		last = i
	}
	if !strings.Contains(s, "**2. pg | stop**: readyz 503") {
		t.Errorf("notes missing:\n%s", s)
	}
}

func TestRenderFailsOnInconsistentCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    testreport.FaultResult
	}{
		{"a lost record", testreport.FaultResult{Case: "1", Produced: 5, Rows: 4, Lost: 1, Result: "PASS"}},
		{"a duplicate", testreport.FaultResult{Case: "1", Produced: 5, Rows: 6, Duplicate: 1, Result: "PASS"}},
		{"an aborted record that landed", testreport.FaultResult{Case: "7", Produced: 5, Rows: 6, Unexpected: 1, Result: "PASS"}},
		{"a case that failed", testreport.FaultResult{Case: "3", Produced: 5, Rows: 5, Result: "FAIL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var page strings.Builder
			err := renderFaults(&page, []testreport.FaultResult{tc.r}, pageMeta{})
			if err == nil {
				t.Fatalf("renderFaults: no error for %+v", tc.r)
			}
			if !strings.Contains(page.String(), "**FAIL**") {
				t.Errorf("the row is not marked FAIL:\n%s", page.String())
			}
		})
	}
	if err := renderFaults(&strings.Builder{}, nil, pageMeta{}); err == nil {
		t.Error("renderFaults: no error without results")
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	_, err := decodeLines[testreport.FaultResult](strings.NewReader("{\"case\":\"1\"}\n\nnot json\n"), "fault", nil)
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("decodeLines: %v, want an error naming line 3", err)
	}
}

func TestARenderedPageReadsBackAsItsResults(t *testing.T) {
	results := []testreport.FaultResult{
		{Case: "2", Name: "pg | stop", Broker: "kfake", Injection: "pg_ctl stop", Produced: 7, Rows: 7, Result: "PASS", Trials: 3, WallSecs: 30, Notes: "readyz 503 | 200"},
		{Case: "4b", Name: "failover", Broker: "Apache Kafka, 3 node(s)", Produced: 3, Rows: 2, Lost: 1, Result: "FAIL", Trials: 1, WallSecs: 72},
		{Case: "20c", Name: "bomb, lz4", Produced: 20, Rows: 20, Result: "PASS", Trials: 1, WallSecs: 1},
	}
	var page strings.Builder
	_ = renderFaults(&page, results, pageMeta{}) // one case fails
	got, err := keptResults(strings.NewReader(page.String()))
	if err != nil {
		t.Fatalf("keptResults: %v\n%s", err, page.String())
	}
	if len(got) != len(results) {
		t.Fatalf("read back %d results, want %d", len(got), len(results))
	}
	for i, want := range results {
		if got[i] != want {
			t.Errorf("row %d read back as %+v, want %+v", i, got[i], want)
		}
	}
	if _, err := keptResults(strings.NewReader("# not a fault page\n")); err == nil {
		t.Errorf("keptResults of a page without a table: no error")
	}
}
