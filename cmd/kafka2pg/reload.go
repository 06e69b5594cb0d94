package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/bridge"
)

// configWatchInterval is how often --config-watch reads the file.
const configWatchInterval = time.Second

// watchReloads reloads o's config file into b on SIGHUP and, with
// --config-watch, whenever the file's content changes, until stop is
// called; stop returns once no reload is under way. Without --config
// there is nothing to reload, and SIGHUP keeps its default (the process
// ends).
func watchReloads(ctx context.Context, o *runOptions, b *bridge.Bridge, log *slog.Logger) (stop func()) {
	if o.configPath == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	rl := &reloader{running: o, b: b, log: log, sum: fileSum(o.configPath)}
	var tick <-chan time.Time
	stopTick := func() {}
	if o.configWatch {
		t := time.NewTicker(configWatchInterval)
		tick, stopTick = t.C, t.Stop
	}
	var wg sync.WaitGroup
	wg.Go(func() { rl.loop(ctx, hup, tick) })
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
		stopTick()
	}
}

// reloader reloads the config file of the running options into the
// bridge.
type reloader struct {
	running *runOptions // as run started: what needs a restart runs as it says
	b       *bridge.Bridge
	log     *slog.Logger
	sum     [sha256.Size]byte // of the file's content at the last reload, or at start
}

// loop reloads on each SIGHUP, and on each tick at which the file's
// content differs from the last one read.
func (rl *reloader) loop(ctx context.Context, hup <-chan os.Signal, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			rl.log.Info("SIGHUP: reloading the configuration", "config", rl.running.configPath)
			rl.sum = fileSum(rl.running.configPath)
			rl.reload(ctx)
		case <-tick:
			sum := fileSum(rl.running.configPath)
			if sum == rl.sum {
				continue
			}
			rl.sum = sum
			rl.log.Info("the config file changed: reloading the configuration", "config", rl.running.configPath)
			rl.reload(ctx)
		}
	}
}

// fileSum is the SHA-256 of the file's content; of nothing when it cannot
// be read (the reload says why).
func fileSum(path string) [sha256.Size]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(data)
}

// reload reads the command's flags, the environment and the config file
// again, as run read them at start, and hands the sinks to the bridge. A
// configuration that does not load or build is refused (the bridge logs
// and counts it); the settings of the file other than sinks need a
// restart, which a WARN names when they changed.
func (rl *reloader) reload(ctx context.Context) {
	var printed bytes.Buffer
	next, _, ok, err := readCommandOptions("run", runHelp, rl.running.args, io.Discard, &printed, runLoad{})
	if err == nil && !ok {
		err = errors.New(string(bytes.TrimSpace(printed.Bytes())))
	}
	if err != nil {
		rl.b.RefuseReload(&reloadError{msg: cliMessage(err), err: err})
		return
	}
	if changed := restartSettings(rl.running.fileFlags, next.fileFlags); len(changed) > 0 {
		rl.log.Warn("settings of the config file changed that take effect at a restart only; they keep their running values until then",
			"config", rl.running.configPath, "settings", changed)
	}
	set, err := next.buildSinks(ctx)
	if err != nil {
		rl.b.RefuseReload(&reloadError{msg: cliMessage(err), err: err})
		return
	}
	if err := rl.b.Reconfigure(ctx, set); errors.Is(err, bridge.ErrNotRunning) {
		rl.log.Warn("reload asked before the bridge joined the consumer group, or while it stops: nothing changed; send SIGHUP again once /readyz says ready",
			"config", rl.running.configPath)
	}
}

// reloadError is a reload the command refused before the bridge saw
// it: its message as the command's user reads it (cliMessage), and the
// error underneath.
type reloadError struct {
	msg string
	err error
}

func (e *reloadError) Error() string { return "reload: " + e.msg }
func (e *reloadError) Unwrap() error { return e.err }

// restartSettings are the keys of the config file, sinks aside, whose
// values differ between running and next (set in one of them only
// included), sorted.
func restartSettings(running, next map[string]flagValue) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(running)) {
		if n, ok := next[k]; !ok || !slices.Equal(n.values, running[k].values) {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if _, ok := running[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// configStatusLine is the configuration's generation, and the last
// refused reload while it stands, for /readyz's body.
func configStatusLine(s bridge.ConfigStatus) string {
	line := fmt.Sprintf("config generation %d", s.Generation)
	if s.Refused != nil {
		line += "; last reload refused: " + cliMessage(s.Refused)
	}
	return line
}
