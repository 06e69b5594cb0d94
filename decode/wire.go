package decode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The Confluent wire format, as Confluent's serializers (and franz-go's
// sr.Serde) write it: a 0 magic byte, the schema id as a 4-byte big-endian
// number, for Protobuf the message indexes (a zigzag varint count, then
// that many zigzag varints; a single 0 means [0]), then the encoded value.
// The registry package writes it; Row reads it here because reading it is
// pure logic.

// Error kinds of the registry mappers (AvroMapper, ProtobufMapper).
const (
	// KindInvalidWireFormat: the key or value does not start with the magic
	// byte and a schema id, or its bytes do not decode with their schema.
	KindInvalidWireFormat = "invalid_wire_format"
	// KindUnknownSchema: the registry does not know the record's schema id.
	KindUnknownSchema = "unknown_schema"
	// KindSchemaIncompatible: the record's schema changed a field in a way
	// the table cannot follow (see docs/MAPPING.md, Schema Registry).
	KindSchemaIncompatible = "schema_incompatible"
)

// ErrSchemaNotFound is wrapped by a SchemaLookup's error when the registry
// answered that it has no schema of that id (HTTP 404): the record is then
// a bad record of kind unknown_schema. Any other lookup error (the registry
// cannot be reached) aborts the batch, which the writer retries.
var ErrSchemaNotFound = errors.New("the schema registry has no schema of this id")

// RegisteredSchema is one schema a Schema Registry holds, with the schemas
// it references, as a SchemaLookup returns it.
type RegisteredSchema struct {
	ID   int
	Type string // AVRO (also ""), PROTOBUF or JSON, as the registry says
	Text string
	// References are the referenced schemas, transitively, each before the
	// schemas that reference it. Name is the reference's name: the imported
	// file name for Protobuf, the full type name for Avro.
	References []SchemaReference
}

// SchemaReference is a schema another one refers to.
type SchemaReference struct {
	Name string
	Text string
}

// SchemaLookup returns the schema of an id. It is called with the ctx of
// the batch whose records carry an id the mapper has not seen, from
// ResolveSchemas (never from Row), so it may block on I/O until ctx ends;
// it must be safe for concurrent use, and should cache. An id the registry
// does not know is an error wrapping ErrSchemaNotFound.
type SchemaLookup func(ctx context.Context, id int) (RegisteredSchema, error)

// wireHeader is the decoded start of a wire-format payload.
type wireHeader struct {
	id      int
	indexes []int // Protobuf message indexes; nil for Avro
}

// key names the (schema, message) pair of a header, for caches.
func (h wireHeader) key() string {
	if len(h.indexes) == 0 {
		return strconv.Itoa(h.id)
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(h.id))
	for _, i := range h.indexes {
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

// maxMessageIndexes bounds the index array of a Protobuf header: deeper
// nesting than this is a corrupt header, not a schema.
const maxMessageIndexes = 64

// parseWire reads the header of b; withIndexes reads Protobuf's message
// indexes too. It returns the header and the encoded value after it.
func parseWire(b []byte, withIndexes bool) (wireHeader, []byte, error) {
	var h wireHeader
	if len(b) < 5 || b[0] != 0 {
		if len(b) == 0 {
			return h, nil, errors.New("is empty, so it has no magic byte and schema id")
		}
		return h, nil, fmt.Errorf("does not start with the magic byte 0 and a 4-byte schema id (first byte %#02x, %d bytes): it was not written by a Schema Registry serializer", b[0], len(b))
	}
	h.id = int(binary.BigEndian.Uint32(b[1:5]))
	rest := b[5:]
	if !withIndexes {
		return h, rest, nil
	}
	n, w := binary.Varint(rest)
	if w <= 0 {
		return h, nil, errors.New("has no Protobuf message indexes after the schema id")
	}
	rest = rest[w:]
	switch {
	case n == 0:
		h.indexes = []int{0}
		return h, rest, nil
	case n < 0 || n > maxMessageIndexes:
		return h, nil, fmt.Errorf("has %d Protobuf message indexes, which is no valid header", n)
	}
	h.indexes = make([]int, n)
	for i := range h.indexes {
		x, w := binary.Varint(rest)
		if w <= 0 || x < 0 || x > 1<<20 {
			return h, nil, errors.New("has a truncated or invalid Protobuf message index")
		}
		h.indexes[i] = int(x)
		rest = rest[w:]
	}
	return h, rest, nil
}

// AppendWireHeader appends the Confluent wire-format header of schema id
// (and, for Protobuf, the message indexes; nil for Avro) to b.
func AppendWireHeader(b []byte, id int, indexes []int) []byte {
	b = append(b, 0, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	if indexes == nil {
		return b
	}
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(b, 0)
	}
	b = binary.AppendVarint(b, int64(len(indexes)))
	for _, i := range indexes {
		b = binary.AppendVarint(b, int64(i))
	}
	return b
}

// WireHeader reads the Confluent wire-format header of b: the schema id
// and, when protobuf is true, the Protobuf message indexes.
func WireHeader(b []byte, protobuf bool) (id int, indexes []int, err error) {
	id, indexes, _, err = WirePayload(b, protobuf)
	return id, indexes, err
}

// WirePayload is WireHeader that also returns the encoded value after the
// header. An error says what is wrong with b, to follow "the value " or
// "the key ".
func WirePayload(b []byte, protobuf bool) (id int, indexes []int, payload []byte, err error) {
	h, payload, err := parseWire(b, protobuf)
	return h.id, h.indexes, payload, err
}
