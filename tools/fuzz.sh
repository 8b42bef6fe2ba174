#!/usr/bin/env bash
# Runs every libFuzzer target for longer than CI does (tools/run-tests.sh
# gives each 60 s):
#   tools/fuzz.sh MINUTES
# Builds build-fuzz (clang, ASan + UBSan, like run-tests.sh) if needed, then
# runs each tests/fuzz target for MINUTES, as many at once as there are CPUs.
# Each starts from its committed seeds (tests/fuzz/corpus*, only read) and
# keeps the new interesting inputs it finds, its log and any crash, leak or
# timeout reproducer under $UROCE_FUZZ_SCRATCH (default /tmp/uroce-fuzz);
# a second run goes on from there. Copy inputs worth keeping into the seed
# directory by hand (few, small: see tests/fuzz/README.md).
# Prints one line per target: runs, coverage, corpus, crashes. Exits 1 when
# any target found a crash.
set -euo pipefail

if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -eq 0 ]; then
  echo "usage: $0 MINUTES" >&2
  exit 2
fi
minutes=$1
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-fuzz"
scratch=${UROCE_FUZZ_SCRATCH:-/tmp/uroce-fuzz}

# The committed seeds of each target.
declare -A seeds=(
  [fuzz_parse]=corpus
  [fuzz_engine]=corpus_engine
  [fuzz_control]=corpus_control
  [fuzz_cm]=corpus_cm
)

if [ ! -f "$build/build.ninja" ]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} meson setup "$build" "$root" -Dwerror=true -Dfuzz=enabled -Dtests=false \
    -Dbenchmarks=disabled -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
# Only the fuzz targets this configuration has (meson's summary says why one is off).
mapfile -t defined < <(ninja -C "$build" -t targets all | sed -n 's|^\(tests/fuzz/fuzz_[a-z_]*\): .*LINKER.*|\1|p')
if [ ${#defined[@]} -eq 0 ]; then
  echo "no fuzz target is configured in $build (needs clang and libFuzzer: see meson's summary)" >&2
  exit 1
fi
ninja -C "$build" "${defined[@]}" >/dev/null

run_target() {  # run_target NAME: fuzzes until the time is up or it crashes
  local name=$1 dir="$scratch/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  "$build/tests/fuzz/$name" -max_total_time=$((minutes * 60)) -rss_limit_mb=2048 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" "$root/tests/fuzz/${seeds[$name]}" >"$dir/log" 2>&1 || true
}

summary() {  # summary NAME: one line from the log and the scratch directory
  local name=$1 dir="$scratch/$1"
  local runs cov ft crashes rate
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  crashes=$(find "$dir/artifacts" -type f | wc -l)
  printf '%-14s %10s runs (%s/s), cov %s, ft %s, corpus %s inputs, %s crashes%s\n' "$name" "${runs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}" "$(find "$dir/corpus" -type f | wc -l)" "$crashes" \
    "$([ "$crashes" -gt 0 ] && echo " in $dir/artifacts (log: $dir/log)")"
  [ "$crashes" -eq 0 ]
}

targets=()
for name in "${!seeds[@]}"; do
  if [ -x "$build/tests/fuzz/$name" ]; then
    targets+=("$name")
  else
    echo "$name: not built (see meson's summary for why)" >&2
  fi
done
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort)

echo "fuzzing ${targets[*]} for $minutes min each, $(nproc) at a time; scratch: $scratch"
pids=()
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do
    wait -n || true
  done
  run_target "$name" &
  pids+=($!)
done
wait "${pids[@]}" || true

status=0
for name in "${targets[@]}"; do
  summary "$name" || status=1
done
exit $status
