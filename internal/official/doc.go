// Package official is the official business channel's link to its
// provider: an HTTP client for the provider's Cloud-API-style interface
// (send text, media and templates, upload media, list templates, fetch a
// contact's media), the messaging Transport of channel type 3 built on it,
// and the inbound side of the provider's webhooks (verification handshake,
// signature check, messages and delivery receipts reported to messaging).
package official
