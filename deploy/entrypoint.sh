#!/bin/sh
# Entry point of the Agentry image: the first argument picks what the container runs; the
# remaining arguments go to it (for example `gateway --config /etc/agentry/config.yaml`).
# Node runs the compiled JavaScript (dist/) directly: no tsx, no npm at run time.
set -eu

root="${AGENTRY_HOME:-/app}"
names="gateway agent-worker scheduler channel-connector migrate standalone"

usage() {
  echo "usage: <image> <service> [options]   services: $names" >&2
  echo "       <image> healthcheck [PORT [PATH]]   exit 0 when 127.0.0.1:PORT/PATH (default /ready) answers 200" >&2
}

if [ "$#" -eq 0 ]; then
  echo "agentry: no service given" >&2
  usage
  exit 64
fi

service="$1"
shift

case "$service" in
  gateway) entry=services/gateway/dist/src/main.js ;;
  agent-worker) entry=services/agent-worker/dist/src/main.js ;;
  scheduler) entry=services/scheduler/dist/src/main.js ;;
  channel-connector) entry=services/channel-connector/dist/src/main.js ;;
  migrate) entry=libs/db/dist/src/cli.js ;;
  standalone) entry=services/standalone/dist/src/main.js ;;
  healthcheck)
    # The container health check (deploy/healthcheck.sh): bash, not a Node process.
    exec /usr/local/bin/agentry-healthcheck "$@"
    ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    echo "agentry: unknown service \"$service\"" >&2
    usage
    exit 64
    ;;
esac

# Embedded mode, with the flags of `npm start` (package.json): PGlite's WebAssembly baseline-compiled
# only (optimising it cost a 500 MB peak at every start, no CPU saved measurably), and a 4 MB young
# generation (V8 grew it to 16 MB a half at start-up and kept it: 60 MB of heap for nothing idle;
# 2 MB cost 7-15 % more CPU per run in scavenges for 3-6 MB less idle RSS).
# docs/benchmarks.md, "Memory of the embedded server" and "Issue 39: embedded mode CPU per run".
flags=""
if [ "$service" = standalone ]; then flags="--liftoff-only --max-semi-space-size=4"; fi

# exec: node becomes the process the container's init (tini) signals, so SIGTERM reaches the
# service's own graceful shutdown.
# shellcheck disable=SC2086 # $flags is a list of words or nothing
exec node $flags "$root/$entry" "$@"
