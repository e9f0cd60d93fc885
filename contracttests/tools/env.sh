# shellcheck shell=sh
# Environment for building/running the Pact contract tests (build tag
# `contract`). Source it, don't execute it:
#
#   . contracttests/tools/env.sh        # POSIX sh (make recipes) - from the repo root
#   source contracttests/tools/env.sh   # bash/zsh - from any directory
#
# It links pact-go's cgo package against the project-local libpact_ffi.so that
# contracttests/tools/fetch-pact-ffi.sh installs. The rpath bakes the absolute
# library path into test binaries, so no LD_LIBRARY_PATH is needed.
# POSIX sh on purpose: make runs recipes with /bin/sh.

# Find the repo root: bash knows the sourced file; plain sh (dash) does not,
# so fall back to git, then to the current directory.
if [ -n "${BASH_SOURCE:-}" ]; then
  _pact_root=$(cd "$(dirname "$BASH_SOURCE")/../.." && pwd)
elif [ -n "${ZSH_VERSION:-}" ]; then
  # shellcheck disable=SC2296
  _pact_root=$(cd "$(dirname "${(%):-%x}")/../.." && pwd)
else
  _pact_root=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
fi

_pact_lib="$_pact_root/.tools/pact/lib"
if [ ! -f "$_pact_lib/libpact_ffi.so" ]; then
  echo "contracttests/tools/env.sh: $_pact_lib/libpact_ffi.so is missing; run contracttests/tools/fetch-pact-ffi.sh" >&2
fi

export CGO_ENABLED=1
# Prepend once (sourcing twice must not duplicate). Our -L/-rpath come before
# pact-go's own #cgo LDFLAGS (/tmp, /opt/pact/lib, /usr/local/lib), so a stray
# library in those folders cannot win.
case " ${CGO_LDFLAGS:-} " in
  *" -L$_pact_lib "*) ;;
  *) export CGO_LDFLAGS="-L$_pact_lib -Wl,-rpath,$_pact_lib${CGO_LDFLAGS:+ $CGO_LDFLAGS}" ;;
esac
export PACT_DO_NOT_TRACK=true   # no usage telemetry calls from the FFI
# Upper case matters: pact-go filters its log with hashicorp/logutils, which
# knows only TRACE/DEBUG/INFO/WARN/ERROR; an unknown level hides everything.
export PACT_LOG_LEVEL="${PACT_LOG_LEVEL:-WARN}"

unset _pact_root _pact_lib
