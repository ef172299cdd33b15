#!/bin/bash
# Entry point of docker-compose.yml's postgres: the image's own (docker-entrypoint.sh, which
# creates the database with POSTGRES_PASSWORD_FILE on the first start only), plus, on every
# start, the role's password set again from that file. Postgres keeps the password it was
# created with, so without this a changed secret would leave Agentry (which reads the same
# file) locked out; with it, changing deploy/secrets/postgres_password and recreating the
# containers (`up -d --force-recreate`) changes the password.
# The setter runs beside the server, detached so that tini (compose `init: true`), not the
# postmaster, reaps it: the postmaster treats an unknown child's failure as a crash.
set -euo pipefail
user="${POSTGRES_USER:-postgres}"
(
  (
    for _ in $(seq 1 120); do
      # The socket answers once the server runs (the first start's temporary server included:
      # setting the password then is harmless). The password goes through psql's backquote,
      # never a command line.
      if pg_isready -q -h /var/run/postgresql -U "$user" -d postgres 2>/dev/null \
        && psql -q -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres >/dev/null <<'SQL'
\set password `cat "$POSTGRES_PASSWORD_FILE"`
ALTER ROLE CURRENT_USER PASSWORD :'password';
SQL
      then
        echo "postgres-start: password of role $user set from $POSTGRES_PASSWORD_FILE"
        exit 0
      fi
      sleep 1
    done
    echo "postgres-start: could not set the password of role $user from $POSTGRES_PASSWORD_FILE" >&2
  ) &
)
exec docker-entrypoint.sh "$@"
