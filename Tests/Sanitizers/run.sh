#!/usr/bin/env bash
# `make sanitize`: every test under AddressSanitizer, and those of the manager and xignd under ThreadSanitizer, each
# built in a scratch path of its own so the everyday build stays as it is. LeakSanitizer is off: at exit it reports what
# process-wide singletons still hold (NIO's thread pool, a `static let` Data) as direct leaks, most likely because
# Swift keeps enum tags in the spare bits of a reference, where it does not see a pointer; every instrumented command
# would then exit 23. `make fuzz` checks each input for leaks instead.
# The tests start the built xign-manager, xignd and xign-setup, so those run instrumented too. A report from any
# instrumented process fails the run, including one from a manager that a test stopped with SIGTERM, whose
# exit status no test sees: reports go to files (log_path) that are checked at the end.
# Usage: run.sh [address|thread]...; both when none is named.
set -euo pipefail
repository="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repository"

run() {
    local sanitizer="$1"
    shift
    # .build-asan or .build-tsan
    local scratch=".build-${sanitizer:0:1}san" reports
    reports="$(mktemp -d)"
    swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch"
    local status=0
    case "$sanitizer" in
    address)
        ASAN_OPTIONS="log_path=$reports/report:detect_leaks=0" swift test --skip-build --sanitize=address --scratch-path "$scratch" "$@" || status=$?
        ;;
    thread)
        TSAN_OPTIONS="log_path=$reports/report" swift test --skip-build --sanitize=thread --scratch-path "$scratch" "$@" || status=$?
        ;;
    esac
    if compgen -G "$reports/report*" > /dev/null; then
        echo "sanitize: $sanitizer reported problems:" >&2
        cat "$reports"/report* >&2
        status=1
    fi
    rm -rf "$reports"
    [ "$status" = 0 ] && echo "sanitize: $sanitizer: no report" || echo "sanitize: $sanitizer FAILED" >&2
    return "$status"
}

sanitizers=("$@")
[ "${#sanitizers[@]}" -gt 0 ] || sanitizers=(address thread)
failed=0
for sanitizer in "${sanitizers[@]}"; do
    case "$sanitizer" in
    address) run address || failed=1 ;;
    # The concurrent parts: the manager (NIO, Hummingbird, async stores) and xignd (a thread per connection). The
    # client side, pam_xign and xign-setup, is synchronous by design.
    thread) run thread --filter "XignManagerTests|XigndLoginTests|DesktopApprovalTests|ScreenLockerTests" || failed=1 ;;
    *) echo "sanitize: use address or thread, not '$sanitizer'" >&2; exit 2 ;;
    esac
done
exit "$failed"
