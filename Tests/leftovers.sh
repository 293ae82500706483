#!/usr/bin/env bash
# `make test`: what the test run left behind. `start` marks its beginning; `check` gives the watchdogs (RunEnd) up to
# 30 s to finish, then lists the temporary directories made since, the cgroups the tests made, and the processes still
# running from them (by their arguments or their environment), and fails when there is any.
set -euo pipefail
marker=.build/test-run-started

leftovers() {
    find /tmp -maxdepth 1 \( -name 'xign-test-*' -o -name 'xign-pam-harness-*' \) -newer "$marker" 2>/dev/null || true
    # The cgroups RecordedLogind makes carry "xign" in their names.
    find /sys/fs/cgroup -mindepth 2 -maxdepth 7 -type d -name '*xign*' 2>/dev/null || true
    local age=$(($(date +%s) - $(stat -c %Y "$marker")))
    # Only what started after the marker (its age in seconds is more than the process's), and not this script.
    ps -eo pid=,etimes= | while read -r pid elapsed; do
        [ "$pid" = $$ ] || [ "$elapsed" -gt "$age" ] && continue
        if { tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q '/tmp/xign-test-'; } 2>/dev/null \
            || { tr '\0' '\n' < "/proc/$pid/environ" | grep -q '/tmp/xign-test-'; } 2>/dev/null; then
            echo "process $pid: $({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-200)"
        fi
    done
}

case "${1:-}" in
start)
    mkdir -p "$(dirname "$marker")"
    touch "$marker"
    ;;
check)
    for _ in $(seq 30); do
        [ -z "$(leftovers)" ] && exit 0
        sleep 1
    done
    echo "make test left these behind (a test that does not stop what it started, or a static nobody registered with RunEnd):"
    leftovers
    exit 1
    ;;
*)
    echo "usage: $0 start|check" >&2
    exit 2
    ;;
esac
