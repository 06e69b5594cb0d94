package decode

// The mapper as it was before the single-pass scanner (scan.go): decode the
// whole document with encoding/json into any (decodeJSON), walk each
// column's path through the tree, convert the decoded value. It is kept
// here, unchanged but for the names, as the oracle of FuzzScanMatchesDecode.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/pgvalue"

	"github.com/kafka2pg/kafka2pg/stream"
)

var oldConverters = map[string]func(*colType, any) (any, *convError){
	"text": oldConvertText, "character varying": oldConvertText,
	"smallint": oldConvertInt16, "integer": oldConvertInt32, "bigint": oldConvertInt64,
	"numeric": oldConvertNumeric, "real": oldConvertFloat32, "double precision": oldConvertFloat64,
	"boolean": oldConvertBool, "timestamp with time zone": oldConvertTimestamptz,
	"timestamp without time zone": oldConvertTimestamp, "date": oldConvertDate,
	"time without time zone": oldConvertTime, "uuid": oldConvertUUID, "jsonb": oldConvertJSONB,
	"bytea": oldConvertBytea, "inet": oldConvertInet,
}

// oracleMapper maps rows the old way, from the columns m compiled.
type oracleMapper struct {
	m    *JSONMapper
	defs []any // per column: the default, converted the old way
}

func newOracle(t testing.TB, m *JSONMapper) *oracleMapper {
	t.Helper()
	o := &oracleMapper{m: m, defs: make([]any, len(m.cols))}
	for i, cs := range m.spec.Columns {
		if cs.Default == nil {
			continue
		}
		v, err := decodeJSON([]byte(*cs.Default))
		if err != nil {
			t.Fatalf("default %s: %v", *cs.Default, err)
		}
		x, cerr := o.convert(&m.cols[i], v)
		if cerr != nil {
			t.Fatalf("default %s: %s", *cs.Default, cerr.msg)
		}
		o.defs[i] = x
	}
	return o
}

func (o *oracleMapper) convert(c *mappedColumn, v any) (any, *convError) {
	if c.typ.array {
		return oldConvertArray(&c.typ, v)
	}
	return oldConverters[c.typ.base.Name](&c.typ, v)
}

