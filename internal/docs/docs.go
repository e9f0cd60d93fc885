// Package docs serves the gateway's documentation at /docs: the API reference, rendered by Redoc
// from the OpenAPI document at /openapi.yaml, and the webhook event catalog at /docs/events,
// rendered by the AsyncAPI React component from /asyncapi.yaml. The renderers are prebuilt browser
// bundles from pinned npm packages, copied into gen/docs at `make generate` and embedded, so the page
// works with no network: it requests nothing from another host, and its Content-Security-Policy
// forbids the browser to. The two documents and the docs assets answer CORS (GET, any origin), so
// browser tools served elsewhere can load them.
package docs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	gendocs "github.com/chatmsg/gateway/gen/docs"
)

//go:embed pages
var pages embed.FS

// Paths the docs serve outside /docs: the two documents get CORS, "/" redirects to the page.
const (
	OpenAPIPath  = "/openapi.yaml"
	AsyncAPIPath = "/asyncapi.yaml"
)

// csp keeps a page on its own origin. The renderers need inline styles (styled-components, the
// AsyncAPI component's highlighter), and Redoc's search index runs in a worker it starts from a
// blob: URL. Only the event catalog needs 'unsafe-eval': the AsyncAPI parser compiles JSON Schemas
// with new Function (ajv); the API reference runs without it.
func csp(eval bool) string {
	script := "script-src 'self'"
	if eval {
		script += " 'unsafe-eval'"
	}
	return "default-src 'none'; " + script + "; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
}

// asset is one file served under /docs/assets/. Its bytes stay in the binary's embedded data and
// are streamed from there on each request: copying the bundles (4 MB) to the heap at start, and
// hashing them, cost every replica that much resident memory for a page few ever open. The ETag is
// computed on the first request for the asset.
type asset struct {
	fsys        fs.FS
	path        string
	contentType string
	etagOnce    sync.Once
	etag        string
	etagErr     error
}

