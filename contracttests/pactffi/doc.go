//go:build contract

// Package pactffi is a tiny cgo shim over the Pact FFI (libpact_ffi) for the
// one thing pact-go v2.4.2 cannot do: attach matching rules to message
// metadata. pact-go's WithMetadata takes map[string]string and passes each
// value to pactffi_message_with_metadata, which stores it as a literal string
// even when it is matcher JSON (pact-go issue #217). So a header such as
// X-Svc-Signature could only be pinned to one exact example value, which a
// real producer (fresh timestamp, fresh HMAC) never reproduces.
//
// pactffi_with_metadata (FFI 0.4.x) parses the value as JSON and understands
// the integration-JSON matcher form, e.g.
//
//	{"pact:matcher:type":"regex","regex":"^sha256=[0-9a-f]{64}$","value":"sha256=…"}
//
// Every file carries the `contract` build tag, so a plain `go build ./...`
// never needs cgo or the native library. Build with the environment from
// contracttests/tools/env.sh.
package pactffi
