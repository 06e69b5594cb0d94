package main

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with its name and the line, until the
// test ends.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + " " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends line on c and returns the answer, or the error.
func ask(c net.Conn, line string) (string, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestForwarderSwitchCutsOldConnections: after switchTo, a connection made
// before it is broken, and a new one reaches the new target.
func TestForwarderSwitchCutsOldConnections(t *testing.T) {
	t.Parallel()
	f, err := newForwarder(echoServer(t, "old"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, err := net.Dial("tcp", f.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if got, err := ask(before, "a"); err != nil || got != "old a\n" {
		t.Fatalf("before the switch: %q, %v; want \"old a\\n\"", got, err)
	}
	f.switchTo(echoServer(t, "new"))
	if got, err := ask(before, "b"); err == nil {
		t.Fatalf("a connection made before the switch still answers %q", got)
	}
	after, err := net.Dial("tcp", f.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got, err := ask(after, "c"); err != nil || got != "new c\n" {
		t.Fatalf("after the switch: %q, %v; want \"new c\\n\"", got, err)
	}
}
