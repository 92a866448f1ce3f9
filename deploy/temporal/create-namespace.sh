#!/bin/sh
# Register the Temporal namespace Keel uses (TEMPORAL_NAMESPACE, default "default").
# temporalio/server does not create one by itself; this runs once the server answers and
# leaves an existing namespace alone.
set -eu

NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${TEMPORAL_RETENTION:-168h}"

# The CLI may prefer an IPv6 address the server does not bind; use the IPv4 one if any.
HOST="${TEMPORAL_ADDRESS%:*}"
PORT="${TEMPORAL_ADDRESS##*:}"
IP="$(getent ahosts "$HOST" 2>/dev/null | awk '/STREAM/ && $1 ~ /^[0-9.]+$/ {print $1; exit}')" || IP=""
ADDRESS="${IP:-$HOST}:$PORT"

attempt=0
until temporal operator cluster health --address "$ADDRESS"; do
    attempt=$((attempt + 1))
    if [ "$attempt" -ge 30 ]; then
        echo "Temporal at $TEMPORAL_ADDRESS did not become healthy." >&2
        exit 1
    fi
    sleep 2
done

if temporal operator namespace describe --namespace "$NAMESPACE" --address "$ADDRESS" >/dev/null 2>&1; then
    echo "Namespace '$NAMESPACE' exists."
else
    temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" \
        --address "$ADDRESS"
    echo "Namespace '$NAMESPACE' created (retention $RETENTION)."
fi

# Keel's search attributes (docs/operations.md): runs list by agent, tenant, trigger and
# schedule in the Temporal UI and CLI. Creating one that exists is refused; that is fine.
for name in KeelAgent KeelTenant KeelTrigger KeelSchedule; do
    if temporal operator search-attribute create --namespace "$NAMESPACE" --address "$ADDRESS" \
        --name "$name" --type Keyword >/dev/null 2>&1; then
        echo "Search attribute $name registered."
    else
        echo "Search attribute $name already registered (or refused; see: temporal operator search-attribute list)."
    fi
done
