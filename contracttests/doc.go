// Package contracttests holds the Pact contract tests (build tag `contract`).
//
// This file carries no build tag on purpose: it keeps
// `go test ./contracttests/...` and `go vet ./contracttests/...` valid (and
// green) in a build without the tag, where every other package here is
// excluded. See README.md for how to run the contract tests.
package contracttests
