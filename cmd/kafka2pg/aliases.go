package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/pflag"
)

// flagAlias is an old spelling of a flag, kept working wherever a flag is
// given: on the command line, as KAFKA2PG_<OLD> in the environment and as a
// config-file key. It is hidden from help, listed in docs/CONFIGURATION.md,
// and using it earns a notice naming the new spelling.
type flagAlias struct {
	old, name string
	inverted  bool // a negative bool: --old means --name=false
}

// flagAliases are the renames, old → new. Deployments written for an older
// version keep working; remove an entry only in a release that says so.
var flagAliases = []flagAlias{
	{old: "no-migrate", name: "migrate", inverted: true},
	{old: "start", name: "kafka-start"},
	{old: "table", name: "pg-table"},
	{old: "schema-registry-tls-ca", name: "schema-registry-tls-ca-file"},
	{old: "schema-registry-tls-cert", name: "schema-registry-tls-cert-file"},
	{old: "schema-registry-tls-key", name: "schema-registry-tls-key-file"},
}

// aliasOf is the annotation that marks a flag as an alias: its value is the
// flag's current name.
const aliasOf = "kafka2pg-alias-of"

// addFlagAliases defines, hidden, the old spellings of fs's flags. Each old
// flag shares its new flag's value (through invertedBool for a negative
// bool), so the two are one setting.
func addFlagAliases(fs *pflag.FlagSet) {
	for _, a := range flagAliases {
		f := fs.Lookup(a.name)
		if f == nil || fs.Lookup(a.old) != nil {
			continue
		}
		alias := &pflag.Flag{Name: a.old, Usage: "old name of --" + a.name, Value: f.Value, DefValue: f.DefValue,
			NoOptDefVal: f.NoOptDefVal, Hidden: true, Annotations: map[string][]string{aliasOf: {a.name}}}
		if a.inverted {
			def, _ := strconv.ParseBool(f.DefValue)
			alias.Value, alias.DefValue = invertedBool{f.Value}, strconv.FormatBool(!def)
		}
		fs.AddFlag(alias)
	}
}

// aliasTarget is the current name of an alias flag, or "" for a flag that
// is not one.
func aliasTarget(f *pflag.Flag) string {
	if v := f.Annotations[aliasOf]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// aliasesOf lists the old spellings of the flag name that fs defines.
func aliasesOf(fs *pflag.FlagSet, name string) []string {
	var out []string
	for _, a := range flagAliases {
		if a.name == name && fs.Lookup(a.old) != nil {
			out = append(out, a.old)
		}
	}
	return out
}

// given reports whether the flag name was set already, under its name or
// an old one: a setting given on the command line is not overridden by
// the environment, nor one from either by the config file.
func given(fs *pflag.FlagSet, name string) bool {
	if f := fs.Lookup(name); f != nil && f.Changed {
		return true
	}
	for _, old := range aliasesOf(fs, name) {
		if fs.Lookup(old).Changed {
			return true
		}
	}
	return false
}

// oldNameNotices says, for every old spelling that was used, what to write
// instead.
func oldNameNotices(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		name := aliasTarget(f)
		if name == "" || !f.Changed {
			return
		}
		i := slices.IndexFunc(flagAliases, func(a flagAlias) bool { return a.old == f.Name })
		use, env, key := "--"+name, envName(name), name+":"
		if flagAliases[i].inverted {
			use, env, key = use+"=false", env+"=false", key+" false"
		}
		out = append(out, fmt.Sprintf("--%s is an old name: use %s (%s, or %s in a config file); the old name still works",
			f.Name, use, env, key))
	})
	return out
}

// invertedBool is a negative bool flag bound to a positive one: setting it
// true sets the positive one false.
type invertedBool struct{ v pflag.Value }

func (b invertedBool) Type() string { return "bool" }

func (b invertedBool) String() string {
	v, _ := strconv.ParseBool(b.v.String())
	return strconv.FormatBool(!v)
}

func (b invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	return b.v.Set(strconv.FormatBool(!v))
}