// tag is the asset's ETag (a prefix of its SHA-256), computed once.
func (a *asset) tag() (string, error) {
	a.etagOnce.Do(func() {
		f, err := a.fsys.Open(a.path)
		if err != nil {
			a.etagErr = err
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			a.etagErr = err
			return
		}
		a.etag = `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
	})
	return a.etag, a.etagErr
}

// Site serves the docs pages and assets. Routes registers it on a router.
type Site struct {
	assets    map[string]*asset
	reference []byte
	events    []byte
}

// New loads the embedded pages and bundles. It fails only when the build embedded a broken set of
// files (a gen/docs that bundle.sh did not write).
func New() (*Site, error) {
	s := &Site{assets: map[string]*asset{}}
	var err error
	if s.reference, err = render("reference.html", frame{Title: "API reference", Current: "/docs",
		Scripts: []string{"/docs/assets/redoc.standalone.js", "/docs/assets/reference.js"}}); err != nil {
		return nil, err
	}
	if s.events, err = render("events.html", frame{Title: "Webhook events", Current: "/docs/events",
		Styles:  []string{"/docs/assets/asyncapi.min.css"},
		Anchors: []navLink{{Href: "#verify-signature", Label: "Verifying a delivery"}},
		Scripts: []string{"/docs/assets/asyncapi.standalone.js", "/docs/assets/events.js"}}); err != nil {
		return nil, err
	}
	add := func(fsys fs.FS, dir string, names ...string) error {
		for _, name := range names {
			p := path.Join(dir, name)
			if _, err := fs.Stat(fsys, p); err != nil {
				return fmt.Errorf("docs: asset %s: %w", name, err)
			}
			s.assets[name] = &asset{fsys: fsys, path: p, contentType: contentType(name)}
		}
		return nil
	}
	if err := add(pages, "pages", "docs.css", "reference.js", "events.js"); err != nil {
		return nil, err
	}
	if err := add(gendocs.Assets, ".", "redoc.standalone.js", "asyncapi.standalone.js", "asyncapi.min.css", "MANIFEST", "LICENSES"); err != nil {
		return nil, err
	}
	return s, nil
}

// frame is what pages/layout.html needs around a page's content.
type frame struct {
	Title, Current  string
	Styles, Scripts []string
	// Anchors link to sections of the page itself.
	Anchors []navLink
}

type navLink struct {
	Href, Label string
	Current     bool
}

// Nav lists the pages, marking the current one.
func (f frame) Nav() []navLink {
	links := []navLink{{Href: "/docs", Label: "API reference"}, {Href: "/docs/events", Label: "Webhook events"}}
	for i := range links {
		links[i].Current = links[i].Href == f.Current
	}
	return links
}

// render executes the layout around one page's content once, at start: the pages are static.
func render(page string, f frame) ([]byte, error) {
	t, err := template.ParseFS(pages, "pages/layout.html", "pages/"+page)
	if err != nil {
		return nil, fmt.Errorf("docs: %s: %w", page, err)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", f); err != nil {
		return nil, fmt.Errorf("docs: %s: %w", page, err)
	}
	return b.Bytes(), nil
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// Router is the part of a chi router Routes needs.
type Router interface {
	Handle(pattern string, h http.Handler)
}

// Routes registers "/", "/docs", "/docs/" and "/docs/…" on r, and CORS in front of the two
// documents. Whatever the docs do not answer themselves (other methods, unknown /docs paths, the
// documents' bodies) goes to next, the API's own handler, so errors keep the API's JSON shape.
func (s *Site) Routes(r Router, next http.Handler) {
	r.Handle("/", readOnly(next, func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/docs", http.StatusFound)
	}))
	pagesHandler := readOnly(next, func(w http.ResponseWriter, req *http.Request) { s.serve(w, req, next) })
	r.Handle("/docs", pagesHandler)
	r.Handle("/docs/*", pagesHandler)
	r.Handle(OpenAPIPath, CORS(next))
	r.Handle(AsyncAPIPath, CORS(next))
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	switch p := r.URL.Path; {
	case p == "/docs" || p == "/docs/":
		page(w, r, s.reference, csp(false))
	case p == "/docs/events" || p == "/docs/events/":
		page(w, r, s.events, csp(true))
	case strings.HasPrefix(p, "/docs/assets/"):
		a, ok := s.assets[strings.TrimPrefix(p, "/docs/assets/")]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		etag, err := a.tag()
		if err != nil {
			// Only a broken build gets here (New checked the file exists).
			http.Error(w, "docs asset unavailable", http.StatusInternalServerError)
			return
		}
		f, err := a.fsys.Open(a.path)
		if err != nil {
			http.Error(w, "docs asset unavailable", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		body, ok := f.(io.ReadSeeker) // embed.FS files are; http.ServeContent needs Seek for ranges
		if !ok {
			http.Error(w, "docs asset unavailable", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", etag)
		// The bundles change only with a new build; revalidating by ETag costs one 304.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, body)
	default:
		next.ServeHTTP(w, r)
	}
}

func page(w http.ResponseWriter, r *http.Request, body []byte, policy string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// readOnly answers GET and HEAD (with CORS) through h and a CORS preflight itself; any other method
// goes to next, which answers it the way the API answers an unknown method.
func readOnly(next http.Handler, h http.HandlerFunc) http.Handler {
	return CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		h(w, r)
	}))
}

// CORS lets a page of any origin GET what next serves: GET and HEAD answers carry
// Access-Control-Allow-Origin: *, and a preflight (OPTIONS with Access-Control-Request-Method GET
// or HEAD) is answered 204 here. No credentials are involved: the documents and the docs are public.
// Other requests pass to next untouched.
func CORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			h.Set("Access-Control-Allow-Origin", "*")
		case r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && isReadMethod(r.Header.Get("Access-Control-Request-Method")):
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Allow-Methods", "GET, HEAD")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isReadMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }
