#!/usr/bin/env bash
# Nightly soak from cron: runs the checklist with a long PERF-3 soak and keeps the JUnit XML, the
# soak journal and the report of every night in a dated directory.
#
#   SOAK_DURATION   soak length (default 24h)
#   SOAK_ROOT       where the nights are kept (default /var/lib/triton-ready/nightly)
#   SOAK_KEEP       how many nights to keep (default 14)
#   TRITON_READY    the triton-ready command (default: triton-ready on PATH)
#   any other argument is passed to triton-ready (e.g. --triton-url=http://triton:8000 -k "PERF or soak");
#   --triton-baseline="$SOAK_ROOT" compares each night with the newest READY night before it (PERF-5)
#
# Exit status: triton-ready's (0 READY, non-zero otherwise); 2 when even the journal cannot be rendered.
set -uo pipefail

duration="${SOAK_DURATION:-24h}"
root="${SOAK_ROOT:-/var/lib/triton-ready/nightly}"
keep="${SOAK_KEEP:-14}"
triton_ready="${TRITON_READY:-triton-ready}"
night="$root/$(date -u +%Y-%m-%dT%H%MZ)"
mkdir -p "$night"

# A run longer than the soak plus a generous margin is stuck: SIGINT first (the soak then ends
# cleanly, writes its journal's last line and the report), SIGKILL two minutes later.
seconds=$(python3 -c "import sys; from pytest_triton_ready.soak import parse_duration; print(int(parse_duration(sys.argv[1])))" "$duration")
limit=$(( seconds + seconds / 10 + 1800 ))

timeout --signal=INT --kill-after=120 "$limit" \
  "$triton_ready" --triton-soak="$duration" --readiness-report="$night/report" \
  --junitxml="$night/junit.xml" -p no:cacheprovider "$@" >"$night/console.log" 2>&1
status=$?

journal="$night/report/soak-journal.jsonl"
if [[ ! -f "$night/report/readiness.json" && -f "$journal" ]]; then
  # The runner died before writing its report: render what the journal kept (INCOMPLETE).
  "$triton_ready" report "$journal" --out "$night/report" >>"$night/console.log" 2>&1 || status=2
fi
echo "$(date -u +%FT%TZ) soak $duration: exit $status, $night" >>"$root/nights.log"

# The index over every kept night: verdicts, key numbers and their trends (history.html, history.md).
"$triton_ready" history "$root" >>"$night/console.log" 2>&1 || true

# Keep the last $keep nights.
ls -1dt "$root"/20*/ 2>/dev/null | tail -n +"$((keep + 1))" | xargs -r rm -rf
exit "$status"
