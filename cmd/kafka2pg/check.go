package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// kafka2pg check takes run's flags and config, checks them against the
// broker and the database (admin.CheckKafka, admin.CheckPostgres), and
// prints the DDL run would execute. It writes nothing: Kafka is asked for
// metadata only (no group, no topic creation), and Postgres is read in one
// READ ONLY transaction that is rolled back.

func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := loadRunOptions("check", checkHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	r := &checkReport{w: stdout}
	for _, n := range o.oldNames {
		r.line(admin.Finding{Level: admin.Note, Message: n})
	}
	set, n := checkSinks(ctx, r, o)
	if n > 0 {
		r.line(admin.Finding{Message: fmt.Sprintf("schema registry: the subjects of %d avro/protobuf sink(s) fold into tables", n)})
	}
	r.line(admin.Finding{Message: fmt.Sprintf("configuration: %d sink(s), group %q", len(set.Fixed), o.cfg.Kafka.Group)})
	k := admin.Kafka{Brokers: o.cfg.Kafka.Brokers, Security: o.cfg.KafkaSecurity, ClientID: o.cfg.Kafka.ClientID}
	r.lines(admin.CheckKafka(ctx, k, o.cfg.Kafka.Topics, o.cfg.Kafka.TopicsAreRegex))
	if pool, err := bridge.OpenPool(ctx, o.cfg.PostgresURL, "kafka2pg-check"); err != nil {
		r.line(admin.Finding{Level: admin.Fail, Message: fmt.Sprintf("postgres: --pg-url: %v", redact.Err(err))})
	} else {
		defer pool.Close()
		pc := admin.PostgresCheck{Group: o.cfg.Kafka.Group, Migrate: !o.cfg.SkipMigrations, CreateTables: !o.cfg.SkipCreateTables}
		r.lines(admin.CheckPostgres(ctx, pool, pc, set))
	}
	if r.failed > 0 {
		fmt.Fprintf(stdout, "\ncheck FAILED: %d problem(s); run would not start or would not write as configured\n", r.failed)
		return exitError
	}
	if r.ddl > 0 {
		fmt.Fprintf(stdout, "\ncheck passed: run would execute the %d statement(s) above before consuming\n", r.ddl)
	} else {
		fmt.Fprintln(stdout, "\ncheck passed: run would execute no DDL")
	}
	return exitOK
}

// checkReport prints one line per finding, with the statements run would
// execute indented and those that would fix it commented out, and counts
// failures and planned statements.
type checkReport struct {
	w      io.Writer
	failed int
	ddl    int
}

func (r *checkReport) lines(fs []admin.Finding) {
	for _, f := range fs {
		r.line(f)
	}
}

func (r *checkReport) line(f admin.Finding) {
	if f.Level == admin.Fail {
		r.failed++
	}
	msg := f.Message + flagHint(f.Message)
	if f.Err != nil {
		// The error's fields under their flags, after the subject.
		msg = f.Subject + ": " + cliMessage(f.Err)
	}
	fmt.Fprintf(r.w, "%-4s  %s\n", f.Level, msg)
	r.ddl += len(f.DDL)
	for _, s := range f.DDL {
		for _, l := range strings.Split(s+";", "\n") {
			fmt.Fprintf(r.w, "        %s\n", l)
		}
	}
	for _, s := range f.Fix {
		fmt.Fprintf(r.w, "        -- %s\n", strings.ReplaceAll(s, "\n", "\n        -- "))
	}
}

// checkSinks builds the sinks, reading the schema registry for those of
// formats avro, protobuf and json_schema (their table is the fold of the
// subject's versions), and reports those it cannot build. It returns the
// set and how many of the registry's sinks it built.
func checkSinks(ctx context.Context, r *checkReport, o *runOptions) (sinks.Set, int) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	set, err := o.buildSinks(ctx)
	if err != nil {
		r.line(admin.Finding{Level: admin.Fail, Message: fmt.Sprintf("schema registry: %v", redact.Err(err))})
	}
	n := 0
	for _, s := range o.sinks {
		if _, ok := set.Fixed[s.Topic]; ok && s.NeedsRegistry() {
			n++
		}
	}
	return set, n
}

// checkTimeout bounds the building of the sinks.
const checkTimeout = 30 * time.Second
