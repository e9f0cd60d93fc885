// Package clientts holds the generated-client suite (build tag `clientts`): a TypeScript client
// generated from openapi/openapi.yaml with openapi-typescript + openapi-fetch, typechecked with
// `tsc --noEmit` and run against a live gateway with the provider and chat-app simulators, every
// answer validated against the document. `make test-clients` runs it; see README.md.
//
// This file carries no build tag on purpose: `go vet ./...` and `go test ./...` stay valid in a
// build without the tag.
package clientts
