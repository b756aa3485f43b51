package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

func keygenCommand() command {
	return command{
		name:    "keygen",
		summary: "make an Ed25519 key pair for signing checkpoints (refundd's checkpoint key)",
		help: `Writes the private key to --out (PKCS#8 PEM, mode 0600) and the public
key to --out.pub (PKIX PEM). Give the private key to refundd, the public
key to auditors ("refundctl journal verify --public-key").`,
		options: func() options { return &keygenOptions{} },
	}
}

// keygenOptions are keygen's flags.
type keygenOptions struct {
	out string
}

func (o *keygenOptions) register(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&o.out, "out", "", "private key file to create (required); the public key goes to FILE.pub")
}

func (o *keygenOptions) run(c *cli, args []string) int {
	name := "keygen"
	if o.out == "" || len(args) > 0 {
		return c.usageError(name, "give --out FILE and no arguments")
	}
	priv, pub, err := audit.GenerateKey()
	if err != nil {
		return c.fail(name, err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{o.out, priv, 0o600}, {o.out + ".pub", pub, 0o644}} {
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return c.fail(name, err)
		}
		_, err = fh.Write(f.data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return c.fail(name, err)
		}
	}
	pk, _ := audit.ParsePublicKey(pub)
	fmt.Fprintf(c.stdout, "private key %s\npublic key  %s.pub\nkey id      %s\n", o.out, o.out, journal.KeyID(pk))
	return exitOK
}
