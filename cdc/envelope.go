package cdc

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Decoder decodes the Debezium change events of one source table (one
// topic, or the topics a route sends to one table) into Changes of one
// target table. Its table is the fold of the row schemas the events carry;
// when an event brings a field the table lacks, Decode returns an error
// wrapping decode.ErrTableChanged and Table describes the grown table, as
// the registry mappers do (ingest's TableMapper). Safe for concurrent use.
type Decoder struct {
	t    *table
	wire *wireSchemas // format avro or protobuf; nil for json
}

// NewDecoder checks cfg. Every error names the setting, the value and the
// fix.
func NewDecoder(cfg Config) (*Decoder, error) {
	w, err := newWireSchemas(cfg)
	if err != nil {
		return nil, err
	}
	t, err := newTable(cfg)
	if err != nil {
		return nil, err
	}
	return &Decoder{t: t, wire: w}, nil
}

// Table is the target table now (see Config for the column order). Before
// the first event with a row it has only the configured and metadata
// columns.
func (d *Decoder) Table() schema.Table { return d.t.Table() }

// HasColumns reports whether cols are Table's columns, in order; unlike
// comparing with Table, it allocates nothing, so a caller may ask after
// every Decode.
func (d *Decoder) HasColumns(cols []schema.Column) bool { return d.t.hasColumns(cols) }

// KeyColumns lists the primary key columns; nil while no event has told
// them, empty for a source table without a key.
func (d *Decoder) KeyColumns() []string { return d.t.KeyColumns() }

// envelope is what Decode reads of a record besides its change.
type envelope struct {
	op          byte   // the op letter (c, r, u, d, t, m); 0 when it is not one letter
	badOp       string // an op that is not one letter, for the message
	haveOp      bool
	hasAfter    bool
	hasBefore   bool
	afterField  string
	afterErr    *convError
	beforeField string
	beforeErr   *convError
	source      sourceBlock
	transaction transactionBlock
	tsMs        int64 // when the connector processed the event; 0 when absent
}

// sourceBlock is what the envelope says about where the change came
// from: the source metadata columns' values (sourceValue). A field the
// connector does not send is zero.
type sourceBlock struct {
	Connector string // postgresql, mysql, ...
	Name      string // the connector's topic.prefix
	DB        string
	Schema    string // Postgres, SQL Server
	Table     string
	TsMs      int64 // when the change was made in the source database
	// Snapshot is "true", "last", "first", "incremental", ... during a
	// snapshot, "false" or "" after.
	Snapshot string
	TxID     int64  // Postgres txId
	LSN      int64  // Postgres log sequence number
	File     string // MySQL binlog file
	Pos      int64  // MySQL binlog position
	Row      int64  // MySQL row within the binlog event
	GTID     string // MySQL GTID
	// Sequence is Postgres' ["<last commit LSN>","<LSN>"], as its JSON
	// text.
	Sequence string
}

// transactionBlock is the envelope's transaction block (provide.transaction
// .metadata); ID is "" without one.
type transactionBlock struct {
	ID                  string
	TotalOrder          int64
	DataCollectionOrder int64
}

// Decode decodes rec into ch, reusing its slices (see stream.Change). A
// record that is not a change event the table can take is a
// *decode.DecodeError (errors.Is decode.ErrBadRecord) with its kind; a
// record that changes the table is an error wrapping
// decode.ErrTableChanged, and decoding it again after the table changed
// succeeds.
func (d *Decoder) Decode(rec *stream.Record, ch *stream.Change) error {
	return d.DecodePayload(rec, nil, ch)
}

// DecodePayload is Decode for an event whose value was taken apart from
// its schema: rec.Value holds the text of the envelope's payload member
// and schema the text of its schema member, both as the event carried
// them (a staged event, ingest's transactions). It decodes what Decode
// decodes of {"schema":<schema>,"payload":<rec.Value>}, without putting
// the two together again. A nil schema (a value staged whole) is Decode's,
// as is every record of a registry's wire format, which is never split.
func (d *Decoder) DecodePayload(rec *stream.Record, schema []byte, ch *stream.Change) error {
	var env envelope
	if err := d.decodeEnvelope(rec, schema, ch, &env); err != nil {
		return err
	}
	ch.Tx = env.transactionOf()
	return nil
}

// decodeEnvelope is DecodePayload, leaving in env what the envelope says
// besides the change (its op letter, source and transaction blocks,
// ts_ms).
func (d *Decoder) decodeEnvelope(rec *stream.Record, schema []byte, ch *stream.Change, env *envelope) error {
	*ch = stream.Change{Row: ch.Row[:0], Key: ch.Key[:0], Unavailable: ch.Unavailable[:0]}
	if rec.Value == nil {
		return nil // a tombstone: the delete before it did the work
	}
	if d.wire != nil {
		return d.decodeWire(rec, ch, env)
	}
	var v *version // the version of schema: the records of a table repeat one
	if schema != nil {
		if v, _ = d.t.lastVersionAt(schema, 0); v == nil || len(v.text) != len(schema) {
			var err error
			if v, err = d.versionOf(rec, schema); err != nil {
				return err
			}
		}
	}
	rs := d.t.getState()
	defer d.t.putState(rs)
	return d.decode(rec, ch, env, rs, v)
}

// decode decodes a record whose value is JSON. preset is the version of
// its row schema when the record does not carry it (a registry format's,
// whose value is the JSON of its payload alone).
func (d *Decoder) decode(rec *stream.Record, ch *stream.Change, env *envelope, rs *rowState, preset *version) error {
	t := d.t
	r := &rs.r
	r.reset(rec.Value)
	var (
		v          = preset
		schemaText []byte
		haveSchema bool // a schema member that is not null
		payloadAt  = -1
		done       bool // the payload was read
		topLevel   bool // the envelope is the document itself
	)
	if !r.object() {
		return badRead(rec, r)
	}
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		switch string(key) {
		case "schema":
			schemaText, v, haveSchema = nil, nil, false
			if r.null() {
				continue
			}
			haveSchema = true
			if v, r.i = t.lastVersionAt(r.b, r.i); v == nil {
				schemaText = r.skip()
			}
		case "payload":
			if !haveSchema && first {
				payloadAt = r.i
				r.skip()
				continue
			}
			if v == nil {
				var err error
				if v, err = d.versionOf(rec, schemaText); err != nil {
					return err
				}
			}
			if !r.object() {
				return badRead(rec, r)
			}
			if err := d.readEnvelope(r, rs, v, env); err != nil {
				return bad(rec, "", err.kind, "the payload: %s", err.msg)
			}
			done = true
		default:
			topLevel = true
			if v == nil && (string(key) == "after" || string(key) == "before") && r.peek() != 'n' {
				var err error
				if v, err = d.versionOf(rec, nil); err != nil {
					return err
				}
			}
			if err := d.envelopeMember(string(key), r, rs, v, env); err != nil {
				return bad(rec, "", err.kind, "%s", err.msg)
			}
		}
	}
	r.end()
	if r.err != nil {
		return badRead(rec, r)
	}
	if payloadAt >= 0 && !done && !topLevel {
		// The payload came before the schema: read it again, now that the
		// schema is known.
		if v == nil {
			var err error
			if v, err = d.versionOf(rec, schemaText); err != nil {
				return err
			}
		}
		r.i, r.depth = payloadAt, 0
		if !r.object() {
			return badRead(rec, r)
		}
		if err := d.readEnvelope(r, rs, v, env); err != nil {
			return bad(rec, "", err.kind, "the payload: %s", err.msg)
		}
	}
	if !env.haveOp {
		return bad(rec, "", KindNotAnEnvelope, "the value has no op, so it is not a Debezium change event: a record flattened by ExtractNewRecordState is format connect_json")
	}
	if env.op == 0 {
		return bad(rec, "", KindUnknownOp, "op %q is not c, r, u, d, t or m", env.badOp)
	}
	switch env.op {
	case 'm':
		// A logical decoding message (pg_logical_emit_message) carries no
		// row of this table.
		return nil
	case 't':
		ch.Op = stream.OpTruncate
		return nil
	case 'c', 'r', 'u', 'd':
	default:
		return bad(rec, "", KindUnknownOp, "op %q is not c, r, u, d, t or m", string(env.op))
	}
	if env.afterErr != nil {
		return bad(rec, env.afterField, env.afterErr.kind, "after: %s", env.afterErr.msg)
	}
	if env.beforeErr != nil {
		return bad(rec, env.beforeField, env.beforeErr.kind, "before: %s", env.beforeErr.msg)
	}
	l, err := d.fold(rec, rs, v)
	if err != nil {
		return err
	}
	if err := d.changeVersion(rec, env, ch); err != nil {
		return err
	}
	if env.op == 'd' {
		return d.delete(rec, rs, v, l, env, ch)
	}
	return d.upsert(rec, rs, v, l, env, ch)
}

