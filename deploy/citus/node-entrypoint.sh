#!/bin/sh
# The nodes of a Citus cluster connect to each other as POSTGRES_USER; libpq finds its password in the postgres
# user's ~/.pgpass, written here from the environment (never baked into the image). Then the image's own start.
set -eu
pgpass=/var/lib/postgresql/.pgpass
printf '*:5432:*:%s:%s\n' "$POSTGRES_USER" "$POSTGRES_PASSWORD" > "$pgpass"
chown postgres:postgres "$pgpass"
chmod 600 "$pgpass"
exec docker-entrypoint.sh "$@"
