package decode

import (
	"errors"
	"fmt"
)

// Error kinds of a DecodeError, stored in kafka2pg.dead_letters.error_kind.
const (
	KindInvalidJSON = "invalid_json"
	// KindTooDeep is valid JSON nested deeper than the decoder's limit
	// (10,000 objects and arrays, encoding/json's).
	KindTooDeep      = "too_deep"
	KindInvalidUTF8  = "invalid_utf8"
	KindNULByte      = "nul_byte"
	KindUnsupported  = "unsupported_value"
	KindInvalidValue = "invalid_value"
)

// ErrBadRecord matches every *DecodeError with errors.Is.
var ErrBadRecord = errors.New("bad record")

// ErrTableChanged is returned, wrapped, by the Row of a mapper whose table
// follows a schema that can change while it runs (a schema registry gained
// a version with new fields): the record needs the table the mapper's Table
// method now describes. The writer plans the change (PlanEvolve), applies it
// and writes the batch again; nothing of the batch was committed.
var ErrTableChanged = errors.New("the mapping's table changed")

// DecodeError says why a record cannot become a row.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Column    string // the column that refused the value, when known
	Kind      string // one of the Kind constants
	Err       error
}

func (e *DecodeError) Error() string {
	col := ""
	if e.Column != "" {
		col = fmt.Sprintf(" column %q:", e.Column)
	}
	return fmt.Sprintf("decode %s/%d@%d:%s %s: %v", e.Topic, e.Partition, e.Offset, col, e.Kind, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBadRecord) true for every DecodeError.
func (e *DecodeError) Is(target error) bool { return target == ErrBadRecord }
