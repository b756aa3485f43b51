// Package console is refundd's operator console: static HTML, JavaScript
// and CSS embedded in the binary, with no CDN and no build step, so it
// works offline. Everything it shows comes from the JSON API with the
// operator's bearer token; it writes data into the page only as text
// (textContent), and the Content-Security-Policy it is served with forbids
// inline script, foreign origins and, through Trusted Types, HTML string
// sinks such as innerHTML.
package console

import (
	"embed"
	"net/http"
	"path"
	"strings"
)

//go:embed index.html app.js app.css favicon.svg
var files embed.FS

// ContentSecurityPolicy is sent with every console file: scripts, styles
// and fetches from this origin only, nothing inline, no plugins, no
// framing, and no HTML string sinks (Trusted Types with no policy).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// Handler serves the console's files at "/" + name ("/" is index.html);
// mount it under /console with http.StripPrefix. Anything else is 404:
// there are no directory listings.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary may bring new files
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name == "" {
			name = "index.html"
		}
		if name != path.Clean(name) || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		if _, err := files.Open(name); err != nil {
			http.NotFound(w, r)
			return
		}
		if name == "index.html" {
			// ServeFileFS would redirect ".../index.html" to "./".
			b, _ := files.ReadFile(name)
			h.Set("Content-Type", "text/html; charset=utf-8")
			if r.Method != http.MethodHead {
				_, _ = w.Write(b)
			}
			return
		}
		http.ServeFileFS(w, r, files, name)
	})
}
