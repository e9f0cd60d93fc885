// Package console serves the operator console at /console: a single page, embedded in the binary,
// that calls the public API only (through a client generated from openapi/openapi.yaml) with the
// token the person pastes. Its script and stylesheet are built from .tools/console/src by esbuild at
// `make generate` into gen/console. Like /docs it works with no network: the page loads nothing from
// another host, and its Content-Security-Policy allows the browser only the gateway's own origin.
package console

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	genconsole "github.com/chatmsg/gateway/gen/console"
)

//go:embed page/index.html
var index []byte

// CSP keeps the console on its own origin. No inline script or style at all; images may be data: URLs
// (the QR code arrives as one) and blob: URLs (the preview of a file the person picked, before it is
// uploaded). The page posts no HTML form (form-action 'none'): every call goes through fetch.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one built file, its bytes and ETag. The console's bundle is small (tens of kB), so unlike
// the docs renderers it is read and hashed once at start.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// Site serves the console. Routes registers it on a router.
type Site struct {
	assets map[string]asset
}

// New loads the embedded bundle. It fails only when the build embedded a broken gen/console.
func New() (*Site, error) {
	s := &Site{assets: map[string]asset{}}
	for name, ctype := range map[string]string{
		"console.js":  "text/javascript; charset=utf-8",
		"console.css": "text/css; charset=utf-8",
		"MANIFEST":    "text/plain; charset=utf-8",
		"LICENSES":    "text/plain; charset=utf-8",
	} {
		b, err := fs.ReadFile(genconsole.Assets, name)
		if err != nil {
			return nil, fmt.Errorf("console: asset %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		s.assets[name] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, contentType: ctype}
	}
	return s, nil
}

// Router is the part of a chi router Routes needs.
type Router interface {
	Handle(pattern string, h http.Handler)
}

// Routes registers "/console", "/console/" and "/console/…" on r. What the console does not answer
// itself (other methods, unknown paths) goes to next, the API's handler, so errors keep its JSON shape.
func (s *Site) Routes(r Router, next http.Handler) {
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.serve(w, req, next) })
	r.Handle("/console", h)
	r.Handle("/console/*", h)
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		next.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	switch p := r.URL.Path; {
	case p == "/console" || p == "/console/":
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", CSP)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(index))
	case strings.HasPrefix(p, "/console/assets/"):
		a, ok := s.assets[strings.TrimPrefix(p, "/console/assets/")]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// The bundle changes only with a new build; revalidating by ETag costs one 304.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	default:
		next.ServeHTTP(w, r)
	}
}
