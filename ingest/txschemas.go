package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Connect's JsonConverter with schemas.enable writes each key and value
// as {"schema":S,"payload":P}, S the same bytes in every event of a table
// and about two thirds of a Debezium event. The staging keeps P, and S
// once in kafka2pg.cdc_staged_schemas under its SHA-256 (cdc_staged's
// key_schema and value_schema name it); the Applier joins a key again,
// byte for byte, before it decodes, and hands a value's two parts to a
// decoder that takes them apart (payloadDecoder), or joins it too. A key
// or value of another shape is staged whole, with no digest.

const (
	envelopeHead = `{"schema":`
	envelopeMid  = `,"payload":`
	envelopeTail = `}`
)

// splitEnvelope cuts b, {"schema":S,"payload":P}, into S and P; ok is
// false when b is not of that shape, byte for byte (a space between the
// members, another order, a null schema): it is then staged whole.
// joinEnvelope(S, P) is b again, whatever P holds.
func splitEnvelope(b []byte) (schema, payload []byte, ok bool) {
	if !bytes.HasPrefix(b, []byte(envelopeHead)) || len(b) < len(envelopeHead)+len(envelopeMid)+2 || b[len(b)-1] != '}' {
		return nil, nil, false
	}
	i := len(envelopeHead)
	if b[i] != '{' {
		return nil, nil, false // null, or a schema of another shape
	}
	end, _, ok := decode.SkipJSONValue(b, i, 0)
	if !ok || !bytes.HasPrefix(b[end:], []byte(envelopeMid)) {
		return nil, nil, false
	}
	return b[i:end], b[end+len(envelopeMid) : len(b)-1], true
}

// joinEnvelope appends {"schema":schema,"payload":payload} to dst.
func joinEnvelope(dst, schema, payload []byte) []byte {
	dst = slices.Grow(dst, len(envelopeHead)+len(schema)+len(envelopeMid)+len(payload)+len(envelopeTail))
	dst = append(dst, envelopeHead...)
	dst = append(dst, schema...)
	dst = append(dst, envelopeMid...)
	dst = append(dst, payload...)
	return append(dst, envelopeTail...)
}

// schemaSplitter splits the keys and values of one staging, hashing each
// distinct schema once: the events of a batch share one or two.
type schemaSplitter struct {
	seen []stagedSchema
}

type stagedSchema struct {
	text   []byte
	digest []byte
}

// split returns what to stage of b and the digest of its schema (nil
// when b is staged whole). A schema split before is matched by its bytes;
// a new one is scanned, and hashed once.
func (s *schemaSplitter) split(b []byte) (stored, digest []byte) {
	if !bytes.HasPrefix(b, []byte(envelopeHead)) || b[len(b)-1] != '}' {
		return b, nil
	}
	rest := b[len(envelopeHead) : len(b)-1]
	for _, k := range s.seen {
		if bytes.HasPrefix(rest, k.text) && bytes.HasPrefix(rest[len(k.text):], []byte(envelopeMid)) {
			return rest[len(k.text)+len(envelopeMid):], k.digest
		}
	}
	schema, payload, ok := splitEnvelope(b)
	if !ok || len(s.seen) == maxSplitSchemas {
		return b, nil
	}
	sum := sha256.Sum256(schema)
	s.seen = append(s.seen, stagedSchema{text: schema, digest: sum[:]})
	return payload, sum[:]
}

// maxSplitSchemas bounds the schemas of one staging: the events past it
// with yet another schema are staged whole.
const maxSplitSchemas = 64

// stageSchemasSQL stages the schemas of a staging, in the order of their
// digests (two stagings that wait on each other's new schemas wait in
// one order); one staged already is left.
const stageSchemasSQL = `INSERT INTO kafka2pg.cdc_staged_schemas (digest, schema)
SELECT d, s FROM unnest($1::bytea[], $2::bytea[]) AS t(d, s) ORDER BY d
ON CONFLICT DO NOTHING`

