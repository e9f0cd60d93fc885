// Package deploy holds the deployment kit (Dockerfile, compose.yaml, Kubernetes manifests, alert
// rules); its tests are `make check-deploy`. They read the environment each kit gives the gateway,
// check every name against the settings the binary knows, and start the real binary with that
// environment — the migration Job's and the Deployment's arguments, probed on the Deployment's
// probe paths — on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the test's own database
	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/internal/config"
)

// kit is what one deployment recipe gives the gateway process.
type kit struct {
	name    string
	env     map[string]string
	migrate []string // arguments of the migration step; nil when the kit has none
	serve   []string
	probes  []string // HTTP paths the orchestrator probes, all expected to answer 200
}

// settingNames are the environment variables `gateway serve` reads, taken from the flags' help
// ("… ($NAME)") so the list cannot drift from internal/config.
func settingNames(t *testing.T) map[string]bool {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	config.Bind(fs, func(string) string { return "" })
	re := regexp.MustCompile(`\(\$([A-Z0-9_]+)\)`)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		for _, m := range re.FindAllStringSubmatch(f.Usage, -1) {
			names[m[1]] = true
		}
	})
	if !names[config.EnvDatabaseURL] || !names[config.EnvListenAddr] {
		t.Fatalf("no setting names found in the flags' help: %v", names)
	}
	return names
}

// yamlDocs decodes every document of a multi-document YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err == io.EOF {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// dig walks nested maps and lists: keys for maps, ints for lists.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func stringList(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func stringMap(t *testing.T, v any, what string) map[string]string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a map: %v", what, v)
	}
	out := map[string]string{}
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// kubernetesKit reads deploy/kubernetes: the ConfigMap and Secret the containers take with
// envFrom, the Job's and the Deployment's arguments, and the Deployment's probe paths.
func kubernetesKit(t *testing.T) kit {
	t.Helper()
	byKind := map[string]map[string]any{}
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			if kind, _ := d["kind"].(string); kind != "" && kind != "Kustomization" {
				if byKind[kind] != nil {
					t.Fatalf("two %s documents; the check reads one", kind)
				}
				byKind[kind] = d
			}
		}
	}
	for _, kind := range []string{"ConfigMap", "Secret", "Deployment", "Job", "Service", "PodDisruptionBudget"} {
		if byKind[kind] == nil {
			t.Fatalf("deploy/kubernetes has no %s", kind)
		}
	}
	env := stringMap(t, byKind["ConfigMap"]["data"], "ConfigMap data")
	for k, v := range stringMap(t, byKind["Secret"]["stringData"], "Secret stringData") {
		if _, dup := env[k]; dup {
			t.Errorf("%s is in both the ConfigMap and the Secret", k)
		}
		env[k] = v
	}
	pod := dig(byKind["Deployment"], "spec", "template", "spec", "containers", 0)
	job := dig(byKind["Job"], "spec", "template", "spec", "containers", 0)
	for name, c := range map[string]any{"Deployment": pod, "Job": job} {
		var refs []string
		for _, e := range dig(c, "envFrom").([]any) {
			for _, kind := range []string{"configMapRef", "secretRef"} {
				if n := dig(e, kind, "name"); n != nil {
					refs = append(refs, kind+"="+fmt.Sprint(n))
				}
			}
		}
		sort.Strings(refs)
		if got := strings.Join(refs, ","); got != "configMapRef=gateway,secretRef=gateway" {
			t.Errorf("%s takes its environment from %s; want the ConfigMap and the Secret gateway", name, got)
		}
		if dig(c, "env") != nil {
			t.Errorf("%s sets env of its own; the check reads only envFrom", name)
		}
	}
	k := kit{name: "kubernetes", env: env, migrate: stringList(dig(job, "args")), serve: stringList(dig(pod, "args"))}
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		if p := dig(pod, probe, "httpGet", "path"); p != nil {
			k.probes = append(k.probes, fmt.Sprint(p))
		}
	}
	if len(k.probes) < 2 {
		t.Fatalf("the Deployment has %d HTTP probes; want readiness and liveness", len(k.probes))
	}
	return k
}

// composeKit reads compose.yaml: the gateway service's environment, interpolated the way
// compose does with the variables its header asks for, and the migrate and gateway commands.
func composeKit(t *testing.T) kit {
	t.Helper()
	docs := yamlDocs(t, "compose.yaml")
	services := docs[0]["services"]
	vars := map[string]string{"POSTGRES_PASSWORD": "compose-check", "SECRETS_KEY": newSecretsKey(t)}
	interpolate := regexp.MustCompile(`\$\{([A-Z_]+)(?::([?-])((?:[^{}]|\$\{[^}]*\})*))?\}`)
	env := map[string]string{}
	for k, v := range stringMap(t, dig(services, "gateway", "environment"), "gateway environment") {
		env[k] = interpolate.ReplaceAllStringFunc(v, func(ref string) string {
			m := interpolate.FindStringSubmatch(ref)
			if val, ok := vars[m[1]]; ok {
				return val
			}
			if m[2] == "-" {
				return m[3]
			}
			t.Fatalf("compose.yaml needs %s, which the check does not set", m[1])
			return ""
		})
	}
	if got := stringMap(t, dig(services, "migrate", "environment"), "migrate environment"); fmt.Sprint(got) != fmt.Sprint(stringMap(t, dig(services, "gateway", "environment"), "")) {
		t.Errorf("migrate and gateway have different environments")
	}
	return kit{name: "compose", env: env, migrate: stringList(dig(services, "migrate", "command")),
		serve: stringList(dig(services, "gateway", "command")), probes: []string{"/readyz"}}
}