// lookup finds the path's value in doc. found is false when a member or
// element is absent; a null on the way gives (nil, true, nil).
func (p jsonPath) lookup(doc any) (v any, found bool, cerr *convError) {
	cur := doc
	for n, st := range p.steps {
		if cur == nil {
			return nil, true, nil
		}
		if st.isIndex {
			arr, ok := cur.([]any)
			if !ok {
				return nil, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an array", p.text, p.prefix(n), oldJsonKind(cur))
			}
			i := st.index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return nil, false, nil
			}
			cur = arr[i]
			continue
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an object", p.text, p.prefix(n), oldJsonKind(cur))
		}
		if cur, ok = obj[st.key]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// oldDocs holds the lazily decoded value and key of one record.
type oldDocs struct {
	value, key     any
	valueOK, keyOK bool // decoded (and present)
	valueTried     bool
	keyd           bool // key decoding tried
}

func (o *oracleMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	dst = dst[:0]
	var d oldDocs
	for i := range o.m.cols {
		v, err := o.value(i, r, &d)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

func (o *oracleMapper) KeyRow(r *stream.Record) ([]any, error) {
	if len(o.m.keyIdx) == 0 {
		return nil, errors.New("key row: the mapping has no key columns (append mode)")
	}
	out := make([]any, 0, len(o.m.keyIdx))
	var d oldDocs
	for _, i := range o.m.keyIdx {
		v, err := o.value(i, r, &d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (o *oracleMapper) value(i int, r *stream.Record, d *oldDocs) (any, error) {
	c := &o.m.cols[i]
	var v any
	switch c.source {
	case fromValue, fromKey:
		return o.dataValue(i, r, d)
	case metaTopic:
		v = r.Topic
	case metaPartition:
		v = r.Partition
	case metaOffset:
		v = r.Offset
	case metaTimestamp:
		if !r.Timestamp.IsZero() {
			v = r.Timestamp
		}
	case metaTimestampType:
		if r.TimestampType != "" {
			v = r.TimestampType
		}
	case metaKey:
		if r.Key == nil {
			break
		}
		switch c.keyFormat {
		case KeyFormatText:
			if kind, err := CheckText(r.Key); err != nil {
				return nil, badRecord(r, c.name, kind, "the key "+strings.TrimPrefix(err.Error(), "the value ")+": use key_format bytes")
			}
			v = string(r.Key)
		case KeyFormatJSON:
			if kind, err := CheckJSON(r.Key); err != nil {
				return nil, badRecord(r, c.name, kind, "the key "+strings.TrimPrefix(err.Error(), "the value ")+": use key_format bytes or text")
			}
			v = r.Key
		default:
			v = r.Key
		}
	case metaHeaders:
		if len(r.Headers) > 0 {
			v = HeadersJSON(r.Headers)
		}
	case metaHeader:
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if h := r.Headers[i]; h.Key == c.header {
				if h.Value != nil {
					if kind, err := CheckText(h.Value); err != nil {
						return nil, badRecord(r, c.name, kind, fmt.Sprintf("header %q: %s", c.header, err.Error()))
					}
					v = string(h.Value)
				}
				break
			}
		}
	}
	if v == nil && c.notNull {
		return nil, badRecord(r, c.name, KindNullValue, "the record has no "+metaWhat(c)+", and the column is NOT NULL (it is part of the key)")
	}
	return v, nil
}

func (o *oracleMapper) dataValue(i int, r *stream.Record, d *oldDocs) (any, error) {
	c := &o.m.cols[i]
	doc, present, err := d.get(c.source, r)
	if err != nil {
		return nil, err
	}
	what := "value"
	if c.source == fromKey {
		what = "key"
	}
	var raw any
	if present {
		var found bool
		var cerr *convError
		raw, found, cerr = c.path.lookup(doc)
		if cerr != nil {
			return nil, badRecord(r, c.name, cerr.kind, "in the "+what+", "+cerr.msg)
		}
		if !found && c.onMissing == "error" {
			return nil, badRecord(r, c.name, KindMissingValue, fmt.Sprintf("path %s is missing from the %s: send it, or set on_missing to null or default", c.path.text, what))
		}
	}
	if raw == nil {
		switch {
		case o.defs[i] != nil:
			return o.defs[i], nil
		case !c.notNull:
			return nil, nil
		case !present && what == "value":
			return nil, badRecord(r, c.name, KindTombstone, "the record is a tombstone (null value) and the column is NOT NULL without default: set delete_on_tombstone with a key, give a default, or drop not_null")
		case !present:
			return nil, badRecord(r, c.name, KindNullValue, "the record has no key and the column is NOT NULL without default: give a default or drop not_null")
		}
		return nil, badRecord(r, c.name, KindNullValue, fmt.Sprintf("path %s is null or missing in the %s and the column is NOT NULL without default: send a value, give a default, or drop not_null", c.path.text, what))
	}
	v, cerr := o.convert(c, raw)
	if cerr != nil {
		return nil, badRecord(r, c.name, cerr.kind, fmt.Sprintf("path %s of the %s: %s", c.path.text, what, cerr.msg))
	}
	return v, nil
}

func (d *oldDocs) get(s source, r *stream.Record) (doc any, present bool, err error) {
	if s == fromKey {
		if r.Key == nil {
			return nil, false, nil
		}
		if !d.keyd {
			d.keyd = true
			v, err := decodeJSON(r.Key)
			if err != nil {
				return nil, false, badRecord(r, "", decodeKind(err), "the key "+err.Error())
			}
			d.key, d.keyOK = v, true
		}
		return d.key, d.keyOK, nil
	}
	if r.Value == nil {
		return nil, false, nil
	}
	if !d.valueTried {
		d.valueTried = true
		v, err := decodeJSON(r.Value)
		if err != nil {
			return nil, false, badRecord(r, "", decodeKind(err), "the value "+err.Error())
		}
		d.value, d.valueOK = v, true
	}
	return d.value, d.valueOK, nil
}

// describe renders a value for an error message, truncated.
func oldDescribe(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		if len(v) > maxShown {
			cut := maxShown
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			return strconv.Quote(v[:cut]) + "…"
		}
		return strconv.Quote(v)
	case json.Number:
		s = string(v)
	case bool:
		s = strconv.FormatBool(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return oldJsonKind(v)
		}
		s = string(b)
	}
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}

// jsonKind names the JSON kind of a decoded value.
func oldJsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	}
	return "an unknown value"
}

func oldMismatch(v any, want string) *convError {
	return convErrorf(KindTypeMismatch, "%s is %s: %s", oldDescribe(v), oldJsonKind(v), want)
}

func oldConvertText(c *colType, v any) (any, *convError) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = string(v)
	case bool:
		s = strconv.FormatBool(v)
	default:
		return nil, oldMismatch(v, "a text column takes a string, number or boolean; map objects and arrays to jsonb")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return nil, convErrorf(KindNULByte, "%s has a NUL character at byte %d, which Postgres text cannot store", oldDescribe(s), i)
	}
	if c.length > 0 {
		if n := utf8.RuneCountInString(s); n > c.length {
			return nil, convErrorf(KindOutOfRange, "%s is %d characters long: %s holds at most %d; use a longer varchar or text", oldDescribe(s), n, c.sql(), c.length)
		}
	}
	return s, nil
}

