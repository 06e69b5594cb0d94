package schema

import "time"

// quickTimestamp reads the common shape of RFC 3339 timestamps,
// YYYY-MM-DD[T ]HH:MM:SS[.f{1,9}](Z|±HH:MM) with a year from 0001, into the
// instant parseTimestamp's slow path (normalizeDateTime, time.Parse with
// RFC3339Nano, UTC, checkTimeRange) returns for it: UTC, rounded to the
// microsecond half up. Every such string is inside Postgres' range. ok is
// false for anything else, valid or not, which the slow path then reads
// and, if need be, refuses in its own words. time.Parse was a tenth of
// AppendRow on a typed table; TestQuickTimestampMatchesTimeParse and
// FuzzQuickTimestamp hold the two to the same answers.
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
