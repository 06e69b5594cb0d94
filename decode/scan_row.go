package decode

import (
	"bytes"
	"unsafe"

	"github.com/kafka2pg/kafka2pg/stream"
)

// The per-row state of JSONMapper.Row: one scan of each document, and the
// row's buffer for the bytes of its values.

// rowState is the scratch space of one Row or KeyRow call. JSONMapper pools
// them: nothing in it outlives the call but buf.arena, which is dropped
// (never reused) when the state goes back to the pool.
type rowState struct {
	value, key docState
	buf        rowBuffer
	// scratch is the arena AppendRow lends buf for one row at a time: the
	// row's bytes are copied out before the next, so it is reused.
	scratch []byte
	// v is the value AppendRow hands a column's appendFunc.
	v jsonValue
}

// docState is the scan of the value or the key, done on first use.
type docState struct {
	sc        scanner
	tried, ok bool
}

// rowBuffer holds the text of one row's string and number values and its
// jsonb bytes, in one allocation instead of one per value.
type rowBuffer struct {
	// arena is append-only: every string handed out points into it, and
	// bytes once written are never written again, so the strings stay
	// immutable. It belongs to the row: a new row gets a new arena, since
	// the rows of a batch live together (ingest's materialize).
	arena []byte
	// need is what the row's values take at most: the length of the
	// values the columns read, as scanned (unescaping only shortens;
	// jsonb may add a little, and the arena then grows).
	need int
	jw   jsonbWriter
}

func (m *JSONMapper) getState() *rowState {
	if rs := m.hot.Swap(nil); rs != nil {
		return rs
	}
	rs, _ := m.states.Get().(*rowState)
	if rs == nil {
		rs = &rowState{}
	}
	return rs
}

// putState takes back a state. The last one put waits in m.hot rather
// than the pool: a COPY calls AppendRow row after row, and the next row
// takes it back with one atomic swap.
func (m *JSONMapper) putState(rs *rowState) {
	rs.endRow()
	if !m.hot.CompareAndSwap(nil, rs) {
		m.states.Put(rs)
	}
}

// endRow drops what the state holds of a row: its documents, its arena
// (the rows of a batch keep theirs; AppendRow's scratch is kept apart)
// and the last value.
func (rs *rowState) endRow() {
	rs.value.reset()
	rs.key.reset()
	rs.buf.arena, rs.buf.need = nil, 0
	rs.v = jsonValue{}
}

// reset drops the document and keeps the scanner's scratch slices.
func (d *docState) reset() {
	d.sc.data, d.sc.tree = nil, nil
	d.tried, d.ok = false, false
}

// docOf is the value's or the key's docState.
func (rs *rowState) docOf(s source) *docState {
	if s == fromKey {
		return &rs.key
	}
	return &rs.value
}

// doc scans the value or the key on first use. present is false for a
// tombstone's value or a record without key.
func (rs *rowState) doc(m *JSONMapper, s source, r *stream.Record) (d *docState, present bool, err error) {
	d, data, tree, leaves, what := &rs.value, r.Value, m.valueTree, m.valueLeaves, "the value "
	if s == fromKey {
		d, data, tree, leaves, what = &rs.key, r.Key, m.keyTree, m.keyLeaves, "the key "
	}
	if data == nil {
		return nil, false, nil
	}
	if !d.tried {
		d.tried = true
		if !d.sc.scan(data, tree) {
			err := refusal(data)
			return nil, false, badRecord(r, "", decodeKind(err), what+err.Error())
		}
		d.ok = true
		for _, id := range leaves {
			if h := d.sc.hits[id]; h.kind >= kindNumber {
				rs.buf.need += int(h.end - h.start)
			}
		}
	}
	return d, d.ok, nil
}

// refusal says why the scanner refused doc, in decodeJSON's words.
func refusal(doc []byte) error {
	if _, err := decodeJSON(doc); err != nil {
		return err
	}
	// Not reached while FuzzScanMatchesDecode holds.
	return &decodeError{KindInvalidJSON, "is not JSON"}
}

// rootValue is the value of a document decodeJSON accepts.
func rootValue(doc []byte) jsonValue {
	var sc scanner
	if !sc.scan(doc, rootTree) {
		return jsonValue{}
	}
	return (*rowBuffer)(nil).valueOf(doc, sc.hits[0])
}

