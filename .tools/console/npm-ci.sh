# Sourced by build.sh, run by internal/console's browser test: installs the pinned packages of this folder (npm ci)
# when node_modules is missing or older than package.json / package-lock.json. No install scripts,
# no audit, no update notices: nothing but the registry download.
console_tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
console_stamp="$console_tools/node_modules/.package-lock.json"
if [[ ! -f "$console_stamp" || "$console_tools/package-lock.json" -nt "$console_stamp" || "$console_tools/package.json" -nt "$console_stamp" ]]; then
	echo "==> npm ci in .tools/console" >&2
	# Stamp only a complete install; works both sourced (return) and run with bash (exit).
	if ! (cd "$console_tools" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts >&2); then
		echo "npm ci in .tools/console failed" >&2
		return 1 2>/dev/null || exit 1
	fi
	touch "$console_stamp"
fi
