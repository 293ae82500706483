"""A Debian 12 VM under qemu (TCG: KVM does not work on these machines), driven as a person would:
keys through QMP's send-key, pictures through QMP's screendump, state read over ssh.

Traps from ../shared/notes/desktop-recipes.md: pictures trail typing by seconds under llvmpipe, so type
blind with pauses and then poll; QMP serves one client, so this keeps one connection.
"""

import json
import os
import socket
import subprocess
import time

from PIL import Image

# QMP qcodes for the characters the tests type.
QCODES = {**{c: c for c in "abcdefghijklmnopqrstuvwxyz0123456789"}, "-": "minus", ".": "dot", " ": "spc", "_": "shift-minus",
          "@": "shift-2"}


class TestFailure(Exception):
    pass


class VM:
    def __init__(self, image_dir, work, ssh_key, ssh_port=2222):
        """Boots the image with a TPM 2.0: a new swtpm on the host, through qemu's TPM emulator (the guest's
        /dev/tpmrm0)."""
        self.work = work
        self.ssh_key = ssh_key
        self.ssh_port = ssh_port
        self.pictures = []
        overlay = os.path.join(work, "run.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", os.path.join(image_dir, "base.raw"), overlay],
                       check=True)
        self.qmp_path = os.path.join(work, "qmp.sock")
        tpm = os.path.join(work, "tpm")
        os.makedirs(tpm, exist_ok=True)
        self.tpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={tpm}", "--ctrl", f"type=unixio,path={tpm}/ctrl"],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "swtpm.log"), "w"))
        deadline = time.monotonic() + 10
        while not os.path.exists(f"{tpm}/ctrl"):
            if time.monotonic() > deadline:
                raise TestFailure("swtpm did not start")
            time.sleep(0.1)
        # XIGN_VM_CPU: Nehalem for GNOME 48 and later (see the Makefile).
        self.process = subprocess.Popen([
            "qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", os.environ.get("XIGN_VM_CPU", "max"),
            "-smp", "2", "-m", "3G", "-vga", "std",
            "-display", "none", "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
            "-kernel", os.path.join(image_dir, "vmlinuz"), "-initrd", os.path.join(image_dir, "initrd.img"),
            "-append", "root=/dev/vda rw console=ttyS0,115200",
            "-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
            "-chardev", f"socket,id=tpm,path={tpm}/ctrl", "-tpmdev", "emulator,id=tpm0,chardev=tpm", "-device", "tpm-tis,tpmdev=tpm0",
            "-qmp", f"unix:{self.qmp_path},server=on,wait=off", "-serial", f"file:{os.path.join(work, 'serial.log')}",
        ], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "qemu.log"), "w"))
        self.qmp = None
        self._connect_qmp()

    def _connect_qmp(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.qmp = socket.socket(socket.AF_UNIX)
                self.qmp.settimeout(30)
                self.qmp.connect(self.qmp_path)
                self.qmp_file = self.qmp.makefile("rw")
                json.loads(self.qmp_file.readline())  # the greeting
                self.command("qmp_capabilities")
                return
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.2)
        raise TestFailure("qemu's QMP socket did not come up")

    def command(self, name, **arguments):
        self.qmp_file.write(json.dumps({"execute": name, "arguments": arguments}) + "\n")
        self.qmp_file.flush()
        while True:
            answer = json.loads(self.qmp_file.readline())
            if "return" in answer:
                return answer["return"]
            if "error" in answer:
                raise TestFailure(f"QMP {name}: {answer['error']}")
            # An event: read on.

    def key(self, *qcodes, pause=0.15):
        self.command("send-key", keys=[{"type": "qcode", "data": code} for code in qcodes], **{"hold-time": 60})
        time.sleep(pause)

    def type(self, text):
        for character in text:
            code = QCODES[character]
            if code.startswith("shift-"):
                self.key("shift", code[len("shift-"):])
            else:
                self.key(code)

    def picture(self, name):
        """Saves the screen as NAME.png in the work directory and returns the image."""
        ppm = os.path.join(self.work, name + ".ppm")
        self.command("screendump", filename=ppm)
        image = Image.open(ppm)
        image.load()
        path = os.path.join(self.work, name + ".png")
        image.save(path)
        os.unlink(ppm)
        self.pictures.append(path)
        return image

    def drawn(self, name, seconds):
        """Waits until the screen shows more than one colour (llvmpipe under TCG draws a new session late), then keeps
        that picture as NAME.png."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            image = self.picture(name)
            low, high = zip(*image.convert("RGB").getextrema())
            if max(high) - min(low) > 40:
                return image
            self.pictures.pop()
            time.sleep(5)
        raise TestFailure(f"the screen stayed blank for {seconds} s ({name})")

    def ssh(self, command, stdin=None, timeout=120, check=True):
        result = subprocess.run(
            ["ssh", "-i", self.ssh_key, "-p", str(self.ssh_port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "root@127.0.0.1", command],
            input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise TestFailure(f"in the VM, {command!r} failed ({result.returncode}): {result.stdout} {result.stderr}")
        return result.stdout

    def tunnel(self, guest_port, host_port):
        """The host's 127.0.0.1:host_port at the guest's 127.0.0.1:guest_port, so the guest reaches it as loopback."""
        return subprocess.Popen(
            ["ssh", "-i", self.ssh_key, "-p", str(self.ssh_port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-N",
             "-R", f"127.0.0.1:{guest_port}:127.0.0.1:{host_port}", "root@127.0.0.1"])

    def wait(self, what, condition, seconds, every=3):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except (subprocess.TimeoutExpired, TestFailure):
                pass
            time.sleep(every)
        raise TestFailure(f"{what} did not happen within {seconds} s")

    def stop(self):
        if self.qmp:
            try:
                self.command("quit")
            except Exception:
                pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.tpm.terminate()
