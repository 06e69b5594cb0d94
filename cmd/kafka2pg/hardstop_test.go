package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTheFirstSignalStopsGracefullyAndTheSecondAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second os.Signal
		want          int
	}{
		{"two SIGTERMs exit 143", syscall.SIGTERM, syscall.SIGTERM, exitTerminated},
		{"SIGTERM then Ctrl-C exits 130", syscall.SIGTERM, os.Interrupt, exitInterrupted},
		{"two Ctrl-Cs exit 130", os.Interrupt, os.Interrupt, exitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sigs := make(chan os.Signal, 2)
			graceful := make(chan struct{})
			exited := make(chan int, 1)
			var stderr bytes.Buffer
			done := make(chan struct{})
			go func() {
				defer close(done)
				hardStop(sigs, func() { close(graceful) }, &stderr, func(code int) { exited <- code })
			}()

			sigs <- tc.first
			select {
			case <-graceful:
			case <-time.After(10 * time.Second):
				t.Fatal("the first signal did not start the graceful stop")
			}
			select {
			case code := <-exited:
				t.Fatalf("the first signal exited with %d: it must only stop gracefully", code)
			default:
			}

			sigs <- tc.second
			select {
			case code := <-exited:
				if code != tc.want {
					t.Errorf("exit code %d, want %d", code, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the second signal did not stop at once")
			}
			<-done
			if out := stderr.String(); !strings.Contains(out, "send it again to stop at once") || !strings.Contains(out, "stopping now") {
				t.Errorf("stderr does not say what each signal does:\n%s", out)
			}
		})
	}
}
