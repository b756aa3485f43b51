package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/version"
	"github.com/refundd/refundd/journal"
)

// Exit statuses.
const (
	exitOK       = 0
	exitProblems = 1 // the data has problems; they were reported
	exitUsage    = 2
	exitFailed   = 3 // the work could not be done
	exitNothing  = 4 // reconcile: nothing to compare (an empty range is no agreement)
)

// command is one subcommand.
type command struct {
	name    string // "journal verify"
	args    string // positional synopsis, e.g. "RESERVATION"
	summary string
	help    string // the rest of --help, after the flags
	// options returns the command's options, zero, for one invocation.
	options func() options
}

// options is one command's flags, filled in by parsing, and the function
// that runs the command with them.
type options interface {
	// register declares the flags into the options' own fields.
	register(fs *flag.FlagSet, c *cli)
	// run does the work with the positional arguments and returns the
	// exit status.
	run(c *cli, args []string) int
}

func commands() []command {
	return []command{
		verifyCommand(), archiveCommand(), showCommand(), stateCommand(), exportCommand(), statsCommand(), headCommand(),
		backupCommand(), restoreCommand(), reconcileCommand(), keygenCommand(), probeCommand(),
		// "credentials reload" before "credentials": the first command whose words lead the arguments runs.
		credentialsReloadCommand(), credentialsCommand(),
	}
}

// merchantUsage is the --merchant flag's help, the same on every command
// that lists or folds reservations.
const merchantUsage = "only this merchant's reservations (its name in the merchants file; \"default\" for the --wechatpay-* merchant and reservations from before merchants)"

