package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/refundd/refundd/api"
)

func headCommand() command {
	return command{
		name:    "journal head",
		summary: "the journal's chain head (last global and hash) to record outside the journal",
		help: `Record the printed GLOBAL:HASH (or save the --json output) somewhere the
operators of refundd cannot change: an auditor's file, a ticket, another
system. "refundctl journal verify --head GLOBAL:HASH" (or --checkpoint
FILE) later proves that nothing up to that record was changed. With
--server the head comes from GET /v1/audit/head of the running service,
signed when refundd has a checkpoint key.`,
		options: func() options { return &headOptions{} },
	}
}

// headOptions are head's flags.
type headOptions struct {
	src    source
	asJSON bool
}

func (o *headOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the head as JSON (the shape of GET /v1/audit/head)")
}

func (o *headOptions) run(c *cli, args []string) int {
	name := "journal head"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	var v api.HeadView
	if o.src.server != "" && o.src.file == "" && o.src.data == "" {
		var err error
		if v, err = c.fetchHead(o.src.server, o.src.tokenOr(c)); err != nil {
			return c.fail(name, err)
		}
	} else {
		db, done, code := c.openOrExit(name, &o.src)
		if db == nil {
			return code
		}
		defer done()
		var err error
		if v.Head, err = db.ChainHead(c.ctx); err != nil {
			return c.fail(name, err)
		}
		if cp, ok, err := db.LastCheckpoint(c.ctx); err != nil {
			return c.fail(name, err)
		} else if ok {
			v.Checkpoint = &cp
		}
		if v.Epoch, err = db.Epoch(c.ctx); err != nil {
			return c.fail(name, err)
		}
		if v.Restore, err = db.ReconcileRequired(c.ctx); err != nil {
			return c.fail(name, err)
		}
		v.ReconcileRequired = v.Restore != nil
	}
	if o.asJSON {
		c.printJSON(v)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "head        %d:%s\n", v.Head.Global, v.Head.Hash)
	fmt.Fprintf(c.stdout, "time        %s\n", v.Head.Time.UTC().Format(time.RFC3339Nano))
	if v.Head.Signed() {
		fmt.Fprintf(c.stdout, "signed by   %s\n", v.Head.KeyID)
	}
	if v.Checkpoint != nil {
		fmt.Fprintf(c.stdout, "checkpoint  %d:%s at %s (signed: %v)\n", v.Checkpoint.Global, v.Checkpoint.Hash,
			v.Checkpoint.Time.UTC().Format(time.RFC3339), v.Checkpoint.Signed())
	}
	fmt.Fprintf(c.stdout, "epoch       %d\n", v.Epoch)
	if v.ReconcileRequired {
		fmt.Fprintln(c.stdout, "reconcile   REQUIRED: restored from a backup; refunds are paused until refundd has reconciled")
	}
	return exitOK
}

// fetchHead reads GET /v1/audit/head.
func (c *cli) fetchHead(server, token string) (api.HeadView, error) {
	var v api.HeadView
	resp, err := c.getOK(server, token, "/v1/audit/head")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("GET /v1/audit/head: %v", err)
	}
	return v, nil
}

// getOK sends GET route to server with token (if any) and returns the
// response of a 200, whose body the caller closes; any other status is an
// error naming the route, with the start of the server's answer.
func (c *cli) getOK(server, token, route string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, strings.TrimRight(server, "/")+route, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s: %s", route, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}
