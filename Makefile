# xign: build, test, demo and benchmarks. `make test` and `make demo` work on a fresh Debian 12 with Swift.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Build and test dependencies from Debian: the system libraries and the real tools the tests drive.
DEBIAN_PACKAGES := nodejs libcurl4-openssl-dev libssl-dev libqrencode-dev libpam0g-dev libtss2-dev libdbus-1-dev libsqlite3-dev fprintd python3-dbusmock \
	zbar-tools sqlite3 ca-certificates pamtester libpam-wrapper binutils swtpm swtpm-tools tpm2-tools faketime socat openssl openssh-server openssh-client sudo \
	i3lock xvfb xdotool dunst libnotify-bin dbus-daemon dbus-bin postgresql util-linux python3-prometheus-client python3-venv python3-cryptography \
	chromium chromium-driver curl sway swaylock grim wtype lightdm lightdm-gtk-greeter sddm sddm-theme-debian-maui imagemagick \
	libkscreenlocker5 plasma-workspace plasma-framework qml-module-org-kde-kquickcontrolsaddons tesseract-ocr tesseract-ocr-eng glewlwyd libnss-extrausers \
	xscreensaver cinnamon-screensaver cinnamon-common gir1.2-cvc-1.0 gir1.2-caribou-1.0
# (cinnamon-screensaver 5.6 needs the last three and does not depend on them.)
# GDM and GNOME's lock screen run in a Debian 12 VM (qemu, TCG) built from Debian's packages (make desktop-test).
DESKTOP_VM_PACKAGES := mmdebstrap qemu-system-x86 qemu-utils python3-pil openssh-client tesseract-ocr tesseract-ocr-eng
DESKTOP_VM := .build-desktop/vm

# pam_xign.so must run inside sudo, sshd and login: static Swift stdlib, only pam_sm_* exported,
# and nodelete so libpam's dlclose at every pam_end does not unload a runtime (docs/design.md, "The PAM host").
PAM_BUILD := .build-pam
PAM_SO := $(PAM_BUILD)/pam_xign.so
# lld, not gold: gold keeps GOT-referenced Swift symbols in .dynsym even when the version script hides them.
PAM_TOOLSET := $(PAM_BUILD)/toolset.json
PAM_FLAGS := -c release --product pam_xign --scratch-path $(PAM_BUILD) --toolset $(PAM_TOOLSET) --disable-local-rpath \
	-Xswiftc -static-stdlib \
	-Xlinker --version-script=$(CURDIR)/pam/pam_xign.map \
	-Xlinker -z -Xlinker nodelete -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker defs

