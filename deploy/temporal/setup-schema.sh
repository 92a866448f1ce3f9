#!/bin/sh
# Create or upgrade Temporal's two databases in the compose Postgres.
# Runs in temporalio/admin-tools before the server starts; every step is idempotent
# (create skips an existing database, update-schema applies only newer versions), so it
# runs on every `docker compose up` and upgrades the schema after an image bump.
# Connection: SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD from the environment.
set -eu

SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

for attempt in 1 2 3 4 5 6 7 8 9 10; do
    nc -z -w 5 "$SQL_HOST" "$SQL_PORT" && break
    echo "Waiting for Postgres at $SQL_HOST:$SQL_PORT (attempt $attempt)"
    sleep 3
done

temporal-sql-tool --db temporal create
temporal-sql-tool --db temporal setup-schema -v 0.0
temporal-sql-tool --db temporal update-schema -d "$SCHEMA_DIR/temporal/versioned"

temporal-sql-tool --db temporal_visibility create
temporal-sql-tool --db temporal_visibility setup-schema -v 0.0
temporal-sql-tool --db temporal_visibility update-schema -d "$SCHEMA_DIR/visibility/versioned"

echo "Temporal schema is up to date."
