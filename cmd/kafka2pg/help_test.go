package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every command and action answers -h and --help with its usage and exit
// 0, before it looks at anything else.
func TestEverySubcommandAnswersHelp(t *testing.T) {
	commands := [][]string{
		{"run"}, {"check"}, {"infer"}, {"migrate"}, {"migrate", "up"}, {"demo"}, {"status"},
		{"offsets"}, {"offsets", "show"}, {"offsets", "reset"},
		{"dead-letters"}, {"dead-letters", "list"}, {"dead-letters", "replay"},
	}
	for _, cmd := range commands {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string{}, cmd...), h)
			var stdout, stderr bytes.Buffer
			code := dispatch(t.Context(), args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != exitOK {
				t.Errorf("kafka2pg %s: exit %d, want 0; output:\n%s", strings.Join(args, " "), code, out)
			}
			if !strings.Contains(strings.ToLower(out), "usage") {
				t.Errorf("kafka2pg %s: no usage printed:\n%s", strings.Join(args, " "), out)
			}
		}
	}
}

// helpOf runs `kafka2pg args... --help` and returns what it printed.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatch(t.Context(), append(args, "--help"), &stdout, &stderr); code != exitOK {
		t.Fatalf("kafka2pg %s --help: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String() + stderr.String()
}

// Every help fits helpWidth columns and shows no pflag noise: no
// [=true|false] after the bools, no Go type names, each default once.
func TestEveryHelpFitsAndHasNoPflagNoise(t *testing.T) {
	helps := map[string]string{"kafka2pg": helpOf(t), "offsets": helpOf(t, "offsets"), "dead-letters": helpOf(t, "dead-letters")}
	for _, c := range commands() {
		helps[c.name] = helpOf(t, strings.Fields(c.name)...)
	}
	for name, out := range helps {
		widest := ""
		for line := range strings.SplitSeq(out, "\n") {
			if len([]rune(line)) > len([]rune(widest)) {
				widest = line
			}
			for _, noise := range []string{"[=true|false]", "Slice", "(default []", `(default "`} {
				if strings.Contains(line, noise) {
					t.Errorf("kafka2pg %s --help: %q in line %q", name, noise, line)
				}
			}
			if strings.Count(line, "default") > 1 {
				t.Errorf("kafka2pg %s --help: a default given twice in line %q", name, line)
			}
		}
		if n := len([]rune(widest)); n > helpWidth {
			t.Errorf("kafka2pg %s --help: a line of %d columns, over %d:\n%s", name, n, helpWidth, widest)
		}
	}
}

// Every flag a command shows is in exactly one section of its help, and
// every flag a section names exists: a new flag without a section fails
// here, not in front of a user.
func TestEveryFlagHasASection(t *testing.T) {
	for _, c := range commands() {
		fs := c.flagSet()
		seen := map[string]string{}
		for _, s := range c.help.sections {
			for _, name := range s.flags {
				f := fs.Lookup(name)
				switch {
				case f == nil:
					t.Errorf("kafka2pg %s: section %q names --%s, which the command does not have", c.name, s.title, name)
				case f.Hidden:
					t.Errorf("kafka2pg %s: section %q names the hidden --%s", c.name, s.title, name)
				case seen[name] != "":
					t.Errorf("kafka2pg %s: --%s is in sections %q and %q", c.name, name, seen[name], s.title)
				}
				seen[name] = s.title
			}
		}
		for _, name := range visibleFlags(fs) {
			if seen[name] == "" {
				t.Errorf("kafka2pg %s: --%s is in no section of its help (commands.go)", c.name, name)
			}
		}
	}
}

// run's help is examples first, then the flags by section, one line each.
func TestRunHelpIsExamplesThenOneLineAFlag(t *testing.T) {
	out := helpOf(t, "run")
	ex, kafka := strings.Index(out, "Examples:"), strings.Index(out, "\nKafka:\n")
	if ex < 0 || kafka < 0 || ex > kafka {
		t.Fatalf("run --help: want Examples: before the Kafka: section:\n%s", out)
	}
	if n := strings.Count(out[ex:kafka], "\n  # "); n < 2 || n > 3 {
		t.Errorf("run --help: %d examples, want 2 or 3", n)
	}
	for line := range strings.SplitSeq(out[kafka:], "\n") {
		if strings.HasPrefix(line, "    ") {
			t.Errorf("run --help: a flag's text runs onto a second line: %q", line)
		}
	}
}

// offsets reset prints its own flags and run's (it finds the tables as run
// does), not those of show.
func TestOffsetsResetHelpIsItsOwn(t *testing.T) {
	out := helpOf(t, "offsets", "reset")
	for _, want := range []string{"--to ", "--yes", "--kafka-group", "--config", "--delete-rewound-rows", "--allow-duplicates", "required"} {
		if !strings.Contains(out, want) {
			t.Errorf("offsets reset --help lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"--json", "every group"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("offsets reset --help shows %q, which is show's:\n%s", unwanted, out)
		}
	}
}
