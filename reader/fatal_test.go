package reader

import (
	"errors"
	"testing"
	"time"
)

func TestAFailureIsFatalOnceItsStreakLastsTheTimeoutAndNotBefore(t *testing.T) {
	boom := errors.New("GROUP_AUTHORIZATION_FAILED")
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newFatalWatch(2 * time.Second)
	w.now = func() time.Time { return clock }

	// Reported every 5 s, as franz-go retries a refused join: the streak
	// goes on across the reports and is fatal at the second one.
	if w.failed("group", boom, "grant READ") {
		t.Fatal("fatal at the first failure")
	}
	clock = clock.Add(5 * time.Second)
	if !w.failed("group", boom, "grant READ") {
		t.Fatal("not fatal after 5 s of failures with a timeout of 2 s")
	}
	var fe *FatalError
	if err := w.fatal(); !errors.As(err, &fe) || fe.For != 5*time.Second || fe.Fix != "grant READ" || !errors.Is(err, boom) {
		t.Errorf("fatal() = %v, want a FatalError of 5s wrapping the failure, with its fix", err)
	}

	// A success ends a streak; a failure after a long quiet starts anew.
	w = newFatalWatch(2 * time.Second)
	w.now = func() time.Time { return clock }
	w.failed("topic", boom, "")
	clock = clock.Add(time.Second)
	w.ok("topic")
	clock = clock.Add(1500 * time.Millisecond)
	if w.failed("topic", boom, "") {
		t.Error("fatal right after a success")
	}
	clock = clock.Add(streakQuiet)
	if w.failed("topic", boom, "") {
		t.Error("fatal at a failure that came after a quiet minute: a new streak")
	}
	if w.fatal() != nil {
		t.Error("a streak that never lasted the timeout made the watch fatal")
	}
}
