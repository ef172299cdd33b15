#!/bin/bash
# What one Postgres and one Redis on this box sustain, for the scale model in docs/benchmarks.md
# (section "scale-model"): a run's three autocommit write statements (insert, claim, finish) under
# pgbench with synchronous_commit on and off, the disk's one-writer fdatasync rate (pg_test_fsync),
# and a redis-server of its own under redis-benchmark (simple commands, no pipelining).
#
#   bash bench/backend-ceilings.sh
#
# Loopback only; a throwaway database and a redis-server on port 16399, both removed at the end.
set -euo pipefail
PG=postgres://postgres@127.0.0.1:5432/postgres
WORK=$(mktemp -d)
DB=agentry_ceilings_$RANDOM$RANDOM
RPID=
cleanup() {
  psql "$PG" -qc "drop database if exists $DB with (force)" || true
  [ -n "$RPID" ] && kill "$RPID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
psql "$PG" -qc "create database $DB"
psql "${PG%/postgres}/$DB" -qc "create table runs(id bigserial primary key, status text not null, payload text, updated_at timestamptz not null default now())"
cat > "$WORK/run.sql" <<'SQL'
INSERT INTO runs(status, payload) VALUES ('queued', repeat('x', 200)) RETURNING id \gset
UPDATE runs SET status = 'running', updated_at = now() WHERE id = :id;
UPDATE runs SET status = 'done', payload = repeat('y', 400), updated_at = now() WHERE id = :id;
SQL
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for sc in on off; do
  echo "== pgbench, one 'transaction' = one run's 3 autocommit statements, 16 clients, 10 s, synchronous_commit=$sc"
  PGOPTIONS="-c synchronous_commit=$sc" pgbench -h 127.0.0.1 -U postgres -n -f "$WORK/run.sql" -c 16 -j 2 -T 10 "$DB" 2>&1 | grep -E "^tps|latency average"
done
FSYNC=${PG_TEST_FSYNC:-$(ls /usr/lib/postgresql/*/bin/pg_test_fsync 2>/dev/null | tail -1)}
if [ -x "$FSYNC" ]; then
  echo "== pg_test_fsync, one 8 kB write per sync, in $WORK (the WAL's device only if that is the same filesystem)"
  "$FSYNC" -s 2 -f "$WORK/fsync.out" 2>&1 | sed -n '/using one 8kB write/,/^$/p' | grep -E "datasync|fsync " || true
fi
echo "== redis-benchmark, 50 clients, no pipelining, 100000 requests each"
redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no --logfile '' >/dev/null 2>&1 &
RPID=$!
sleep 0.5
redis-benchmark -p 16399 -q -n 100000 -c 50 -t set,incr,lpush,zadd,hset 2>&1 | tr '\r' '\n' | grep "requests per second"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