// numberOf returns the decimal a JSON number, or a string holding one (as
// protobuf's JSON mapping writes 64-bit integers), stands for.
func oldNumberOf(v any, typeName string) (oldDecimal, *convError) {
	var lit string
	switch v := v.(type) {
	case json.Number:
		lit = string(v)
	case string:
		lit = v
	default:
		return oldDecimal{}, oldMismatch(v, "a "+typeName+" column takes a number (or a string holding one)")
	}
	d, ok := oldParseDecimal(lit)
	if !ok {
		return oldDecimal{}, convErrorf(KindTypeMismatch, "%s is not a number: a %s column takes a JSON number (or a string holding one)", oldDescribe(v), typeName)
	}
	return d, nil
}

func oldConvertInt(v any, bits int, typeName string) (int64, *convError) {
	d, cerr := oldNumberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	n, cerr := d.toInt(bits)
	switch {
	case cerr == nil:
		return n, nil
	case cerr.kind == KindOutOfRange:
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s: use a wider integer type or numeric", oldDescribe(v), typeName)
	}
	return 0, convErrorf(KindTypeMismatch, "%s is not a whole number: a %s column takes integers; use numeric or double precision for fractions", oldDescribe(v), typeName)
}

func oldConvertInt16(_ *colType, v any) (any, *convError) {
	n, err := oldConvertInt(v, 16, "smallint")
	if err != nil {
		return nil, err
	}
	return int16(n), nil
}

func oldConvertInt32(_ *colType, v any) (any, *convError) {
	n, err := oldConvertInt(v, 32, "integer")
	if err != nil {
		return nil, err
	}
	return int32(n), nil
}

func oldConvertInt64(_ *colType, v any) (any, *convError) {
	n, err := oldConvertInt(v, 64, "bigint")
	if err != nil {
		return nil, err
	}
	return n, nil
}

func oldConvertNumeric(c *colType, v any) (any, *convError) {
	d, cerr := oldNumberOf(v, "numeric")
	if cerr != nil {
		return nil, cerr
	}
	if c.precision > 0 {
		// Postgres rounds to the scale (half away from zero) before it
		// checks the precision; do the same, and send the rounded value.
		d = d.round(c.scale)
		if n := d.intDigits(); n > int64(c.precision-c.scale) {
			return nil, convErrorf(KindOutOfRange, "%s, rounded to %d decimal places, has %d digits before the decimal point: %s allows %d; use a larger precision", oldDescribe(v), c.scale, n, c.sql(), c.precision-c.scale)
		}
	} else {
		if n := d.intDigits(); n > maxNumericIntDigits {
			return nil, convErrorf(KindOutOfRange, "%s has %d digits before the decimal point: numeric allows %d", oldDescribe(v), n, maxNumericIntDigits)
		}
		if -d.exp > maxNumericFracDigits {
			d = d.round(maxNumericFracDigits)
		}
	}
	return d.numeric(), nil
}

func oldConvertFloat(v any, bits int, typeName string) (float64, *convError) {
	if s, ok := v.(string); ok {
		switch s {
		case "NaN", "Infinity", "-Infinity":
			f, _ := strconv.ParseFloat(s, bits)
			return f, nil
		}
	}
	d, cerr := oldNumberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	lit := d.String()
	f, err := strconv.ParseFloat(lit, bits)
	if err != nil {
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s: use numeric", oldDescribe(v), typeName)
	}
	return f, nil
}

func oldConvertFloat32(_ *colType, v any) (any, *convError) {
	f, err := oldConvertFloat(v, 32, "real")
	if err != nil {
		return nil, err
	}
	return float32(f), nil
}

func oldConvertFloat64(_ *colType, v any) (any, *convError) {
	f, err := oldConvertFloat(v, 64, "double precision")
	if err != nil {
		return nil, err
	}
	return f, nil
}