// cli is one invocation's environment.
type cli struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	http   *http.Client
	// progressOK says stderr is a terminal: long runs report progress there.
	progressOK bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, getenv: getenv, http: &http.Client{Timeout: 10 * time.Minute}}
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			c.progressOK = true
		}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		c.usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "version" || version.Requested(args[:1]) {
		fmt.Fprintln(stdout, version.Get().String("refundctl"))
		return exitOK
	}
	// Commands are one or two words ("journal verify", "backup").
	for _, cmd := range commands() {
		words := strings.Fields(cmd.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == cmd.name {
			return c.runCommand(cmd, args[len(words):])
		}
	}
	// A group's name alone ("journal") lists the group's commands.
	if len(args) == 1 || args[1] == "-h" || args[1] == "--help" || args[1] == "help" {
		if code, ok := c.groupUsage(args[0], len(args) > 1); ok {
			return code
		}
	}
	fmt.Fprintf(stderr, "refundctl: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
	c.usage(stderr)
	return exitUsage
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, "usage: refundctl COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-32s %s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
	fmt.Fprintln(w, "\nJournal sources (every journal command takes exactly one):")
	fmt.Fprintln(w, "  --file PATH    a backup, or a refundd.db nobody is writing")
	fmt.Fprintln(w, "  --data DIR     the data directory of a stopped refundd (DIR/refundd.db)")
	fmt.Fprintln(w, "  --server URL   a running refundd: a hot backup is taken (operator token in --token or REFUNDCTL_TOKEN)")
	fmt.Fprintln(w, "  version                          print the version")
	fmt.Fprintln(w, "\nExit status: 0 all is well, 1 problems found (listed), 2 bad usage, 3 the work could not be done,")
	fmt.Fprintln(w, "4 reconcile found nothing to compare.")
	fmt.Fprintln(w, "Run \"refundctl COMMAND --help\" for a command's flags.")
}

// groupUsage prints the commands of group ("journal"); help says it was
// asked for (stdout, exit 0) rather than a command left out (stderr, 2).
func (c *cli) groupUsage(group string, help bool) (int, bool) {
	w, code := c.stderr, exitUsage
	if help {
		w, code = c.stdout, exitOK
	}
	found := false
	for _, cmd := range commands() {
		if rest, ok := strings.CutPrefix(cmd.name, group+" "); ok {
			if !found {
				fmt.Fprintf(w, "usage: refundctl %s COMMAND [flags] [args]\n\nCommands:\n", group)
				found = true
			}
			fmt.Fprintf(w, "  %-32s %s\n", strings.TrimSpace(group+" "+rest+" "+cmd.args), cmd.summary)
		}
	}
	if !found {
		return 0, false
	}
	fmt.Fprintf(w, "\nRun \"refundctl %s COMMAND --help\" for a command's flags.\n", group)
	return code, true
}

func (c *cli) runCommand(cmd command, args []string) int {
	fs := flag.NewFlagSet("refundctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := cmd.options()
	opts.register(fs, c)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(c.stdout, "usage: refundctl %s [flags] %s\n\n%s\n\nFlags:\n", cmd.name, cmd.args, cmd.summary)
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		if cmd.help != "" {
			fmt.Fprintf(c.stdout, "\n%s\n", strings.TrimSpace(cmd.help))
		}
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "refundctl %s: %v\nRun \"refundctl %s --help\" for usage.\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	return opts.run(c, pos)
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("journal show r1 --json").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError reports bad usage and returns exitUsage.
func (c *cli) usageError(name, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "refundctl %s: %s\nRun \"refundctl %s --help\" for usage.\n", name, fmt.Sprintf(format, args...), name)
	return exitUsage
}

// fail reports that the work could not be done and returns exitFailed.
func (c *cli) fail(name string, err error) int {
	fmt.Fprintf(c.stderr, "refundctl %s: %v\n", name, err)
	return exitFailed
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// source is the journal a command reads.
type source struct {
	file, data, server, token string
	lockTimeout               time.Duration
	// archive is the archive directory; empty: beside the journal file.
	archive string
}

func (s *source) register(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&s.file, "file", "", "journal file: a backup, or a refundd.db nobody is writing")
	fs.StringVar(&s.data, "data", "", "data directory of a stopped refundd (reads DIR/refundd.db)")
	fs.StringVar(&s.server, "server", "", "URL of a running refundd: take a hot backup from it and read that")
	fs.StringVar(&s.token, "token", "", "bearer token for --server (default $REFUNDCTL_TOKEN)")
	fs.DurationVar(&s.lockTimeout, "lock-timeout", time.Second, "how long to wait for the file lock")
	fs.StringVar(&s.archive, "archive", "", "the journal's archive directory (journal archive); default: DIR/archive beside DIR/refundd.db, FILE.archive beside another file")
}

// open opens the journal read-only. The cleanup closes it and removes a
// temporary hot backup.
func (s *source) open(c *cli) (*journal.DB, func(), error) {
	n := 0
	for _, v := range []string{s.file, s.data, s.server} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return nil, nil, errUsage("give exactly one of --file, --data and --server")
	}
	path := s.file
	cleanup := func() {}
	switch {
	case s.data != "":
		path = filepath.Join(s.data, "refundd.db")
	case s.server != "":
		dir, err := os.MkdirTemp("", "refundctl-")
		if err != nil {
			return nil, nil, err
		}
		path = filepath.Join(dir, "backup.db")
		if _, _, err := c.fetchBackup(s.server, s.tokenOr(c), path); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	db, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: s.lockTimeout, ArchiveDir: s.archive})
	if errors.Is(err, journal.ErrLocked) {
		cleanup()
		return nil, nil, fmt.Errorf("%s is held by a running refundd (it allows no reader while it writes); "+
			"take a hot backup with \"refundctl backup --server URL --out FILE\" and read that with --file, or use --server", path)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return db, func() { db.Close(); cleanup() }, nil
}

func (s *source) tokenOr(c *cli) string {
	if s.token != "" {
		return s.token
	}
	return c.getenv("REFUNDCTL_TOKEN")
}

// usageErr marks an error as bad usage (exit 2) rather than failure.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

func errUsage(msg string) error { return usageErr{msg} }

// openOrExit opens the source, reporting a failure with the right status.
func (c *cli) openOrExit(name string, s *source) (*journal.DB, func(), int) {
	db, done, err := s.open(c)
	var ue usageErr
	switch {
	case errors.As(err, &ue):
		return nil, nil, c.usageError(name, "%s", ue.msg)
	case err != nil:
		return nil, nil, c.fail(name, err)
	}
	return db, done, exitOK
}

// parseTime accepts RFC 3339 (2026-03-01T10:00:00+08:00), a date
// (2026-03-01, the start of the day in Beijing time, like WeChat Pay's
// bills), or "yyyy-MM-dd HH:mm:ss" in Beijing time.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateOnly, time.DateTime} {
		if t, err := time.ParseInLocation(layout, s, beijing); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: use RFC 3339 (2026-03-01T10:00:00+08:00), yyyy-MM-dd or \"yyyy-MM-dd HH:mm:ss\" (Beijing time)", s)
}

var beijing = time.FixedZone("CST", 8*3600)

// progress reports counts and rate on stderr while a long run goes on,
// only when stderr is a terminal.
type progress struct {
	c     *cli
	what  string
	start time.Time
	last  time.Time
}

func (c *cli) progress(what string) *progress {
	return &progress{c: c, what: what, start: time.Now()}
}

// report is called with the count so far; it prints at most once a second.
func (p *progress) report(n uint64) {
	if !p.c.progressOK {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	rate := float64(n) / now.Sub(p.start).Seconds()
	fmt.Fprintf(p.c.stderr, "\r%s: %d (%.0f/s)   ", p.what, n, rate)
}

func (p *progress) done() {
	if p.c.progressOK && !p.last.IsZero() {
		fmt.Fprintln(p.c.stderr)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
