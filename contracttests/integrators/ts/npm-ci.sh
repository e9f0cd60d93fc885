# Installs the pinned packages of the TypeScript pact example (npm ci) when
# node_modules is missing or older than package.json / package-lock.json.
# pact-js's native library is the npm package
# @pact-foundation/pact-core-linux-x64-glibc (an optional dependency with a
# prebuild): no install scripts, no download from anywhere but the registry.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$dir/node_modules/.package-lock.json"
if [[ ! -f "$stamp" || "$dir/package-lock.json" -nt "$stamp" || "$dir/package.json" -nt "$stamp" ]]; then
	(cd "$dir" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts >&2)
	touch "$stamp"
fi
