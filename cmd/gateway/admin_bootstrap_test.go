package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// bootstrap runs the bootstrap command's own flag parsing and action against a, as runAdmin does.
func bootstrap(t *testing.T, a *app.App, args ...string) (auth.BootstrapResult, error) {
	t.Helper()
	fs := flag.NewFlagSet("admin bootstrap", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	action := adminCommands["bootstrap"].flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	res, err := action(context.Background(), a)
	if err != nil {
		return auth.BootstrapResult{}, err
	}
	return res.(auth.BootstrapResult), nil
}

// A second bootstrap with a company name or an e-mail that exists is refused, names what exists,
// and creates nothing; --force creates the company anyway.
func TestAdminBootstrapRefusesDuplicates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		a, err := app.New(context.Background(), apitest.Config(t), app.Options{DB: db, InsertOnlyJobs: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		first, err := bootstrap(t, a, "--company", "Acme", "--email", "admin@acme.test")
		if err != nil || first.CompanyID == 0 {
			t.Fatalf("first bootstrap: %+v, %v", first, err)
		}

		cases := []struct {
			name string
			args []string
			want []string // the error names what exists; nil = the bootstrap succeeds
		}{
			{"same name and email", []string{"--company", "Acme", "--email", "admin@acme.test"},
				[]string{`a company named "Acme" exists (company_id 1)`, "a user with email admin@acme.test exists (company_id 1)", "--force"}},
			{"same name, other email", []string{"--company", "Acme", "--email", "ops@acme.test"},
				[]string{`a company named "Acme" exists (company_id 1)`}},
			{"name differing in case and spaces", []string{"--company", " ACME ", "--email", "ops@acme.test"},
				[]string{`a company named " ACME " exists (company_id 1)`}},
			{"other name, same email in another case", []string{"--company", "Globex", "--email", "Admin@Acme.test"},
				[]string{"a user with email Admin@Acme.test exists (company_id 1)"}},
			{"another company", []string{"--company", "Globex", "--email", "admin@globex.test"}, nil},
			{"forced duplicate", []string{"--company", "Acme", "--email", "admin@acme.test", "--force"}, nil},
		}
		forced := false // whether the forced case ran, for the check after the loop
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				forced = forced || slices.Contains(tc.args, "--force")
				// tc.args[1] is the company name: a refused bootstrap leaves its count as it was.
				before, err := a.Auth.FindBootstrapConflicts(context.Background(), tc.args[1], "")
				if err != nil {
					t.Fatal(err)
				}
				res, err := bootstrap(t, a, tc.args...)
				after, _ := a.Auth.FindBootstrapConflicts(context.Background(), tc.args[1], "")
				if tc.want == nil {
					if err != nil || res.CompanyID == 0 || !strings.HasPrefix(res.Token, "gw_") {
						t.Errorf("%+v, %v", res, err)
					}
					return
				}
				if err == nil {
					t.Errorf("bootstrapped company %d", res.CompanyID)
					return
				}
				var fe *fault.Error
				if !errors.As(err, &fe) || fe.Kind != fault.Rule {
					t.Errorf("error %v, want a rule error", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q does not say %q", err, w)
					}
				}
				if len(after.CompanyIDs) != len(before.CompanyIDs) {
					t.Errorf("refused, yet companies named %q went from %v to %v", tc.args[1], before.CompanyIDs, after.CompanyIDs)
				}
			})
		}
		if !forced {
			return
		}
		got, err := a.Auth.FindBootstrapConflicts(context.Background(), "acme", "nobody@acme.test")
		if err != nil || len(got.CompanyIDs) != 2 || len(got.UserCompanyIDs) != 0 {
			t.Fatalf("after --force: %+v, %v; want two companies named Acme", got, err)
		}
	})
}

// From the command line the refusal is an error on stderr and exit status 1, with nothing printed.
func TestAdminBootstrapTwiceExitsNonZero(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) string {
		switch k {
		case "DATA_DIR":
			return dir
		case "LOG_LEVEL":
			return "error"
		}
		return ""
	}
	args := []string{"admin", "bootstrap", "--company", "Acme", "--email", "admin@acme.test"}
	if err := run(context.Background(), args, io.Discard, env); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), args, &out, env)
	if err == nil || exitCode(err) != 1 || out.Len() != 0 {
		t.Fatalf("second bootstrap: err %v (exit %d), printed %q", err, exitCode(err), out.String())
	}
}
