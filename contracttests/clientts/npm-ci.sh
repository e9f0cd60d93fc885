# Run by clientts_test.go (make test-clients): installs the pinned packages of this folder (npm ci)
# when node_modules is missing or older than package.json / package-lock.json. No install scripts,
# no audit, no update notices: nothing but the registry download.
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$tools/node_modules/.package-lock.json"
if [[ ! -f "$stamp" || "$tools/package-lock.json" -nt "$stamp" || "$tools/package.json" -nt "$stamp" ]]; then
	echo "==> npm ci in contracttests/clientts" >&2
	if ! (cd "$tools" && npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts >&2); then
		echo "npm ci in contracttests/clientts failed" >&2
		exit 1
	fi
	touch "$stamp"
fi