// versionOf compiles (or finds) the row schema of an envelope's schema
// text; without one, the configured columns.
func (d *Decoder) versionOf(rec *stream.Record, text []byte) (*version, error) {
	if text == nil {
		if d.t.fixed == nil {
			return nil, bad(rec, "", KindInvalidSchema, "the event has no Connect schema (schemas.enable=false) and the mapping configures no columns: configure the columns, or enable schemas on the converter")
		}
		return d.t.fixed, nil
	}
	v, err := d.t.version(text, envelopeRow)
	if err != nil {
		return nil, bad(rec, "", KindInvalidSchema, "%s", err.Error())
	}
	return v, nil
}

// envelopeRow picks the row struct (after, else before) of an envelope
// schema.
func envelopeRow(s *connectSchema) (*connectSchema, error) {
	if s.Type != typeStruct {
		return nil, fmt.Errorf("the envelope schema is %s, not a struct", s.describe())
	}
	for _, name := range []string{"after", "before"} {
		if f := s.field(name); f != nil {
			if f.Type != typeStruct {
				return nil, fmt.Errorf("the envelope's %s is %s, not a struct", name, f.describe())
			}
			return f, nil
		}
	}
	if s.field("op") != nil {
		// A truncate or message envelope of a connector that leaves the
		// row out: an empty row changes nothing.
		return &connectSchema{Type: typeStruct}, nil
	}
	return nil, errors.New("the schema has neither after nor before nor op: it is not a Debezium envelope")
}

