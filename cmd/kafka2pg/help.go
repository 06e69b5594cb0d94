package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Every command's --help is printed here rather than by pflag: pflag's list
// is one ungrouped block, prints [=true|false] after every bool and Go type
// names (int32Slice), and lets a flag's text run to any width. Here a
// command's help is its usage, two or three examples, then its flags in
// titled sections, one line a flag within helpWidth columns; what a flag
// needs beyond a line is in docs/CONFIGURATION.md (flagdocs_test.go).

// helpWidth is the widest line any help prints.
const helpWidth = 100

// commandHelp is what `kafka2pg <command> --help` prints.
type commandHelp struct {
	usage    []string // synopsis lines, without the leading "kafka2pg "
	about    string   // a few lines on what the command does; may be empty
	examples []helpExample
	sections []helpSection
	notes    string // printed after the flags; may be empty
}

// helpExample is one example: a comment line and the command.
type helpExample struct{ comment, command string }

// helpSection is a titled group of a command's flags, in the order they
// are printed. Every visible flag of a command belongs to exactly one
// section (TestEveryFlagHasASection).
type helpSection struct {
	title string
	flags []string
}

// print writes the help of the command whose flags fs holds.
func (h *commandHelp) print(w io.Writer, fs *pflag.FlagSet) {
	var b strings.Builder
	b.WriteString("Usage:\n")
	for _, u := range h.usage {
		b.WriteString("  kafka2pg " + u + "\n")
	}
	if h.about != "" {
		b.WriteString("\n" + strings.TrimRight(h.about, "\n") + "\n")
	}
	if len(h.examples) > 0 {
		b.WriteString("\nExamples:\n")
		for i, e := range h.examples {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString("  # " + e.comment + "\n")
			b.WriteString(indentCommand(e.command))
		}
	}
	// Each section aligns its texts on its own longest flag: one long
	// name would otherwise narrow every text of the command.
	for _, s := range h.sectionsOf(fs) {
		fmt.Fprintf(&b, "\n%s:\n", s.title)
		col := 0
		for _, f := range s.flags {
			col = max(col, len(flagSynopsis(f))+2)
		}
		for _, f := range s.flags {
			b.WriteString(flagLine(f, col))
		}
	}
	if h.notes != "" {
		b.WriteString("\n" + strings.TrimRight(h.notes, "\n") + "\n")
	}
	io.WriteString(w, b.String())
}

// resolvedSection is a section with its flags looked up.
type resolvedSection struct {
	title string
	flags []*pflag.Flag
}

// sectionsOf groups fs's visible flags by h's sections. A flag no section
// names is printed under "Other" rather than dropped; the test keeps that
// section empty.
func (h *commandHelp) sectionsOf(fs *pflag.FlagSet) []resolvedSection {
	var out []resolvedSection
	placed := map[string]bool{}
	for _, s := range h.sections {
		rs := resolvedSection{title: s.title}
		for _, name := range s.flags {
			if f := fs.Lookup(name); f != nil && !f.Hidden {
				rs.flags = append(rs.flags, f)
				placed[name] = true
			}
		}
		if len(rs.flags) > 0 {
			out = append(out, rs)
		}
	}
	other := resolvedSection{title: "Other"}
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && !placed[f.Name] {
			other.flags = append(other.flags, f)
		}
	})
	if len(other.flags) > 0 {
		out = append(out, other)
	}
	return out
}

// flagSynopsis is the left column of a flag's line: "  --name TYPE".
func flagSynopsis(f *pflag.Flag) string {
	s := "  --" + f.Name
	if arg := flagArg(f); arg != "" {
		s += " " + arg
	}
	return s
}

// flagArg names what a flag takes: a word in backquotes in its usage (as
// pflag.UnquoteUsage reads it), else a plain name for its type; nothing for
// a bool.
func flagArg(f *pflag.Flag) string {
	if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") {
		return name
	}
	switch t := f.Value.Type(); t {
	case "bool":
		return ""
	case "stringSlice", "int32Slice", "int64Slice", "intSlice":
		return "list"
	case "int32", "int64":
		return "int"
	default:
		return t
	}
}

// flagText is a flag's one-line meaning with its default.
func flagText(f *pflag.Flag) string {
	_, usage := pflag.UnquoteUsage(f)
	if d := flagDefault(f); d != "" {
		usage += " (default " + d + ")"
	}
	return usage
}

// flagDefault is a flag's default as a user would type it, or "" when the
// default is the zero value (off, empty, none).
func flagDefault(f *pflag.Flag) string {
	d := f.DefValue
	switch f.Value.Type() {
	case "bool":
		if d == "false" {
			return ""
		}
	case "stringSlice", "int32Slice", "int64Slice", "intSlice":
		d = strings.TrimSuffix(strings.TrimPrefix(d, "["), "]")
	case "duration":
		if d == "0s" {
			return ""
		}
		// time.Duration's String writes 1m0s and 1h0m0s.
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
	case "string":
		if strings.ContainsAny(d, " \t") {
			d = fmt.Sprintf("%q", d)
		}
	}
	if d == "0" {
		return ""
	}
	return d
}

// flagLine is one flag's line (or lines, when its text does not fit): the
// synopsis padded to col, then the text wrapped at helpWidth.
func flagLine(f *pflag.Flag, col int) string {
	left := flagSynopsis(f)
	if len(left)+2 > col {
		col = len(left) + 2
	}
	var b strings.Builder
	b.WriteString(left + strings.Repeat(" ", col-len(left)))
	for i, line := range wrapWords(flagText(f), helpWidth-col) {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", col))
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// wrapWords breaks text into lines of at most width characters at spaces;
// a word longer than width gets a line of its own.
func wrapWords(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// indentCommand prints an example command, indented, continued with a
// backslash where it would pass helpWidth.
func indentCommand(cmd string) string {
	const indent, cont = "  ", "      "
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(cmd) {
		if line != indent && line != cont && len(line)+1+len(w)+2 > helpWidth {
			b.WriteString(line + " \\\n")
			line = cont
		}
		if line != indent && line != cont {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}

// visibleFlags lists the names of fs's flags that help prints.
func visibleFlags(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return slices.Sorted(slices.Values(names))
}
