package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/records"
)

// fmtRecordValue and fmtRecordKey are the fmt forms recordValue and
// recordKey replaced: the records every bench before them measured.
func fmtRecordValue(id int) []byte {
	return fmt.Appendf(nil, `{"id":%d,"user_id":"u%06d","event":%q,"amount":%d.%02d,"currency":%q,"country":%q,"ts":%q,`+
		`"props":{"page":%q,"ref":%q,"device":%q,"session":"s%08d","ab":"x%03d%c"}}`,
		id, id%100_000, records.Events[id%len(records.Events)], id%100_000, id%100, records.Currencies[id%len(records.Currencies)], records.Countries[id%len(records.Countries)],
		tsBase.Add(time.Duration(id)*time.Millisecond).Format(time.RFC3339Nano),
		pages[id%len(pages)], referrers[id%len(referrers)], records.Devices[id%len(records.Devices)], id*7919%100_000_000, id%1000, 'a'+rune(id%2))
}

func fmtRecordKey(id int) []byte { return fmt.Appendf(nil, "u%06d", id%100_000) }

// TestRecordValueIsTheFmtOne holds the hand-appended records to the fmt
// forms, byte for byte, over ids that reach every branch: every value list's
// index, padding widths from full to none, timestamps with and without
// fractional milliseconds, and ids past the paddings' widths.
func TestRecordValueIsTheFmtOne(t *testing.T) {
	ids := []int{}
	for id := range 5000 {
		ids = append(ids, id)
	}
	for _, id := range []int{99_999, 100_000, 123_456, 999_999, 1_000_000, 5_000_000, 12_627_953, 100_000_000, 1 << 40} {
		ids = append(ids, id-1, id, id+1)
	}
	for _, id := range ids {
		if got, want := recordValue(id), fmtRecordValue(id); !bytes.Equal(got, want) {
			t.Fatalf("recordValue(%d):\n got %s\nwant %s", id, got, want)
		}
		if got, want := recordKey(id), fmtRecordKey(id); !bytes.Equal(got, want) {
			t.Fatalf("recordKey(%d) = %s, want %s", id, got, want)
		}
	}
	if !json.Valid(recordValue(12345)) {
		t.Fatalf("recordValue(12345) is not JSON: %s", recordValue(12345))
	}
}

func BenchmarkRecordValue(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		_ = recordValue(i)
	}
}

func BenchmarkFmtRecordValue(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		_ = fmtRecordValue(i)
	}
}

// TestPrebuiltRecordsAreTheRecords holds the latency producer's pre-built
// keys and values to recordKey and recordValue, id by id, and each to its
// own capacity, so that nothing appended to one can reach the next.
func TestPrebuiltRecordsAreTheRecords(t *testing.T) {
	const n = 3000
	b := prebuild(n)
	if b.n() != n {
		t.Fatalf("%d records pre-built, want %d", b.n(), n)
	}
	for id := range n {
		key, value := b.record(id)
		if !bytes.Equal(key, recordKey(id)) || !bytes.Equal(value, recordValue(id)) {
			t.Fatalf("record %d: %q %q, want %q %q", id, key, value, recordKey(id), recordValue(id))
		}
		if cap(key) != len(key) || cap(value) != len(value) {
			t.Fatalf("record %d: capacities %d and %d beyond lengths %d and %d", id, cap(key), cap(value), len(key), len(value))
		}
	}
}

// A latency window too long to build beforehand stops with the flag to
// change, before it allocates or produces anything.
func TestALatencyWindowTooLargeToPrebuildSaysSo(t *testing.T) {
	n, _, err := (&kafka{}).produceAt(t.Context(), "t", 1_000_000, 5*time.Minute)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "shorten -latency") || !strings.Contains(err.Error(), "300,000,000 records") {
		t.Fatalf("%d records, error %v; want none and an error naming the records and -latency", n, err)
	}
}

// TestSmallValueIsTheIssuesShape: a small record is JSON with exactly id,
// user, amount and ts, about 65 bytes, its id the record's.
func TestSmallValueIsTheIssuesShape(t *testing.T) {
	for _, id := range []int{0, 7, 123_456, 999_999, 4_999_999} {
		v := smallValue(id)
		var got map[string]any
		if err := json.Unmarshal(v, &got); err != nil {
			t.Fatalf("smallValue(%d) = %s: %v", id, v, err)
		}
		if len(got) != 4 || got["id"] != float64(id) || got["user"] == nil || got["amount"] == nil || got["ts"] == nil {
			t.Errorf("smallValue(%d) = %s, want the fields id (%d), user, amount, ts", id, v, id)
		}
		if len(v) < 50 || len(v) > 72 {
			t.Errorf("smallValue(%d) is %d bytes, want about 65: %s", id, len(v), v)
		}
	}
}