// readEnvelope reads the members of the envelope object r is in.
func (d *Decoder) readEnvelope(r *reader, rs *rowState, v *version, env *envelope) *convError {
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		if err := d.envelopeMember(string(key), r, rs, v, env); err != nil {
			return err
		}
	}
	if r.err != nil {
		return &convError{kind: r.err.kind, msg: "the value " + r.err.msg}
	}
	return nil
}

// envelopeMember reads one member of an envelope.
func (d *Decoder) envelopeMember(key string, r *reader, rs *rowState, v *version, env *envelope) *convError {
	switch key {
	case "op":
		if r.null() {
			return nil
		}
		if r.peek() != '"' {
			return convErrorf(KindUnknownOp, "op is %s, not a string", what(r))
		}
		op := r.str()
		env.op, env.badOp, env.haveOp = 0, "", true
		if len(op) == 1 && op[0] != 0 {
			env.op = op[0]
		} else {
			env.badOp = string(op)
		}
	case "after", "before":
		if r.null() {
			return nil
		}
		n := len(v.row.fields)
		if key == "after" {
			rs.vals, rs.unavail = grow(rs.vals, n), growBool(rs.unavail, n)
			env.hasAfter = true
			env.afterField, env.afterErr = d.t.readRow(r, v, rs.vals, rs.unavail, nil)
		} else {
			rs.before = grow(rs.before, n)
			env.hasBefore = true
			env.beforeField, env.beforeErr = d.t.readRow(r, v, rs.before, nil, v.keyFields(d.t.cur.Load()))
		}
	case "source":
		readSource(r, &env.source, &rs.source)
	case "transaction":
		readTransaction(r, &env.transaction, &rs.transaction)
	case "ts_ms":
		env.tsMs = lenientInt(r)
	default:
		r.skip()
	}
	return nil
}

