package decode

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/kafka2pg/kafka2pg/stream"
)

// KindFilter is the error kind of a record a Filter cannot evaluate: its
// value is not JSON, or the expression fails on it (a field of null, a
// comparison of a string with a number).
const KindFilter = "filter"

// FilterSpec is a sink's `where:` expression and the records it lets
// through unevaluated.
type FilterSpec struct {
	// Where is the expression (expr-lang's language), true for the
	// records to write. It reads value (the record's value decoded as
	// JSON: objects are maps, numbers float64, null nil), key (the key as
	// a string, nil without one) and headers (a map of each header's
	// last value).
	Where string
	// Envelope unwraps a Kafka Connect value ({"schema": ..., "payload":
	// ...}) to its payload, when it has both fields.
	Envelope bool
	// PassTombstones lets records without a value through: the deletes of
	// an upsert sink with delete_on_tombstone, and debezium's.
	PassTombstones bool
	// PassDeletes lets Debezium's delete and truncate events (op d and t)
	// through, so that a row that stops matching can still be removed.
	PassDeletes bool
}

// Filter is a compiled FilterSpec. Safe for concurrent use.
type Filter struct {
	spec FilterSpec
	prog *vm.Program
}

// filterEnv is what an expression reads.
type filterEnv struct {
	Value   any               `expr:"value"`
	Key     any               `expr:"key"`
	Headers map[string]string `expr:"headers"`
}

// ExprError is an expression that does not compile: Line and Column
// (from 1) locate the error in Expr.
type ExprError struct {
	Expr         string
	Line, Column int
	Msg          string
}

func (e *ExprError) Error() string {
	return fmt.Sprintf("expression `%s` at line %d, column %d: %s", e.Expr, e.Line, e.Column, e.Msg)
}

// CompileFilter compiles spec.Where, type-checked against value, key and
// headers, to a boolean. An error is an *ExprError.
func CompileFilter(spec FilterSpec) (*Filter, error) {
	prog, err := expr.Compile(spec.Where, expr.Env(filterEnv{}), expr.AsBool())
	if err != nil {
		e := &ExprError{Expr: spec.Where, Line: 1, Column: 1, Msg: err.Error()}
		var fe *file.Error
		if errors.As(err, &fe) {
			e.Line, e.Column, e.Msg = fe.Line, fe.Column+1, fe.Message
		}
		return nil, e
	}
	return &Filter{spec: spec, prog: prog}, nil
}

// Keep reports whether r is to be written: true when the expression is
// true, or when r is a tombstone or delete the spec lets through. A record
// it cannot evaluate is an error wrapping ErrBadRecord (KindFilter).
func (f *Filter) Keep(r *stream.Record) (bool, error) {
	if r.Value == nil {
		if f.spec.PassTombstones {
			return true, nil
		}
	}
	env := filterEnv{}
	if r.Key != nil {
		env.Key = string(r.Key)
	}
	if len(r.Headers) > 0 {
		env.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			env.Headers[h.Key] = string(h.Value)
		}
	}
	if r.Value != nil {
		if err := json.Unmarshal(r.Value, &env.Value); err != nil {
			return false, f.bad(r, fmt.Errorf("the value is not JSON: %w", err))
		}
	}
	if m, ok := env.Value.(map[string]any); ok && f.spec.Envelope {
		if p, ok := m["payload"]; ok {
			if _, ok := m["schema"]; ok {
				env.Value = p
			}
		}
	}
	if m, ok := env.Value.(map[string]any); ok && f.spec.PassDeletes {
		if op := m["op"]; op == "d" || op == "t" {
			return true, nil
		}
	}
	out, err := expr.Run(f.prog, env)
	if err != nil {
		return false, f.bad(r, err)
	}
	keep, ok := out.(bool)
	if !ok {
		return false, f.bad(r, fmt.Errorf("the expression is %v (%T), not true or false", out, out))
	}
	return keep, nil
}

func (f *Filter) bad(r *stream.Record, err error) error {
	return &DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Kind: KindFilter,
		Err: fmt.Errorf("where %q: %w", f.spec.Where, err)}
}
