package main

import (
	"encoding"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/reader"
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

// textVar defines a flag of one of the libraries' closed sets (or of
// another value that reads and writes itself as text), bound to p, with
// default def. It shows as a string in the help, as its name does.
func textVar[T encoding.TextMarshaler, P interface {
	*T
	encoding.TextUnmarshaler
}](fs *pflag.FlagSet, p P, name string, def T, usage string) {
	*p = def
	fs.Var(textValue[T, P]{p}, name, usage)
}

// textValue is the flag value of textVar.
type textValue[T encoding.TextMarshaler, P interface {
	*T
	encoding.TextUnmarshaler
}] struct{ p P }

func (v textValue[T, P]) Type() string { return "string" }

func (v textValue[T, P]) String() string {
	if v.p == nil {
		return ""
	}
	b, _ := (*v.p).MarshalText()
	return string(b)
}

func (v textValue[T, P]) Set(s string) error { return v.p.UnmarshalText([]byte(s)) }

// balancersVar defines --kafka-balancers, a list of reader.Balancer
// written as pflag writes a list of strings: comma-separated, repeatable,
// the first value given replacing the default.
func balancersVar(fs *pflag.FlagSet, p *[]reader.Balancer, name string, def []reader.Balancer, usage string) {
	*p = slices.Clone(def)
	fs.Var(&balancersValue{p: p}, name, usage)
}

type balancersValue struct {
	p   *[]reader.Balancer
	set bool // a value was given: the next one appends
}

func (v *balancersValue) Type() string { return "stringSlice" } // as pflag's, so that the help shows it alike

func (v *balancersValue) String() string {
	if v.p == nil {
		return "[]"
	}
	names := make([]string, len(*v.p))
	for i, b := range *v.p {
		names[i] = b.String()
	}
	return "[" + strings.Join(names, ",") + "]"
}

func (v *balancersValue) Set(s string) error {
	var bs []reader.Balancer
	for name := range strings.SplitSeq(s, ",") {
		b, err := reader.ParseBalancer(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	if v.set {
		*v.p = append(*v.p, bs...)
	} else {
		*v.p, v.set = bs, true
	}
	return nil
}
