package decode

import (
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// Dates, times of day and timestamps: the converters of the date, time,
// timestamp and timestamptz columns, what they accept (RFC 3339 and SQL's
// space-separated form, or epoch numbers with time_unit), Postgres' range,
// and quickTimestamp, the fast path of the common timestamp shape.

// The range of Postgres timestamps: 4714-11-24 BC to 294276-12-31 AD.
var (
	minTimestamp = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	maxTimestamp = time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

const (
	layoutLocal = "2006-01-02T15:04:05.999999999"
	layoutDate  = "2006-01-02"
)

// normalizeDateTime accepts a space between date and time, as SQL writes it.
func normalizeDateTime(s string) string {
	if len(s) > 10 && s[10] == ' ' {
		return s[:10] + "T" + s[11:]
	}
	return s
}

// microShift is the power of ten from an epoch unit (in nanoseconds) to
// microseconds.
var microShift = map[int64]int64{1e9: 6, 1e6: 3, 1e3: 0, 1: -3}

// epochMicros reads an epoch number in the column's unit as microseconds,
// rounded half away from zero like Postgres' own input.
func epochMicros(c *colType, v jsonValue, typeName string) (int64, *convError) {
	if c.unitNanos == 0 {
		return 0, convErrorf(KindTypeMismatch, "%s is a number: a %s column reads epoch numbers only with time_unit set (s, ms, us or ns); or send an RFC 3339 string", describe(v), typeName)
	}
	d, cerr := numberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	d = d.shift(microShift[c.unitNanos]).round(0)
	us, cerr := d.toInt(64)
	if cerr != nil {
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s", describe(v), typeName)
	}
	return us, nil
}

func checkTimeRange(t time.Time, v jsonValue, typeName string) (time.Time, *convError) {
	if t.Before(minTimestamp) || t.After(maxTimestamp) {
		return time.Time{}, convErrorf(KindOutOfRange, "%s is outside the range of %s (4714-11-24 BC to 294276-12-31)", describe(v), typeName)
	}
	return t.Round(time.Microsecond), nil
}

// parseTimestamp reads a timestamp string or epoch number. withZone says
// the string must carry a UTC offset.
func parseTimestamp(c *colType, v jsonValue, withZone bool) (time.Time, *convError) {
	typeName := c.base.Name
	switch v.kind {
	case kindNumber:
		us, cerr := epochMicros(c, v, typeName)
		if cerr != nil {
			return time.Time{}, cerr
		}
		return checkTimeRange(time.UnixMicro(us).UTC(), v, typeName)
	case kindString:
		x := v.text
		if t, ok := quickTimestamp(x); ok {
			return t, nil
		}
		s := normalizeDateTime(x)
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return checkTimeRange(t.UTC(), v, typeName)
		}
		if t, err := time.Parse(layoutLocal, s); err == nil {
			if withZone {
				return time.Time{}, convErrorf(KindInvalidTimestamp, "%s has no UTC offset: %s needs one, as in 2026-01-02T03:04:05Z or +02:00", describe(v), typeName)
			}
			return checkTimeRange(t, v, typeName)
		}
		if c.unitNanos != 0 {
			if _, ok := parseDecimal(x); ok {
				return parseTimestamp(c, jsonNumber(x), withZone)
			}
		}
		return time.Time{}, convErrorf(KindInvalidTimestamp, "%s is not an RFC 3339 timestamp (as in 2026-01-02T03:04:05.123Z)", describe(v))
	}
	return time.Time{}, mismatch(v, "a "+typeName+" column takes an RFC 3339 string, or an epoch number with time_unit set")
}

// convertTimestamptz: an offset is required; the value is stored as an
// instant.
func convertTimestamptz(c *colType, v jsonValue) (any, *convError) {
	return boxed(parseTimestamp(c, v, true))
}

// convertTimestamp: a string without an offset is stored as written; one
// with an offset, and an epoch number, are converted to UTC first.
func convertTimestamp(c *colType, v jsonValue) (any, *convError) {
	return boxed(parseTimestamp(c, v, false))
}

func convertDate(c *colType, v jsonValue) (any, *convError) { return boxed(dateOf(c, v)) }

// dateOf is convertDate's day, at midnight UTC.
func dateOf(c *colType, v jsonValue) (time.Time, *convError) {
	switch v.kind {
	case kindNumber:
		us, cerr := epochMicros(c, v, "date")
		if cerr != nil {
			return time.Time{}, cerr
		}
		t, cerr := checkTimeRange(time.UnixMicro(us).UTC(), v, "date")
		if cerr != nil {
			return time.Time{}, cerr
		}
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
	case kindString:
		t, err := time.Parse(layoutDate, v.text)
		if err != nil {
			return time.Time{}, convErrorf(KindInvalidTimestamp, "%s is not a date as YYYY-MM-DD", describe(v))
		}
		return t, nil
	}
	return time.Time{}, mismatch(v, "a date column takes a YYYY-MM-DD string, or an epoch number with time_unit set")
}

const microsPerDay = 24 * 60 * 60 * 1000000

// convertTime reads a time of day: "15:04", "15:04:05" or "15:04:05.999999"
// (more fraction digits are rounded to microseconds, as Postgres does), or
// an epoch number with a unit as the time since midnight. 24:00:00 is
// allowed, as in Postgres.
func convertTime(c *colType, v jsonValue) (any, *convError) {
	switch v.kind {
	case kindNumber:
		us, cerr := epochMicros(c, v, "time")
		if cerr != nil {
			return nil, cerr
		}
		if us < 0 || us > microsPerDay {
			return nil, convErrorf(KindOutOfRange, "%s is not within one day since midnight", describe(v))
		}
		return pgvalue.Time{Microseconds: us}, nil
	case kindString:
		us, ok := parseTimeOfDay(v.text)
		if !ok {
			return nil, convErrorf(KindInvalidTimestamp, "%s is not a time of day as HH:MM:SS[.ffffff] (no offset)", describe(v))
		}
		return pgvalue.Time{Microseconds: us}, nil
	}
	return nil, mismatch(v, "a time column takes an HH:MM:SS string, or a number with time_unit set")
}

func parseTimeOfDay(s string) (int64, bool) {
	twoDigits := func(at int, max int64) (int64, bool) {
		if at+2 > len(s) {
			return 0, false
		}
		n, ok := digits(s, at, 2)
		return int64(n), ok && int64(n) <= max
	}
	h, ok := twoDigits(0, 24)
	if !ok || len(s) < 5 || s[2] != ':' {
		return 0, false
	}
	m, ok := twoDigits(3, 59)
	if !ok {
		return 0, false
	}
	var sec int64
	var frac decimal
	if len(s) > 5 {
		if s[5] != ':' {
			return 0, false
		}
		if sec, ok = twoDigits(6, 60); !ok {
			return 0, false
		}
		if len(s) > 8 {
			if s[8] != '.' || len(s) == 9 {
				return 0, false
			}
			d, ok := parseDecimal("0" + s[8:])
			if !ok {
				return 0, false
			}
			frac = d
		}
	}
	us := ((h*60+m)*60 + sec) * 1000000
	f, cerr := frac.shift(6).round(0).toInt(64)
	if cerr != nil {
		return 0, false
	}
	us += f
	return us, us <= microsPerDay
}

// quickTimestamp reads the common shape of RFC 3339 timestamps,
// YYYY-MM-DD[T ]HH:MM:SS[.f{1,9}](Z|±HH:MM) with a year from 0001, into the
// instant parseTimestamp's slow path (normalizeDateTime, time.Parse with
// RFC3339Nano, UTC, checkTimeRange) returns for it: UTC, rounded to the
// microsecond half up. Every such string is inside Postgres' range. ok is
// false for anything else, valid or not, which the slow path then reads
// and, if need be, refuses in its own words. time.Parse handles every
// layout and is slow for the one shape nearly every timestamp has;
// TestQuickTimestampMatchesTimeParse and FuzzQuickTimestamp hold the two
// to the same answers.
func quickTimestamp(s string) (time.Time, bool) {
	n := len(s)
	if n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(s, 0, 4)
	month, ok2 := digits(s, 5, 2)
	day, ok3 := digits(s, 8, 2)
	hour, ok4 := digits(s, 11, 2)
	minute, ok5 := digits(s, 14, 2)
	sec, ok6 := digits(s, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || year < 1 || month < 1 || month > 12 ||
		day < 1 || day > daysInMonth(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	i, nsec := 19, int64(0)
	if s[i] == '.' {
		j := i + 1
		for j < n && j-i <= 9 && s[j] >= '0' && s[j] <= '9' {
			nsec = nsec*10 + int64(s[j]-'0')
			j++
		}
		if j == i+1 || (j < n && s[j] >= '0' && s[j] <= '9') {
			return time.Time{}, false // no digit, or more than nine: the slow path
		}
		for k := j - i - 1; k < 9; k++ {
			nsec *= 10
		}
		i = j
	}
	var offset int64
	switch {
	case i == n-1 && s[i] == 'Z':
	case i == n-6 && (s[i] == '+' || s[i] == '-') && s[i+3] == ':':
		oh, okh := digits(s, i+1, 2)
		om, okm := digits(s, i+4, 2)
		if !okh || !okm || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		offset = int64(oh*60+om) * 60
		if s[i] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	unix := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offset
	us := (nsec + 500) / 1000 // half up, as time.Time.Round after year 1
	return time.Unix(unix, us*1000).UTC(), true
}

// digits reads s[at:at+n] as a decimal number; false if a byte is not a
// digit.
func digits(s string, at, n int) (int, bool) {
	v := 0
	for _, c := range []byte(s[at : at+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysInMonth(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to the given day of
// the proleptic Gregorian calendar (Howard Hinnant's algorithm).
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
