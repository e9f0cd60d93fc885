// Package asyncapi embeds the hand-written AsyncAPI document of the gateway's outbound webhooks
// (asyncapi.yaml), the single source of truth for every event name, header, envelope and payload.
// The event catalog and payload types in gen/events are generated from it (see generate.go), and
// internal/eventschema validates webhook bodies and headers against it.
package asyncapi

import _ "embed"

// Document is asyncapi.yaml byte for byte.
//
//go:embed asyncapi.yaml
var Document []byte
