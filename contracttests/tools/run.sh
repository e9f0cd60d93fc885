#!/usr/bin/env bash
# Runs the Pact contract tests in the only safe way: library present, stale
# pact files removed, consumer-before-provider (each package orders its own
# steps), no test cache. Extra arguments go to `go test` (e.g. -v, -run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
contracttests/tools/fetch-pact-ffi.sh
rm -rf contracttests/pacts
# shellcheck source=env.sh
. contracttests/tools/env.sh
go test -tags contract -count=1 "$@" ./contracttests/...
