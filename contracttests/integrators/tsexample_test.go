//go:build contract

package integrators

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTypeScriptConsumerPact runs the TypeScript example (pact-js, pinned
// in ts/package-lock.json; its native library comes from npm, in the
// @pact-foundation/pact-core platform package) and checks the pact file it
// writes names both events. The webhookevents provider verifies that file.
func TestTypeScriptConsumerPact(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm is required: %v", err)
	}
	file := filepath.Join("pacts", "example-crm-sync-ts-gateway-webhooks.json")
	// The pact file merges with what is on disk: start from nothing.
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	steps := [][]string{
		{"bash", "ts/npm-ci.sh"},
		{"npx", "--no-install", "tsc", "-p", "."},
		{"node", "--test", "build/"},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = "ts"
		if s[0] == "bash" {
			cmd.Dir = "."
		}
		cmd.Env = append(os.Environ(), "PACT_DO_NOT_TRACK=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", s, err, out)
		}
		if testing.Verbose() {
			t.Logf("%v:\n%s", s, out)
		}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the TypeScript consumer wrote no pact: %v", err)
	}
	var pact struct {
		Provider struct{ Name string } `json:"provider"`
		Messages []struct {
			Description string `json:"description"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &pact); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a delivery of crm.business.won": false, "a delivery of omnichat.message.received": false}
	for _, m := range pact.Messages {
		if _, ok := want[m.Description]; ok {
			want[m.Description] = true
		}
	}
	for d, ok := range want {
		if !ok || pact.Provider.Name != "gateway-webhooks" {
			t.Fatalf("%s: no %q for gateway-webhooks in\n%s", file, d, raw)
		}
	}
}
