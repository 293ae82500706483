#!/usr/bin/env bash
# `make api-check`: schemathesis (PyPI) against a real xign-manager on 127.0.0.1 with a temporary SQLite database,
# driven by docs/openapi.yaml. Usage: run.sh BIN_DIR; API_CHECK_ARGS adds schemathesis options (such as
# --include-operation-id NAME). Fails on any check's failure or a manager that died.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repository="$(cd "$here/../.." && pwd)"
bin="$1"
venv="$repository/.build-api/venv"
version=4.32.5
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "$version" || ! "$venv/bin/python" -c "import cryptography" 2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version" "cryptography>=42"
fi

work="$(mktemp -d)"
manager=""
cleanup() {
    [ -n "$manager" ] && kill "$manager" 2>/dev/null && wait "$manager" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# Rate limits high enough for ~2000 generated requests from one address; everything else at its default.
cat > "$work/manager.conf" <<'CONF'
[limits]
registrations_per_address = 1000
registrations_per_email = 1000
decrypts_per_address = 1000
CONF
"$bin/xign-manager" serve --config "$work/manager.conf" --data-dir "$work/data" --listen 127.0.0.1:0 --port-file "$work/port" \
    > "$work/manager.log" 2>&1 &
manager=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { cat "$work/manager.log"; echo "api-check: xign-manager did not start" >&2; exit 1; }

url="http://127.0.0.1:$(cat "$work/port")"

# Real data for the hooks to put into some schema-valid requests, so they get past "not found" to the signed
# answers: a personalized device (its id), and an activation that is not personalized yet (its id and secret).
register() {
    printf '24680\n' | "$bin/xign-setup" register --manager "$url" --email "$1" --alias seed --pin-stdin --state-dir "$work/state" >/dev/null
    grep -l "$1" "$work/data/outbox/new/"* | head -n 1
}
device_mail=$(register device@example.org)
printf '24680\n' | "$bin/xign-setup" personalize --mail "$device_mail" --user seed --pin-stdin --no-qr --state-dir "$work/state" >/dev/null
device_id=$("$bin/xign-setup" list --state-dir "$work/state" --json | sed -n 's/.*"idmIdentifier" : "\([0-9a-f]*\)".*/\1/p')
activation_link=$(grep -o 'link/personalize#[^ ]*' "$(register activation@example.org)" | head -n 1)
activation_id=$(printf '%s' "$activation_link" | sed -n 's/.*[#&]a=\([0-9a-f]*\).*/\1/p')
activation_secret=$(printf '%s' "$activation_link" | sed -n 's/.*&s=\([A-Za-z0-9_-]*\).*/\1/p')
[ -n "$device_id" ] && [ -n "$activation_id" ] && [ -n "$activation_secret" ] || { echo "api-check: cannot seed the manager" >&2; exit 1; }
# PINs are sealed to the PIN-sealing key that /health names, signed by the manager's key (a JWS; its payload's key).
manager_key=$(/usr/bin/python3 -c 'import base64, json, sys, urllib.request; s = json.load(urllib.request.urlopen(sys.argv[1] + "/health", timeout=10))["pinSealingKey"].split(".")[1]; print(json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))["key"])' "$url")
[ -n "$manager_key" ] || { echo "api-check: /health names no manager key" >&2; exit 1; }
export XIGN_API_CHECK_SEED="{\"deviceId\": \"$device_id\", \"activationId\": \"$activation_id\", \"activationSecret\": \"$activation_secret\", \"managerKey\": \"$manager_key\"}"

status=0
(cd "$here" && PYTHONPATH="$here" XIGN_API_CHECK_SIGNED="$work/signed" "$venv/bin/st" --config-file "$here/schemathesis.toml" run "$repository/docs/openapi.yaml" \
    --url "$url" --no-color ${API_CHECK_ARGS:-}) || status=$?
if ! kill -0 "$manager" 2>/dev/null; then
    echo "api-check: xign-manager died during the run:" >&2
    tail -20 "$work/manager.log" >&2
    exit 1
fi
echo "api-check: signed answers checked against their payload schema: $(cat "$work/signed" 2>/dev/null | wc -l)"
sort "$work/signed" 2>/dev/null | uniq -c || true
exit "$status"