# Where `make install` puts the module: Debian's multiarch PAM directory.
PAM_DIR ?= /usr/lib/$(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/security

# Debian packages: built with dpkg-buildpackage, checked with lintian, tested in a throwaway root.
PACKAGE_TOOLS := debhelper dh-nss dpkg-dev lintian fakeroot iproute2 systemd mmdebstrap
DEB_OUT := .build-deb/debs
# Debian 13's packages, and the root they are made and tested in.
DEB_OUT_TRIXIE := .build-deb/debs-trixie
TRIXIE_ROOT := .build-deb/trixie-root
# DEB_BUILD_OPTIONS=noautodbgsym (CI: nothing installs them there) leaves out the -dbgsym packages and their minutes of xz.
DBGSYM_DEBS := $(if $(findstring noautodbgsym,$(DEB_BUILD_OPTIONS)),,$(foreach p,libpam-xign libnss-xign xign-setup xign-manager,../$(p)-dbgsym_*.deb))

.PHONY: all deps build pam nss install test failover-test lint api-check fuzz sanitize demo bench bench-manager bench-scale package-tools package trixie-root package-trixie package-test desktop-tools desktop-root desktop-test desktop-test-bookworm desktop-test-trixie desktop-test-next clean

all: build

# Installs those of the Debian packages $(1) that are missing.
install_missing = @missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing from Debian:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

deps:
	$(call install_missing,$(DEBIAN_PACKAGES))

build: deps
	$(SWIFT) build

pam: deps
	@mkdir -p $(PAM_BUILD)
	@printf '{"schemaVersion": "1.0", "linker": {"path": "%s/ld.lld"}}\n' "$$(dirname "$$(readlink -f "$$(command -v swiftc)")")" > $(PAM_TOOLSET)
	@# libdbus's headers without its library: the module opens libdbus at the first fingerprint check (CXignDBus).
	@mkdir -p $(PAM_BUILD)/pkgconfig
	@printf 'Name: dbus-1\nDescription: headers only\nVersion: %s\nCflags: %s\n' "$$(pkg-config --modversion dbus-1)" "$$(pkg-config --cflags dbus-1)" > $(PAM_BUILD)/pkgconfig/dbus-1.pc
	PKG_CONFIG_PATH=$(CURDIR)/$(PAM_BUILD)/pkgconfig $(SWIFT) build $(PAM_FLAGS)
	install -m 0644 $(PAM_BUILD)/release/libpam_xign.so $(PAM_SO)
	@echo "built $(PAM_SO)"

# libnss_xign.so.2: small C with no Swift runtime, since every process that looks up a user loads it; only the
# _nss_xign_* functions exported (nss/libnss_xign.map).
NSS_BUILD := .build-nss
NSS_SO := $(NSS_BUILD)/libnss_xign.so.2
NSS_CFLAGS := -std=gnu11 -O2 -g -fPIC -Wall -Wextra -Werror -Wconversion -D_FORTIFY_SOURCE=2 -fstack-protector-strong
nss: $(NSS_SO)
$(NSS_SO): nss/nss_xign.c nss/xign_nss_wire.c nss/xign_nss_wire.h nss/libnss_xign.map
	@mkdir -p $(NSS_BUILD)
	$(CC) $(NSS_CFLAGS) -shared -Wl,--version-script=nss/libnss_xign.map -Wl,-z,relro,-z,now,-z,defs \
		-Wl,-soname,libnss_xign.so.2 -o $@ nss/nss_xign.c nss/xign_nss_wire.c

install: pam
	install -D -m 0644 $(PAM_SO) $(DESTDIR)$(PAM_DIR)/pam_xign.so
	@echo "installed $(DESTDIR)$(PAM_DIR)/pam_xign.so; enable it with a line such as: auth required pam_xign.so"

# The browser tests drive Debian's chromium with selenium from PyPI (Tests/XignTestSupport/Browser/setup.sh). The run
# fails if it leaves a process or a temporary directory behind (Tests/leftovers.sh).
test: deps pam nss
	bash Tests/XignTestSupport/Browser/setup.sh
	$(SWIFT) build --build-tests
	bash Tests/leftovers.sh start
	SWIFT="$(SWIFT)" bash Tests/run.sh
	bash Tests/leftovers.sh check

# PostgreSQL failing over under load (a primary with a synchronous standby, two managers, SIGKILL and promotion), alone:
# beside the other suites the machine's load stretches the waits it times. About 30 s; CI runs it after make test.
failover-test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter FailoverTests

# The toolchain's swift-format, with .swift-format; `swift-format format -i -r` on the same paths fixes what it reports.
FORMATTED := Package.swift Sources Tests Fuzz/Package.swift Fuzz/Sources
# The module map: each target's imports against Package.swift, and the README's drawing against both.
# The web app's script is read as JavaScript by node --check (Debian's nodejs, installed here when missing).
lint:
	@dpkg-query -W -f='$${Status}\n' nodejs 2>/dev/null | grep -q "install ok installed" || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs; }
	swift-format lint --strict --recursive $(FORMATTED)
	python3 .ci/module-map.py
	node --check Sources/XignWeb/Resources/app.js
	cat packaging/gnome-shell/43/prologue.js packaging/gnome-shell/qr-code.js packaging/gnome-shell/43/epilogue.js | node --check
	cat packaging/gnome-shell/45/prologue.js packaging/gnome-shell/qr-code.js packaging/gnome-shell/45/epilogue.js | \
		node --check --input-type=module

# schemathesis (PyPI, in .build-api/venv) against a real manager with docs/openapi.yaml: no 5xx, no answer that breaks the spec.
api-check: build
	bash Tests/APICheck/run.sh "$$($(SWIFT) build --show-bin-path)"

# libFuzzer targets (Fuzz/, a package of its own) with AddressSanitizer, FUZZ_SECONDS each; FUZZ_TARGETS picks some.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" bash Fuzz/run.sh

# Every test under AddressSanitizer, the manager's and xignd's under ThreadSanitizer (.build-asan, .build-tsan); SANITIZERS picks.
sanitize: deps pam
	bash Tests/Sanitizers/run.sh $(SANITIZERS)

demo: build pam
	bash .ci/demo.sh "$$($(SWIFT) build --show-bin-path)" "$(CURDIR)/$(PAM_SO)"

bench: deps pam nss
	bash Tests/XignTestSupport/Browser/setup.sh
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/xign-bench" "$(CURDIR)/$(PAM_SO)" "$(CURDIR)/pam/tests/pam_harness.c" \
		"$(CURDIR)/$(NSS_SO)" "$(CURDIR)/bench/nss_lookup.c"

# Complete logins per second against xign-manager (SQLite, PostgreSQL) and privacyIDEA from PyPI, BENCH_SECONDS per run.
BENCH_SECONDS ?= 10
bench-manager: deps pam
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/xign-bench" manager $(BENCH_SECONDS) --pam "$(CURDIR)/$(PAM_SO)" "$(CURDIR)/pam/tests/pam_harness.c"

# A login, a confirmation, a registration, the admin's lookups, /metrics and the database's size at 1,000 and at
# 1,000,000 accounts on PostgreSQL (BENCH_ACCOUNTS), in one run. Not in CI: the fill and the figures take minutes.
BENCH_ACCOUNTS ?= 1000000
bench-scale: deps
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/xign-bench" scale $(BENCH_ACCOUNTS)

