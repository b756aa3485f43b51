package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/client"
	"github.com/refundd/refundd/internal/wechatpay"
)

// renewalWindow is how close to its last certificate's expiry an account
// counts as a problem: the same 30 days as the expiring metric's default.
const renewalWindow = 30 * 24 * time.Hour

func credentialsCommand() command {
	return command{
		name:    "credentials",
		summary: "show the WeChat Pay keys and certificates a running refundd holds, per account (GET /v1/admin/credentials)",
		help: `Asks a running refundd (--server, an operator token) which WeChat Pay keys it
verifies with, per account: each public key and platform certificate, where
it came from and until when it is valid, whether the APIv3 and APIv2 keys
are loaded (never their values) and, in certificate mode, the downloads.

Exit status 1 when an account needs action: it verifies with platform
certificates only and the last of them expires within 30 days, or its
certificate downloads are failing. A cron job can run it as a check.`,
		options: func() options { return &credentialsOptions{} },
	}
}

func credentialsReloadCommand() command {
	return command{
		name:    "credentials reload",
		summary: "make a running refundd reread its merchants file and credential files (as SIGHUP), then show them",
		help: `POST /v1/admin/credentials/reload (an operator token): refundd rereads every
credential file and swaps them in only if all of them are good. A bad file
is refused and the running credentials stay (exit 1, the reason printed); a
change that needs a restart is refused too and says so.`,
		options: func() options { return &credentialsOptions{reload: true} },
	}
}

type credentialsOptions struct {
	server, token string
	json          bool
	reload        bool
	timeout       time.Duration
}

func (o *credentialsOptions) register(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&o.server, "server", "", "URL of the running refundd (required)")
	fs.StringVar(&o.token, "token", "", "operator bearer token (default $REFUNDCTL_TOKEN)")
	fs.BoolVar(&o.json, "json", false, "print the answer as JSON")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
}

func (o *credentialsOptions) run(c *cli, args []string) int {
	name := "credentials"
	if o.reload {
		name = "credentials reload"
	}
	if len(args) > 0 {
		return c.usageError(name, "takes no arguments, got %q", strings.Join(args, " "))
	}
	if o.server == "" {
		return c.usageError(name, "--server is required")
	}
	token := o.token
	if token == "" {
		token = c.getenv("REFUNDCTL_TOKEN")
	}
	cl, err := client.New(o.server, client.Options{Token: token, HTTPClient: c.http, MaxAttempts: 1})
	if err != nil {
		return c.usageError(name, "--server: %v", err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, o.timeout)
	defer cancel()
	var creds *client.Credentials
	if o.reload {
		creds, err = cl.ReloadCredentials(ctx)
	} else {
		creds, err = cl.Credentials(ctx)
	}
	var ae *client.Error
	if o.reload && errors.As(err, &ae) && (ae.Code == client.CodeCredentialsInvalid || ae.Code == client.CodeRestartRequired) {
		fmt.Fprintf(c.stderr, "refundctl %s: refused, the running credentials stay: %s\n", name, ae.Message)
		return exitProblems
	}
	if err != nil {
		return c.fail(name, err)
	}
	if o.json {
		c.printJSON(creds)
	} else {
		printCredentials(c, creds, time.Now())
	}
	if problems := credentialProblems(creds, time.Now()); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(c.stderr, "refundctl %s: %s\n", name, p)
		}
		return exitProblems
	}
	return exitOK
}

// credentialProblems lists what an operator must act on.
func credentialProblems(creds *client.Credentials, now time.Time) []string {
	var out []string
	for _, a := range creds.Accounts {
		if due, _ := wechatpay.RenewalDue(keyInfos(a.Keys), now, renewalWindow); due {
			out = append(out, fmt.Sprintf("account %s (mchid %s): its last platform certificate expires within 30 days; "+
				"download the next one or move to the WeChat Pay public key", a.Account, a.MchID))
		}
		if d := a.Download; d != nil && d.ConsecutiveFailures > 0 {
			out = append(out, fmt.Sprintf("account %s (mchid %s): the last %d certificate downloads failed: %s",
				a.Account, a.MchID, d.ConsecutiveFailures, d.LastError))
		}
	}
	return out
}

func keyInfos(keys []client.CredentialKey) []wechatpay.KeyInfo {
	out := make([]wechatpay.KeyInfo, 0, len(keys))
	for _, k := range keys {
		ki := wechatpay.KeyInfo{Serial: k.Serial, Certificate: k.Kind == api.KeyKindCertificate}
		if k.NotAfter != nil {
			ki.NotAfter = *k.NotAfter
		}
		out = append(out, ki)
	}
	return out
}

func printCredentials(c *cli, creds *client.Credentials, now time.Time) {
	loaded := func(b bool) string {
		if b {
			return "loaded"
		}
		return "none"
	}
	if len(creds.Accounts) == 0 {
		fmt.Fprintln(c.stdout, "no WeChat Pay account (the provider reads no credentials)")
	}
	for i, a := range creds.Accounts {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		fmt.Fprintf(c.stdout, "account %s  mchid %s  merchant serial %s  APIv3 key %s  APIv2 key %s\n",
			a.Account, a.MchID, a.MerchantSerial, loaded(a.APIv3Key), loaded(a.APIv2Key))
		for _, k := range a.Keys {
			line := fmt.Sprintf("  %-20s %-44s from %s", k.Kind, k.Serial, k.Source)
			if k.NotAfter != nil {
				left := k.NotAfter.Sub(now)
				line += fmt.Sprintf(", valid until %s (%s)", k.NotAfter.UTC().Format(time.RFC3339), daysLeft(left))
			}
			fmt.Fprintln(c.stdout, line)
		}
		if d := a.Download; d != nil {
			fmt.Fprintf(c.stdout, "  downloads every %s: %d ok, %d failed (%d in a row), %d on an unknown serial (%d held back)",
				d.Refresh, d.Downloads, d.Failures, d.ConsecutiveFailures, d.OnDemand, d.OnDemandDropped)
			if !d.LastSuccess.IsZero() {
				fmt.Fprintf(c.stdout, "; last success %s", d.LastSuccess.UTC().Format(time.RFC3339))
			}
			if d.LastError != "" {
				fmt.Fprintf(c.stdout, "; last error: %s", d.LastError)
			}
			fmt.Fprintln(c.stdout)
		}
	}
}

func daysLeft(d time.Duration) string {
	days := int(d / (24 * time.Hour))
	switch {
	case d < 0:
		return "expired"
	case days == 1:
		return "1 day left"
	default:
		return fmt.Sprintf("%d days left", days)
	}
}
