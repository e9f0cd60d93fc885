// Package integrators holds the consumer pacts an integrator team writes
// for the webhook events it uses, in Go (goexample/) and TypeScript (ts/),
// as contracttests/README.md shows them. Both write into pacts/, which the
// provider verification of contracttests/webhookevents reads: the gateway
// verifies its integrators' pacts on every `make contract`.
package integrators
