package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// quickstartTopic is the topic the README's quick start creates and reads.
const quickstartTopic = "orders"

// TestReadmeQuickstart runs the README's quick start as a newcomer would,
// then the tour's rewind example that continues it: the shell blocks, in order, in one bash with -euo pipefail, from a copy of
// the checkout (links to its files; bin/ of its own, so `make build` leaves
// the suite's binary alone), and checks that each of its output blocks
// appears in what the commands printed. Two things differ from a fresh
// machine, each named: the lines that start a throwaway Kafka and Postgres
// (B=$(...), PG=$(...)) get the suite's broker and a database of the
// test's own, and the topic name "orders" gets a random suffix, so that a
// shared cluster's topics and groups are never touched. It needs a real
// broker: the quick start uses Kafka's own command-line tools.
func TestReadmeQuickstart(t *testing.T) {
	if os.Getenv(kafkatest.BrokersEnv) == "" {
		t.Skip("the README's quick start needs a real Kafka: set " + kafkatest.BrokersEnv + " (make test-real-kafka does)")
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme := string(readRepoFile(t, "README.md"))
	script, outputs, err := quickstart(readme)
	if err != nil {
		t.Fatal(err)
	}
	rewind, rewound, err := tourRewind(readme)
	if err != nil {
		t.Fatal(err)
	}
	script += rewind
	outputs = append(outputs, rewound)
	k := kafkatest.New(t)
	topic := fmt.Sprintf("%s_qs%08x", quickstartTopic, rand.Uint32())
	k.DeleteTopicAtEnd(t, topic)
	script, err = quickstartFor(script, k.Brokers(), pgtest.URL(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range outputs {
		outputs[i] = renameTopic(outputs[i], topic)
	}

	dir := linkCheckout(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = append(quickstartEnv(), "KAFKA2PG_METRICS_ADDR=127.0.0.1:0") // beside other bridges
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the quick start failed: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", err, script, stdout.String(), stderr.String())
	}
	for i, want := range outputs {
		if !containsLinesInOrder(stdout.String(), want) {
			t.Errorf("output block %d of the quick start not printed:\n%s\nstdout:\n%s\nstderr:\n%s", i+1, want, stdout.String(), stderr.String())
		}
	}
	t.Logf("the quick start ran: %d shell line(s), %d output block(s) matched", strings.Count(script, "\n"), len(outputs))
}

// quickstart returns the shell blocks of the README's "## Quick start"
// section, joined, and its text blocks: the output the commands print.
func quickstart(readme string) (script string, outputs []string, err error) {
	_, section, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		return "", nil, fmt.Errorf("README has no \"## Quick start\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	fence := regexp.MustCompile("(?ms)^```(sh|text)\n(.*?)^```$")
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		if m[1] == "sh" {
			script += m[2]
		} else {
			outputs = append(outputs, m[2])
		}
	}
	if script == "" || len(outputs) == 0 {
		return "", nil, fmt.Errorf("the quick start has %d byte(s) of shell and %d output block(s)", len(script), len(outputs))
	}
	return script, outputs, nil
}

// quickstartFor points the quick start at brokers and pgURL instead of the
// throwaway servers it starts, and renames its topic, and with it the
// table and groups named after it. The lines it replaces must be there.
func quickstartFor(script, brokers, pgURL, topic string) (string, error) {
	for _, v := range []struct{ name, value string }{{"B", brokers}, {"PG", pgURL}} {
		line := regexp.MustCompile(`(?m)^` + v.name + `=\$\(.*$`)
		if !line.MatchString(script) {
			return "", fmt.Errorf("the quick start has no line %s=$(...) to point at the test's server", v.name)
		}
		script = line.ReplaceAllLiteralString(script, v.name+"='"+v.value+"'")
	}
	if !topicWord.MatchString(script) {
		return "", fmt.Errorf("the quick start never names the topic %q", quickstartTopic)
	}
	return renameTopic(script, topic), nil
}

// topicWord is the quick start's topic name as a word: not the table
// orders_typed, but the group orders-typed and the file orders.yaml.
var topicWord = regexp.MustCompile(`\b` + quickstartTopic + `\b`)

func renameTopic(text, topic string) string {
	return topicWord.ReplaceAllLiteralString(text, topic)
}

// tourRewind returns the commands of the tour's rewind example (its "$ "
// lines), which continue the quick start, and the output they print on
// stdout: the other lines, but those the README elides ("...").
func tourRewind(readme string) (script, output string, err error) {
	_, section, ok := strings.Cut(readme, "\n### Dead letters, replay and rewind\n")
	if !ok {
		return "", "", fmt.Errorf("README has no \"### Dead letters, replay and rewind\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```text\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		return "", "", fmt.Errorf("the rewind example has no text block")
	}
	for line := range strings.SplitSeq(strings.TrimRight(block, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			script += strings.TrimPrefix(line, "$ ") + "\n"
		case strings.HasPrefix(line, "..."): // elided, or the log on stderr
		default:
			output += line + "\n"
		}
	}
	if script == "" || output == "" {
		return "", "", fmt.Errorf("the rewind example has no commands or no output")
	}
	return script, output, nil
}

// linkCheckout makes a directory that links every top-level entry of the
// checkout at root but bin/, for the commands to run in: what they write
// (a config file, the binary) lands there.
func linkCheckout(t testing.TB, root string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "bin" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// quickstartEnv is the test's environment without what would change the
// commands: make's variables of an enclosing make, and the kafka2pg flags
// and URLs of the environment.
func quickstartEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "MAKEFLAGS", name == "MAKELEVEL", name == "MFLAGS", name == "DATABASE_URL",
			strings.HasPrefix(name, "KAFKA2PG_"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

// containsLinesInOrder reports whether every line of want is a line of got,
// in the same order, comparing their words: columns padded to other widths
// (psql's, or a table's with a longer topic name) still match.
func containsLinesInOrder(got, want string) bool {
	lines := strings.Split(got, "\n")
	i := 0
	for w := range strings.SplitSeq(strings.TrimRight(want, "\n"), "\n") {
		w = strings.Join(strings.Fields(w), " ")
		for i < len(lines) && strings.Join(strings.Fields(lines[i]), " ") != w {
			i++
		}
		if i == len(lines) {
			return false
		}
		i++
	}
	return true
}

// TestReadmeQuickstartIsRunnable checks, without a broker, what
// TestReadmeQuickstart needs of the README: shell and output blocks, the
// lines that start the servers, the topic; and that the output check
// refuses output that lacks a line or has it out of order.
func TestReadmeQuickstartIsRunnable(t *testing.T) {
	script, outputs, err := quickstart(string(readRepoFile(t, "README.md")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := quickstartFor(script, "127.0.0.1:9092", "postgres://db", "orders_qs1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "B='127.0.0.1:9092'") || !strings.Contains(got, "--topic orders_qs1") {
		t.Errorf("the servers or the topic were not replaced:\n%s", got)
	}
	if !containsLinesInOrder("x\n"+outputs[0]+"y\n", outputs[0]) {
		t.Errorf("output block 1 not found in itself:\n%s", outputs[0])
	}
	if containsLinesInOrder(" a \n b\n", " b\n a\n") || containsLinesInOrder(" a\n", " a\n b\n") || containsLinesInOrder("a b\n", "a  c\n") {
		t.Error("lines out of order, missing or different were accepted")
	}
	rewind, rewound, err := tourRewind(string(readRepoFile(t, "README.md")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rewind, "offsets reset") || !strings.Contains(rewound, "ROWS TO DELETE") {
		t.Errorf("the rewind example lacks the reset or its output:\n%s\n%s", rewind, rewound)
	}
}