func grow(s []any, n int) []any {
	if cap(s) < n {
		return make([]any, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func growBool(s []bool, n int) []bool {
	if cap(s) < n {
		return make([]bool, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// fold merges the event's row schema into the table the first time the
// table sees it; the first event also settles the key from the record key.
func (d *Decoder) fold(rec *stream.Record, rs *rowState, v *version) (*layout, error) {
	if !v.folded.Load() {
		var key []string
		if d.t.cur.Load().key == nil {
			k, err := d.t.keyNames(rec, &rs.kr)
			if err != nil {
				return nil, err
			}
			key = k
		}
		changed, err := d.t.fold(v, key)
		if err != nil {
			return nil, err
		}
		if v.bad == "" {
			v.folded.Store(true)
		}
		if changed {
			return nil, fmt.Errorf("%s/%d@%d: the event's schema changes the table %s: %w", rec.Topic, rec.Partition, rec.Offset, d.t.cfg.Table, decode.ErrTableChanged)
		}
	}
	if v.bad != "" {
		return nil, bad(rec, "", decode.KindSchemaIncompatible, "%s", v.bad)
	}
	return d.t.cur.Load(), nil
}

// upsert finishes a c, r or u event.
func (d *Decoder) upsert(rec *stream.Record, rs *rowState, v *version, l *layout, env *envelope, ch *stream.Change) error {
	if !env.hasAfter {
		return bad(rec, "", decode.KindInvalidValue, "the %c event has no after", env.op)
	}
	var kafka []any
	if d.t.kafka != nil {
		var err error
		if kafka, err = d.t.kafka.Row(rec, nil); err != nil {
			return err
		}
	}
	ch.Op = stream.OpUpsert
	ch.Row = d.t.assemble(ch.Row, l, v, rs.vals, rs.unavail, rec, env, kafka, ch)
	if err := checkNotNull(rec, l, ch.Row, ch); err != nil {
		return err
	}
	if len(l.key) == 0 {
		if env.op == 'u' {
			return bad(rec, "", KindNoKey, "an update of a table without key columns cannot be applied: give the source table a primary key (or REPLICA IDENTITY and message.key.columns), or name key columns in the mapping")
		}
		ch.Key = nil
		return nil
	}
	for _, i := range l.keyIdx {
		ch.Key = append(ch.Key, ch.Row[i])
	}
	if env.op != 'u' || !env.hasBefore {
		return nil
	}
	idx := v.index(l)
	old := rs.oldKey[:0]
	for _, i := range l.keyIdx {
		j := idx[i]
		if j < 0 || rs.before[j] == nil {
			return nil // the before image lacks the key: no change to see
		}
		old = append(old, rs.before[j])
	}
	rs.oldKey = old
	if !sameKey(old, ch.Key) {
		// Its own slice: rs goes back to the pool before ch is applied.
		// Keys rarely change, so this allocates rarely.
		ch.OldKey = slices.Clone(old)
	}
	return nil
}

// delete finishes a d event: the key from the record key, else from
// before.
func (d *Decoder) delete(rec *stream.Record, rs *rowState, v *version, l *layout, env *envelope, ch *stream.Change) error {
	if len(l.key) == 0 {
		return bad(rec, "", KindNoKey, "a delete from a table without key columns cannot be applied: give the source table a primary key, or name key columns in the mapping")
	}
	ch.Op = stream.OpDelete
	if rec.Key != nil {
		key, err := d.t.recordKey(rec, &rs.kr, v, l, ch.Key)
		if err != nil {
			return err
		}
		ch.Key = key
		return nil
	}
	if !env.hasBefore {
		return bad(rec, "", KindNoKey, "the delete has neither a record key nor a before image: set REPLICA IDENTITY FULL (or DEFAULT with a primary key) on the source table")
	}
	idx := v.index(l)
	for _, i := range l.keyIdx {
		j := idx[i]
		if j < 0 || rs.before[j] == nil {
			return bad(rec, l.cols[i].Name, KindNoKey, "the delete's before image has no value for key column %q", l.cols[i].Name)
		}
		ch.Key = append(ch.Key, rs.before[j])
	}
	return nil
}

// readSource reads the envelope's source block, leniently: a field of an
// unexpected kind is left zero rather than refusing the change. Its
// strings are those of last (the block of the previous record) when they
// are equal, as they mostly are, so that reading it allocates nothing;
// last becomes this one.
func readSource(r *reader, s, last *sourceBlock) {
	if !lenientObject(r) {
		return
	}
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			*last = *s
			return
		}
		switch string(key) {
		case "connector":
			s.Connector = lenientString(r, last.Connector)
		case "name":
			s.Name = lenientString(r, last.Name)
		case "db":
			s.DB = lenientString(r, last.DB)
		case "schema":
			s.Schema = lenientString(r, last.Schema)
		case "table":
			s.Table = lenientString(r, last.Table)
		case "ts_ms":
			s.TsMs = lenientInt(r)
		case "snapshot":
			switch r.peek() {
			case 't':
				r.boolean()
				s.Snapshot = "true"
			case 'f':
				r.boolean()
				s.Snapshot = "false"
			default:
				s.Snapshot = lenientString(r, last.Snapshot)
			}
		case "txId":
			s.TxID = lenientInt(r)
		case "lsn":
			s.LSN = lenientInt(r)
		case "file":
			s.File = lenientString(r, last.File)
		case "pos":
			s.Pos = lenientInt(r)
		case "row":
			s.Row = lenientInt(r)
		case "gtid":
			s.GTID = lenientString(r, last.GTID)
		case "sequence":
			s.Sequence = lenientString(r, "")
		default:
			r.skip()
		}
	}
}

func readTransaction(r *reader, t *transactionBlock, last *transactionBlock) {
	if !lenientObject(r) {
		return
	}
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			*last = *t
			return
		}
		switch string(key) {
		case "id":
			t.ID = lenientString(r, last.ID)
		case "total_order":
			t.TotalOrder = lenientInt(r)
		case "data_collection_order":
			t.DataCollectionOrder = lenientInt(r)
		default:
			r.skip()
		}
	}
}

// lenientObject starts reading an object, as reader.object does, and
// reports whether it did: a null, or a value of another kind, is read
// and left.
func lenientObject(r *reader) bool {
	if r.null() {
		return false
	}
	if r.peek() != '{' {
		r.skip()
		return false
	}
	return r.object()
}

// lenientString reads a string, or the text of a number; "" otherwise.
// It returns same when the text is same's.
func lenientString(r *reader, same string) string {
	var text []byte
	switch c := r.peek(); {
	case c == '"':
		text = r.str()
	case c == '-' || (c >= '0' && c <= '9'):
		text = r.number()
	default:
		r.skip()
		return ""
	}
	if string(text) == same {
		return same
	}
	return string(text)
}

// lenientInt reads an integer, or a string holding one (documentation
// examples quote them); 0 otherwise.
func lenientInt(r *reader) int64 {
	var text []byte
	switch c := r.peek(); {
	case c == '"':
		text = r.str()
	case c == '-' || (c >= '0' && c <= '9'):
		text = r.number()
	default:
		r.skip()
		return 0
	}
	n, _ := parseInt(text, 64)
	return n
}

// sourceValue is a source metadata column's value, of env's blocks.
func sourceValue(f sourceField, env *envelope) any {
	s := &env.source
	switch f {
	case srcTable:
		switch {
		case s.Table == "":
			return nil
		case s.Schema != "":
			return s.Schema + "." + s.Table
		case s.DB != "":
			return s.DB + "." + s.Table
		}
		return s.Table
	case srcPosition:
		switch {
		case s.LSN != 0:
			return fmt.Sprintf("%X/%X", uint64(s.LSN)>>32, uint32(s.LSN))
		case s.File != "":
			return fmt.Sprintf("%s:%d", s.File, s.Pos)
		}
	case srcTxID:
		switch {
		case s.TxID != 0:
			return strconv.FormatInt(s.TxID, 10)
		case s.GTID != "":
			return s.GTID
		case env.transaction.ID != "":
			return env.transaction.ID
		}
	case srcTimestamp:
		if s.TsMs != 0 {
			return time.UnixMilli(s.TsMs).UTC()
		}
	case srcOp:
		if env.op != 0 {
			return string(env.op)
		}
	case srcDeletedFlag:
		return false
	}
	return nil
}

func badRead(rec *stream.Record, r *reader) error {
	if r.err == nil {
		return bad(rec, "", decode.KindInvalidJSON, "the value is not a JSON object")
	}
	return bad(rec, "", r.err.kind, "the value %s", r.err.msg)
}
