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
// so every figure comes with its ratio to what this machine can do at all;
// the baselines of the job itself (baseline-send: INSERT, a worker's POST
// to the provider, UPDATE; baseline-delivery: an outbox row, a signed POST,
// a log row with the delete) give the ratios of a whole send and a whole
// delivery.
//
// Growth and tenancy have scenarios of their own: events-fanout (publish
// latency and CPU per delivery at 1–500 subscriptions per event), list-1m
// (listing a company whose million conversations SeedConversations wrote
// through SQL), and noisy-webhooks, noisy-sends and noisy-inbound, which
// measure a healthy tenant without and beside another tenant's dead
// endpoints, stalled provider or inbound flood in one run. Issue 27's
// destinations too: events-nats and events-amqp, run only when named (a
// subscription to a JetStream stream or a RabbitMQ exchange the scenario
// makes, read back and verified as a subscriber does), and events-stream
// (readers of the live Server-Sent Events stream). README.md says what
// each does and how to run it.
package loadtest
