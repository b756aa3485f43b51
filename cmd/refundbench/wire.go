package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// wire is the load generator's HTTP/1.1 client for plain http:// targets:
// keep-alive connections, one request at a time each, the request written
// by hand and the answer read by net/http's own parser (http.ReadResponse).
//
// net/http's Transport runs a reader and a writer goroutine per connection
// and hands every request and answer between them and the caller: with
// refundd at ~0.33 ms of CPU per lifecycle, the load generator took a third
// of the machine's CPU, shared with the service under test. Both services
// are measured through the same client, so the ratio stays fair; they just
// get more of the machine.
type wire struct {
	addr    string // host:port to dial
	host    string // Host header
	timeout time.Duration
	idle    chan *wireConn
}

type wireConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// maxBody bounds an answer read into memory; a longer one fails the
// exchange and drops the connection.
const maxBody = 8 << 20

func newWire(hostport string, timeout time.Duration, conns int) *wire {
	return &wire{addr: hostport, host: hostport, timeout: timeout, idle: make(chan *wireConn, conns)}
}

func (w *wire) close() {
	for {
		select {
		case wc := <-w.idle:
			_ = wc.c.Close()
		default:
			return
		}
	}
}

func (w *wire) dial(ctx context.Context) (*wireConn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return nil, err
	}
	return &wireConn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 8<<10)}, nil
}

// roundTrip sends one request and reads its whole answer. A connection the
// server closed while it sat idle fails the first write or read of the next
// request before any answer: that request is sent again once, on a new
// connection, as net/http's Transport does.
func (w *wire) roundTrip(ctx context.Context, method, path string, header http.Header, token string, body []byte) (int, []byte, error) {
	var wc *wireConn
	select {
	case wc = <-w.idle:
		status, raw, err := w.exchange(ctx, wc, method, path, header, token, body)
		if err == nil || !staleConn(err) {
			return status, raw, err
		}
	default:
	}
	wc, err := w.dial(ctx)
	if err != nil {
		return 0, nil, err
	}
	return w.exchange(ctx, wc, method, path, header, token, body)
}

// staleConn reports an error of a kept-alive connection the server had
// closed: the request could not be written, or the connection ended
// (closed or reset) before the first byte of an answer. A timeout is not
// one.
func staleConn(err error) bool {
	var se *sendError
	var na *noAnswerError
	if errors.As(err, &se) {
		return true
	}
	return errors.As(err, &na) && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

// sendError is a failure to write the request.
type sendError struct{ err error }

func (e *sendError) Error() string { return "write request: " + e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// noAnswerError is a connection that ended before any answer.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string { return "no answer: " + e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

func (w *wire) exchange(ctx context.Context, wc *wireConn, method, path string, header http.Header, token string, body []byte) (status int, raw []byte, err error) {
	keep := false
	defer func() {
		if keep {
			select {
			case w.idle <- wc:
				return
			default:
			}
		}
		_ = wc.c.Close()
	}()
	deadline := time.Now().Add(w.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := wc.c.SetDeadline(deadline); err != nil {
		return 0, nil, err
	}
	// A cancelled ctx ends a request in flight by expiring the deadline.
	stop := context.AfterFunc(ctx, func() { _ = wc.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	bw := wc.bw
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(w.host)
	bw.WriteString("\r\n")
	if token != "" {
		bw.WriteString("Authorization: Bearer ")
		bw.WriteString(token)
		bw.WriteString("\r\n")
	}
	for k, vs := range header {
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if body != nil {
		if header.Get("Content-Type") == "" {
			bw.WriteString("Content-Type: application/json\r\n")
		}
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(body)))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	bw.Write(body)
	if err := bw.Flush(); err != nil {
		return 0, nil, &sendError{err}
	}
	if _, err := wc.br.Peek(1); err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, &noAnswerError{err}
	}
	resp, err := http.ReadResponse(wc.br, nil)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, err
	}
	raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read answer: %w", err)
	}
	if len(raw) > maxBody {
		return resp.StatusCode, nil, fmt.Errorf("answer longer than %d bytes", maxBody)
	}
	keep = !resp.Close
	return resp.StatusCode, raw, nil
}
