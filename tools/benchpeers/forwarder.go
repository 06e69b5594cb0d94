package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// forwarder is the Postgres address every sink gets in the failover
// scenario: a TCP forwarder to the current primary, switched to the
// promoted standby as a virtual IP or a DNS name is in a real deployment.
// switchTo cuts every connection to the old server, so that each sink meets
// the failover as it would there: its connections break, and the new ones
// reach the new primary at the same address.
//
// It owns a goroutine that accepts and two per connection; Close stops
// them and waits for them.
type forwarder struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{} // both ends of every forwarded connection
	closed bool
}

// newForwarder listens on a free port of 127.0.0.1 and forwards to target
// (host:port).
func newForwarder(target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the Postgres forwarder: %w", err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// addr is the forwarder's host:port.
func (f *forwarder) addr() string { return f.ln.Addr().String() }

// switchTo makes new connections go to target and closes every open one.
func (f *forwarder) switchTo(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
	for c := range f.conns {
		c.Close()
	}
}

// Close stops accepting, closes every connection and waits for the
// forwarder's goroutines.
func (f *forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		client, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // a transient accept error (EMFILE): the client retries
		}
		f.mu.Lock()
		target := f.target
		f.mu.Unlock()
		// A dead target refuses at once; a stopped one could hang.
		server, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !f.track(client, server) {
			continue
		}
		f.wg.Add(2)
		go f.pipe(client, server)
		go f.pipe(server, client)
	}
}

// track records both ends of a connection; false (both closed) when the
// forwarder is closed.
func (f *forwarder) track(a, b net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		a.Close()
		b.Close()
		return false
	}
	f.conns[a], f.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies from src to dst until either breaks, then closes both: a
// connection is cut as a whole.
func (f *forwarder) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(dst, src)
	src.Close()
	dst.Close()
	f.mu.Lock()
	delete(f.conns, src)
	delete(f.conns, dst)
	f.mu.Unlock()
}
