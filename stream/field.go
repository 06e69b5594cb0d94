package stream

import "fmt"

// FieldError is a configuration value at fault, named by where it is set:
// Field is the path of a Go field as a program that embeds kafka2pg
// writes it ("reader.Config.Brokers", "reader.Security.TLSCAFile"), or
// the path of a key of a YAML sinks file ("sinks[2].columns[0].type"),
// with the file's Line when one is known. Err says what is wrong with it,
// and reads after the field and a colon; it may name other fields by
// their paths.
//
// A program that sets the fields from elsewhere (flags, environment
// variables) finds the field with errors.As and speaks of it in its own
// terms, whatever the wording of Err.
type FieldError struct {
	Field string
	Line  int
	Err   error
}

// FieldErrorf is a *FieldError on field whose Err is fmt.Errorf(format,
// args...).
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("%s (line %d): %v", e.Field, e.Line, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	case e.Field != "":
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }
