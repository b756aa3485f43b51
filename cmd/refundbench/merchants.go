package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/journal"
)

// maxBenchMerchants bounds --merchants: four digits in names and prefixes.
const maxBenchMerchants = 9999

// benchMerchant names the ith of n benchmark merchants (1-based) and its
// refund-number prefix. Numbers are zero-padded to n's width, so that no
// prefix starts another, as the merchants file requires:
// bench-001/B001 .. bench-100/B100.
func benchMerchant(i, n int) (name, prefix string) {
	w := len(strconv.Itoa(n))
	return fmt.Sprintf("bench-%0*d", w, i), fmt.Sprintf("B%0*d", w, i)
}

// benchPrefix is the prefix of the benchmark merchant named name.
func benchPrefix(name string) string { return "B" + strings.TrimPrefix(name, "bench-") }

// merchantsFile returns a merchants file (docs/MERCHANTS.md) of n direct
// merchants named by benchMerchant, each with an account of its own (two
// merchants cannot share a direct account). It is meant for refundd
// --provider memory, which reads no credentials: the keys it names
// (REFUNDBENCH_* variables, bench-keys/pub_key.pem) need not exist. The
// file is checked with refundd's own parser before it is returned.
func merchantsFile(n int) ([]byte, error) {
	if n < 1 || n > maxBenchMerchants {
		return nil, fmt.Errorf("--merchants must be 1..%d", maxBenchMerchants)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# refundbench merchants-file --merchants %d\n", n)
	fmt.Fprintf(&b, "# For refundd --provider memory, which reads no credentials: the keys named\n")
	fmt.Fprintf(&b, "# here need not exist. Reservations: refundbench --merchants %d.\n", n)
	for i := 1; i <= n; i++ {
		name, prefix := benchMerchant(i, n)
		fmt.Fprintf(&b, "\n[[accounts]]\nname = %q\nkind = \"direct\"\nmchid = \"19%08d\"\nserial = \"%040X\"\n", name, i, i)
		fmt.Fprintf(&b, "private_key = \"env:REFUNDBENCH_PRIVATE_KEY\"\napiv3_key = \"env:REFUNDBENCH_APIV3_KEY\"\n")
		fmt.Fprintf(&b, "public_key_id = \"PUB_KEY_ID_%020d\"\npublic_key_file = \"bench-keys/pub_key.pem\"\n", i)
		fmt.Fprintf(&b, "\n[[merchants]]\nname = %q\nkind = \"direct\"\naccount = %q\nrefund_prefix = %q\n", name, name, prefix)
	}
	if _, err := merchant.Parse(b.Bytes(), "."); err != nil {
		return nil, fmt.Errorf("generated merchants file is invalid: %w", err)
	}
	return b.Bytes(), nil
}

// merchantsFileCommand is "refundbench merchants-file".
func merchantsFileCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("refundbench merchants-file", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("merchants", 100, "merchants to write (1.."+strconv.Itoa(maxBenchMerchants)+")")
	out := fs.String("out", "", "write to this file (atomically) instead of stdout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("merchants-file: unexpected argument %q", fs.Arg(0))
	}
	data, err := merchantsFile(*n)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(data)
		return err
	}
	return journal.WriteFileAtomic(*out, func(w io.Writer) error { _, err := w.Write(data); return err })
}
