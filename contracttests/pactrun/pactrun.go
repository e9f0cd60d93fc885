//go:build contract

// Package pactrun is how the contract suites run: where pact files live,
// the consumer → provider → "a broken provider fails" order inside one
// test, and the child-process pattern that turns "this verification must
// fail" into an assertion (pact-go reports failures only through t.Error).
package pactrun

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pact-foundation/pact-go/v2/models"
)

// Dir is contracttests/pacts, absolute. pact-go's default is ./pacts of
// the test's package, so every suite sets PactDir to this explicitly.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("pactrun: cannot locate the source directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "pacts")
}

// File is the pact file pact-go writes for a consumer/provider pair.
func File(consumer, provider string) string {
	return filepath.Join(Dir(), consumer+"-"+provider+".json")
}

// Remove deletes the pact file of a pair before its consumer test runs:
// pact files merge with what is on disk, so a removed interaction would
// otherwise survive. run.sh deletes the whole directory too; this makes a
// single package run (go test -run …) just as safe.
func Remove(t *testing.T, consumer, provider string) {
	t.Helper()
	if err := os.Remove(File(consumer, provider)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// Step is one ordered part of a contract test.
type Step struct {
	Name string
	Run  func(*testing.T)
}

// Steps runs steps in order as subtests and stops at the first failure:
// a provider step is meaningless without the pact its consumer step wrote.
func Steps(t *testing.T, steps ...Step) {
	t.Helper()
	for _, s := range steps {
		if !t.Run(s.Name, s.Run) {
			t.Fatalf("step %q failed; later steps skipped", s.Name)
		}
	}
}

// ChildEnv is set in the environment of a child process started by
// ExpectFailure; its value names the breakage to apply.
const ChildEnv = "CONTRACT_BREAK"

// Breakage returns the breakage this process must apply ("" in a normal
// run).
func Breakage() string { return os.Getenv(ChildEnv) }

// SkipUnlessChild skips a test that exists only to be run by ExpectFailure.
func SkipUnlessChild(t *testing.T) {
	t.Helper()
	if Breakage() == "" {
		t.Skip("negative case; started by the contract test with " + ChildEnv + " set")
	}
}

// ExpectFailure re-runs this test binary for the single test named test
// with ChildEnv=breakage, and asserts that it fails and that its output
// contains every string in wants (so the failure is readable: it names
// the header, field or check that broke). It returns the child's output.
func ExpectFailure(t *testing.T, test, breakage string, wants ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ChildEnv+"="+breakage)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("breakage %q: the verification passed (err=%v); it must fail. Output:\n%s", breakage, err, out)
	}
	for _, w := range wants {
		if !strings.Contains(string(out), w) {
			t.Errorf("breakage %q: the failure does not mention %q. Output:\n%s", breakage, w, out)
		}
	}
	return string(out)
}

// Params returns the parameters of a provider state. pact-go v2.4.2
// passes state handlers the whole state-change body minus action and state,
// so the consumer's parameters arrive nested under "params"; message
// handlers get them directly. Params accepts both.
func Params(s models.ProviderState) map[string]any {
	if nested, ok := s.Parameters["params"].(map[string]any); ok {
		return nested
	}
	return s.Parameters
}
