package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// The flags whose words differ from their field's: a flag bound to a
// field that says the opposite (--migrate sets bridge.Config.SkipMigrations),
// and a flag whose 0 is the field's "off", which the library spells
// negative because its zero value is the default. Each is still one flag
// bound to one field.

// negatedBoolVar defines a bool flag that sets *skip to its opposite:
// --migrate=false sets SkipMigrations. def is the flag's default.
func negatedBoolVar(fs *pflag.FlagSet, skip *bool, name string, def bool, usage string) {
	*skip = !def
	fs.VarPF(negatedBool{skip}, name, "", usage).NoOptDefVal = "true"
}

// negatedBool is the flag value of negatedBoolVar.
type negatedBool struct{ p *bool }

func (b negatedBool) Type() string { return "bool" }

func (b negatedBool) String() string {
	if b.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.p)
}

func (b negatedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}

// zeroMeansOff makes 0 the off of the flag name, already defined on fs
// and bound to p: given 0, the field gets -1, the library's off; given a
// negative value, the flag is refused. The flag keeps its type and its
// default.
func zeroMeansOff[T ~int | ~int32 | ~int64](fs *pflag.FlagSet, name string, p *T) {
	f := fs.Lookup(name)
	f.Value = offAtZero[T]{v: f.Value, p: p}
}

// offAtZero is the flag value of zeroMeansOff.
type offAtZero[T ~int | ~int32 | ~int64] struct {
	v pflag.Value // the flag's own value, bound to p
	p *T
}

func (o offAtZero[T]) Type() string { return o.v.Type() }

func (o offAtZero[T]) String() string {
	if *o.p < 0 {
		return "0"
	}
	return o.v.String()
}

func (o offAtZero[T]) Set(s string) error {
	if err := o.v.Set(s); err != nil {
		return err
	}
	switch {
	case *o.p < 0:
		return fmt.Errorf("%s is negative: give 0 to turn it off, or a positive value", s)
	case *o.p == 0:
		*o.p = -1
	}
	return nil
}
