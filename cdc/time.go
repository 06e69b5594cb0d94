package cdc

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// Dates, times, timestamps and intervals. Postgres keeps microseconds;
// nanoseconds are truncated toward negative infinity (floor), so a value
// never moves into the next second, day or year, and values before 1970
// truncate the same way as values after. The limits are Postgres' own, so
// a value beyond them is a bad record with its reason rather than a row
// the server refuses.

const (
	microsPerDay = 86400 * 1000000
	// minDateDays is 4714-11-24 BC, the first day Postgres' date holds;
	// maxDateDays 5874897-12-31, the last (days since 1970-01-01).
	minDateDays = -2440588
	maxDateDays = 2145042905
	// minTimestampMicros is 4714-11-24 00:00:00 BC. Every int64 count of
	// microseconds after it is within Postgres' range (which ends in 294276).
	minTimestampMicros = -210866803200000000
)

// Debezium's sentinels for PostgreSQL's infinity and -infinity, as its
// PostgreSQL connector (3.6) sends them. A timestamp carries the
// PostgreSQL JDBC driver's (PGStatement.DATE_POSITIVE_INFINITY and
// DATE_NEGATIVE_INFINITY) in its own unit: that many microseconds for a
// MicroTimestamp, a thousandth of it in milliseconds for a Timestamp; a
// NanoTimestamp int64's limits. A date carries -622191234 and -625821272
// days, what the connector makes of the driver's infinite dates (recorded:
// testdata/recorded), far before Postgres' first day; the days of
// -5877611-06-21 and -22 are kept as well, the sentinels of older
// versions' documentation.
const (
	timestampPosInf = 9223372036825200000
	timestampNegInf = -9223372036832400000
	datePosInf      = -622191234
	dateNegInf      = -625821272
)

var datePosInfOld, dateNegInfOld = epochDays(-5877611, 6, 21), epochDays(-5877611, 6, 22)

