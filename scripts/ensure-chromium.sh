#!/usr/bin/env bash
# The browser test drives Debian's chromium through Playwright (Playwright's own browser
# download does not work offline). Install it when we may (root) and it is missing.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "chromium is not installed and this is not root: run 'apt-get install -y chromium'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium >/dev/null
