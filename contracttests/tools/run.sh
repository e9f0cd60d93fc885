#!/usr/bin/env bash
# Runs the Pact contract tests in the only safe way: library present, stale
# pact files removed, consumer before provider (each suite package runs its
# consumer step, then its provider step, in one ordered test), packages one
# at a time (-p 1), no test cache (-count=1). Extra arguments go to
# `go test` (e.g. -v, -run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
contracttests/tools/fetch-pact-ffi.sh
# PROVIDER_URL: verify the committed HTTP pact against that running gateway
# (started with PACT_PROVIDER_STATES=1) and nothing else; the pact files are
# left as committed, since no consumer step runs.
if [[ -n "${PROVIDER_URL:-}" ]]; then
	# shellcheck source=env.sh
	. contracttests/tools/env.sh
	exec go test -tags contract -count=1 -timeout 30m -run '^TestDeployedGateway$' "$@" ./contracttests/apicontract/
fi
# The npm standardwebhooks package (an independent implementation of the
# Standard Webhooks specification) that webhookevents runs under node: npm ci
# when node_modules is missing or older than the lock file.
swh=contracttests/tools/standardwebhooks
if [[ ! -f "$swh/node_modules/.package-lock.json" || "$swh/package-lock.json" -nt "$swh/node_modules/.package-lock.json" ]]; then
	(cd "$swh" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts)
	touch "$swh/node_modules/.package-lock.json"
fi
# Pact files merge with what is on disk: start from nothing, so a removed
# interaction cannot survive. The consumer steps write them again (they are
# committed; a run leaves them unchanged unless a contract changed).
rm -rf contracttests/pacts
mkdir -p contracttests/pacts
# shellcheck source=env.sh
. contracttests/tools/env.sh
go test -tags contract -count=1 -p 1 -timeout 30m "$@" ./contracttests/...
