package config

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Table defines a program's flags on one FlagSet, each under a --help
// section (PrintSections), its usage naming the variable it is read from
// (Options.EnvName).
type Table struct {
	fs      *flag.FlagSet
	opts    Options
	section map[string]string
	cur     string
}

// NewTable returns a Table defining flags on fs.
func NewTable(fs *flag.FlagSet, opts Options) *Table {
	return &Table{fs: fs, opts: opts, section: map[string]string{}}
}

// In makes section the one the following flags are listed in.
func (t *Table) In(section string) { t.cur = section }

// Section is the section a flag was defined in; "" for none.
func (t *Table) Section(name string) string { return t.section[name] }

// Def defines the flag name over p, whose value is its default: a string,
// time.Duration, int, float64, bool or List. Any other type is a
// programming error and panics.
func (t *Table) Def(p any, name, usage string) {
	t.section[name] = t.cur
	env := " (env " + t.opts.EnvName(name) + ")"
	switch p := p.(type) {
	case *string:
		t.fs.StringVar(p, name, *p, usage+env)
	case *time.Duration:
		t.fs.DurationVar(p, name, *p, usage+env)
	case *int:
		t.fs.IntVar(p, name, *p, usage+env)
	case *float64:
		t.fs.Float64Var(p, name, *p, usage+env)
	case *bool:
		t.fs.BoolVar(p, name, *p, usage+env)
	case *List:
		t.fs.Var(p, name, usage+strings.TrimSuffix(env, ")")+", comma-separated)")
	default:
		panic(fmt.Sprintf("flag %s: no flag type for %T", name, p))
	}
}

// PrintSections writes the flags grouped under the sections of order.
func (t *Table) PrintSections(w io.Writer, order []string) {
	PrintSections(w, t.fs, order, t.Section)
}

// List is a repeatable flag; its variable is comma-separated (ApplyEnv's
// lists).
type List []string

func (l *List) String() string     { return strings.Join(*l, ",") }
func (l *List) Set(v string) error { *l = append(*l, v); return nil }
