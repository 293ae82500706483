#!/usr/bin/env bash
# Installs, uses, upgrades, removes and purges the Debian packages inside a throwaway root: an overlay
# of this machine's / (Debian 12), or of another system's root such as packaging/trixie.sh's (Debian 13), in
# private mount and network namespaces. That root's /etc/pam.d and package database are never touched, and
# nothing survives the test.
# Usage: package-test.sh DEB_DIR [ROOT] (DEB_DIR with libpam-xign, libnss-xign, xign-setup and xign-manager .debs)
set -euo pipefail

if [ "${XIGN_PACKAGE_TEST_STAGE:-}" = "" ]; then
    DEBS=$(readlink -f "${1:?usage: package-test.sh DEB_DIR [ROOT]}")
    LOWER=$(readlink -f "${2:-/}")
    WORK=$(mktemp -d /tmp/xign-package-test.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
    echo "package-test: $(. "$LOWER/etc/os-release" && echo "$PRETTY_NAME"), the packages of $DEBS"
    # --mount and --net: a private view of the file systems and of the network (port 8440 is ours alone).
    XIGN_PACKAGE_TEST_STAGE=namespace unshare --mount --net --fork -- "$0" "$DEBS" "$WORK" "$LOWER"
    exit $?
fi

if [ "$XIGN_PACKAGE_TEST_STAGE" = namespace ]; then
    DEBS=$1 WORK=$2 LOWER=$3
    mount --make-rprivate /
    # The upper layer lives on its own tmpfs, so it cannot overlap the lower layer.
    mkdir -p "$WORK/layers" "$WORK/root"
    mount -t tmpfs tmpfs "$WORK/layers"
    mkdir -p "$WORK/layers/upper" "$WORK/layers/work"
    mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$WORK/layers/upper,workdir=$WORK/layers/work" "$WORK/root"
    mount -t proc proc "$WORK/root/proc"
    mount --rbind /sys "$WORK/root/sys"  # the cgroups a login's session is told by
    mount --rbind /dev "$WORK/root/dev"
    mount -t tmpfs tmpfs "$WORK/root/run"  # no systemd here: maintainer scripts must not reach the host's
    mkdir -p "$WORK/root/tmp/debs"
    cp "$DEBS"/*.deb "$WORK/root/tmp/debs/"
    cp "$0" "$WORK/root/tmp/package-test.sh"
    ip link set lo up
    XIGN_PACKAGE_TEST_STAGE=root exec chroot "$WORK/root" /bin/bash /tmp/package-test.sh
fi

# Inside the throwaway root.
step() { printf '\n== %s\n' "$*"; }
fail() { echo "package-test: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
cd /tmp/debs
PIN=24680

step "Install the packages"
cp /etc/nsswitch.conf /tmp/nsswitch.before
apt-get install -y -q ./libpam-xign_*.deb ./libnss-xign_*.deb ./xign-setup_*.deb ./xign-manager_*.deb
dpkg -s libpam-xign libnss-xign xign-setup xign-manager | grep -E '^(Package|Status|Version):'
grep -E '^passwd:.* xign$' /etc/nsswitch.conf && grep -E '^group:.* xign$' /etc/nsswitch.conf || fail "libnss-xign is not last in nsswitch.conf"
grep -q pam_mkhomedir /etc/pam.d/common-session || fail "the xign-homes profile is not in common-session"
test "$(stat -c '%a %U' /var/lib/xign-nss)" = "755 root" || fail "/var/lib/xign-nss is not root's 0755"
test -f /usr/lib/x86_64-linux-gnu/security/pam_xign.so || fail "pam_xign.so is not in the multiarch PAM directory"
test "$(stat -c %a /var/lib/xign)" = 700 || fail "/var/lib/xign is not 0700"
getent passwd xign-manager >/dev/null || fail "no xign-manager system user"
grep -q pam_xign /etc/pam.d/common-auth && fail "the profile must not be enabled by default"

step "Start the manager with its unit's command line (systemd is not PID 1 here)"
EXEC=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/xign-manager.service)
echo "$EXEC"
runuser -u xign-manager -- $EXEC >/tmp/manager.log 2>&1 &
MANAGER=$!
for _ in $(seq 100); do grep -q listening /tmp/manager.log && break; sleep 0.1; done
grep listening /tmp/manager.log || { cat /tmp/manager.log; fail "the manager did not start"; }

step "Enrol a test user with the installed xign-setup"
id xtest >/dev/null 2>&1 || useradd --create-home xtest
printf '%s\n' "$PIN" | xign-setup register --manager http://127.0.0.1:8440 --email xtest@example.org --pin-stdin
MAIL=$(grep -l 'To: xtest@example.org' /var/lib/xign-manager/outbox/new/*)
printf '%s\n' "$PIN" | xign-setup personalize --mail "$MAIL" --user xtest --pin-stdin --no-qr
ID=$(xign-setup list --json | sed -n 's/.*"idmIdentifier" : "\([0-9a-f]*\)".*/\1/p')
[ -n "$ID" ] || fail "no enrolment listed"

step "Enable the module with pam-auth-update"
pam-auth-update --enable xign
grep pam_xign /etc/pam.d/common-auth || fail "pam-auth-update did not add the module"
grep pam_xign /etc/pam.d/common-account || fail "pam-auth-update did not add the module's account line"
pamtester login xtest acct_mgmt || fail "the account phase judged a local user"
grep pam_xign /etc/pam.d/common-session || fail "pam-auth-update did not add the module's session line"
grep -q pam_xign /etc/pam.d/common-session-noninteractive && fail "the session line is in sudo's noninteractive stack"
pamtester login xtest open_session close_session || fail "the session phase failed a local user's session"

step "Log in through the real /etc/pam.d stack: the right PIN"
printf '%s\n' "$PIN" | pamtester -I tty=tty1 login xtest authenticate || fail "the right PIN was refused"

step "Without root the login goes through xignd, started from its socket as systemd starts it"
test -L /etc/systemd/system/sockets.target.wants/xignd.socket || fail "the package did not enable xignd.socket"
test -e /etc/systemd/system/multi-user.target.wants/xignd.service && fail "xignd.service must start from its socket only"
SOCKET=$(sed -n 's/^ListenStream=//p' /lib/systemd/system/xignd.socket)
XIGND_EXEC=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/xignd.service)
mkdir -p "$(dirname "$SOCKET")"
systemd-socket-activate -l "$SOCKET" $XIGND_EXEC >/tmp/xignd.log 2>&1 &
XIGND=$!
for _ in $(seq 100); do test -S "$SOCKET" && break; sleep 0.1; done
chmod 0666 "$SOCKET"  # the unit's SocketMode
# xtest at the machine: logind's records of a seat session (no logind runs here) and a cgroup where systemd puts its
# scope (user.slice/user-UID.slice/session-ID.scope), with an id of this run's own.
XTEST_UID=$(id -u xtest)
SESSION="pkgxign$$"
mkdir -p /run/systemd/sessions /run/systemd/users
printf 'UID=%s\nUSER=xtest\nACTIVE=1\nREMOTE=0\nSEAT=seat0\nCLASS=user\n' "$XTEST_UID" > /run/systemd/sessions/"$SESSION"
printf 'NAME=xtest\nSESSIONS=%s\nDISPLAY=%s\n' "$SESSION" "$SESSION" > /run/systemd/users/"$XTEST_UID"
CGROUPS=$(for d in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do test -e "$d/cgroup.procs" && { echo "$d"; break; }; done)
[ -n "$CGROUPS" ] || fail "no cgroup hierarchy to run the session in"
SCOPE="$CGROUPS/user.slice/user-$XTEST_UID.slice/session-$SESSION.scope"
mkdir -p "$SCOPE"
# Gone even when a step fails: a cgroup left behind is what make test's leftover check reports.
trap 'rmdir "$SCOPE" "$(dirname "$SCOPE")" "$(dirname "$(dirname "$SCOPE")")" 2>/dev/null || true' EXIT
at_seat() { sh -c 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"' "$SCOPE" _ "$@"; }
if printf '%s\n' "$PIN" | runuser -u xtest -- pamtester login xtest authenticate; then fail "xignd used the key for a caller in no session at the machine"; fi
printf '%s\n' "$PIN" | at_seat runuser -u xtest -- pamtester login xtest authenticate || { cat /tmp/xignd.log; fail "the user's own login through xignd was refused"; }
grep -q "uid=$(id -u xtest) .*result=success" /tmp/xignd.log || { cat /tmp/xignd.log; fail "the login did not go through xignd"; }
if printf '%s\n' "$PIN" | runuser -u nobody -- pamtester login xtest authenticate; then fail "nobody logged in as xtest through xignd"; fi
kill "$XIGND"; wait "$XIGND" 2>/dev/null || true
rmdir "$SCOPE" "$(dirname "$SCOPE")" "$(dirname "$(dirname "$SCOPE")")" 2>/dev/null || true

step "A TPM device key (swtpm) through the installed libtss2: personalized, the right PIN, a wrong one"
# The swtpm TCTI finds the control socket at the data socket's path with .ctrl.
TPM=$(mktemp -d)
swtpm socket --tpm2 --server type=unixio,path="$TPM/s" --ctrl type=unixio,path="$TPM/s.ctrl" --tpmstate dir="$TPM" \
    --flags not-need-init,startup-clear >/tmp/swtpm.log 2>&1 &
SWTPM=$!
for _ in $(seq 100); do test -S "$TPM/s" && break; sleep 0.1; done
cp /etc/xign/xign.conf /tmp/xign.conf.before
sed -i "s|^#device_key = auto$|device_key = tpm|; s|^#tcti = device:/dev/tpmrm0$|tcti = swtpm:path=$TPM/s|" /etc/xign/xign.conf
grep -q '^device_key = tpm' /etc/xign/xign.conf || fail "cannot set device_key in xign.conf"
id xtpm >/dev/null 2>&1 || useradd --create-home xtpm
printf '%s\n' "$PIN" | xign-setup register --manager http://127.0.0.1:8440 --email xtpm@example.org --pin-stdin
MAIL=$(grep -l 'To: xtpm@example.org' /var/lib/xign-manager/outbox/new/*)
printf '%s\n' "$PIN" | xign-setup personalize --mail "$MAIL" --user xtpm --pin-stdin --no-qr | tee /tmp/personalize-tpm.log
grep -q '(tpm key' /tmp/personalize-tpm.log || fail "the key was not made in the TPM"
printf '%s\n' "$PIN" | pamtester -I tty=tty1 login xtpm authenticate || fail "the right PIN was refused with a TPM key"
if printf '13570\n' | pamtester -I tty=tty1 login xtpm authenticate; then fail "a wrong PIN was accepted with a TPM key"; fi
cp /tmp/xign.conf.before /etc/xign/xign.conf
kill "$SWTPM"; wait "$SWTPM" 2>/dev/null || true

step "The manager's users on a joined host, through the installed libnss-xign and glibc's own NSS"
admin() { runuser -u xign-manager -- xign-manager admin "$@"; }
TOKEN=$(admin hosts add pkg-host.example.org --group web | awk '{print $NF}')
printf '%s\n' "$TOKEN" | xign-setup host join --manager http://127.0.0.1:8440 >/dev/null
admin accounts add xnina@example.org --login-name xnina >/dev/null
admin accounts set-host-groups xnina@example.org web >/dev/null
admin groups set-local web sudo >/dev/null
$XIGND_EXEC --socket /run/xign/xignd-directory.sock >/tmp/xignd-directory.log 2>&1 &
XIGND=$!
for _ in $(seq 100); do grep -qs '^xnina:' /var/lib/xign-nss/passwd && break; sleep 0.1; done
getent passwd xnina | grep -E '^xnina:\*:[0-9]{10}:[0-9]{10}::/home/xnina:/bin/bash$' || { cat /tmp/xignd-directory.log; fail "xnina is not a user here"; }
XNINA=$(id -u xnina)
test "$(getent passwd "$XNINA" | cut -d: -f1)" = xnina || fail "xnina's uid does not name her"
id xnina | grep -q '(sudo)' || fail "xnina did not join the mapped group sudo: $(id xnina)"
admin accounts add xomar@example.org --login-name xomar >/dev/null
admin accounts set-host-groups xomar@example.org web >/dev/null
getent passwd xomar >/dev/null || fail "a person added after the cache was written did not resolve at the first lookup"
id xtest >/dev/null || fail "a local user no longer resolves"
kill "$XIGND"; wait "$XIGND" 2>/dev/null || true
getent passwd xnina >/dev/null || fail "the cache did not answer with xignd stopped"
if getent passwd nobody-here >/dev/null; then fail "a made-up name resolved"; fi

step "Upgrade to a rebuilt package; the activation survives"
for deb in /tmp/debs/libpam-xign_*.deb /tmp/debs/libnss-xign_*.deb /tmp/debs/xign-setup_*.deb /tmp/debs/xign-manager_*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -R "$deb" "/tmp/rebuild-$name"
    sed -i 's/^Version: \(.*\)$/Version: \1+rebuild1/' "/tmp/rebuild-$name/DEBIAN/control"
    dpkg-deb -b "/tmp/rebuild-$name" "/tmp/${name}_rebuild.deb" >/dev/null
done
apt-get install -y -q /tmp/libpam-xign_rebuild.deb /tmp/libnss-xign_rebuild.deb /tmp/xign-setup_rebuild.deb /tmp/xign-manager_rebuild.deb
getent passwd xnina >/dev/null || fail "the upgrade lost the directory's users"
dpkg -s xign-setup | grep '^Version:.*+rebuild1' || fail "the upgrade did not happen"
xign-setup list | grep -q "$ID" || fail "the upgrade lost the activation"
printf '%s\n' "$PIN" | pamtester -I tty=tty1 login xtest authenticate || fail "the right PIN was refused after the upgrade"

step "Log in through the real stack: a wrong PIN"
if printf '13570\n' | pamtester -I tty=tty1 login xtest authenticate; then fail "a wrong PIN was accepted"; fi

step "Remove: the module leaves the PAM stack, the enrolment stays"
kill "$MANAGER"; wait "$MANAGER" 2>/dev/null || true
apt-get remove -y -q libpam-xign libnss-xign xign-setup xign-manager
grep -q pam_xign /etc/pam.d/common-auth /etc/pam.d/common-account /etc/pam.d/common-session && fail "the removed module is still in common-auth, common-account or common-session"
grep -q xign /etc/nsswitch.conf && fail "the removed module is still in nsswitch.conf"
grep -q pam_mkhomedir /etc/pam.d/common-session && fail "the removed homes profile is still in common-session"
test -d /var/lib/xign || fail "remove deleted the enrolments"
test -d /var/lib/xign-manager || fail "remove deleted the manager's data"

step "Purge: the state goes"
dpkg --purge libpam-xign libnss-xign xign-setup xign-manager  # apt no longer knows packages that came from local .debs
test ! -e /var/lib/xign || fail "purge kept /var/lib/xign"
test ! -e /var/lib/xign-manager || fail "purge kept /var/lib/xign-manager"
test ! -e /etc/xign/xign.conf || fail "purge kept /etc/xign/xign.conf"
test ! -e /var/lib/xign-nss || fail "purge kept /var/lib/xign-nss"
diff -u /tmp/nsswitch.before /etc/nsswitch.conf || fail "purge did not restore nsswitch.conf"

echo
echo "package-test: 1 passed, 0 failed"
