#!/usr/bin/env bash
# The packages for Debian 13 (trixie): the binaries `make package` compiled on Debian 12, packaged again inside a
# Debian 13 root made with mmdebstrap, so that debhelper and dpkg-shlibdeps compute every dependency from Debian 13's
# own libraries (libssl3t64, libtss2-mu-4.0.1-0t64...), the GNOME Shell extension is the one for its shell, and
# Debian 13's lintian checks them. A binary compiled against Debian 12's glibc runs on 13's; compiling again there
# would cost the 20 minutes of a release build for the same code. Nothing compiles here, so the build dependencies are
# not checked (-d).
# Usage: trixie.sh ROOT [OUT_DIR]   (ROOT is kept, for the package test and the next run; OUT_DIR gets the .debs;
# without it only the root is made, so CI can make it while the packages compile)
set -euo pipefail
ROOT=$(readlink -f "${1:?usage: trixie.sh ROOT [OUT_DIR]}")
cd "$(dirname "$0")/.."
# Written last, so a root cut short by a failure or a signal is made again.
DONE="$ROOT.done"

MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
make_root() {
    rm -rf "$ROOT"
    # To build: debhelper and its NSS addon, lintian. What the packages depend on, so that the package test installs
    # them without a network, and what that test drives (pamtester, systemd-socket-activate, swtpm).
    local packages=dpkg-dev,debhelper,dh-nss,lintian,fakeroot
    packages+=,libcurl4t64,libssl3t64,libqrencode4,libsqlite3-0,libdbus-1-3,libpam0g,libpam-runtime,adduser
    packages+=,libtss2-esys-3.0.2-0t64,libtss2-mu-4.0.1-0t64,libtss2-rc0t64,libtss2-tctildr0t64,libtss2-tcti-swtpm0t64
    packages+=,pamtester,systemd,swtpm,swtpm-tools,procps
    # Debian's Release files count as expired against these machines' clock.
    mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' --include="$packages" \
        trixie "$ROOT" ${MIRROR:+"$MIRROR"}
    touch "$DONE"
}
# One maker at a time: CI makes the root in the background while the package test may come to it.
{
    flock 9
    [ -f "$DONE" ] || make_root
} 9> "$ROOT.lock"
[ -n "${2:-}" ] || exit 0
OUT=$(readlink -f "$2")

# The source's packaging and what the Debian 12 build left, in a build directory inside the root.
BUILD="$ROOT/build"
rm -rf "$BUILD"
mkdir -p "$BUILD/xign/.build-deb/release" "$BUILD/xign/.build-pam" "$BUILD/xign/.build-nss"
cp -r debian packaging Makefile "$BUILD/xign/"
cp .build-deb/release/xign-setup .build-deb/release/xign-manager .build-deb/release/xignd \
    "$BUILD/xign/.build-deb/release/"
cp -r .build-deb/completions .build-deb/tss2-stub "$BUILD/xign/.build-deb/"
cp .build-pam/pam_xign.so "$BUILD/xign/.build-pam/"
cp .build-nss/libnss_xign.so.2 "$BUILD/xign/.build-nss/"
# The same version with +deb13: Debian 13's build sorts after Debian 12's, so an upgrade of the release takes it.
sed -i '1s/(\([^)]*\))/(\1+deb13)/' "$BUILD/xign/debian/changelog"
unshare --mount --fork -- sh -c 'mount -t proc proc "$1/proc" && chroot "$1" sh -c "
    cd /build/xign && XIGN_PREBUILT=1 DEB_BUILD_OPTIONS=noautodbgsym dpkg-buildpackage -us -uc -b -d &&
    lintian --fail-on error,warning /build/xign_*.changes"' package "$ROOT"
mkdir -p "$OUT"
rm -f "$OUT"/*
mv "$BUILD"/*.deb "$BUILD"/xign_*.changes "$BUILD"/xign_*.buildinfo "$OUT/"
rm -rf "$BUILD"
ls "$OUT"
