package asyncapi

// Regenerate the event catalog and payload types in gen/events from asyncapi.yaml.
//go:generate go run ../cmd/eventgen -in ../asyncapi/asyncapi.yaml -out ../gen/events
