#!/bin/sh
# One-shot (docker-compose.yml, profile `citus`): the coordinator learns its own address and its workers.
# Idempotent: citus_add_node answers the id of a node it already has.
set -eu
run() { psql -v ON_ERROR_STOP=1 -h "$CITUS_COORDINATOR" -U "$POSTGRES_USER" -d "$POSTGRES_DB" -qAtc "$1"; }
run "SELECT citus_set_coordinator_host('$CITUS_COORDINATOR', 5432)"
for worker in $CITUS_WORKERS; do
    run "SELECT citus_add_node('$worker', 5432)"
done
run "SELECT count(*) || ' workers' FROM citus_get_active_worker_nodes()"
