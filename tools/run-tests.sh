#!/usr/bin/env bash
# The whole test suite: installs what is missing, then
#   1. builds with warnings as errors and runs the unit and integration suites;
#   2. builds again with AddressSanitizer + UndefinedBehaviorSanitizer and
#      runs the same suites;
#   3. builds the concurrency stress tests with ThreadSanitizer and runs them
#      (they run in the ASan build too);
#   4. builds the fuzz targets with clang and runs each for a short while.
# Ends with one line: "tests: N passed, N failed, N skipped".
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fuzz_seconds=${UROCE_FUZZ_SECONDS:-60}

"$root/tools/setup.sh"

configure() {  # configure DIR [meson options...]
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

status=0
run_suites() {  # run_suites DIR meson-test-args...
  local dir=$1
  shift
  meson test -C "$dir" --print-errorlogs "$@" || status=1
}

echo "== build (warnings as errors)"
# --prefix=/usr: the layout of the Debian package, so install_deb can package this build
configure build-test -Dwerror=true --prefix=/usr
ninja -C build-test
run_suites build-test --suite unit --suite integration --suite dataflow --suite interop

# The sanitizer and fuzz builds compile only what their suites run
# (tools/suite-targets.py): the first build already checked that everything
# compiles with warnings as errors.
build_for_suites() {  # build_for_suites DIR SUITE...
  local dir=$1
  shift
  ninja -C "$dir" $(python3 "$root/tools/suite-targets.py" "$dir" "$@")
}

echo "== build with AddressSanitizer + UndefinedBehaviorSanitizer"
# -O1: what the sanitizers' own documentation advises, and a quicker build.
configure build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=disabled \
  -Doptimization=1
build_for_suites build-asan unit integration stress
run_suites build-asan --no-rebuild --suite unit --suite integration --suite stress

echo "== stress tests with ThreadSanitizer"
configure build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=disabled
build_for_suites build-tsan stress
run_suites build-tsan --suite stress --no-rebuild

echo "== fuzz (clang, libFuzzer, ${fuzz_seconds} s per target)"
CC=clang CXX=clang++ configure build-fuzz -Dwerror=true -Dfuzz=enabled -Dtests=false -Dbenchmarks=disabled \
  -Db_sanitize=address,undefined -Db_lundef=false
build_for_suites build-fuzz fuzz
run_suites build-fuzz --no-rebuild --suite fuzz --test-args="-max_total_time=${fuzz_seconds}"

python3 - build-test build-asan build-tsan build-fuzz <<'PY'
import json, sys
passed = failed = skipped = 0
for d in sys.argv[1:]:
    try:
        lines = open(f"{d}/meson-logs/testlog.json").read().splitlines()
    except FileNotFoundError:
        continue
    for line in lines:
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
