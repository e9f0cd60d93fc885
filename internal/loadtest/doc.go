// Package loadtest drives the real gateway binary through its public API
// and CLI to measure it (cmd/loadgen run) and to break it on purpose
// (cmd/loadgen chaos).
//
// It builds cmd/gateway and cmd/providersim with production defaults,
// starts them on loopback on a database it creates and drops (a fresh
// PostgreSQL database, or a SQLite file in a temporary data directory),
// sets up companies, tokens and official channels through `gateway admin`,
// the provider simulator's control API and the gateway's own API, and then
// sends requests the way clients do. Nothing here reaches into the
// gateway's packages or tables: what it measures and asserts is what a
// client, a webhook receiver and the provider can see.
//
// Latency is measured from the time a request was meant to be sent
// (open loop, paced) or from when it was sent (closed loop, N connections),
// so a stalled server cannot hide its stalls by slowing the client down
// (no coordinated omission). The bare baseline server (net/http + pgx, one
// INSERT per request; Baseline) runs under the same client in the same run
// so every figure comes with its ratio to what this machine can do at all.
package loadtest
