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
