package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
)

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := loadRunOptions("run", runHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	log := newLogger(stderr, o.logFormat, o.logLevel)
	for _, n := range o.oldNames {
		log.Warn(n)
	}
	err := serveBridge(ctx, o, log)
	var bad *badRecordsError
	switch {
	case errors.As(err, &bad):
		log.Error("records of this run became dead letters or were skipped: exit 3", "dead_letters", bad.deadLetters,
			"skipped", bad.skipped, "exit_code", exitBadRecords,
			"fix", "kafka2pg dead-letters list shows why; fix the table or the mapping, then kafka2pg dead-letters replay --config ...")
		return exitBadRecords
	case err != nil:
		log.Error("kafka2pg stopped", "error", cliMessage(redact.Err(explainPrivilege(err, o.cfg.PostgresURL))))
		if errors.As(err, new(*bindError)) {
			return exitUsage
		}
		return exitError
	}
	return exitOK
}

// badRecordsError is serveBridge's outcome with --until-caught-up when it
// caught up but records of the run became dead letters or were skipped.
type badRecordsError struct {
	deadLetters, skipped int64
}

func (e *badRecordsError) Error() string {
	return fmt.Sprintf("caught up with %d dead letter(s) and %d skipped record(s) during the run", e.deadLetters, e.skipped)
}

// loadRunOptions reads run's flags, the environment and the config file, in
// that order of precedence, and checks all of it, mappings included, before
// anything connects; `run` and `check` share it. On failure it has printed
// why (naming the command) and returns the exit code.
func loadRunOptions(command string, help *commandHelp, args []string, stdout, stderr io.Writer) (o *runOptions, code int, ok bool) {
	return loadCommandOptions(command, help, args, stdout, stderr, runLoad{})
}

// runLoad is what a command that takes run's flags and config file adds to
// them (dead-letters replay, offsets reset: they must find the tables the
// bridge writes exactly as run does).
type runLoad struct {
	// flags defines the command's own flags beside run's. The config file
	// may set run's flags only.
	flags func(fs *pflag.FlagSet)
	// offline: the command does not consume. Kafka's brokers, group and
	// topics may be left out; with sinks in --config, --topic and
	// --pg-table select among them (runOptions.onlyTopics, onlyTable)
	// instead of naming what to consume.
	offline bool
}

// loadCommandOptions is loadRunOptions for a command that adds load to
// run's flags.
func loadCommandOptions(command string, help *commandHelp, args []string, stdout, stderr io.Writer, load runLoad) (o *runOptions, code int, ok bool) {
	o, code, ok, err := readCommandOptions(command, help, args, stdout, stderr, load)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg %s: invalid configuration; nothing was written:\n%s\n", command, cliMessage(err))
		return nil, exitUsage, false
	}
	return o, code, ok
}

// readCommandOptions is loadCommandOptions without printing what is
// invalid: that is err. Without err, ok false says the flags did not parse
// (or asked for help), which it has printed, and code is the exit code.
// A reload of the config file (reload.go) reads the options with it again.
func readCommandOptions(command string, help *commandHelp, args []string, stdout, stderr io.Writer, load runLoad) (o *runOptions, code int, ok bool, err error) {
	fs := newFlagSet(command)
	o = &runOptions{offline: load.offline}
	defineRunFlags(fs, o)
	keys := fs // the flags the config file may set
	if load.flags != nil {
		keys = newFlagSet(command)
		defineRunFlags(keys, &runOptions{})
		addFlagAliases(keys)
		load.flags(fs)
	}
	if code, ok := parseFlags(command, help, fs, args, stdout, stderr); !ok {
		return nil, code, false, nil
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafka2pg %s: unexpected argument %q: flags only (did you mean --topic %s or --config %s?)\n", command, fs.Arg(0), fs.Arg(0), fs.Arg(0))
		return nil, exitUsage, false, nil
	}
	invalid := func(err error) (*runOptions, int, bool, error) {
		return nil, exitUsage, false, err
	}
	o.args = args
	if o.configPath != "" {
		cfg, err := loadConfig(o.configPath, keys)
		if err == nil {
			err = cfg.apply(fs)
		}
		if err != nil {
			return invalid(err)
		}
		o.sinks, o.fileFlags = cfg.sinks, cfg.flags
	}
	o.oldNames = oldNameNotices(fs)
	if o.offline {
		o.onlyTopics, o.onlyTable = slices.Clone(o.cfg.Kafka.Topics), o.table
		if len(o.sinks) > 0 {
			o.cfg.Kafka.Topics, o.table = nil, ""
		}
	}
	if err := resolvePGURL(o); err != nil {
		return invalid(err)
	}
	if err := o.validate(); err != nil {
		return invalid(err)
	}
	if err := o.checkSinks(); err != nil {
		return invalid(err)
	}
	return o, exitOK, true, nil
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	lvl, _ := parseLevel(level)
	hopts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(cliLogHandler{slog.NewJSONHandler(w, hopts)})
	}
	return slog.New(cliLogHandler{slog.NewTextHandler(w, hopts)})
}

// serveBridge runs the bridge that o describes until it stops: it serves
// /metrics, /healthz and /readyz (bound first, so that a taken port fails
// at once, before anything connects; served until the very end, through
// the shutdown's flush), sets Go's memory limit, builds the sinks (reading
// the schema registry for those that need it) and runs the bridge. It
// returns what bridge.Run returns; a *badRecordsError when
// --until-caught-up caught up but records of the run became dead letters
// or were skipped; a *bindError when --metrics-addr cannot be listened on.
func serveBridge(ctx context.Context, o *runOptions, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	registerProcessMetrics(reg)
	var running atomic.Pointer[bridge.Bridge]
	if o.metricsAddr != "" {
		ready := func(ctx context.Context) error {
			if b := running.Load(); b != nil {
				return b.Ready(ctx)
			}
			return errors.New("starting: build the sinks")
		}
		status := func() string {
			if b := running.Load(); b != nil {
				return configStatusLine(b.ConfigStatus())
			}
			return ""
		}
		srv, err := listenHTTP(o.metricsAddr, reg, ready, status, log, o.pprof)
		if err != nil {
			return err
		}
		srv.serve()
		defer srv.stop(5 * time.Second) // the very last step: /healthz answers through the shutdown
	}
	setMemoryLimit(o, log)
	cfg, err := o.bridgeConfig(ctx)
	if err != nil {
		return err
	}
	b, err := bridge.New(cfg, log, reg)
	if err != nil {
		return err
	}
	running.Store(b)
	stopReloads := watchReloads(ctx, o, b, log)
	err = b.Run(ctx)
	stopReloads()
	if err != nil {
		return err
	}
	if st := b.Stats(); o.cfg.UntilCaughtUp && st.DeadLetters+st.Skipped > 0 {
		return &badRecordsError{deadLetters: st.DeadLetters, skipped: st.Skipped}
	}
	return nil
}

// bridgeConfig is the bridge's configuration from the flags, with the
// sinks built (those of the schema registry read from it, with ctx).
func (o *runOptions) bridgeConfig(ctx context.Context) (bridge.Config, error) {
	set, err := o.buildSinks(ctx)
	if err != nil {
		return bridge.Config{}, err
	}
	cfg := o.cfg
	if o.memoryLimitAuto {
		cfg.Kafka.OnOwned = func(n int) { debug.SetMemoryLimit(autoMemoryLimit(o.cfg.Kafka.MaxBufferedBytes, n)) }
	}
	cfg.Sinks = set
	return cfg, nil
}
