package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// The reference pages in docs/ are what the renderers write now: a flag,
// a default, a section or a metric changed without `make docs` fails here.
// With -write-docs (make docs) it writes them instead.
func TestReferencePagesAreCurrent(t *testing.T) {
	for _, p := range referencePages {
		want, err := p.render(t.Context())
		if err != nil {
			t.Fatalf("render %s: %v", p.file, err)
		}
		path := filepath.Join("..", "..", "docs", p.file)
		if *writeDocs {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: run make docs", err)
		}
		if string(got) == want {
			continue
		}
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("docs/%s is out of date (run make docs); first difference at line %d:\n  page:   %q\n  flags:  %q", p.file, i+1, g, w)
				break
			}
		}
	}
}

// Every longer text describes a flag that exists, and every sink key the
// command words its own way is a key of the sink model (sinks.Keys, whose
// test checks that every key has its meaning).
func TestReferenceTextsMatchTheFlagsAndKeys(t *testing.T) {
	byName := map[string]command{}
	for _, c := range commands() {
		byName[c.name] = c
	}
	run := byName["run"].flagSet()
	for key := range flagDetails {
		flag, cmd := key, "run"
		if i := strings.LastIndexByte(key, ' '); i >= 0 {
			cmd, flag = key[:i], key[i+1:]
		}
		fs := run
		if c, ok := byName[cmd]; !ok {
			t.Errorf("flagDetails[%q]: no command %q", key, cmd)
			continue
		} else if cmd != "run" {
			fs = c.flagSet()
		}
		if f := fs.Lookup(flag); f == nil || f.Hidden {
			t.Errorf("flagDetails[%q]: kafka2pg %s has no flag --%s", key, cmd, flag)
		}
	}
	known := map[string]bool{}
	for _, g := range sinks.Keys() {
		for _, k := range g.Keys {
			known[g.Prefix+k.Name] = true
		}
	}
	for key := range sinkKeyDocs {
		if !known[key] {
			t.Errorf("sinkKeyDocs[%q]: no such config key", key)
		}
	}
}

// The reference lists every visible flag of every command with its
// environment variable, and every old name.
func TestConfigurationReferenceListsEveryFlag(t *testing.T) {
	page := configurationReference()
	for _, c := range commands() {
		for _, name := range visibleFlags(c.flagSet()) {
			if !strings.Contains(page, "| `--"+name+"` |") || !strings.Contains(page, "`"+envName(name)+"`") {
				t.Errorf("kafka2pg %s --%s is not in the reference with %s", c.name, name, envName(name))
			}
		}
	}
	for _, a := range flagAliases {
		if !strings.Contains(page, "| `--"+a.old+"` |") {
			t.Errorf("the old name --%s is not in the reference", a.old)
		}
	}
}