func epochDays(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

func decodeEpochDays(r *reader, n *node) (any, *convError) {
	d, cerr := readInt(r, n, 32)
	if cerr != nil {
		return nil, cerr
	}
	return dateOfDays(d)
}

func dateOfDays(d int64) (any, *convError) {
	switch {
	case d == datePosInf || d == datePosInfOld:
		return pgvalue.Infinity{}, nil
	case d == dateNegInf || d == dateNegInfOld:
		return pgvalue.Infinity{Negative: true}, nil
	case d < minDateDays || d > maxDateDays:
		return nil, convErrorf(decode.KindOutOfRange, "the date %d days from 1970-01-01 is outside Postgres' dates (4714-11-24 BC to 5874897-12-31)", d)
	}
	return time.Unix(d*86400, 0).UTC(), nil
}

// timeOfDayIn decodes a time of day counted in unit microseconds; a
// negative unit -k means units of 1/k microsecond (nanoseconds: -1000).
func timeOfDayIn(unit int64) func(*reader, *node) (any, *convError) {
	return func(r *reader, n *node) (any, *convError) {
		v, cerr := readInt(r, n, 64)
		if cerr != nil {
			return nil, cerr
		}
		us, ok := toMicros(v, unit)
		if !ok || us < 0 || us > microsPerDay {
			return nil, convErrorf(decode.KindOutOfRange, "the time of day %d (%s) is not within 00:00:00 and 24:00:00", v, n.s.describe())
		}
		return pgvalue.Time{Microseconds: us}, nil
	}
}

// toMicros converts v units to microseconds (see timeOfDayIn), flooring;
// ok is false on overflow.
func toMicros(v, unit int64) (int64, bool) {
	if unit < 0 {
		k := -unit
		q := v / k
		if v%k < 0 {
			q--
		}
		return q, true
	}
	if v > math.MaxInt64/unit || v < math.MinInt64/unit {
		return 0, false
	}
	return v * unit, true
}

// timestampIn decodes a timestamp without time zone counted in unit since
// the epoch (see timeOfDayIn); Debezium's sentinels become ±infinity.
func timestampIn(unit int64) func(*reader, *node) (any, *convError) {
	return func(r *reader, n *node) (any, *convError) {
		v, cerr := readInt(r, n, 64)
		if cerr != nil {
			return nil, cerr
		}
		switch {
		case unit > 0 && v == timestampPosInf/unit, unit < 0 && v == math.MaxInt64:
			return pgvalue.Infinity{}, nil
		case unit > 0 && v == timestampNegInf/unit, unit < 0 && v == math.MinInt64:
			return pgvalue.Infinity{Negative: true}, nil
		}
		var t time.Time
		switch unit {
		case 1000:
			// Not through microseconds: those of the last milliseconds
			// Postgres holds overflow int64.
			t = time.UnixMilli(v)
		default:
			us, _ := toMicros(v, unit) // 1 or a fraction: no overflow
			t = time.UnixMicro(us)
		}
		if t.Before(minTimestamp) || t.After(maxTimestamp) {
			return nil, convErrorf(decode.KindOutOfRange, "the timestamp %d (%s) is outside Postgres' timestamps (4714-11-24 BC to 294276)", v, n.s.describe())
		}
		return t.UTC(), nil
	}
}

// decodeZonedTimestamp reads an ISO-8601 timestamp with an offset
// (2011-12-03T10:15:30.030431+01:00, or Z), or Debezium's "infinity" and
// "-infinity".
func decodeZonedTimestamp(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	switch string(s) {
	case "infinity":
		return pgvalue.Infinity{}, nil
	case "-infinity":
		return pgvalue.Infinity{Negative: true}, nil
	}
	t, hasOffset, ok := parseISOTimestamp(string(s))
	if !ok || !hasOffset {
		return nil, convErrorf(decode.KindInvalidTimestamp, "%q is not an ISO-8601 timestamp with an offset, as %s has", s, n.s.describe())
	}
	if cerr := checkTimestampRange(t, s); cerr != nil {
		return nil, cerr
	}
	return t, nil
}

// Postgres' first and last timestamps. Compared as times: a count of
// microseconds since 1970 overflows int64 after the year 294246, before
// Postgres' last day (pgx counts from 2000 and writes those right).
var (
	minTimestamp = time.UnixMicro(minTimestampMicros).UTC()
	maxTimestamp = time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

func checkTimestampRange(t time.Time, s []byte) *convError {
	switch {
	case t.Before(minTimestamp):
		return convErrorf(decode.KindOutOfRange, "%q is before 4714-11-24 BC, the first timestamp Postgres holds", s)
	case t.After(maxTimestamp):
		return convErrorf(decode.KindOutOfRange, "%q is after 294276-12-31 23:59:59.999999, the last timestamp Postgres holds", s)
	}
	return nil
}

// decodeIsoTimestamp reads io.debezium.time.IsoTimestamp: a timestamp
// without time zone written in UTC (2019-07-09T02:28:57.123456Z).
func decodeIsoTimestamp(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	t, _, ok := parseISOTimestamp(string(s))
	if !ok {
		return nil, convErrorf(decode.KindInvalidTimestamp, "%q is not an ISO-8601 timestamp", s)
	}
	if cerr := checkTimestampRange(t, s); cerr != nil {
		return nil, cerr
	}
	return t, nil
}

// decodeIsoDate reads io.debezium.time.IsoDate: 2017-09-15Z.
func decodeIsoDate(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	y, m, d, rest, ok := parseISODate(string(s))
	if ok {
		_, ok = parseOffset(rest)
	}
	if !ok {
		return nil, convErrorf(decode.KindInvalidTimestamp, "%q is not an ISO-8601 date", s)
	}
	return dateOfDays(epochDays(y, time.Month(m), d))
}

// decodeIsoTime reads io.debezium.time.IsoTime: 04:05:11.789Z.
func decodeIsoTime(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	us, rest, ok := parseISOTime(string(s))
	if ok {
		_, ok = parseOffset(rest)
	}
	if !ok {
		return nil, convErrorf(decode.KindInvalidTimestamp, "%q is not an ISO-8601 time of day", s)
	}
	return pgvalue.Time{Microseconds: us}, nil
}

// decodeZonedTime reads io.debezium.time.ZonedTime: 10:15:30.123456Z or
// with an offset, for a time with time zone column.
func decodeZonedTime(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	us, rest, ok := parseISOTime(string(s))
	var off int
	if ok {
		off, ok = parseOffset(rest)
	}
	if !ok || rest == "" {
		return nil, convErrorf(decode.KindInvalidTimestamp, "%q is not an ISO-8601 time with an offset", s)
	}
	return pgvalue.TimeTZ{Microseconds: us, OffsetSeconds: int32(off)}, nil
}

// parseISOTimestamp reads [+-]YYYY[Y...]-MM-DDTHH:MM[:SS[.f]] and an
// optional offset (Z, ±HH:MM, ±HH:MM:SS), as java.time writes them (years
// beyond 9999 with a sign, years before 1 as astronomical years: 0 is
// 1 BC).
func parseISOTimestamp(s string) (t time.Time, hasOffset, ok bool) {
	y, m, d, rest, ok := parseISODate(s)
	if !ok || len(rest) < 1 || (rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ') {
		return t, false, false
	}
	us, rest, ok := parseISOTime(rest[1:])
	if !ok || us == microsPerDay {
		return t, false, false
	}
	off, ok := parseOffset(rest)
	if !ok {
		return t, false, false
	}
	base := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	t = base.Add(time.Duration(us) * time.Microsecond).Add(-time.Duration(off) * time.Second)
	return t, rest != "", true
}

func parseISODate(s string) (y, m, d int, rest string, ok bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i < 4 || i > 10 || len(s) < i+6 || s[i] != '-' || s[i+3] != '-' {
		return 0, 0, 0, "", false
	}
	y, _ = strconv.Atoi(s[:i])
	if neg {
		y = -y
	}
	m, ok1 := twoDigits(s[i+1:])
	d, ok2 := twoDigits(s[i+4:])
	if !ok1 || !ok2 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, 0, 0, "", false
	}
	return y, m, d, s[i+6:], true
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func twoDigits(s string) (int, bool) {
	if len(s) < 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// parseISOTime reads HH:MM[:SS[.f{1,9}]] into microseconds past midnight
// (flooring nanoseconds); 24:00:00 is allowed, as Postgres allows it.
func parseISOTime(s string) (us int64, rest string, ok bool) {
	h, ok1 := twoDigits(s)
	if !ok1 || len(s) < 5 || s[2] != ':' {
		return 0, "", false
	}
	mi, ok2 := twoDigits(s[3:])
	if !ok2 {
		return 0, "", false
	}
	s = s[5:]
	sec, frac := 0, int64(0)
	if len(s) >= 3 && s[0] == ':' {
		var ok3 bool
		if sec, ok3 = twoDigits(s[1:]); !ok3 {
			return 0, "", false
		}
		s = s[3:]
		if len(s) > 0 && s[0] == '.' {
			j := 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			digits := s[1:j]
			if len(digits) == 0 || len(digits) > 9 {
				return 0, "", false
			}
			digits += strings.Repeat("0", 9-len(digits))
			ns, _ := strconv.ParseInt(digits, 10, 64)
			frac = ns / 1000
			s = s[j:]
		}
	}
	if h > 24 || mi > 59 || sec > 59 || (h == 24 && (mi > 0 || sec > 0 || frac > 0)) {
		return 0, "", false
	}
	return (int64(h)*3600+int64(mi)*60+int64(sec))*1000000 + frac, s, true
}

// parseOffset reads "", Z, or ±HH:MM[:SS] into seconds east of UTC.
func parseOffset(s string) (int, bool) {
	switch {
	case s == "":
		return 0, true
	case s == "Z" || s == "z":
		return 0, true
	case len(s) < 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':':
		return 0, false
	}
	h, ok1 := twoDigits(s[1:])
	m, ok2 := twoDigits(s[4:])
	sec, ok3 := 0, true
	switch len(s) {
	case 6:
	case 9:
		if s[6] != ':' {
			return 0, false
		}
		sec, ok3 = twoDigits(s[7:])
	default:
		return 0, false
	}
	if !ok1 || !ok2 || !ok3 || h > 18 || m > 59 || sec > 59 {
		return 0, false
	}
	off := h*3600 + m*60 + sec
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

// durationIn decodes io.debezium.time.MicroDuration (and NanoDuration) as
// an interval of that many microseconds: Debezium has already folded the
// months and days of the source interval into them (a month as 30.4375
// days), so the interval keeps the time the event carries.
func durationIn(unit int64) func(*reader, *node) (any, *convError) {
	return func(r *reader, n *node) (any, *convError) {
		v, cerr := readInt(r, n, 64)
		if cerr != nil {
			return nil, cerr
		}
		us, ok := toMicros(v, unit)
		if !ok {
			return nil, convErrorf(decode.KindOutOfRange, "the duration %d (%s) does not fit an interval", v, n.s.describe())
		}
		return pgvalue.Interval{Microseconds: us}, nil
	}
}

// decodeISOInterval reads io.debezium.time.Interval, which Debezium writes
// as P<y>Y<m>M<d>DT<h>H<m>M<s>S with each part signed and the seconds a
// decimal (P1Y-2M3DT4H5M-6.78S); months, days and time stay apart, as in
// Postgres' interval. Fractions beyond microseconds are truncated toward
// zero, like the sign of the part they belong to.
func decodeISOInterval(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	iv, ok := parseISOInterval(string(s))
	if !ok {
		return nil, convErrorf(decode.KindInvalidValue, "%q is not an ISO-8601 duration as Debezium writes intervals (P1Y2M3DT4H5M6.78S)", s)
	}
	return iv, nil
}

func parseISOInterval(s string) (pgvalue.Interval, bool) {
	var months, days, micros big.Int
	if len(s) < 2 || (s[0] != 'P' && s[0] != 'p') {
		return pgvalue.Interval{}, false
	}
	s = s[1:]
	inTime := false
	for s != "" {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return pgvalue.Interval{}, false
			}
			inTime, s = true, s[1:]
			continue
		}
		j := 0
		if s[0] == '-' || s[0] == '+' {
			j++
		}
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		if j == 0 || j >= len(s) {
			return pgvalue.Interval{}, false
		}
		num, unit := s[:j], s[j]
		s = s[j+1:]
		if unit == 'S' || unit == 's' {
			if !inTime {
				return pgvalue.Interval{}, false
			}
			x, ok := decimalMicros(num)
			if !ok {
				return pgvalue.Interval{}, false
			}
			micros.Add(&micros, x)
			continue
		}
		x, ok := new(big.Int).SetString(strings.TrimPrefix(num, "+"), 10)
		if !ok {
			return pgvalue.Interval{}, false
		}
		switch {
		case !inTime && (unit == 'Y' || unit == 'y'):
			months.Add(&months, x.Mul(x, big.NewInt(12)))
		case !inTime && (unit == 'M' || unit == 'm'):
			months.Add(&months, x)
		case !inTime && (unit == 'W' || unit == 'w'):
			days.Add(&days, x.Mul(x, big.NewInt(7)))
		case !inTime && (unit == 'D' || unit == 'd'):
			days.Add(&days, x)
		case inTime && (unit == 'H' || unit == 'h'):
			micros.Add(&micros, x.Mul(x, big.NewInt(3600000000)))
		case inTime && (unit == 'M' || unit == 'm'):
			micros.Add(&micros, x.Mul(x, big.NewInt(60000000)))
		default:
			return pgvalue.Interval{}, false
		}
	}
	if !months.IsInt64() || !days.IsInt64() || !micros.IsInt64() ||
		months.Int64() > math.MaxInt32 || months.Int64() < math.MinInt32 ||
		days.Int64() > math.MaxInt32 || days.Int64() < math.MinInt32 {
		return pgvalue.Interval{}, false
	}
	return pgvalue.Interval{Months: int32(months.Int64()), Days: int32(days.Int64()), Microseconds: micros.Int64()}, true
}

// decimalMicros reads signed decimal seconds into microseconds, truncating
// toward zero.
func decimalMicros(num string) (*big.Int, bool) {
	neg := strings.HasPrefix(num, "-")
	num = strings.TrimLeft(num, "+-")
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || strings.ContainsAny(frac, ".") {
		return nil, false
	}
	if len(frac) > 6 {
		frac = frac[:6]
	}
	frac += strings.Repeat("0", 6-len(frac))
	x, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return nil, false
	}
	if neg {
		x.Neg(x)
	}
	return x, true
}
