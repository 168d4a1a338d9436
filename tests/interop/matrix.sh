#!/usr/bin/env bash
# `make interop-matrix`: the interop suite against every Copilot CLI version listed in
# tests/interop/cli-versions.txt, one after the other (each installed in .interop/VERSION/
# by run.sh), then one line per version. Exit status 0 only when every version passed.
#
#   bash tests/interop/matrix.sh [pytest args...]
#
# Each run's output goes to interop-logs/matrix/VERSION.log (kept) and the summary to
# interop-logs/matrix/summary.txt, with the date: what the README's table reports.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/interop-logs/matrix
mkdir -p "$OUT"
versions=$(sed -e 's/#.*//' tests/interop/cli-versions.txt | awk 'NF { print $1 }')
[ -n "$versions" ] || { echo "interop-matrix: no versions in tests/interop/cli-versions.txt"; exit 1; }
status=0
: > "$OUT/summary.txt"
for v in $versions; do
  printf 'interop-matrix: Copilot CLI %s ...\n' "$v"
  CLI_VERSION=$v bash tests/interop/run.sh "$@" > "$OUT/$v.log" 2>&1
  rc=$?
  counts=$(grep -E '^=+ .*(passed|failed|skipped|error).* in [0-9.]+s' "$OUT/$v.log" | tail -n 1 | sed -e 's/=//g' -e 's/^ *//' -e 's/ *$//')
  if grep -q '^SKIPPED: ' "$OUT/$v.log"; then
    verdict="not run ($(grep -m1 '^SKIPPED: ' "$OUT/$v.log" | cut -c10-))"
    status=1
  elif [ $rc -eq 0 ]; then
    verdict="passed"
  else
    verdict="FAILED (exit status $rc)"
    status=1
  fi
  line=$(printf '%s  %-8s %s: %s' "$(date -u +%Y-%m-%dT%H:%MZ)" "$v" "$verdict" "${counts:-no pytest summary}")
  echo "$line" | tee -a "$OUT/summary.txt"
done
echo "interop-matrix: logs in interop-logs/matrix/ (summary.txt)"
exit $status