package-tools:
	$(call install_missing,$(PACKAGE_TOOLS))

package: deps package-tools
	DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" dpkg-buildpackage -us -uc -b
	mkdir -p $(DEB_OUT)
	rm -f $(DEB_OUT)/*
	mv ../libpam-xign_*.deb ../libnss-xign_*.deb ../xign-setup_*.deb ../xign-manager_*.deb ../gnome-shell-extension-xign_*.deb \
	   $(DBGSYM_DEBS) ../xign_*.buildinfo ../xign_*.changes $(DEB_OUT)/
	lintian --fail-on error,warning $(DEB_OUT)/xign_*.changes

# The package and desktop tests build the packages first; PACKAGED= takes those in $(DEB_OUT) as they are and
# PACKAGED_TRIXIE= those in $(DEB_OUT_TRIXIE) (CI builds them in the background beside other steps). Set before the
# rules that name them: make expands a rule's prerequisites as it reads it.
PACKAGED ?= package
PACKAGED_TRIXIE ?= package-trixie

# Debian 13's root (packaging/trixie.sh), which needs no package of ours: CI makes it while the packages compile.
trixie-root: package-tools
	bash packaging/trixie.sh $(TRIXIE_ROOT)

# The same binaries packaged for Debian 13 in a Debian 13 root (packaging/trixie.sh): the root once (165-250 s here,
# mostly downloading), then about 3 minutes (stripping, xz and lintian of the same large binaries).
package-trixie: $(PACKAGED) package-tools
	bash packaging/trixie.sh $(TRIXIE_ROOT) $(DEB_OUT_TRIXIE)

# The test runs on Debian 12 (this machine) and on Debian 13 (the root).
package-test: $(PACKAGED) $(PACKAGED_TRIXIE)
	bash packaging/package-test.sh $(DEB_OUT)
	bash packaging/package-test.sh $(DEB_OUT_TRIXIE) $(TRIXIE_ROOT)

desktop-tools:
	$(call install_missing,$(DESKTOP_VM_PACKAGES))

# Debian's part of the VM's image, which needs no package of ours: CI makes it while the packages compile.
desktop-root: desktop-tools
	bash Tests/Desktop/gdm-image.sh $(DESKTOP_VM)

# GDM and GNOME's lock screen in a VM on Debian 12 and on Debian 13; CI runs Debian 12's alone (it has room for one VM).
desktop-test: desktop-test-bookworm desktop-test-trixie

# GDM 43 and GNOME's lock screen with the packages from `make package`, in a VM, and a phone (Chromium) approving a
# login at GDM: about 18 minutes with 2 cores.
desktop-test-bookworm: $(PACKAGED) desktop-root
	bash Tests/XignTestSupport/Browser/setup.sh
	bash Tests/Desktop/gdm-image.sh $(DESKTOP_VM) $(DEB_OUT)
	/usr/bin/python3 Tests/Desktop/gdm_test.py $(DESKTOP_VM) .build-deb/release .build-desktop/artifacts
	rm -rf $(DESKTOP_VM)

# GDM 48 and GNOME 48's lock screen on Debian 13 (Wayland), with the packages of `make package-trixie`: the same test,
# about 22 minutes. The guest's CPU has no AVX: with qemu's `max` model, GNOME 48's llvmpipe crashed the user's shell.
DESKTOP_VM_TRIXIE := .build-desktop/vm-trixie
desktop-test-trixie: package-trixie desktop-tools
	bash Tests/XignTestSupport/Browser/setup.sh
	SUITE=trixie bash Tests/Desktop/gdm-image.sh $(DESKTOP_VM_TRIXIE) $(DEB_OUT_TRIXIE)
	XIGN_VM_CPU=Nehalem /usr/bin/python3 Tests/Desktop/gdm_test.py $(DESKTOP_VM_TRIXIE) .build-deb/release \
		.build-desktop/artifacts-trixie
	rm -rf $(DESKTOP_VM_TRIXIE)

# GNOME 51's own login screen (Debian unstable: gdm3 51, gnome-shell 51) with the Debian 13 packages and no extension:
# a phone approves from the web login the greeter draws, and a PIN goes into its own password entry. Outside CI:
# unstable changes every day.
DESKTOP_VM_NEXT := .build-desktop/vm-sid
desktop-test-next: package-trixie desktop-tools
	bash Tests/XignTestSupport/Browser/setup.sh
	SUITE=sid bash Tests/Desktop/gdm-image.sh $(DESKTOP_VM_NEXT) $(DEB_OUT_TRIXIE)
	XIGN_VM_CPU=Nehalem /usr/bin/python3 Tests/Desktop/gnome51_test.py $(DESKTOP_VM_NEXT) .build-deb/release \
		.build-desktop/artifacts-next
	rm -rf $(DESKTOP_VM_NEXT)

clean:
	rm -rf .build $(PAM_BUILD)
