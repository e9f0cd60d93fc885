// Package openapi embeds the hand-written OpenAPI document so the server can serve it byte-for-byte and validate requests against it.
package openapi

import _ "embed"

// Document is openapi.yaml exactly as written, the single source of truth
// for routes, request validation and generated code.
//
//go:embed openapi.yaml
var Document []byte
