#!/usr/bin/env bash
# tests/deps.sh — install the Debian packages named in the arguments that are
# not installed yet (apt; sudo when not root). PKG:arm64 names enable the
# arm64 multiarch first. Used by tests/run.sh and examples/demo.sh, so a
# fresh machine needs nothing by hand.
set -euo pipefail
missing=""
# A package installed for two architectures (libgtest-dev and
# libgtest-dev:arm64) is ambiguous without its native qualifier.
native=$(dpkg --print-architecture)
for p in "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || dpkg -s "$p:$native" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "== installing:$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  if [[ $missing == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
