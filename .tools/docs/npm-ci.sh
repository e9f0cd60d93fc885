# Sourced by bundle.sh, run by internal/docs's browser test: installs the pinned packages of this folder (npm ci)
# when node_modules is missing or older than package.json / package-lock.json. No install scripts,
# no audit, no update notices: nothing but the registry download.
docs_tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
docs_stamp="$docs_tools/node_modules/.package-lock.json"
if [[ ! -f "$docs_stamp" || "$docs_tools/package-lock.json" -nt "$docs_stamp" || "$docs_tools/package.json" -nt "$docs_stamp" ]]; then
	echo "==> npm ci in .tools/docs" >&2
	# Stamp only a complete install; works both sourced (return) and run with bash (exit).
	if ! (cd "$docs_tools" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts >&2); then
		echo "npm ci in .tools/docs failed" >&2
		return 1 2>/dev/null || exit 1
	fi
	touch "$docs_stamp"
fi
