#!/usr/bin/env bash
# Runs every benchmark of bench/ in sequence (about 35 minutes, of which permissions.py building its
# 1M-chunk PostgreSQL data takes about 10 on an idle machine, plus source_resync.py's first sync of
# 10,000 objects, roughly an hour of ingestion on 2 cores; with --quick (1,000 objects) about 20).
# Each prints its figures, its baseline measured in the same run and PASS/MISS verdicts; a MISS
# does not fail this script, a benchmark that crashes does. Logs and JSON go to $BENCH_OUT
# (default: a new /tmp/bench-results-* directory). Extra arguments (e.g. --quick) go to every script.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/bench-results-XXXXXX)}
mkdir -p "$OUT"
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

{
  echo "date:     $(date -Is)"
  echo "nproc:    $(nproc)"
  echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory:"; free -h
  echo "postgres: $(psql "${BENCH_PG_URL:-${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}}" -Atc 'select version()' 2>/dev/null || echo unreachable)"
  echo "wrk:      $(command -v wrk || echo 'missing (apt-get install -y wrk; bench/loadgen.py is used instead)')"
  echo "uptime:   $(uptime)"
} | tee "$OUT/machine.txt"

SCRIPTS="engine_throughput overhead status_endpoint sse_fanout reaper_audit_queries metrics_scrape memory recovery_times permissions embed_speed source_resync bulk_small"
failed=""
for name in $SCRIPTS; do
  echo
  echo "##### $name  ($(date +%T), $(uptime | sed 's/.*load average/load average/'))"
  start=$(date +%s)
  "$PY" "bench/$name.py" "$@" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log"
  status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] || failed="$failed $name"
  echo "##### $name took $(( $(date +%s) - start )) s"
done

echo
echo "===== summary (logs and JSON in $OUT) ====="
for name in $SCRIPTS; do
  grep -hE '^(PASS|MISS)  ' "$OUT/$name.log" 2>/dev/null | sed "s/^/[$name] /"
done
echo "uptime at the end: $(uptime)"
if [ -n "$failed" ]; then
  echo "CRASHED:$failed"
  exit 1
fi
