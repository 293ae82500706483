#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets with AddressSanitizer and optimization and runs each (or those FUZZ_TARGETS names) for
# FUZZ_SECONDS on its committed seed corpus (Fuzz/Corpus/TARGET, read only) plus a working corpus in .build-fuzz,
# as many at once as there are cores.
# Prints each target's executions per second and coverage; a crash leaves its input in .build-fuzz/crashes and fails
# the run.
set -euo pipefail
fuzz="$(cd "$(dirname "$0")" && pwd)"
repository="$(cd "$fuzz/.." && pwd)"
seconds="${FUZZ_SECONDS:-60}"
scratch="$repository/.build-fuzz"
# Optimized, as it ships: some memory errors show only there (a key freed while in use, docs/security.md).
# -enable-testing lets the targets reach internal parsers.
swift build --package-path "$fuzz" --scratch-path "$scratch" -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
binary="$scratch/release/xign-fuzz"
targets=$("$binary" 2>&1 | sed -n 's/^set XIGN_FUZZ_TARGET to one of: //p' || true)
[ -n "$targets" ] || { echo "fuzz: the binary lists no targets" >&2; exit 1; }
# The NSS module is C: its wire and line parsing are a target of their own, built with the toolchain's clang.
nss_binary="$scratch/nss-wire"
clang -fuse-ld=lld -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I "$repository/nss" \
    -o "$nss_binary" "$repository/nss/fuzz_wire.c" "$repository/nss/xign_nss_wire.c"
targets="$targets nss-wire"
if [ -n "${FUZZ_TARGETS:-}" ]; then
    for target in $FUZZ_TARGETS; do
        [[ " $targets " == *" $target "* ]] || { echo "fuzz: no target '$target'; the targets are: $targets" >&2; exit 2; }
    done
    targets="$FUZZ_TARGETS"
fi
mkdir -p "$scratch/crashes"

# One target for `seconds`; its log is $scratch/TARGET.log, its exit status $scratch/TARGET.exit.
fuzz_one() {
    local target=$1 runner="$binary" dictionary=() status=0
    # A dictionary of the tokens the input's format is made of: JSON's field names, the config file's keys.
    case "$target" in
    wire-answers | request-bodies | sealed-pin | daemon-socket) dictionary=(-dict="$fuzz/Dictionaries/json.dict") ;;
    manager-config) dictionary=(-dict="$fuzz/Dictionaries/manager-config.dict") ;;
    esac
    [ "$target" = nss-wire ] && runner="$nss_binary"
    mkdir -p "$scratch/corpus/$target"
    XIGN_FUZZ_TARGET="$target" "$runner" "$scratch/corpus/$target" "$fuzz/Corpus/$target" -max_total_time="$seconds" "${dictionary[@]}" \
        -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$scratch/crashes/$target-" \
        > "$scratch/$target.log" 2>&1 || status=$?
    echo "$status" > "$scratch/$target.exit"
}

# As many targets at once as there are cores: each is one process on one core.
failed=0
for target in $targets; do
    [ -d "$fuzz/Corpus/$target" ] || { echo "fuzz: $target has no seed corpus in Fuzz/Corpus/$target" >&2; failed=1; continue; }
    rm -f "$scratch/$target.exit"
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
    fuzz_one "$target" &
done
wait

printf '%-22s %10s %8s %8s %8s\n' target runs exec/s cov corpus
for target in $targets; do
    log="$scratch/$target.log"
    [ -f "$scratch/$target.exit" ] || continue
    if [ "$(cat "$scratch/$target.exit")" != 0 ]; then
        echo "fuzz: $target FAILED; its log is $log:" >&2
        grep -E "ERROR|Fatal|panic|SUMMARY|Test unit written" "$log" | head -20 >&2
        failed=1
        continue
    fi
    done_line=$(grep -E "^#[0-9]+\s+DONE" "$log" | tail -n 1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    printf '%-22s %10s %8s %8s %8s\n' "$target" "$runs" "$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")" \
        "$(printf '%s' "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')" "$(printf '%s' "$done_line" | sed -n 's/.*corp: \([0-9]*\).*/\1/p')"
done
exit "$failed"
