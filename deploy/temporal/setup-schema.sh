#!/bin/sh
# One-shot job (temporalio/admin-tools): create Temporal's two databases in PostgreSQL and bring
# their schemas to the version shipped in this admin-tools image.
#
# Safe to run on every `docker compose up`, and that is how a Temporal upgrade gets its schema
# changes: `create` ignores an existing database, `setup-schema -v 0.0` leaves an already
# versioned schema alone, and `update-schema` applies only the versions that are missing.
#
# temporal-sql-tool reads the connection from SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and
# SQL_PASSWORD (set in docker-compose.yml).
set -eu

SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12

setup() { # setup DATABASE SCHEMA_DIR_NAME
    echo "temporal schema: database $1 <- $SCHEMA_ROOT/$2/versioned"
    temporal-sql-tool --db "$1" create
    temporal-sql-tool --db "$1" setup-schema -v 0.0
    temporal-sql-tool --db "$1" update-schema -d "$SCHEMA_ROOT/$2/versioned"
}

setup "${TEMPORAL_DBNAME:-temporal}" temporal
setup "${TEMPORAL_VISIBILITY_DBNAME:-temporal_visibility}" visibility
echo "temporal schema: up to date"
