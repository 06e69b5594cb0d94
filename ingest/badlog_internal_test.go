package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/stream"
)

// lineRecorder is a slog.Handler that keeps every record.
type lineRecorder struct {
	mu    sync.Mutex
	lines []slog.Record
}

func (r *lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *lineRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec)
	return nil
}
func (r *lineRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *lineRecorder) WithGroup(string) slog.Handler      { return r }

// attr returns the value of the attribute key of rec, as text.
func attr(rec slog.Record, key string) string {
	var v string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// badBatch is n bad records of kind at offsets from first on.
func badBatch(kind string, first, n int) []badRecord {
	out := make([]badRecord, n)
	for i := range out {
		r := &stream.Record{Topic: "orders", Partition: 0, Offset: int64(first + i)}
		out[i] = badRecord{rec: r, kind: kind, err: errors.New(`null value in column "kafka_topic" violates not-null constraint`)}
	}
	return out
}

func TestABadTableGetsOneLineAnIntervalAndAnErrorWhenNothingLands(t *testing.T) {
	cases := []struct {
		name string
		// batch says, for batch i, how many records it has and how many
		// of them are bad.
		batch      func(i int) (records, bad int)
		wantErrors string // the ERROR lines, as a range "lo-hi"
		wantWarns  string
	}{
		{
			// 200 batches 50 ms apart: 10 s, so 10 intervals of 1 s. The
			// first batch warns at once, the third makes the ERROR at
			// once, then one ERROR an interval.
			name:       "every record of every batch is bad",
			batch:      func(int) (int, int) { return 100, 100 },
			wantErrors: "10-11", wantWarns: "1-1",
		},
		{
			name:       "one bad record in each good batch",
			batch:      func(int) (int, int) { return 100, 1 },
			wantErrors: "0-0", wantWarns: "10-11",
		},
		{
			// Two bad batches, then a good one: never three in a row.
			name: "whole batches of garbage between good ones",
			batch: func(i int) (int, int) {
				if i%3 == 2 {
					return 100, 0
				}
				return 100, 100
			},
			wantErrors: "0-0", wantWarns: "10-11",
		},
		{
			name:       "no bad record",
			batch:      func(int) (int, int) { return 100, 0 },
			wantErrors: "0-0", wantWarns: "0-0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &lineRecorder{}
			l := newBadLog(slog.New(rec), time.Second)
			now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
			l.now = func() time.Time { return now }
			totalBad := 0
			for i := range 200 {
				records, bad := tc.batch(i)
				totalBad += bad
				l.note(`"public"."orders"`, records, badBatch("not_null_violation", i*100, bad), false)
				now = now.Add(50 * time.Millisecond)
			}
			var errs, warns, counted int
			for _, line := range rec.lines {
				switch line.Level {
				case slog.LevelError:
					errs++
					if !strings.Contains(line.Message, "every record") || attr(line, "first_kind") != "not_null_violation" ||
						!strings.Contains(attr(line, "first_error"), "kafka_topic") || attr(line, "table") != `"public"."orders"` {
						t.Errorf("ERROR line %q lacks the table, the first reason or its kind: %v", line.Message, line)
					}
				case slog.LevelWarn:
					warns++
					if attr(line, "kinds") == "" {
						t.Errorf("WARN line without counts by kind: %v", line)
					}
				}
				if k := attr(line, "kinds"); k != "" && line.Level == slog.LevelWarn {
					_, n, _ := strings.Cut(k, "=")
					c, err := strconv.Atoi(n)
					if err != nil {
						t.Fatalf("kinds %q: %v", k, err)
					}
					counted += c
				}
			}
			inRange := func(got int, r string) bool {
				var lo, hi int
				if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil {
					t.Fatal(err)
				}
				return got >= lo && got <= hi
			}
			if !inRange(errs, tc.wantErrors) || !inRange(warns, tc.wantWarns) {
				t.Errorf("%d ERROR and %d WARN lines for 200 batches over 10 s, %d bad records; want %s and %s", errs, warns, totalBad, tc.wantErrors, tc.wantWarns)
			}
			// The WARN lines count every bad record but those of the last
			// interval, which wait for the table's next line.
			if errs == 0 && (counted > totalBad || counted < totalBad*8/10) {
				t.Errorf("the lines count %d bad records; there were %d", counted, totalBad)
			}
		})
	}
}
