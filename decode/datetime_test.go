package decode

import (
	"fmt"
	"testing"
	"time"
)

// slowTimestamp is what parseTimestamp did for every string before
// quickTimestamp: the oracle.
func slowTimestamp(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, normalizeDateTime(s))
	if err != nil {
		return time.Time{}, false
	}
	t, cerr := checkTimeRange(t.UTC(), jsonValue{kind: kindString, text: s}, "timestamptz")
	return t, cerr == nil
}

// checkQuick fails when quickTimestamp accepts s and the slow path refuses
// it or reads another instant, location or rounding.
func checkQuick(t *testing.T, s string) (accepted bool) {
	t.Helper()
	q, ok := quickTimestamp(s)
	if !ok {
		return false
	}
	want, wok := slowTimestamp(s)
	if !wok {
		t.Errorf("quickTimestamp(%q) = %v; time.Parse refuses it", s, q)
		return true
	}
	if !q.Equal(want) || q.Location() != want.Location() || q.Nanosecond() != want.Nanosecond() {
		t.Errorf("quickTimestamp(%q) = %v (%d ns); the slow path reads %v (%d ns)", s, q, q.Nanosecond(), want, want.Nanosecond())
	}
	return true
}

func TestQuickTimestampMatchesTimeParse(t *testing.T) {
	// Components of the common shape (true: the fast path must take a
	// string made of such parts when time.Parse reads it) and others it
	// leaves to the slow path.
	type part struct {
		s      string
		common bool
	}
	dates := []part{{"0001-01-01", true}, {"1969-12-31", true}, {"1970-01-01", true}, {"1999-12-31", true}, {"2000-02-29", true},
		{"1900-02-29", false}, {"2024-02-29", true}, {"2023-02-29", false}, {"2026-04-31", false}, {"2026-04-30", true},
		{"2026-12-31", true}, {"2026-13-01", false}, {"2026-00-10", false}, {"2026-01-00", false}, {"9999-12-31", true},
		{"0000-01-01", false}, {"2026-1-01", false}, {"20x6-01-01", false}, {"2100-02-29", false}, {"2400-02-29", true}}
	clocks := []part{{"00:00:00", true}, {"23:59:59", true}, {"09:05:07", true}, {"24:00:00", false}, {"12:60:00", false},
		{"12:00:60", false}, {"9:05:07", false}}
	fracs := []part{{"", true}, {".5", true}, {".0000005", true}, {".0000004999", false}, {".0000015", true}, {".9999995", true},
		{".999999499", true}, {".123456789", true}, {".000000001", true}, {".", false}, {".1234567891", false}, {".x", false}}
	zones := []part{{"Z", true}, {"+00:00", true}, {"-00:00", true}, {"+02:00", true}, {"-07:30", true}, {"+23:59", true},
		{"z", false}, {"-24:00", false}, {"+02:60", false}, {"+0200", false}, {"+02", false}, {"", false}, {"ZZ", false}, {" Z", false}}
	seps := []part{{"T", true}, {" ", true}, {"t", false}}
	total, accepted, missed := 0, 0, 0
	for _, d := range dates {
		for _, c := range clocks {
			for _, f := range fracs {
				for _, z := range zones {
					for _, sep := range seps {
						s := d.s + sep.s + c.s + f.s + z.s
						total++
						if checkQuick(t, s) {
							accepted++
							continue
						}
						if _, slow := slowTimestamp(s); slow && d.common && c.common && f.common && z.common && sep.common {
							missed++
							if missed <= 10 {
								t.Errorf("quickTimestamp(%q) left a common timestamp to the slow path", s)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d of %d strings took the fast path; %d common ones did not", accepted, total, missed)
}

// TestQuickTimestampEveryDay walks every day of years around leap rules and
// the epoch, where a calendar mistake would show.
func TestQuickTimestampEveryDay(t *testing.T) {
	for _, year := range []int{1, 4, 100, 399, 400, 1600, 1900, 1969, 1970, 2000, 2024, 2100, 9999} {
		for d := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == year; d = d.AddDate(0, 0, 1) {
			s := fmt.Sprintf("%04d-%02d-%02dT23:59:59.9999995+01:00", d.Year(), d.Month(), d.Day())
			if !checkQuick(t, s) {
				t.Fatalf("quickTimestamp(%q) refused it", s)
			}
		}
	}
}

func FuzzQuickTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-30T09:05:07Z", "2026-11-30 09:05:07.123+02:00", "2024-02-29T23:59:59.9999995-23:59", "0001-01-01T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkQuick(t, s) })
}

// CheckString answers with the converters the mapping runs, kinds
// included, and refuses what no string column is.
func TestCheckStringAnswersAsTheMappingConverts(t *testing.T) {
	for _, c := range []struct {
		typ, s string
		kind   string // "" when the column takes s
	}{
		{"timestamptz", "2026-01-02T03:04:05Z", ""},
		{"timestamptz", "2026-01-02 03:04:05.123+02:00", ""},
		{"timestamptz", "2026-01-02T03:04:05", KindInvalidTimestamp},
		{"timestamp with time zone", "tomorrow", KindInvalidTimestamp},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", ""},
		{"uuid", "{123E4567E89B12D3A456426614174000}", ""},
		{"uuid", "123e4567e-89b-12d3-a456-426614174000", KindInvalidUUID},
		{"boolean", "true", KindTypeMismatch},
		{"text[]", "a", KindTypeMismatch},
		{"no such type", "a", KindTypeMismatch},
	} {
		kind, err := CheckString(c.typ, c.s)
		if kind != c.kind || (err == nil) != (c.kind == "") {
			t.Errorf("CheckString(%q, %q) = %q, %v; want kind %q", c.typ, c.s, kind, err, c.kind)
		}
	}
}
