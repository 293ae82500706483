#!/usr/bin/env bash
# The main job end to end on the embedded default (SQLite), in a temporary directory:
# start the manager, register, show the activation QR code, personalize, list, remove.
set -euo pipefail
BIN=${1:?usage: demo.sh BIN_DIR PAM_MODULE}
PAM_MODULE=${2:?usage: demo.sh BIN_DIR PAM_MODULE}
WORK=$(mktemp -d /tmp/xign-demo.XXXXXX)
MANAGER_PID=
cleanup() {
    [ -n "$MANAGER_PID" ] && kill "$MANAGER_PID" 2>/dev/null && wait "$MANAGER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
PIN=24680   # the demo user's activation PIN; real users are prompted, or pipe it with --pin-stdin

step "Start xign-manager with SQLite in $WORK/manager"
"$BIN/xign-manager" serve --data-dir "$WORK/manager" --listen 127.0.0.1:0 --port-file "$WORK/port" >"$WORK/manager.log" 2>&1 &
MANAGER_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { cat "$WORK/manager.log"; echo "the manager did not start" >&2; exit 1; }
URL="http://127.0.0.1:$(cat "$WORK/port")"
grep 'listening' "$WORK/manager.log"

step "Register demo@example.org at $URL"
printf '%s\n' "$PIN" | "$BIN/xign-setup" register --manager "$URL" --email demo@example.org --alias "Demo laptop" \
    --pin-stdin --state-dir "$WORK/state"

step "The activation mail in the manager's outbox"
MAIL=$(ls "$WORK"/manager/outbox/new/* | head -n 1)
sed -n '1,/^\r$/p' "$MAIL" | tr -d '\r'

step "The activation QR code, drawn from the mail's link"
LINK=$(grep -m 1 '^X-Xign-Personalization:' "$MAIL" | cut -d ' ' -f 2 | tr -d '\r')
"$BIN/xign-setup" qr "$LINK" --columns 100 || echo "(this terminal is too small for the code; the demo goes on)"

step "Personalize this machine for local user 'demo' (software key)"
printf '%s\n' "$PIN" | "$BIN/xign-setup" personalize --mail "$MAIL" --user demo --pin-stdin --no-qr --state-dir "$WORK/state"

step "List the identity managers of this machine"
"$BIN/xign-setup" list --state-dir "$WORK/state"
"$BIN/xign-setup" list --state-dir "$WORK/state" --json

step "Log in through PAM: pamtester loads $PAM_MODULE (the right PIN)"
printf 'state_dir = %s\n' "$WORK/state" > "$WORK/xign.conf"
mkdir -p "$WORK/pam.d"
printf 'auth required %s config=%s timeout=5\n' "$PAM_MODULE" "$WORK/xign.conf" > "$WORK/pam.d/login"
printf 'auth required pam_deny.so\n' > "$WORK/pam.d/other"
cat "$WORK/pam.d/login"
pamtester() {
    LD_PRELOAD=libpam_wrapper.so PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$WORK/pam.d" command pamtester -v -I tty=tty1 login demo authenticate
}
printf '%s\n' "$PIN" | pamtester

step "A server that holds no key of demo's joins the manager as a host"
TOKEN=$("$BIN/xign-manager" admin hosts add demo-server --data-dir "$WORK/manager" | awk '{print $NF}')
printf '%s\n' "$TOKEN" | "$BIN/xign-setup" host join --manager "$URL" --state-dir "$WORK/server"
"$BIN/xign-manager" admin accounts set-login demo@example.org demo --data-dir "$WORK/manager"
"$BIN/xign-manager" admin accounts set-host-groups demo@example.org --all --data-dir "$WORK/manager"
# The server's user demo is its own (made by hand, not served by libnss-xign): the account may be it.
"$BIN/xign-manager" admin accounts set-local-user demo@example.org yes --data-dir "$WORK/manager"

step "Logging in to the server (mode=confirm): approve it on the enrolled machine with the code it shows"
printf 'state_dir = %s\n' "$WORK/server" > "$WORK/server.conf"
printf 'auth required %s mode=confirm config=%s timeout=30 timeout_total=30\n' "$PAM_MODULE" "$WORK/server.conf" > "$WORK/pam.d/server-login"
# pamtester prints through stdio; libstdbuf (what stdbuf -oL loads) makes it line-buffered into the file.
LD_PRELOAD="libpam_wrapper.so /usr/libexec/coreutils/libstdbuf.so" _STDBUF_O=L PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$WORK/pam.d" \
    command pamtester -v server-login demo authenticate </dev/null >"$WORK/server-login.out" 2>&1 &
SERVER_LOGIN=$!
for _ in $(seq 100); do grep -q 'type the code [0-9]\{6\}' "$WORK/server-login.out" && break; sleep 0.1; done
cat "$WORK/server-login.out"
CODE=$(grep -o 'type the code [0-9]\{6\}' "$WORK/server-login.out" | grep -o '[0-9]\{6\}')
printf '%s\n%s\n' "$CODE" "$PIN" | "$BIN/xign-setup" approve --user demo --pin-stdin --wait --state-dir "$WORK/state"
wait "$SERVER_LOGIN" || { cat "$WORK/server-login.out"; echo "the approved login failed" >&2; exit 1; }
tail -n 1 "$WORK/server-login.out"

step "Change the PIN, confirmed with the current one; then log in with the new PIN"
NEW_PIN=97531
printf '%s\n%s\n' "$PIN" "$NEW_PIN" | "$BIN/xign-setup" change-pin --pin-stdin --state-dir "$WORK/state"
printf '%s\n' "$NEW_PIN" | pamtester

step "The old PIN is now a wrong PIN: it fails, and the lockout is shown"
if printf '%s\n' "$PIN" | pamtester; then echo "the old PIN was accepted" >&2; exit 1; fi
if printf '%s\n' "$NEW_PIN" | pamtester; then echo "the lockout did not hold" >&2; exit 1; fi

step "What the manager knows: the activations, and the account's devices with their last use"
"$BIN/xign-manager" admin activations --data-dir "$WORK/manager"
"$BIN/xign-setup" list --devices --state-dir "$WORK/state"

step "Remove: revoke at the manager and forget it here"
ID=$("$BIN/xign-setup" list --state-dir "$WORK/state" --json | sed -n 's/.*"idmIdentifier" : "\([0-9a-f]*\)".*/\1/p')
"$BIN/xign-setup" remove "$ID" --state-dir "$WORK/state"
"$BIN/xign-setup" list --state-dir "$WORK/state"

step "Done; the temporary directory is removed"
