package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// movedBackWarn starts the WARN kafka2pg logs when a partition's durable
// position is behind the one it last made durable or claimed.
const movedBackWarn = "durable position moved back"

// maxOperatorRestarts bounds how often the harness restarts a sink that
// failed in one failover run.
const maxOperatorRestarts = 5

// sinkWatch watches a sink through a failover and does what an operator
// would: restart a FAILED Connect task through the REST API, start an
// exited Flink job again from its latest retained checkpoint. kafka2pg
// gets nothing: its exit fails the run.
type sinkWatch struct {
	run  handle
	name string // the connector's name
	logf func(format string, args ...any)

	checked  time.Time
	restarts int
	failure  string   // the first failure the harness saw
	notes    []string // what else happened, for the report
}

// health returns an error when the sink is gone for good; it restarts
// what an operator would restart.
func (w *sinkWatch) health(ctx context.Context) error {
	switch r := w.run.(type) {
	case *kafka2pgRun:
		select {
		case err := <-r.exited:
			r.exited <- err
			return fmt.Errorf("kafka2pg exited (%v):\n%s", err, tail(r.log.String(), 4000))
		default:
		}
	case *debeziumRun:
		if time.Since(w.checked) < time.Second {
			return nil
		}
		w.checked = time.Now()
		if !r.sys.w.alive() {
			return fmt.Errorf("the Connect worker (pid %d) exited; see .tmp/connect/%s/connect.log", r.sys.w.pid, r.sys.w.instance)
		}
		var st connectorStatus
		if err := r.sys.w.rest(ctx, http.MethodGet, "/connectors/"+w.name+"/status", nil, &st); err != nil {
			return nil // the worker is busy; the next look asks again
		}
		f := st.failure()
		if f == "" {
			return nil
		}
		if err := w.restarted(rootCause(f)); err != nil {
			return err
		}
		w.logf("the JDBC sink failed (%s): restarting it through the REST API", rootCause(f))
		return r.sys.w.rest(ctx, http.MethodPost, "/connectors/"+w.name+"/restart?includeTasks=true&onlyFailed=true", nil, nil)
	case *flinkRun:
		select {
		case err := <-r.exited:
			r.exited <- err
			if err := w.restarted(fmt.Sprintf("the job exited (%v)", err)); err != nil {
				return err
			}
			w.logf("the Flink job exited (%v): starting it again from its latest retained checkpoint", err)
			return r.restart(ctx)
		default:
		}
	}
	return nil
}

// restarted counts a restart; an error once there were too many.
func (w *sinkWatch) restarted(failure string) error {
	if w.failure == "" {
		w.failure = failure
	}
	w.restarts++
	if w.restarts > maxOperatorRestarts {
		return fmt.Errorf("the sink failed %d times after the failover, the first: %s", w.restarts, w.failure)
	}
	return nil
}

// rootCause is the first line of a Java stack trace and its last
// "Caused by:", which names what failed.
func rootCause(trace string) string {
	first := firstLine(trace)
	i := strings.LastIndex(trace, "Caused by: ")
	if i < 0 {
		return first
	}
	return first + " ... " + firstLine(trace[i:])
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return tail(s, 300)
}

// sleep waits for d, checking the sink's health.
func (w *sinkWatch) sleep(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	return poll(ctx, until.Add(time.Minute), func() time.Duration { return 100 * time.Millisecond }, func() (bool, error) {
		return !time.Now().Before(until), w.health(ctx)
	})
}

// recovery says how the sink went on after the failover.
func (w *sinkWatch) recovery(sys system) string {
	var out []string
	switch sys.(type) {
	case *kafka2pgSystem:
		if len(w.notes) == 0 {
			out = append(out, "reconnected by itself")
		}
		if r, ok := w.run.(*kafka2pgRun); ok && strings.Contains(r.log.String(), movedBackWarn) {
			out = append(out, fmt.Sprintf("logged %q and read again from there", movedBackWarn))
		}
	case *debeziumSystem:
		if w.restarts == 0 {
			out = append(out, "went on by itself (no FAILED task seen)")
		} else {
			out = append(out, fmt.Sprintf("task FAILED (%s); restarted by the harness through the REST API (%d×)", w.failure, w.restarts))
		}
	case *flinkSystem:
		if w.restarts == 0 && len(w.notes) == 0 {
			out = append(out, "went on by its restart strategy (the job did not exit)")
		} else if w.restarts == 0 {
			out = append(out, "the job did not exit after that")
		} else {
			out = append(out, fmt.Sprintf("%s; started again by the harness from its latest retained checkpoint (%d×)", w.failure, w.restarts))
		}
	}
	return strings.Join(append(w.notes, out...), "; ")
}
