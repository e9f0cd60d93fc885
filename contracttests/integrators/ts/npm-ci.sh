# Installs the pinned packages of the TypeScript pact example (from the lock file) when
# node_modules is missing or older than package.json / package-lock.json.
# pact-js's native library is the npm package
# @pact-foundation/pact-core-linux-x64-glibc (an optional dependency with a
# prebuild): no install scripts, no download from anywhere but the registry.
# Not `npm ci`: pact-core lists a prebuild for every platform as an optional
# dependency, and a registry mirror that lacks the other platforms' packages
# leaves them out of the lock file, which `npm ci` then refuses as out of sync.
# `npm install --no-save` installs the lock file's versions and writes nothing.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$dir/node_modules/.package-lock.json"
if [[ ! -f "$stamp" || "$dir/package-lock.json" -nt "$stamp" || "$dir/package.json" -nt "$stamp" ]]; then
	(cd "$dir" && npm install --no-save --no-audit --no-fund --no-update-notifier --ignore-scripts >&2)
	touch "$stamp"
fi
