#!/usr/bin/env bash
# Lint the API documents with the npm tools pinned in .tools/package-lock.json:
#   redocly lint          openapi/openapi.yaml
#   spectral lint         openapi/openapi.yaml and asyncapi/asyncapi.yaml (.tools/.spectral.yaml,
#                         fails on error severity)
#   asyncapi validate     asyncapi/asyncapi.yaml (the official AsyncAPI parser)
# Installs the tools (npm ci) when node_modules is missing or older than the lock file. Never
# prompts; telemetry, analytics and update checks of all three tools are off. Runs every check and
# exits non-zero when any of them reports an error.
#
# Usage: .tools/lint-specs.sh
# Env:   OPENAPI_DOC, ASYNCAPI_DOC  override the document paths (default: the repository's).
set -euo pipefail

tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$tools/.." && pwd)"
openapi="${OPENAPI_DOC:-$root/openapi/openapi.yaml}"
asyncapi="${ASYNCAPI_DOC:-$root/asyncapi/asyncapi.yaml}"
bin="$tools/node_modules/.bin"

# npm writes node_modules/.package-lock.json on every install: it stamps the installed tree.
stamp="$tools/node_modules/.package-lock.json"
if [[ ! -f "$stamp" || "$tools/package-lock.json" -nt "$stamp" || "$tools/package.json" -nt "$stamp" ]]; then
	echo "==> npm ci in .tools"
	# --ignore-scripts: no tool needs an install script, and one of them (scarf) only phones home.
	(cd "$tools" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts)
	touch "$stamp"
fi

# No telemetry, no update checks, no prompts.
export CI="${CI:-true}"
export ASYNCAPI_METRICS_CONFIG_PATH="$tools/node_modules/.asyncapi-analytics.json"
printf '{"analyticsEnabled":"false","infoMessageShown":"true","userID":"disabled"}\n' >"$ASYNCAPI_METRICS_CONFIG_PATH"
export ASYNCAPI_SKIP_NEW_VERSION_CHECK=true
export REDOCLY_TELEMETRY=off
export REDOCLY_SUPPRESS_UPDATE_NOTICE=true
export REDOCLY_SUPPRESS_NOTIFICATIONS=true
export NO_UPDATE_NOTIFIER=1
export npm_config_update_notifier=false

status=0
check() {
	echo "==> $*"
	if ! "$@" </dev/null; then
		echo "FAILED: $1" >&2
		status=1
	fi
}

for doc in "$openapi" "$asyncapi"; do
	if [[ ! -f "$doc" ]]; then
		echo "lint-specs: $doc not found" >&2
		exit 1
	fi
done

cd "$root" # a redocly.yaml at the repository root, if any, applies
check "$bin/redocly" lint --format=stylish "$openapi"
check "$bin/spectral" lint --ruleset "$tools/.spectral.yaml" --fail-severity=error "$openapi" "$asyncapi"
check "$bin/asyncapi" validate --fail-severity=error "$asyncapi"

if [[ $status -ne 0 ]]; then
	echo "lint-specs: errors found" >&2
fi
exit "$status"
