#!/usr/bin/env bash
# podman, for podman-compose 1.0 (Debian bookworm): it puts `--net <project>_default
# --network-alias <service>` after a service's `network_mode: host` (`--network host`), and
# podman refuses the two together. Where the host network is asked for, those two flags go.
set -euo pipefail
host=false
prev=""
for a in "$@"; do
  if [ "$prev" = "--network" ] && [ "$a" = "host" ]; then host=true; fi
  prev="$a"
done
if ! $host; then exec podman "$@"; fi
args=()
skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    --net | --network-alias) skip=1; continue ;;
  esac
  args+=("$a")
done
exec podman "${args[@]}"
