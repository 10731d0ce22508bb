#!/usr/bin/env bash
# What the tests need beyond Python: Debian's Chromium and ChromeDriver (the page is tested in a
# real headless browser) and tmux (the 256-colour view). Installed when missing and apt-get can
# run (as root, or with sudo); otherwise those tests say they were skipped.
set -uo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v tmux >/dev/null || missing+=(tmux)
((${#missing[@]})) || exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; else
        echo "test-deps: ${missing[*]} missing and apt-get needs root: those tests will skip" >&2
        exit 0
    fi
fi
$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" \
    || echo "test-deps: could not install ${missing[*]}: those tests will skip" >&2
exit 0
