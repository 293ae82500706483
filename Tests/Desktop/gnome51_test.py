"""GNOME 51's own login screen with pam_xign, for real, in a Debian unstable VM (gdm3 51, gnome-shell 51, Wayland)
with xign's Debian 13 packages, and no extension: the greeter draws what the module asks for in GDM's CustomJSON
messages (service gdm-switchable-auth, the profile's gdm_json=0).

bob holds no key on this machine, only a passkey in his phone's browser (Chromium with its virtual authenticator):
he types his name, presses "Log In", and the greeter draws the web login (the approval link as a QR code, the link,
"Login code"); zbarimg reads the link from the screen's picture and tesseract the code, the phone approves, Done
logs bob in. Then alice, enrolled here, types her name and her PIN into the greeter's own password entry and is in.
Each step is photographed into the artifacts.

Usage: gnome51_test.py IMAGE_DIR RELEASE_DIR ARTIFACT_DIR   (RELEASE_DIR has xign-manager and xign-setup)
"""

import glob
import os
import re
import shutil
import subprocess
import time

from gdm_test import (PIN, browser, enrol_bobs_phone_and_join, expect, keep_the_failure, keep_the_pictures, main,
                      module_log, rows, start_manager, type_name, wait_for_pin_prompt)
from vm import VM, TestFailure

# GDM 51's greeter runs as a dynamic user whose name starts so (gdm-greeter, then gdm-greeter-2 after a logout).
GREETER = "gdm-greeter"


def read_web_login(vm, name, seconds):
    """The link (zbarimg) and the login code (tesseract) from pictures of the greeter's web login, once both read."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        vm.picture(name)
        path = vm.pictures[-1]
        scanned = subprocess.run(["zbarimg", "--quiet", "--raw", path], capture_output=True, text=True)
        words = subprocess.run(["tesseract", path, "-", "--psm", "11"], capture_output=True, text=True).stdout
        # OCR may read a digit as the letter it resembles.
        code = re.search(r"code:?\s+([0-9OoIlS]{6})\b", words.replace("\n", " "))
        if scanned.returncode == 0 and code:
            return scanned.stdout.strip(), code.group(1).translate(str.maketrans("OoIlS", "00115"))
        vm.pictures.pop()
        time.sleep(5)
    raise TestFailure(f"no QR code and login code could be read from the greeter within {seconds} s")


def run(image_dir, release, artifacts, work):
    key = os.path.join(work, "id_ed25519")
    shutil.copy(os.path.join(image_dir, "id_ed25519"), key)
    os.chmod(key, 0o600)
    manager_binary = os.path.join(release, "xign-manager")
    manager, port, data, config = start_manager(work, manager_binary)
    url = f"http://localhost:{port}"

    def admin(*arguments):
        return subprocess.run([manager_binary, "admin", *arguments, "--config", config, "--data-dir", data], capture_output=True,
                              text=True, check=True).stdout
    vm = VM(image_dir, work, key)
    tunnel = None
    started = time.monotonic()

    def step(text):
        print(f"[{time.monotonic() - started:6.0f} s] {text}", flush=True)

    def greeter_shown(picture):
        vm.wait("GDM's greeter", lambda: any(user.startswith(GREETER) for user in
                                             vm.ssh("ps -o user:32= -C gnome-shell", check=False).split()), 600, every=5)
        vm.drawn(picture, 600)
        time.sleep(20)  # under TCG the greeter takes keys well after it is drawn

    try:
        vm.wait("ssh into the VM", lambda: vm.ssh("true", timeout=20) == "", 400, every=5)
        print(vm.ssh("dpkg-query -W gdm3 gnome-shell libpam-xign"))
        step("the VM is up")
        tunnel = vm.tunnel(port, port)  # the same port: the activation mail names the manager by it
        vm.wait("the tunnel to the manager", lambda: "managerKeyFingerprint" in vm.ssh(f"curl -s http://127.0.0.1:{port}/health", timeout=20), 30)
        vm.ssh(f"printf '{PIN}\\n' | xign-setup register --manager {url} --email alice@example.org "
               f"--alias 'GNOME 51 laptop' --pin-stdin")
        mail = sorted(glob.glob(os.path.join(data, "outbox", "new", "*")))[0]
        vm.ssh("cat > /root/activation.eml", stdin=open(mail).read())
        print(vm.ssh(f"printf '{PIN}\\n' | xign-setup personalize --mail /root/activation.eml --user alice --pin-stdin --no-qr 2>&1"))

        enrol_bobs_phone_and_join(vm, work, release, data, url, admin)
        # The packaged profile, with mode=auto: alice's own key takes her PIN, a person without one here approves.
        vm.ssh("pam-auth-update --enable xign")
        vm.ssh("sed -i 's/pam_xign.so ignore_unknown_user/pam_xign.so mode=auto ignore_unknown_user/' /etc/pam.d/common-auth")
        print(vm.ssh("grep pam_xign /etc/pam.d/common-auth; ls -l /usr/lib/pam.d/gdm-switchable-auth"))
        step("alice is personalized, bob's phone holds a passkey, the VM joined as a host, the profile is on")

        greeter_shown("01-greeter")
        type_name(vm, "bob", lambda: rows(data, "confirmations"))
        step("bob typed his name at GNOME 51's greeter")
        time.sleep(15)
        vm.picture("02-log-in-button")
        vm.key("ret")  # the "Log In" button of the web login, focused
        payload, code = read_web_login(vm, "03-web-login", 240)
        step(f"read from the greeter's own web login: the QR code ({payload[:40]}...) and the login code {code}")
        approved = browser(work, "approve", payload, f"{code}\n{PIN}\n")
        expect(approved.get("status", "").startswith("Approved"), f"the phone's approval: {approved}")
        vm.key("ret")  # Done, focused
        step("the phone approved and bob pressed Done")
        vm.wait("bob's GNOME session", lambda: vm.ssh("pgrep -u bob -x gnome-shell", check=False) != "", 600, every=5)
        vm.drawn("04-bob-session", 300)
        confirmed = [line for line in module_log(vm) if "result=confirmed service=gdm-switchable-auth user=bob" in line]
        expect(confirmed, f"no confirmed login of bob under gdm-switchable-auth: {module_log(vm)}")
        step("GNOME 51's greeter logged bob in with the phone's approval")

        session = vm.ssh("loginctl list-sessions --no-legend | awk '$3 == \"bob\" {print $1}' | head -n 1").strip()
        vm.ssh(f"loginctl terminate-session {session}")
        vm.wait("bob's session gone", lambda: vm.ssh("pgrep -u bob -x gnome-shell", check=False) == "", 300, every=5)
        greeter_shown("05-greeter-again")
        type_name(vm, "alice", lambda: rows(data, "authentications"))
        wait_for_pin_prompt(vm, "06-pin-entry")
        vm.type(PIN)
        vm.key("ret")
        step("alice typed her PIN into the greeter's own password entry")
        vm.wait("alice's GNOME session", lambda: vm.ssh("pgrep -u alice -x gnome-shell", check=False) != "", 600, every=5)
        vm.drawn("07-alice-session", 300)
        logins = module_log(vm)
        expect(any("result=success service=gdm-switchable-auth user=alice" in line for line in logins),
               f"no PIN login of alice under gdm-switchable-auth: {logins}")
        step("GNOME 51's greeter logged alice in with her PIN")
    except Exception:
        keep_the_failure(vm, work)
        raise
    finally:
        if tunnel:
            tunnel.terminate()
        vm.stop()
        manager.terminate()
        keep_the_pictures(work, artifacts)


if __name__ == "__main__":
    main(run, "GNOME 51's own login screen")