// valueOf is the value hit h of doc; its text is in the row's arena (b may be
// nil: then it has its own allocation).
func (b *rowBuffer) valueOf(doc []byte, h hit) jsonValue {
	switch h.kind {
	case kindString:
		return jsonValue{kind: kindString, text: b.text(doc[h.start+1:h.end-1], h.esc), buf: b}
	case kindNumber:
		return jsonValue{kind: kindNumber, text: b.text(doc[h.start:h.end], false), buf: b}
	case kindObject, kindArray:
		return jsonValue{kind: h.kind, raw: doc[h.start:h.end], buf: b}
	}
	return jsonValue{kind: h.kind, buf: b}
}

// valueIn is valueOf for AppendRow, whose values are written out before it
// returns: a string without escapes and a number are the document's own
// bytes instead of copies in the arena. It fills *v in place.
func (b *rowBuffer) valueIn(v *jsonValue, doc []byte, h hit) {
	switch {
	case h.kind == kindString && !h.esc:
		*v = jsonValue{kind: kindString, text: h.body(doc), buf: b, noNUL: true}
	case h.kind == kindNumber:
		*v = jsonValue{kind: kindNumber, text: h.literal(doc), buf: b, noNUL: true}
	default:
		*v = b.valueOf(doc, h)
	}
}

// body and literal are the text of hit h of doc, a string's body as sent
// (escapes and all) or a number's literal, as strings sharing doc's bytes:
// for what is written out before the document is let go (AppendRow),
// never kept.
func (h hit) body(doc []byte) string    { return docString(doc[h.start+1 : h.end-1]) }
func (h hit) literal(doc []byte) string { return docString(doc[h.start:h.end]) }

func docString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// element is the value of one array element, raw without spaces around it.
func (b *rowBuffer) element(raw []byte) jsonValue {
	switch raw[0] {
	case '"':
		body := raw[1 : len(raw)-1]
		return jsonValue{kind: kindString, text: b.text(body, bytes.IndexByte(body, '\\') >= 0), buf: b}
	case '{':
		return jsonValue{kind: kindObject, raw: raw, buf: b}
	case '[':
		return jsonValue{kind: kindArray, raw: raw, buf: b}
	case 't':
		return jsonValue{kind: kindTrue, buf: b}
	case 'f':
		return jsonValue{kind: kindFalse, buf: b}
	case 'n':
		return jsonValue{kind: kindNull, buf: b}
	}
	return jsonValue{kind: kindNumber, text: b.text(raw, false), buf: b}
}

// text is the string raw stands for (unescaped when esc), kept in the arena.
func (b *rowBuffer) text(raw []byte, esc bool) string {
	if b == nil {
		if esc {
			return string(appendUnquoted(nil, raw))
		}
		return string(raw)
	}
	if len(raw) == 0 {
		return ""
	}
	b.reserve()
	start := len(b.arena)
	if esc {
		b.arena = appendUnquoted(b.arena, raw)
	} else {
		b.arena = append(b.arena, raw...)
	}
	// The bytes are never written again (see arena), so the string may
	// share them.
	return unsafe.String(&b.arena[start], len(b.arena)-start)
}

func (b *rowBuffer) reserve() {
	if b.arena == nil {
		b.arena = make([]byte, 0, b.need)
	}
}

// appendJSON writes v as a jsonb value (see scan_jsonb.go) and returns the
// bytes, capped so that appending to them cannot reach the arena or the
// document. An object or array without a backslash is returned as sent:
// the scan validated it, only escapes can hold what jsonb refuses (\u0000,
// lone surrogates), and Postgres stores the same jsonb for every spelling
// of the same JSON, so canonical bytes would cost a rewrite of every
// document for nothing.
func (b *rowBuffer) appendJSON(v jsonValue) []byte {
	b.jw.nul = false
	if (v.kind == kindObject || v.kind == kindArray) && bytes.IndexByte(v.raw, '\\') < 0 {
		return v.raw[:len(v.raw):len(v.raw)]
	}
	b.reserve()
	start := len(b.arena)
	switch v.kind {
	case kindObject, kindArray:
		b.arena = b.jw.appendCanonical(b.arena, v.raw)
	case kindString:
		b.arena = appendEncodedString(&b.jw, b.arena, v.text)
	case kindNumber:
		b.arena = append(b.arena, v.text...)
	case kindTrue:
		b.arena = append(b.arena, "true"...)
	case kindFalse:
		b.arena = append(b.arena, "false"...)
	}
	return b.arena[start:len(b.arena):len(b.arena)]
}
