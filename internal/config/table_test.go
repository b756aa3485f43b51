package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestTable_DefinesEveryKindInItsSection(t *testing.T) {
	var (
		s    = "x"
		d    = time.Second
		n    = 3
		f    = 0.5
		b    bool
		list List
	)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	tbl := NewTable(fs, Options{EnvPrefix: "APP_"})
	tbl.In("One")
	tbl.Def(&s, "name", "a string")
	tbl.Def(&d, "wait", "a duration")
	tbl.In("Two")
	tbl.Def(&n, "count", "an int")
	tbl.Def(&f, "ratio", "a float")
	tbl.Def(&b, "on", "a bool")
	tbl.Def(&list, "item", "repeatable")
	if err := fs.Parse([]string{"--name", "y", "--wait", "2s", "--count", "4", "--ratio", "1.5", "--on", "--item", "a", "--item", "b"}); err != nil {
		t.Fatal(err)
	}
	if s != "y" || d != 2*time.Second || n != 4 || f != 1.5 || !b || list.String() != "a,b" {
		t.Errorf("parsed %q %v %d %g %v %q", s, d, n, f, b, list.String())
	}
	for name, want := range map[string]string{"name": "One", "wait": "One", "count": "Two", "item": "Two", "nope": ""} {
		if got := tbl.Section(name); got != want {
			t.Errorf("section of %s: %q, want %q", name, got, want)
		}
	}
	if u := fs.Lookup("item").Usage; !strings.Contains(u, "(env APP_ITEM, comma-separated)") {
		t.Errorf("list usage %q does not name its variable and separator", u)
	}
	var out strings.Builder
	tbl.PrintSections(&out, []string{"Two", "One"})
	if two, one := strings.Index(out.String(), "\nTwo:\n"), strings.Index(out.String(), "\nOne:\n"); two < 0 || one < two {
		t.Errorf("sections not printed in order:\n%s", out.String())
	}
}

func TestTable_UnknownTypePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Def of an int64 did not panic")
		}
	}()
	var v int64
	NewTable(flag.NewFlagSet("t", flag.ContinueOnError), Options{}).Def(&v, "v", "")
}