func oldConvertBool(_ *colType, v any) (any, *convError) {
	b, ok := v.(bool)
	if !ok {
		return nil, oldMismatch(v, "a boolean column takes only true or false")
	}
	return b, nil
}

// normalizeDateTime accepts a space between date and time, as SQL writes it.
func oldNormalizeDateTime(s string) string {
	if len(s) > 10 && s[10] == ' ' {
		return s[:10] + "T" + s[11:]
	}
	return s
}

// epochMicros reads an epoch number in the column's unit as microseconds,
// rounded half away from zero like Postgres' own input.
func oldEpochMicros(c *colType, v any, typeName string) (int64, *convError) {
	if c.unitNanos == 0 {
		return 0, convErrorf(KindTypeMismatch, "%s is a number: a %s column reads epoch numbers only with time_unit set (s, ms, us or ns); or send an RFC 3339 string", oldDescribe(v), typeName)
	}
	d, cerr := oldNumberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	d = d.shift(microShift[c.unitNanos]).round(0)
	us, cerr := d.toInt(64)
	if cerr != nil {
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s", oldDescribe(v), typeName)
	}
	return us, nil
}

func oldCheckTimeRange(t time.Time, v any, typeName string) (time.Time, *convError) {
	if t.Before(minTimestamp) || t.After(maxTimestamp) {
		return time.Time{}, convErrorf(KindOutOfRange, "%s is outside the range of %s (4714-11-24 BC to 294276-12-31)", oldDescribe(v), typeName)
	}
	return t.Round(time.Microsecond), nil
}

// parseTimestamp reads a timestamp string or epoch number. withZone says
// the string must carry a UTC offset.
func oldParseTimestamp(c *colType, v any, withZone bool) (any, *convError) {
	typeName := c.base.Name
	switch x := v.(type) {
	case json.Number:
		us, cerr := oldEpochMicros(c, v, typeName)
		if cerr != nil {
			return nil, cerr
		}
		return oldCheckTimeRange(time.UnixMicro(us).UTC(), v, typeName)
	case string:
		s := oldNormalizeDateTime(x)
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return oldCheckTimeRange(t.UTC(), v, typeName)
		}
		if t, err := time.Parse(layoutLocal, s); err == nil {
			if withZone {
				return nil, convErrorf(KindInvalidTimestamp, "%s has no UTC offset: %s needs one, as in 2026-01-02T03:04:05Z or +02:00", oldDescribe(v), typeName)
			}
			return oldCheckTimeRange(t, v, typeName)
		}
		if c.unitNanos != 0 {
			if _, ok := oldParseDecimal(x); ok {
				return oldParseTimestamp(c, json.Number(x), withZone)
			}
		}
		return nil, convErrorf(KindInvalidTimestamp, "%s is not an RFC 3339 timestamp (as in 2026-01-02T03:04:05.123Z)", oldDescribe(v))
	}
	return nil, oldMismatch(v, "a "+typeName+" column takes an RFC 3339 string, or an epoch number with time_unit set")
}

// convertTimestamptz: an offset is required; the value is stored as an
// instant.
func oldConvertTimestamptz(c *colType, v any) (any, *convError) { return oldParseTimestamp(c, v, true) }

// convertTimestamp: a string without an offset is stored as written; one
// with an offset, and an epoch number, are converted to UTC first.
func oldConvertTimestamp(c *colType, v any) (any, *convError) { return oldParseTimestamp(c, v, false) }

func oldConvertDate(c *colType, v any) (any, *convError) {
	switch x := v.(type) {
	case json.Number:
		us, cerr := oldEpochMicros(c, v, "date")
		if cerr != nil {
			return nil, cerr
		}
		t, cerr := oldCheckTimeRange(time.UnixMicro(us).UTC(), v, "date")
		if cerr != nil {
			return nil, cerr
		}
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
	case string:
		t, err := time.Parse(layoutDate, x)
		if err != nil {
			return nil, convErrorf(KindInvalidTimestamp, "%s is not a date as YYYY-MM-DD", oldDescribe(v))
		}
		return t, nil
	}
	return nil, oldMismatch(v, "a date column takes a YYYY-MM-DD string, or an epoch number with time_unit set")
}