// queue queues the staging of the schemas split so far into q.
func (s *schemaSplitter) queue(q *pgx.Batch) {
	if len(s.seen) == 0 {
		return
	}
	digests, texts := make([][]byte, len(s.seen)), make([][]byte, len(s.seen))
	for i, k := range s.seen {
		digests[i], texts[i] = k.digest, k.text
	}
	q.Queue(stageSchemasSQL, digests, texts)
}

// schemaCache holds the schemas an Applier read from
// kafka2pg.cdc_staged_schemas, by digest. A source sends few; the cache
// starts again past maxCachedSchemas.
type schemaCache map[string][]byte

var maxCachedSchemas = 4096 // a var for the test of a full cache

// joinRecords puts each of recs back together as it came, its key and
// value joined with the schemas of digests (two for each record, the
// key's and the value's; nil for one staged whole), read from q where the
// cache lacks them.
func (c schemaCache) joinRecords(ctx context.Context, q Querier, recs []stream.Record, digests [][]byte) error {
	schemas, err := c.joinKeys(ctx, q, recs, digests, nil)
	if err != nil {
		return err
	}
	for i, s := range schemas {
		if s != nil {
			recs[i].Value = joinEnvelope(nil, s, recs[i].Value)
		}
	}
	return nil
}

// joinKeys is joinRecords for the keys alone: each value stays as staged,
// and values[i] is the schema of recs[i]'s value (nil for one staged
// whole), for a decoder that takes the two apart (payloadDecoder). A
// value's schema is most of its bytes, and the same in every event of a
// table: joining it again would copy it for each event.
func (c schemaCache) joinKeys(ctx context.Context, q Querier, recs []stream.Record, digests [][]byte, values [][]byte) ([][]byte, error) {
	if err := c.load(ctx, q, digests); err != nil {
		return values, err
	}
	for i := range recs {
		r := &recs[i]
		var err error
		if r.Key, err = c.join(r.Key, digests[2*i]); err != nil {
			return values, err
		}
		vs, err := c.schemaOf(r.Value, digests[2*i+1])
		if err != nil {
			return values, err
		}
		values = append(values, vs)
	}
	return values, nil
}

// load reads the schemas of digests the cache lacks.
func (c schemaCache) load(ctx context.Context, q Querier, digests [][]byte) error {
	var distinct, missing [][]byte
	seen := map[string]bool{}
	for _, d := range digests {
		if d == nil || seen[string(d)] {
			continue
		}
		seen[string(d)] = true
		distinct = append(distinct, d)
		if _, ok := c[string(d)]; !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if len(c)+len(missing) > maxCachedSchemas {
		// Start again with the schemas these events need.
		clear(c)
		missing = distinct
	}
	rows, err := q.Query(ctx, "SELECT digest, schema FROM kafka2pg.cdc_staged_schemas WHERE digest = ANY($1::bytea[])", missing)
	if err != nil {
		return fmt.Errorf("read the staged events' schemas: %w", err)
	}
	var d, text []byte
	if _, err := pgx.ForEachRow(rows, []any{&d, &text}, func() error {
		c[string(d)] = text
		return nil
	}); err != nil {
		return fmt.Errorf("read the staged events' schemas: %w", err)
	}
	for _, d := range missing {
		if _, ok := c[string(d)]; !ok {
			return fmt.Errorf("read the staged events' schemas: schema %x is not in kafka2pg.cdc_staged_schemas", d)
		}
	}
	return nil
}

// join returns stored as it came: stored itself when it has no digest.
func (c schemaCache) join(stored, digest []byte) ([]byte, error) {
	schema, err := c.schemaOf(stored, digest)
	if schema == nil || err != nil {
		return stored, err
	}
	return joinEnvelope(nil, schema, stored), nil
}

// schemaOf is the schema of stored, staged with digest (nil: staged
// whole, or a tombstone). It must be loaded (load); one that is not is a
// bug, and an error rather than a value without its schema.
func (c schemaCache) schemaOf(stored, digest []byte) ([]byte, error) {
	if digest == nil || stored == nil {
		return nil, nil
	}
	schema, ok := c[string(digest)]
	if !ok {
		return nil, fmt.Errorf("join a staged event with its schema: schema %x is not loaded", digest)
	}
	return schema, nil
}
