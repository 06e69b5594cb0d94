package integration_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/schema"
)

// TestInferCheckAndRunCatchATableTheZeroConfigSinkTook is the trap of a new
// user: the quick start's zero-config run made the table named after the
// topic; then `infer` proposes a typed sink of the same topic. infer must
// not name that table, check must fail naming the column every row would
// violate, and a run into it anyway must say so loudly (one ERROR a table
// an interval, not a WARN a record) and exit 3 with --until-caught-up.
func TestInferCheckAndRunCatchATableTheZeroConfigSinkTook(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	const n = 3000
	s.produce(t, n)
	taken := schema.TableNameForTopic(s.topic) // the zero-config default
	zero := startBridge(t, "zero-config", "run", "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", s.group+"-zero",
		"--topic", s.topic, "--pg-url", s.pgURL, "--until-caught-up", "--metrics-addr=", "--kafka-fetch-max-wait", "250ms")
	zero.requireExitZero(t, 2*time.Minute)

	// infer with the database: it sees the table and picks <table>_typed,
	// with a group of its own (the zero-config group's offsets would skip
	// every record already read).
	inferArgs := []string{"--kafka-brokers", s.kafka.Brokers(), "--topic", s.topic, "--sample", "100", "--timeout", "30s"}
	config := inferStdout(t, append(inferArgs, "--pg-url", s.pgURL)...)
	t.Logf("infer --pg-url:\n%s", config)
	for _, want := range []string{
		"table: " + taken + "_typed\n",
		"kafka-group: kafka2pg-" + taken + "_typed\n",
		"exists with the zero-config table's columns",
	} {
		if !strings.Contains(config, want) {
			t.Errorf("infer with the database: the config lacks %q", want)
		}
	}
	// With --table naming the taken table, infer fails and names a free one.
	code, out := cli(t, append(append([]string{"infer"}, inferArgs...), "--pg-url", s.pgURL, "--pg-table", taken)...)
	t.Logf("infer --table %s: exit %d\n%s", taken, code, out)
	if code != 1 || !strings.Contains(out, `"kafka_topic", "kafka_partition", "kafka_offset" are NOT NULL`) || !strings.Contains(out, "--pg-table "+taken+"_typed") {
		t.Errorf("infer --table %s: exit %d, want 1 naming \"kafka_topic\" and --pg-table %s_typed", taken, code, taken)
	}

	// Without the database infer cannot know, and names the table after
	// the topic: the trap. check must catch it, evolve or not.
	trap := inferStdout(t, inferArgs...)
	if !strings.Contains(trap, "table: "+taken+"\n") {
		t.Fatalf("infer without --pg-url: the config does not name %s:\n%s", taken, trap)
	}
	trap = strings.Replace(trap, "mode: append\n", "mode: append\n    evolve: true\n", 1)
	path := writeConfig(t, trap)
	code, out = cli(t, "check", "--config", path, "--pg-url", s.pgURL)
	t.Logf("check of the trap (evolve: true): exit %d\n%s", code, out)
	if code != 1 || !strings.Contains(out, `column(s) "kafka_topic", "kafka_partition", "kafka_offset" are NOT NULL without a default and the mapping does not write them`) ||
		!strings.Contains(out, "table: "+taken+"_typed") {
		t.Errorf("check of the trap: exit %d, want 1 naming \"kafka_topic\" and the fix", code)
	}
	// The config infer wrote with the database passes.
	if code, out := cli(t, "check", "--config", writeConfig(t, config), "--pg-url", s.pgURL); code != 0 {
		t.Errorf("check of the config infer wrote with the database: exit %d\n%s", code, out)
	}

	// Run the trap anyway: every record becomes a dead letter.
	const interval = time.Second
	b := startBridge(t, "trap", "run", "--config", path, "--pg-url", s.pgURL, "--until-caught-up", "--metrics-addr=",
		"--kafka-fetch-max-wait", "250ms", "--batch-max-rows", "100", "--log-dead-letters", interval.String())
	b.requireExit(t, 3, 3*time.Minute)
	ran := time.Since(b.started)
	var letters, kafkaTopicReasons int
	if err := s.db.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE error_message LIKE '%kafka_topic%')
		FROM kafka2pg.dead_letters WHERE target_table = $1`, `"public".`+fmt.Sprintf("%q", taken)).Scan(&letters, &kafkaTopicReasons); err != nil {
		t.Fatal(err)
	}
	if letters != n || kafkaTopicReasons != n {
		t.Errorf("dead letters of the trap run: %d, %d of them about kafka_topic; want %d", letters, kafkaTopicReasons, n)
	}
	errs, warns := logLevels(t, b.logPath, "table=")
	maxLines := int(math.Ceil(ran.Seconds()/interval.Seconds())) + 1
	t.Logf("trap run: %v, %d dead letters, %d ERROR and %d WARN lines about the table (at most %d a level: one an interval)", ran.Round(time.Millisecond), letters, errs, warns, maxLines)
	if errs < 1 || errs > maxLines || warns > maxLines {
		t.Errorf("the log has %d ERROR and %d WARN lines about the table over %v; want 1 to %d ERROR and at most %d WARN",
			errs, warns, ran.Round(time.Millisecond), maxLines, maxLines)
	}
	if !b.logged("exit_code=3") || !b.logged("every record of the table's last") {
		t.Errorf("the log does not say why the run exits 3")
	}
}

// logLevels counts the ERROR and WARN lines of a bridge's text log that
// contain substr.
func logLevels(t testing.TB, path, substr string) (errs, warns int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, substr) {
			continue
		}
		switch {
		case strings.Contains(line, "level=ERROR"):
			errs++
		case strings.Contains(line, "level=WARN"):
			warns++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return errs, warns
}