// imageKit is the Dockerfile's own ENV: a single node on SQLite in the /data volume.
func imageKit(t *testing.T) kit {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	env := map[string]string{}
	var cmd []string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			cmd = strings.Split(strings.Trim(rest, `[]" `), `", "`)
		}
		if strings.HasPrefix(line, "HEALTHCHECK ") && !strings.HasSuffix(line, `CMD ["/gateway", "healthcheck"]`) {
			t.Errorf("the image's HEALTHCHECK is not `gateway healthcheck`: %s", line)
		}
	}
	return kit{name: "image", env: env, serve: cmd, probes: []string{"/healthz", "/readyz"}}
}

func newSecretsKey(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "check:" + base64.StdEncoding.EncodeToString(key)
}

func TestEnvironmentNamesAreSettings(t *testing.T) {
	known := settingNames(t)
	for _, k := range []kit{kubernetesKit(t), composeKit(t), imageKit(t)} {
		t.Run(k.name, func(t *testing.T) {
			for name := range k.env {
				if !known[name] {
					t.Errorf("%s is not a setting of gateway serve (internal/config)", name)
				}
			}
			if k.name != "image" && k.env[config.EnvConnector] == "" {
				t.Errorf("%s leaves %s to its default; a deployment chooses its driver", k.name, config.EnvConnector)
			}
		})
	}
}

// local is the one change the check makes to a kit's environment: what names another host or
// holds a placeholder points at this machine (a fresh PostgreSQL database or SQLite, the local
// Redis when it answers, a temporary data directory, a free loopback port, a fresh key). Every
// other value reaches the binary as the kit wrote it.
func local(t *testing.T, k kit, databaseURL string) (map[string]string, string) {
	t.Helper()
	env := map[string]string{}
	for name, v := range k.env {
		env[name] = v
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env[config.EnvListenAddr] = addr
	env[config.EnvDataDir] = t.TempDir()
	if _, ok := env[config.EnvDatabaseURL]; ok {
		env[config.EnvDatabaseURL] = databaseURL
	}
	if _, ok := env[config.EnvRedisURL]; ok {
		env[config.EnvRedisURL] = ""
		if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err == nil {
			c.Close()
			env[config.EnvRedisURL] = "redis://127.0.0.1:6379/0"
		}
	}
	if key := env[config.EnvSecretsKey]; strings.Contains(key, "REPLACE_ME") {
		env[config.EnvSecretsKey] = newSecretsKey(t)
	}
	for name, v := range env {
		if strings.Contains(v, "REPLACE_ME") {
			t.Fatalf("%s keeps a placeholder the check does not replace: %s", name, v)
		}
	}
	return env, addr
}

// freshDatabase creates a PostgreSQL database of its own next to TEST_DATABASE_URL's and drops
// it at the end; "" (SQLite) without TEST_DATABASE_URL.
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		return ""
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("deploycheck_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// TestKitsStartTheGateway is make check-deploy's run: each kit's migration step, then its serve
// command, with its environment; every probe path answers 200, and so does the image's
// HEALTHCHECK command (`gateway healthcheck`) with the same environment.
func TestKitsStartTheGateway(t *testing.T) {
	bin := buildGateway(t)
	for _, k := range []kit{kubernetesKit(t), composeKit(t), imageKit(t)} {
		t.Run(k.name, func(t *testing.T) {
			env, addr := local(t, k, freshDatabase(t))
			engine := "SQLite"
			if env[config.EnvDatabaseURL] != "" {
				engine = "PostgreSQL"
			}
			t.Logf("%s on %s, Redis %q", k.name, engine, env[config.EnvRedisURL])
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if k.migrate != nil {
				cmd := exec.CommandContext(ctx, bin, k.migrate...)
				cmd.Env = environ(env)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("gateway %v: %v\n%s", k.migrate, err, out)
				}
			}
			var log bytes.Buffer
			serve := exec.CommandContext(ctx, bin, k.serve...)
			serve.Env, serve.Stdout, serve.Stderr = environ(env), &log, &log
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- serve.Wait() }()
			defer func() {
				_ = serve.Process.Signal(os.Interrupt)
				select {
				case err := <-exited:
					if err != nil {
						t.Errorf("gateway serve did not stop cleanly: %v\n%s", err, log.String())
					}
				case <-time.After(30 * time.Second):
					t.Errorf("gateway serve did not stop within 30 s")
				}
			}()
			deadline := time.Now().Add(90 * time.Second)
			for _, path := range k.probes {
				for {
					resp, err := http.Get("http://" + addr + path)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					select {
					case err := <-exited:
						exited <- err
						t.Fatalf("gateway serve exited: %v\n%s", err, log.String())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s did not answer 200 within 90 s (last: %v)\n%s", path, err, log.String())
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			check := exec.CommandContext(ctx, bin, "healthcheck", "-ready")
			check.Env = environ(env)
			if out, err := check.CombinedOutput(); err != nil {
				t.Fatalf("gateway healthcheck -ready: %v\n%s", err, out)
			}
		})
	}
}
