"""Sets up privacyIDEA for `make bench-manager`: SQLite, one user in a passwd resolver, one PIN-only (spass) token.

Usage: python privacyidea_setup.py DIR COST PIN, run with the venv's python. COST is "default" (privacyIDEA's own
PIN hashing, argon2 with 9 rounds) or "pbkdf2" (PBKDF2-SHA256 with 10,000 rounds, xign-manager's default cost).
Writes DIR/pi.cfg; the bench then serves it with gunicorn.
"""
import os
import secrets
import subprocess
import sys

directory, cost, pin = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(directory, exist_ok=True)
os.chdir(directory)  # pi-manage logs into its working directory before it reads PI_LOGFILE
config = os.path.join(directory, "pi.cfg")
lines = [
    f"SQLALCHEMY_DATABASE_URI = 'sqlite:///{directory}/privacyidea.sqlite'",
    f"SECRET_KEY = '{secrets.token_hex(16)}'",
    f"PI_PEPPER = '{secrets.token_hex(16)}'",
    f"PI_ENCFILE = '{directory}/enckey'",
    f"PI_AUDIT_KEY_PRIVATE = '{directory}/private.pem'",
    f"PI_AUDIT_KEY_PUBLIC = '{directory}/public.pem'",
    f"PI_LOGFILE = '{directory}/privacyidea.log'",
    "PI_LOGLEVEL = 30",
]
if cost == "pbkdf2":
    lines += ["PI_HASH_ALGO_LIST = ['pbkdf2_sha256']", "PI_HASH_ALGO_PARAMS = {'pbkdf2_sha256__rounds': 10000}"]
elif cost != "default":
    sys.exit(f"unknown cost {cost}: use default or pbkdf2")
with open(config, "w") as f:
    f.write("\n".join(lines) + "\n")
with open(os.path.join(directory, "passwd"), "w") as f:
    f.write("bench:x:1000:1000:Bench User:/home/bench:/bin/sh\n")
with open(os.path.join(directory, "resolver.conf"), "w") as f:
    f.write(repr({"fileName": os.path.join(directory, "passwd")}))

env = dict(os.environ, PRIVACYIDEA_CONFIGFILE=config)
manage = os.path.join(os.path.dirname(sys.executable), "pi-manage")
for command in (["setup", "create_enckey"], ["setup", "create_audit_keys"], ["setup", "create_tables"],
                ["config", "resolver", "create", "files", "passwdresolver", os.path.join(directory, "resolver.conf")],
                ["config", "realm", "create", "bench", "files"]):
    subprocess.run([manage, *command], env=env, check=True, stdout=subprocess.DEVNULL)

from privacyidea.app import create_app  # noqa: E402
from privacyidea.lib.token import init_token  # noqa: E402
from privacyidea.lib.user import User  # noqa: E402

app = create_app(config_name="production", config_file=config, silent=True)
with app.app_context():
    init_token({"type": "spass", "pin": pin}, user=User("bench", "bench"))
