#!/bin/bash
# `agentry healthcheck [PORT [PATH]]`: exit 0 when http://127.0.0.1:PORT/PATH answers 200, else 1.
# The container health check of docker-compose.yml. bash's /dev/tcp, not node: a probe every
# 10 s per container costs one short bash process (measured on the 2-core CI machine under load:
# 18 ms of CPU per probe), where `node -e "fetch(...)"` cost 600 ms of CPU each time. PORT defaults to HEALTH_PORT (the
# workers', scheduler's and connector's probe port), else PORT (the gateway), else 9527; PATH
# to /ready.
set -u
port="${1:-${HEALTH_PORT:-${PORT:-9527}}}"
path="${2:-/ready}"
case "$port" in '' | *[!0-9]*) echo "healthcheck: \"$port\" is not a port" >&2; exit 2 ;; esac
# Connecting to a loopback port either succeeds or is refused at once; the reads are bounded.
if ! { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
  echo "healthcheck: nothing listens on 127.0.0.1:$port" >&2
  exit 1
fi
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
if ! IFS=' ' read -r -t 5 _ status _ <&3; then
  echo "healthcheck: no answer from 127.0.0.1:$port$path within 5 s" >&2
  exit 1
fi
exec 3>&-
if [ "$status" != 200 ]; then
  echo "healthcheck: 127.0.0.1:$port$path answered $status" >&2
  exit 1
fi
