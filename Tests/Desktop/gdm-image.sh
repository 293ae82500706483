#!/usr/bin/env bash
# Builds a Debian 12 image with GDM 43 and GNOME Shell 43 from Debian's packages, with xign's own .deb
# packages installed, for a qemu VM (no KVM here: TCG). Recipe: ../shared/notes/desktop-recipes.md.
# Usage: gdm-image.sh OUT_DIR DEB_DIR
# Leaves OUT_DIR/base.raw (sparse, 6 GB), OUT_DIR/vmlinuz, OUT_DIR/initrd.img and OUT_DIR/id_ed25519 (root's ssh key).
set -euo pipefail
mkdir -p "${1:?usage: gdm-image.sh OUT_DIR DEB_DIR}"
OUT=$(readlink -f "$1")
DEBS=$(readlink -f "${2:?deb directory}")
ROOTFS="$OUT/rootfs"
rm -rf "$ROOTFS" "$OUT/base.raw" "$OUT/id_ed25519" "$OUT/id_ed25519.pub"
mkdir -p "$OUT"
ssh-keygen -q -t ed25519 -N "" -f "$OUT/id_ed25519"
KEY="$OUT/id_ed25519.pub"
PACKAGES=systemd-sysv,udev,dbus,dbus-user-session,libpam-systemd,linux-image-amd64,initramfs-tools,gdm3,gnome-shell,gnome-session
PACKAGES+=,xserver-xorg-core,xserver-xorg-input-libinput,x11-xkb-utils,xauth,x11-xserver-utils,libgl1-mesa-dri,at-spi2-core
PACKAGES+=,dconf-cli,fonts-cantarell,adwaita-icon-theme,openssh-server,iproute2,curl,procps,python3,libpam-gnome-keyring,ca-certificates
# What xign's packages depend on, so their installation below needs no network.
PACKAGES+=,libcurl4,libqrencode4,libtss2-esys-3.0.2-0,libtss2-tctildr0,libtss2-mu0,libtss2-rc0,libtss2-sys1,libsqlite3-0,libdbus-1-3,adduser
# The laptop's TPM (swtpm on the host, through qemu's TPM emulator), as the module reaches it.
PACKAGES+=,libtss2-tcti-device0
mmdebstrap --variant=minbase --include="$PACKAGES" \
    --customize-hook='echo xign-vm > "$1/etc/hostname"' \
    --customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1000 alice' \
    --customize-hook='echo "alice:alice-password" | chroot "$1" chpasswd' \
    --customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1001 bob' \
    --customize-hook="mkdir -p \"\$1/root/.ssh\" && cp '$KEY' \"\$1/root/.ssh/authorized_keys\" && chmod 600 \"\$1/root/.ssh/authorized_keys\"" \
    --customize-hook='printf "[Match]\nName=en*\n[Network]\nDHCP=yes\n" > "$1/etc/systemd/network/50-dhcp.network"' \
    --customize-hook='chroot "$1" systemctl enable systemd-networkd' \
    --customize-hook='sed -i "s/^\[daemon\]/[daemon]\nWaylandEnable=false/" "$1/etc/gdm3/daemon.conf"' \
    --customize-hook='printf "\n[org/gnome/login-screen]\ndisable-user-list=true\n[org/gnome/settings-daemon/plugins/power]\nsleep-inactive-ac-timeout=0\n" >> "$1/etc/gdm3/greeter.dconf-defaults"' \
    --customize-hook='mkdir -p "$1/etc/dconf/profile" "$1/etc/dconf/db/local.d" && printf "user-db:user\nsystem-db:local\n" > "$1/etc/dconf/profile/user" && printf "[org/gnome/desktop/session]\nidle-delay=uint32 0\n[org/gnome/desktop/screensaver]\nlock-enabled=true\n" > "$1/etc/dconf/db/local.d/00-xign-test" && chroot "$1" dconf update' \
    --customize-hook="mkdir -p \"\$1/tmp/debs\" && cp '$DEBS'/libpam-xign_*.deb '$DEBS'/xign-setup_*.deb '$DEBS'/gnome-shell-extension-xign_*.deb \"\$1/tmp/debs/\"" \
    --customize-hook='chroot "$1" sh -c "dpkg -i /tmp/debs/*.deb" && rm -rf "$1/tmp/debs"' \
    --customize-hook="copy-out /boot '$OUT'" \
    bookworm "$ROOTFS"
cp "$OUT"/boot/vmlinuz-* "$OUT/vmlinuz"
cp "$OUT"/boot/initrd.img-* "$OUT/initrd.img"
mkfs.ext4 -q -F -d "$ROOTFS" "$OUT/base.raw" 6G
rm -rf "$ROOTFS" "$OUT/boot"
echo "built $OUT/base.raw"
