#!/usr/bin/env bash
# Builds a Debian image with GDM and GNOME Shell from Debian's packages, with xign's own .deb packages installed, for a
# qemu VM (no KVM here: TCG): Debian 12 (GDM 43, on Xorg) by default, SUITE=trixie for Debian 13 (GDM 48, Wayland
# only), SUITE=sid for unstable (GDM and GNOME 51 today). Recipe: ../shared/notes/desktop-recipes.md.
# Usage: [SUITE=trixie] gdm-image.sh OUT_DIR [DEB_DIR]
# Without DEB_DIR it makes only Debian's part, OUT_DIR/rootfs (downloading and unpacking), so CI can make it while
# the packages compile; with DEB_DIR it makes that part unless it is there, installs xign's packages into it,
# and leaves OUT_DIR/base.raw (sparse, 6 GB), OUT_DIR/vmlinuz, OUT_DIR/initrd.img and OUT_DIR/id_ed25519 (root's
# ssh key).
set -euo pipefail
mkdir -p "${1:?usage: gdm-image.sh OUT_DIR [DEB_DIR]}"
OUT=$(readlink -f "$1")
ROOTFS="$OUT/rootfs"
SUITE=${SUITE:-bookworm}
# Debian 12 comes from this machine's own apt sources; the others from the same mirror.
MIRROR=
[ "$SUITE" = bookworm ] || MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
# Written last, so a root cut short by a failure or a signal is made again.
DONE="$OUT/rootfs.done"

# Debian's part, with alice and bob, root's ssh key, the network and GDM's settings.
make_root() {
    rm -rf "$ROOTFS" "$OUT/id_ed25519" "$OUT/id_ed25519.pub"
    ssh-keygen -q -t ed25519 -N "" -f "$OUT/id_ed25519"
    KEY="$OUT/id_ed25519.pub"
    PACKAGES=systemd-sysv,udev,dbus,dbus-user-session,libpam-systemd,linux-image-amd64,initramfs-tools,gdm3,gnome-shell,gnome-session
    PACKAGES+=,libgl1-mesa-dri,at-spi2-core
    PACKAGES+=,dconf-cli,fonts-cantarell,adwaita-icon-theme,openssh-server,iproute2,curl,procps,python3,libpam-gnome-keyring,ca-certificates
    # What xign's packages depend on, so their installation below needs no network, and the laptop's TPM (swtpm on
    # the host, through qemu's TPM emulator) as the module reaches it: Debian 13 renamed the libraries (t64).
    if [ "$SUITE" = bookworm ]; then
        # GDM 43 on Xorg: its pictures are easier to take there.
        PACKAGES+=,xserver-xorg-core,xserver-xorg-input-libinput,x11-xkb-utils,xauth,x11-xserver-utils
        PACKAGES+=,libcurl4,libqrencode4,libtss2-esys-3.0.2-0,libtss2-tctildr0,libtss2-mu0,libtss2-rc0,libtss2-sys1,libsqlite3-0
        PACKAGES+=,libdbus-1-3,adduser,libtss2-tcti-device0
        ONLY_XORG='sed -i "s/^\[daemon\]/[daemon]\nWaylandEnable=false/" "$1/etc/gdm3/daemon.conf"'
    else
        PACKAGES+=,libcurl4t64,libqrencode4,libtss2-esys-3.0.2-0t64,libtss2-tctildr0t64,libtss2-mu-4.0.1-0t64,libtss2-rc0t64
        PACKAGES+=,libtss2-sys1t64,libsqlite3-0,libdbus-1-3,adduser,libtss2-tcti-device0t64
        ONLY_XORG=true
    fi
    # Debian's Release files of 13 and unstable count as expired against these machines' clock.
    mmdebstrap --variant=minbase --include="$PACKAGES" --aptopt='Acquire::Check-Valid-Until "false"' \
        --customize-hook='echo xign-vm > "$1/etc/hostname"' \
        --customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1000 alice' \
        --customize-hook='echo "alice:alice-password" | chroot "$1" chpasswd' \
        --customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1001 bob' \
        --customize-hook="mkdir -p \"\$1/root/.ssh\" && cp '$KEY' \"\$1/root/.ssh/authorized_keys\" && chmod 600 \"\$1/root/.ssh/authorized_keys\"" \
        --customize-hook='printf "[Match]\nName=en*\n[Network]\nDHCP=yes\n" > "$1/etc/systemd/network/50-dhcp.network"' \
        --customize-hook='chroot "$1" systemctl enable systemd-networkd' \
        --customize-hook="$ONLY_XORG" \
        --customize-hook='printf "\n[org/gnome/login-screen]\ndisable-user-list=true\n[org/gnome/settings-daemon/plugins/power]\nsleep-inactive-ac-timeout=0\n" >> "$1/etc/gdm3/greeter.dconf-defaults"' \
        --customize-hook='mkdir -p "$1/etc/dconf/profile" "$1/etc/dconf/db/local.d" && printf "user-db:user\nsystem-db:local\n" > "$1/etc/dconf/profile/user" && printf "[org/gnome/desktop/session]\nidle-delay=uint32 0\n[org/gnome/desktop/screensaver]\nlock-enabled=true\n" > "$1/etc/dconf/db/local.d/00-xign-test" && chroot "$1" dconf update' \
        "$SUITE" "$ROOTFS" ${MIRROR:+"$MIRROR"}
    touch "$DONE"
    echo "made Debian's part in $ROOTFS"
}
# One maker at a time: CI makes the root in the background while `make desktop-test` may come to it.
{
    flock 9
    [ -f "$DONE" ] || make_root
} 9> "$OUT/rootfs.lock"
[ -n "${2:-}" ] || exit 0

DEBS=$(readlink -f "$2")
rm -f "$OUT/base.raw"
mkdir -p "$ROOTFS/tmp/debs"
cp "$DEBS"/libpam-xign_*.deb "$DEBS"/xign-setup_*.deb "$ROOTFS/tmp/debs/"
# GNOME 51 draws the QR code itself: the extension is for GNOME Shell 43 to 50.
[ "$SUITE" = sid ] || cp "$DEBS"/gnome-shell-extension-xign_*.deb "$ROOTFS/tmp/debs/"
# As mmdebstrap's hooks ran: /proc and /dev in the root, in a mount namespace of its own so nothing stays mounted, and
# no service started by a maintainer script (policy-rc.d).
printf '#!/bin/sh\nexit 101\n' > "$ROOTFS/usr/sbin/policy-rc.d"
chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
unshare --mount --fork -- sh -c 'mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && chroot "$1" sh -c "dpkg -i /tmp/debs/*.deb"' \
    install "$ROOTFS"
rm -rf "$ROOTFS/tmp/debs" "$ROOTFS/usr/sbin/policy-rc.d" "$DONE"
cp "$ROOTFS"/boot/vmlinuz-* "$OUT/vmlinuz"
cp "$ROOTFS"/boot/initrd.img-* "$OUT/initrd.img"
mkfs.ext4 -q -F -d "$ROOTFS" "$OUT/base.raw" 6G
rm -rf "$ROOTFS" "$OUT/rootfs.lock"
echo "built $OUT/base.raw"
