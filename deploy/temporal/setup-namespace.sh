#!/bin/sh
# One-shot job (temporalio/admin-tools): once the Temporal frontend answers, create mnemo's
# namespace and register its search attributes. Idempotent: what exists is left alone.
#
#   TEMPORAL_ADDRESS      frontend host:port, e.g. temporal:7233
#   TEMPORAL_NAMESPACE    the namespace mnemo runs in (MNEMO_TEMPORAL_NAMESPACE)
#   NAMESPACE_RETENTION   how long closed workflows are kept, e.g. 720h
#   SEARCH_ATTRIBUTES     space-separated NAME=TYPE pairs, e.g. "MnemoTenant=Keyword"
set -eu

: "${TEMPORAL_ADDRESS:?}" "${TEMPORAL_NAMESPACE:?}" "${SEARCH_ATTRIBUTES:?}"
RETENTION="${NAMESPACE_RETENTION:-720h}"
changed=0

op() { temporal operator "$@" --address "$TEMPORAL_ADDRESS"; }

retry() { # retry COMMAND...: up to 60 attempts, 2 s apart
    attempt=1
    until "$@"; do
        if [ "$attempt" -ge 60 ]; then
            echo "temporal setup: giving up after $attempt attempts: $*" >&2
            return 1
        fi
        attempt=$((attempt + 1))
        sleep 2
    done
}

ensure_namespace() {
    op namespace describe --namespace "$TEMPORAL_NAMESPACE" >/dev/null 2>&1 && return 0
    op namespace create --namespace "$TEMPORAL_NAMESPACE" --retention "$RETENTION" || return 1
    changed=1
}

has_search_attribute() { # has_search_attribute NAME TYPE
    op search-attribute list --namespace "$TEMPORAL_NAMESPACE" | grep -w -- "$1" | grep -qiw -- "$2"
}

ensure_search_attribute() { # ensure_search_attribute NAME TYPE
    has_search_attribute "$1" "$2" && return 0
    op search-attribute create --namespace "$TEMPORAL_NAMESPACE" --name "$1" --type "$2" || return 1
    changed=1
    has_search_attribute "$1" "$2"
}

echo "temporal setup: waiting for the frontend at $TEMPORAL_ADDRESS"
retry op cluster health
retry ensure_namespace
echo "temporal setup: namespace $TEMPORAL_NAMESPACE is ready"
for spec in $SEARCH_ATTRIBUTES; do
    name="${spec%%=*}"
    type="${spec#*=}"
    if [ -z "$name" ] || [ "$name" = "$spec" ] || [ -z "$type" ]; then
        echo "temporal setup: bad SEARCH_ATTRIBUTES entry '$spec' (want NAME=TYPE)" >&2
        exit 1
    fi
    retry ensure_search_attribute "$name" "$type"
    echo "temporal setup: search attribute $name ($type) is registered"
done
if [ "$changed" = 1 ]; then
    # Frontends read namespaces (and so search attribute aliases) from a cache refreshed about
    # every 10 s: wait one period so mnemo's first workflows see what was just registered.
    sleep 12
fi
echo "temporal setup: done"
