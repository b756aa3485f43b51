package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ApplyEnv sets every flag of fs whose environment variable (opts.EnvName)
// is set, so that fs.Parse, called after it, lets the command line win. The
// variable of a flag named in lists holds comma-separated values, each
// given to the flag's Set (a repeatable flag). Errors name the variable.
func ApplyEnv(fs *flag.FlagSet, opts Options, lists ...string) error {
	opts = opts.withDefaults()
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := opts.EnvName(f.Name)
		v := opts.Getenv(env)
		if v == "" {
			return
		}
		values := []string{v}
		for _, l := range lists {
			if l == f.Name {
				values = strings.Split(v, ",")
			}
		}
		for _, x := range values {
			if err := fs.Set(f.Name, x); err != nil {
				if opts.Secret(f.Name) { // the value, and the flag's message quoting it, stay out
					errs = append(errs, fmt.Errorf("%w: %s: value refused", ErrInvalidValue, env))
				} else {
					errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrInvalidValue, env, v, err))
				}
				return
			}
		}
	})
	return errors.Join(errs...)
}

// WithAliases returns getenv reading each old variable of aliases (old
// name -> the name that replaced it) for its replacement when only the old
// one is set, and a warning for each old one that is set, for the
// start-up log.
func WithAliases(getenv func(string) string, aliases map[string]string) (func(string) string, []string) {
	var warnings []string
	byNew := map[string]string{}
	for old, repl := range aliases {
		if getenv(old) == "" {
			continue
		}
		if getenv(repl) == "" {
			byNew[repl] = old
		}
		warnings = append(warnings, fmt.Sprintf("%s is deprecated: set %s instead", old, repl))
	}
	return func(k string) string {
		if old, ok := byNew[k]; ok {
			return getenv(old)
		}
		return getenv(k)
	}, warnings
}

// PrintSections writes fs's flags as flag.PrintDefaults does, grouped
// under the titles of order; section names each flag's title. A flag in no
// listed section is not shown.
func PrintSections(w io.Writer, fs *flag.FlagSet, order []string, section func(flagName string) string) {
	for _, title := range order {
		sub := flag.NewFlagSet(title, flag.ContinueOnError)
		sub.SetOutput(w)
		fs.VisitAll(func(f *flag.Flag) {
			if section(f.Name) == title {
				sub.Var(f.Value, f.Name, f.Usage)
				sub.Lookup(f.Name).DefValue = f.DefValue // not the value the environment set
			}
		})
		fmt.Fprintf(w, "\n%s:\n", title)
		sub.PrintDefaults()
	}
}
