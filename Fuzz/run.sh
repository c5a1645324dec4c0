#!/usr/bin/env bash
# Builds the libFuzzer targets and runs one of them, or all.
#
#   Fuzz/run.sh TARGET RUNS        TARGET: json token callback catalog jws jwk entry, or all
#                                  RUNS:   a number of inputs (1000000), or a time such as 20s
#   Fuzz/run.sh TARGET FILE...     runs each file once (a crasher, a corpus entry) and stops
#   Fuzz/run.sh build              only builds
#
# Exits non-zero on a crash, a failed invariant, a leak, a timeout or an out-of-memory; the input
# that caused it is written to the artifacts directory printed at the end. See Fuzz/README.md.
#
# Environment: OAUTHFLOW_FUZZ_BUILD (default .build/fuzz: the cached binary), OAUTHFLOW_FUZZ_OUT
# (default a directory under $TMPDIR or /tmp: grown corpora, artifacts, logs; never the repository),
# OAUTHFLOW_FUZZ_FLAGS (more libFuzzer flags), OAUTHFLOW_FUZZ_OPT (default -O; -Onone builds faster
# and runs slower, for working on a target).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
targets=(json token callback catalog jws jwk entry)
build=${OAUTHFLOW_FUZZ_BUILD:-$root/.build/fuzz}
out=${OAUTHFLOW_FUZZ_OUT:-${TMPDIR:-/tmp}/oauthflow-fuzz-$(id -u)-$(printf %s "$root" | cksum | cut -d' ' -f1)}
command -v swiftc >/dev/null 2>&1 || export PATH="$PATH:/opt/swift/usr/bin"

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The largest input each target is given (bytes).
max_len() {
    case $1 in
        json) echo 4096 ;;
        token) echo 4096 ;;
        callback) echo 2048 ;;
        catalog) echo 8192 ;;
        jws) echo 8192 ;;
        jwk) echo 8192 ;;
        entry) echo 4096 ;;
    esac
}

# Compiles Sources/OAuthFlow and Fuzz/Targets into one module with the fuzzer and address sanitizer
# (so the targets reach internal symbols without making them public); reuses the binary while no
# input file, flag or compiler changed.
build_fuzzer() {
    local sources flags key
    mkdir -p "$build"
    build=$(cd "$build" && pwd)   # swiftc runs there (below), so the paths must not be relative
    mapfile -t sources < <(cd "$root" && find Sources/OAuthFlow Fuzz/Targets -name '*.swift' | LC_ALL=C sort)
    flags=(-sanitize=fuzzer,address -parse-as-library -module-name OAuthFlow -package-name OAuthFlow -swift-version 6
        -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault
        -enable-upcoming-feature MemberImportVisibility "${OAUTHFLOW_FUZZ_OPT:--O}" -wmo -num-threads 2 -g
        -I "$root/Sources/COpenSSL" -I "$root/Sources/CCurl")
    key=$( { swiftc --version 2>&1; echo "${flags[*]}"; cd "$root" && cat "${sources[@]}" Sources/COpenSSL/* Sources/CCurl/*; } \
        | sha256sum | cut -c1-16)
    binary=$build/oauthflow-fuzz-$key
    [ -x "$binary" ] && return 0
    mkdir -p "$build"
    echo "fuzz: building $binary (${#sources[@]} files; a few minutes)" >&2
    # Compiled in $build: with -g the driver writes the module's .swiftmodule, .swiftdoc and
    # .swiftsourceinfo where it runs. The linker's notes about ASan's local symbols are noise;
    # anything else is shown.
    if ! (cd "$build" && swiftc "${flags[@]}" -module-cache-path "$build/module-cache" "${sources[@]/#/$root/}" -o "$binary.tmp" 2>&1) \
        | { grep -v -e "ld.gold: warning: Cannot export local symbol '__asan" || true; } >&2; then
        echo "fuzz: build failed" >&2
        exit 1
    fi
    find "$build" -maxdepth 1 \( -name 'oauthflow-fuzz-*' ! -name "oauthflow-fuzz-$key.tmp" -o -name 'OAuthFlow-*.swift*' \) -delete
    mv "$binary.tmp" "$binary"
}

# Sanitizer settings: leaks are findings; a report is symbolized; a trap stops the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1:allocator_may_return_null=1:handle_abort=1:detect_stack_use_after_return=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-}
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
    ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer || true)
    export ASAN_SYMBOLIZER_PATH
fi

# run_target TARGET RUNS: fuzzes from the seed corpus (read-only) into the grown corpus.
run_target() {
    local target=$1 runs=$2 limit corpus artifacts log dict=() status
    if [[ $runs =~ ^[0-9]+s$ ]]; then limit=(-max_total_time="${runs%s}"); else limit=(-runs="$runs"); fi
    corpus=$out/corpus/$target
    artifacts=$out/artifacts/$target
    log=$out/logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$out/logs"
    [ -f "$root/Fuzz/dict/$target.dict" ] && dict=(-dict="$root/Fuzz/dict/$target.dict")
    echo "fuzz: $target, ${limit[*]}, log $log" >&2
    set +e
    # shellcheck disable=SC2086
    OAUTHFLOW_FUZZ_TARGET=$target "$binary" "${limit[@]}" -max_len="$(max_len "$target")" -timeout=20 -rss_limit_mb=2048 \
        -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" ${OAUTHFLOW_FUZZ_FLAGS:-} \
        "$corpus" "$root/Fuzz/corpus/$target" >"$log" 2>&1
    status=$?
    set -e
    local done_line units
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
    units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ "$status" -ne 0 ] || [ -z "$done_line" ]; then
        echo "fuzz: $target FAILED (exit $status): a finding; the input is in $artifacts/" >&2
        grep -E -m 20 'ERROR: |fuzz invariant|Fatal error|SUMMARY|Test unit written|deadly signal|timeout|leak' "$log" >&2 || tail -20 "$log" >&2
        return 1
    fi
    # e.g. "#1000000 DONE cov: 2306 ft: 9012 corp: 812/61Kb lim: 4096 exec/s: 3125 rss: 160Mb"
    echo "fuzz: $target ok: $units runs, ${done_line#*DONE }" >&2
}

# replay TARGET FILE...: each file once.
replay() {
    local target=$1
    shift
    mkdir -p "$out/artifacts/$target"
    OAUTHFLOW_FUZZ_TARGET=$target "$binary" -detect_leaks=1 -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$out/artifacts/$target/" "$@"
}

[ $# -ge 1 ] || usage
target=$1
build_fuzzer
[ "$target" = build ] && { echo "$binary"; exit 0; }
[ $# -ge 2 ] || usage
if [ "$target" = all ]; then
    [ $# -eq 2 ] || usage
    failed=()
    for name in "${targets[@]}"; do run_target "$name" "$2" || failed+=("$name"); done
    [ ${#failed[@]} -eq 0 ] || { echo "fuzz: findings in: ${failed[*]}" >&2; exit 1; }
    exit 0
fi
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz: unknown target $target (one of: ${targets[*]}, all)" >&2; exit 2; }
if [[ $2 =~ ^[0-9]+s?$ ]] && [ $# -eq 2 ]; then
    run_target "$target" "$2"
else
    shift
    replay "$target" "$@"
fi