// convertTime reads a time of day: "15:04", "15:04:05" or "15:04:05.999999"
// (more fraction digits are rounded to microseconds, as Postgres does), or
// an epoch number with a unit as the time since midnight. 24:00:00 is
// allowed, as in Postgres.
func oldConvertTime(c *colType, v any) (any, *convError) {
	switch x := v.(type) {
	case json.Number:
		us, cerr := oldEpochMicros(c, v, "time")
		if cerr != nil {
			return nil, cerr
		}
		if us < 0 || us > microsPerDay {
			return nil, convErrorf(KindOutOfRange, "%s is not within one day since midnight", oldDescribe(v))
		}
		return pgvalue.Time{Microseconds: us}, nil
	case string:
		us, ok := oldParseTimeOfDay(x)
		if !ok {
			return nil, convErrorf(KindInvalidTimestamp, "%s is not a time of day as HH:MM:SS[.ffffff] (no offset)", oldDescribe(v))
		}
		return pgvalue.Time{Microseconds: us}, nil
	}
	return nil, oldMismatch(v, "a time column takes an HH:MM:SS string, or a number with time_unit set")
}

func oldParseTimeOfDay(s string) (int64, bool) {
	twoDigits := func(at int, max int64) (int64, bool) {
		if at+2 > len(s) || s[at] < '0' || s[at] > '9' || s[at+1] < '0' || s[at+1] > '9' {
			return 0, false
		}
		n := int64(s[at]-'0')*10 + int64(s[at+1]-'0')
		return n, n <= max
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
	var frac oldDecimal
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
			d, ok := oldParseDecimal("0" + s[8:])
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

// convertUUID accepts the canonical 8-4-4-4-12 form, 32 hex digits, either
// within braces, in any case.
func oldConvertUUID(_ *colType, v any) (any, *convError) {
	s, ok := v.(string)
	if !ok {
		return nil, oldMismatch(v, "a uuid column takes a string like 123e4567-e89b-12d3-a456-426614174000")
	}
	h := s
	if strings.HasPrefix(h, "{") && strings.HasSuffix(h, "}") {
		h = h[1 : len(h)-1]
	}
	if len(h) == 36 {
		if h[8] != '-' || h[13] != '-' || h[18] != '-' || h[23] != '-' {
			return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: the hyphens are misplaced", oldDescribe(v))
		}
		h = h[:8] + h[9:13] + h[14:18] + h[19:23] + h[24:]
	}
	var u pgvalue.UUID
	if len(h) != 32 {
		return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: want 32 hex digits, as in 123e4567-e89b-12d3-a456-426614174000", oldDescribe(v))
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: it has a character that is not a hex digit", oldDescribe(v))
	}
	return u, nil
}

// convertJSONB re-encodes the sub-document. Numbers keep their literal
// (json.Number); jsonb normalizes key order and spacing anyway.
func oldConvertJSONB(_ *colType, v any) (any, *convError) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, convErrorf(KindUnsupported, "cannot encode %s as JSON: %s", oldDescribe(v), err.Error())
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if kind, err := CheckJSON(b); err != nil {
		return nil, convErrorf(kind, "%s", err.Error())
	}
	return b, nil
}

// convertBytea decodes standard base64, with or without padding.
func oldConvertBytea(_ *colType, v any) (any, *convError) {
	s, ok := v.(string)
	if !ok {
		return nil, oldMismatch(v, "a bytea column takes a base64 string")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil && !strings.HasSuffix(s, "=") {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, convErrorf(KindInvalidBase64, "%s is not standard base64: %s", oldDescribe(v), err.Error())
	}
	return b, nil
}

// convertInet accepts an address ("10.0.0.1", "2001:db8::1") or an address
// with a prefix length ("10.0.0.1/24", host bits kept as inet does).
func oldConvertInet(_ *colType, v any) (any, *convError) {
	s, ok := v.(string)
	if !ok {
		return nil, oldMismatch(v, "an inet column takes a string like 192.0.2.1 or 2001:db8::/32")
	}
	if strings.Contains(s, "%") {
		return nil, convErrorf(KindInvalidInet, "%s has an IPv6 zone, which inet cannot store", oldDescribe(v))
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, convErrorf(KindInvalidInet, "%s is not an IP address with prefix length: %s", oldDescribe(v), err.Error())
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, convErrorf(KindInvalidInet, "%s is not an IP address: %s", oldDescribe(v), err.Error())
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// convertArray maps a JSON array of scalars to a slice of the element type,
// or of pointers to it when an element is null. Nested arrays are refused.
func oldConvertArray(c *colType, v any) (any, *convError) {
	elems, ok := v.([]any)
	if !ok {
		return nil, oldMismatch(v, "an array column ("+c.sql()+") takes a JSON array")
	}
	hasNull := false
	vals := make([]any, len(elems))
	for i, e := range elems {
		if e == nil {
			hasNull = true
			continue
		}
		if _, nested := e.([]any); nested {
			return nil, convErrorf(KindTypeMismatch, "element %d of %s is an array: only one-dimensional arrays are supported; map it to jsonb", i, oldDescribe(v))
		}
		x, cerr := oldConverters[c.base.Name](c, e)
		if cerr != nil {
			cerr.msg = "element " + strconv.Itoa(i) + ": " + cerr.msg
			return nil, cerr
		}
		vals[i] = x
	}
	et := c.base.GoType
	if hasNull {
		et = reflect.PointerTo(et)
	}
	out := reflect.MakeSlice(reflect.SliceOf(et), len(vals), len(vals))
	for i, x := range vals {
		if x == nil {
			continue
		}
		xv := reflect.ValueOf(x)
		if hasNull {
			p := reflect.New(c.base.GoType)
			p.Elem().Set(xv)
			xv = p
		}
		out.Index(i).Set(xv)
	}
	return out.Interface(), nil
}

// Exact decimal arithmetic for JSON numbers: enough to check integer
// ranges, round to a numeric scale and shift epoch units without ever
// going through float64.

// decimal is an exact decimal number: (-1)^neg × digits × 10^exp, with
// digits free of leading and trailing zeros ("" for zero).
type oldDecimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds exponents so that arithmetic on them cannot overflow; any
// number beyond it is far out of every column's range.
const oldMaxExp = 1 << 40

// parseDecimal reads a JSON number literal exactly.
func oldParseDecimal(s string) (oldDecimal, bool) {
	var d oldDecimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return d, false
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return d, false
		}
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if exp < oldMaxExp {
				exp = exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return d, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return d, false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	d.digits, d.exp = digits, exp
	return d.normalize(), true
}

func (d oldDecimal) normalize() oldDecimal {
	t := strings.TrimRight(d.digits, "0")
	d.exp += int64(len(d.digits) - len(t))
	d.digits = t
	if d.digits == "" {
		return oldDecimal{}
	}
	return d
}

// intDigits is the number of digits before the decimal point.
func (d oldDecimal) intDigits() int64 {
	if d.digits == "" {
		return 0
	}
	return max(0, int64(len(d.digits))+d.exp)
}

// shift multiplies by 10^n.
func (d oldDecimal) shift(n int64) oldDecimal {
	if d.digits != "" {
		d.exp += n
	}
	return d
}

// round rounds to scale digits after the decimal point, half away from
// zero.
func (d oldDecimal) round(scale int) oldDecimal {
	drop := -d.exp - int64(scale)
	if d.digits == "" || drop <= 0 {
		return d
	}
	keep := int64(len(d.digits)) - drop
	if keep < 0 {
		return oldDecimal{}
	}
	up := d.digits[keep] >= '5'
	kept := []byte(d.digits[:keep])
	if up {
		i := len(kept) - 1
		for ; i >= 0 && kept[i] == '9'; i-- {
			kept[i] = '0'
		}
		if i < 0 {
			kept = append([]byte{'1'}, kept...)
		} else {
			kept[i]++
		}
	}
	return oldDecimal{neg: d.neg, digits: string(kept), exp: -int64(scale)}.normalize()
}

// toInt returns the integer value if it fits bits; callers write the
// messages, from the kind.
func (d oldDecimal) toInt(bits int) (int64, *convError) {
	if d.digits == "" {
		return 0, nil
	}
	if d.exp < 0 {
		return 0, convErrorf(KindTypeMismatch, "is not a whole number")
	}
	if int64(len(d.digits))+d.exp > 20 {
		return 0, convErrorf(KindOutOfRange, "is out of the range")
	}
	s := d.digits + strings.Repeat("0", int(d.exp))
	if d.neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return 0, convErrorf(KindOutOfRange, "is out of the range")
	}
	return n, nil
}

// String is the literal, in a form strconv.ParseFloat reads.
func (d oldDecimal) String() string {
	if d.digits == "" {
		return "0"
	}
	s := d.digits + "e" + strconv.FormatInt(d.exp, 10)
	if d.neg {
		s = "-" + s
	}
	return s
}

// numeric is the pgvalue value; the exponent fits int32 because callers
// bound it first.
func (d oldDecimal) numeric() pgvalue.Numeric {
	n := new(big.Int)
	if d.digits != "" {
		n.SetString(d.digits, 10)
		if d.neg {
			n.Neg(n)
		}
	}
	return pgvalue.Numeric{Int: n, Exp: int32(d.exp)}
}
