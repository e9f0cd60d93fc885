package openapi_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/gen/events"
)

// TestAvailableEventsExampleIsTheCatalog keeps the example of GET
// /api/channel-webhooks-available-events equal to the one event catalog
// (gen/events, generated from asyncapi.yaml): the texts a client reads
// there are the texts the service answers and sends in every envelope's
// description. On drift it prints the YAML to paste.
func TestAvailableEventsExampleIsTheCatalog(t *testing.T) {
	doc := load(t)
	op := doc.Paths.Find("/api/channel-webhooks-available-events").Get
	example, ok := op.Responses.Status(200).Value.Content["application/json"].Example.(map[string]any)
	if !ok {
		t.Fatal("listAvailableWebhookEvents: 200 example missing")
	}
	var got, want []string
	for _, item := range example["data"].([]any) {
		m := item.(map[string]any)
		got = append(got, fmt.Sprintf("%v: %v", m["event"], m["description"]))
	}
	var fix strings.Builder
	for _, e := range events.Subscribable() {
		want = append(want, e.Name+": "+e.Description)
		fmt.Fprintf(&fix, "                  - event: %s\n                    description: %s\n", e.Name, e.Description)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the available-events example is not the event catalog;\ngot  %q\nwant %q\nreplace its data with:\n%s", got, want, fix.String())
	}
}

// TestInternalOperationsAreNotInTheClient checks that every operation marked
// x-internal (called by the provider, not by API clients) is excluded from
// the generated Go client, and that the client excludes nothing else.
func TestInternalOperationsAreNotInTheClient(t *testing.T) {
	doc := load(t)
	var internal []string
	for _, o := range operations(doc) {
		if o.op.Extensions["x-internal"] == true {
			internal = append(internal, o.op.OperationID)
			if o.op.Extensions["x-extension"] != true {
				t.Errorf("%s is x-internal but not marked x-extension", o.op.OperationID)
			}
		}
	}
	raw, err := os.ReadFile("client.cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OutputOptions struct {
			Exclude []string `yaml:"exclude-operation-ids"`
		} `yaml:"output-options"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	slices.Sort(internal)
	excluded := slices.Sorted(slices.Values(cfg.OutputOptions.Exclude))
	if len(internal) == 0 || !slices.Equal(internal, excluded) {
		t.Errorf("x-internal operations %v, client.cfg.yaml excludes %v", internal, excluded)
	}
}

// TestPathsOutsideTheDocumentAreExtensions: the API document says every path
// starts with /api and every endpoint takes a Bearer token; an operation
// outside either rule must be marked x-extension.
func TestPathsOutsideTheDocumentAreExtensions(t *testing.T) {
	doc := load(t)
	for _, o := range operations(doc) {
		outside := !strings.HasPrefix(o.path, "/api/") || !secured(doc, o.op)
		if outside && o.op.Extensions["x-extension"] != true {
			t.Errorf("%s %s is outside /api or the Bearer token but not marked x-extension", o.method, o.path)
		}
	}
}
