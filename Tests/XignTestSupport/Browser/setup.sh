#!/usr/bin/env bash
# The browser tests' Python side: selenium (PyPI) in .build-browser/venv, beside Debian's chromium and chromium-driver
# (make deps installs those). Run by `make test`; does nothing when the pinned version is there.
set -euo pipefail
repository="$(cd "$(dirname "$0")/../../.." && pwd)"
venv="$repository/.build-browser/venv"
version=4.27.1
if ! "$venv/bin/python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$version')" 2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium==$version"
fi
