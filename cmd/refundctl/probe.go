package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probeCommand is the container image's health check: the image has no
// shell and no curl, so the check is a binary that is already there.
func probeCommand() command {
	return command{
		name:    "probe",
		args:    "[URL]",
		summary: "ask a refundd whether it is ready (GET URL, default http://127.0.0.1:8080/readyz): exit 0 ready, 1 not ready, 3 no answer",
		help: `For health checks where there is no shell or curl, such as the container
image's HEALTHCHECK. Any 2xx answer is ready; another status is not (the
body is printed); a refused connection or a timeout is no answer.`,
		options: func() options { return &probeOptions{} },
	}
}

// probeOptions are probe's flags.
type probeOptions struct {
	timeout  time.Duration
	insecure bool
}

func (o *probeOptions) register(fs *flag.FlagSet, c *cli) {
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "give up after this long")
	fs.BoolVar(&o.insecure, "insecure", false, "do not verify the server's TLS certificate (a probe of a local process serving a certificate for another name)")
}

func (o *probeOptions) run(c *cli, args []string) int {
	name := "probe"
	url := "http://127.0.0.1:8080/readyz"
	switch len(args) {
	case 0:
	case 1:
		url = args[0]
	default:
		return c.usageError(name, "give at most one URL")
	}
	ctx, cancel := context.WithTimeout(c.ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c.usageError(name, "%v", err)
	}
	client := &http.Client{}
	if o.insecure {
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return c.fail(name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(c.stdout, "not ready: HTTP %d %s\n", resp.StatusCode, body)
		return exitProblems
	}
	fmt.Fprintf(c.stdout, "ready: HTTP %d\n", resp.StatusCode)
	return exitOK
}
