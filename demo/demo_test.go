package demo

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// TestRunLandsEveryEventOnce runs a short demo: every produced event is a
// row, once, and the queries print.
func TestRunLandsEveryEventOnce(t *testing.T) {
	url, _ := pgtest.MigratedPool(t)
	var out bytes.Buffer
	err := Run(t.Context(), Config{PostgresURL: url, Topic: "demo_views", Partitions: 2, Duration: 500 * time.Millisecond, Rate: 400},
		&out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`caught up: (\d+) rows`).FindStringSubmatch(out.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("no rows caught up in the output:\n%s", out.String())
	}
	// The first query's one row: rows | distinct_offsets, both the count caught up.
	after := out.String()[strings.Index(out.String(), "distinct_offsets FROM"):]
	row := regexp.MustCompile(`(?m)^ (\d+)\s+\|\s+(\d+)\s*$`).FindStringSubmatch(after)
	if row == nil || row[1] != m[1] || row[2] != m[1] {
		t.Errorf("the exactly-once query shows %v, want %s rows and %s distinct offsets:\n%s", row, m[1], m[1], out.String())
	}
	for _, want := range []string{"-- top pages", "-- views by country", "-- durable offsets in kafka2pg.offsets"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunNeedsAPostgresURL(t *testing.T) {
	if err := Run(t.Context(), Config{}, &bytes.Buffer{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("Run without a PostgresURL returned nil")
	}
}
