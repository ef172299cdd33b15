#!/bin/sh
# Makes the secret files docker-compose.yml mounts (compose `secrets:`), once, in deploy/secrets/
# (or $AGENTRY_SECRETS_DIR): the master key, the Postgres password and the initial admin
# password, each random; an existing file is kept (rerun it safely). Prints the admin password
# once. Usage, from the repository root:
#   sh deploy/make-secrets.sh
# The folder is 0700, so that only its owner reaches the files on the host; the files are 0644
# because the containers read them as their own users (uid 1000, postgres), and a bind-mounted
# file keeps its mode.
set -eu
dir="${AGENTRY_SECRETS_DIR:-$(dirname "$0")/secrets}"
mkdir -p "$dir"
chmod 0700 "$dir"

# 32 random bytes as base64url, without a newline: URL- and shell-safe, any tool reads it whole.
random() { head -c 32 /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'; }

made=""
for name in agentry_secret_key postgres_password admin_password; do
  file="$dir/$name"
  if [ -s "$file" ]; then continue; fi
  (umask 0022 && random >"$file.tmp" && mv "$file.tmp" "$file")
  chmod 0644 "$file"
  made="$made $name"
done
echo "secrets in $dir:${made:- none made (all exist)}"
case "$made" in *admin_password*)
  echo "the first start creates user admin with the password: $(cat "$dir/admin_password")"
  echo "(change it after signing in: the file only seeds it; README, \"Authentication\")" ;;
esac
