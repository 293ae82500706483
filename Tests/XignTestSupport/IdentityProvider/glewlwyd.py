#!/usr/bin/env python3
"""Debian's glewlwyd as the organization's OpenID provider, for the registration tests.

Usage:
  glewlwyd.py prepare DIR PORT          writes DIR/glewlwyd.conf, an SQLite database from the package's schema and
                                        an RSA and an EC signing key
  glewlwyd.py configure PORT CALLBACK ALG  signs in as glewlwyd's administrator and adds the OpenID Connect plugin
                                        (RS256 or ES256, PKCE, discovery), the client "xign" (secret on stdin) with
                                        CALLBACK as its redirect URI, and the people of the tests with their claims
  glewlwyd.py sign-in PORT USER URL     reads USER's password from stdin; signs in at the provider and grants the
                                        client, as the person's browser does, then opens URL (the authorization
                                        request) and prints where the provider sends the browser back
Prints one JSON object. Secrets come on stdin.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.parse

import http.cookiejar
import urllib.error
import urllib.request

PEOPLE = [
    # username, password, email, name, login, groups, email_verified ("1", "0", or None for no such claim)
    ("nina", "nina-pass-1", "nina@example.org", "Nina Example", "nina", ["staff", "web-admins"], "1"),
    ("omar", "omar-pass-1", "omar@example.org", "Omar Example", "root", ["staff"], "1"),
    ("pat", "pat-pass-1", "", "Pat Example", "pat", [], "1"),
    ("vera", "vera-pass-1", "vera@example.org", "Vera Example", "vera", ["staff"], "0"),
    ("ursula", "ursula-pass-1", "ursula@example.org", "Ursula Example", "ursula", ["staff"], None),
    ("olga", "olga-pass-1", "olga@elsewhere.example", "Olga Example", "olga", ["staff"], "1"),
]


def prepare(directory, port):
    os.makedirs(directory, exist_ok=True)
    database = os.path.join(directory, "glewlwyd.sqlite")
    schema = subprocess.run(["zcat", "/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz"], check=True,
                            capture_output=True).stdout
    subprocess.run(["sqlite3", database], input=schema, check=True)
    # The people's login name, groups and whether their address is verified are properties of the database user
    # module, which the claims read; the module reads its data format when glewlwyd starts.
    connection = sqlite3.connect(database)
    (parameters,) = connection.execute("SELECT gumi_parameters FROM g_user_module_instance WHERE gumi_name = 'database'").fetchone()
    parameters = json.loads(parameters)
    parameters["data-format"].update({
        "login": {"multiple": False, "read": True, "write": True, "profile-read": True, "profile-write": False},
        "groups": {"multiple": True, "read": True, "write": True, "profile-read": True, "profile-write": False},
        "email_verified": {"multiple": False, "read": True, "write": True, "profile-read": True, "profile-write": False}})
    connection.execute("UPDATE g_user_module_instance SET gumi_parameters = ? WHERE gumi_name = 'database'", (json.dumps(parameters),))
    connection.commit()
    connection.close()
    for name, command in [("rsa", ["openssl", "genrsa", "-out"]), ("ec", ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out"])]:
        key = os.path.join(directory, name + ".key")
        subprocess.run(command + [key], check=True, capture_output=True)
        subprocess.run(["openssl", "req", "-new", "-x509", "-key", key, "-out", os.path.join(directory, name + ".crt"),
                        "-days", "2", "-subj", "/CN=glewlwyd"], check=True, capture_output=True)
    with open("/etc/glewlwyd/glewlwyd.conf") as f:
        conf = f.read()
    conf = conf.replace("port=4593", f"port={port}").replace('external_url="http://localhost:4593/"',
                                                             f'external_url="http://localhost:{port}"')
    conf = conf.replace('log_file="/var/log/glewlwyd.log"', f'log_file="{directory}/glewlwyd.log"')
    conf = conf.replace('@include "/etc/glewlwyd/glewlwyd-db.conf"', f'database = {{ type = "sqlite3" path = "{database}" }};')
    with open(os.path.join(directory, "glewlwyd.conf"), "w") as f:
        f.write(conf)
    return {"config": os.path.join(directory, "glewlwyd.conf"), "binary": shutil.which("glewlwyd") or "/usr/bin/glewlwyd"}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *arguments):
        return None


class Session:
    """A browser's cookies, JSON calls, and redirects left unfollowed (the test reads where they lead)."""

    def __init__(self):
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect())

    def call(self, method, url, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with self.opener.open(request, timeout=10) as answer:
                return answer.status, answer.read().decode(), dict(answer.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(), dict(error.headers)


def admin(port):
    session = Session()
    check(session.call("POST", f"http://localhost:{port}/api/auth/", {"username": "admin", "password": "password"}), "admin")
    return session


def check(answer, what):
    status, text, _ = answer
    if status != 200:
        raise SystemExit(json.dumps({"error": f"{what}: HTTP {status} {text[:300]}"}))


def configure(port, callback, algorithm, directory):
    secret = sys.stdin.readline().strip()
    api = f"http://localhost:{port}/api"
    session = admin(port)
    check(session.call("PUT", api + "/scope/openid", {"name": "openid", "display_name": "OpenID", "description": "OpenID Connect",
                                                  "password_required": True, "password_max_age": 0, "scheme": {}}), "scope")
    kind = "rsa" if algorithm == "RS256" else "ecdsa"
    prefix = "rsa" if algorithm == "RS256" else "ec"
    with open(os.path.join(directory, prefix + ".key")) as key, open(os.path.join(directory, prefix + ".crt")) as cert:
        key_text, cert_text = key.read(), cert.read()
    plugin = {"module": "oidc", "name": "oidc", "display_name": "OpenID Connect", "enabled": True, "parameters": {
        "iss": f"http://localhost:{port}/api/oidc", "jwt-type": kind, "jwt-key-size": "256", "key": key_text, "cert": cert_text,
        "code-duration": 600, "refresh-token-duration": 1209600, "access-token-duration": 3600,
        "auth-type-code-enabled": True, "auth-type-refresh-enabled": True, "auth-type-client-enabled": False,
        "auth-type-implicit-enabled": False, "auth-type-password-enabled": False,
        "pkce-allowed": True, "pkce-method-plain-allowed": False, "discovery-enabled": True, "jwks-show": True,
        "allowed-scope": ["openid"], "subject-type": "public", "name-claim": "mandatory", "email-claim": "mandatory",
        "claims": [{"name": "login", "user-property": "login", "type": "string", "mandatory": True, "on-demand": False},
                   {"name": "groups", "user-property": "groups", "type": "string", "mandatory": True, "on-demand": False},
                   {"name": "email_verified", "user-property": "email_verified", "type": "boolean",
                    "boolean-value-true": "1", "boolean-value-false": "0", "mandatory": True, "on-demand": False}]}}
    check(session.call("POST", api + "/mod/plugin/", plugin), "plugin")
    check(session.call("POST", api + "/client/", {
        "client_id": "xign", "name": "xign", "confidential": True, "password": secret, "redirect_uri": [callback],
        "authorization_type": ["code"], "scope": ["openid"], "enabled": True,
        "token_endpoint_auth_method": ["client_secret_basic"]}), "client")
    for user, password, email, name, login, groups, verified in PEOPLE:
        person = {"username": user, "password": password, "name": name, "email": email, "login": login, "groups": groups,
                  "scope": ["openid"], "enabled": True}
        if verified is not None:
            person["email_verified"] = verified
        check(session.call("POST", api + "/user/", person), "user " + user)
    return {"issuer": f"http://localhost:{port}/api/oidc"}


def sign_in(port, user, url):
    password = sys.stdin.readline().rstrip("\n")
    api = f"http://localhost:{port}/api"
    browser = Session()
    check(browser.call("POST", api + "/auth/", {"username": user, "password": password}), "sign-in")
    client = urllib.parse.parse_qs(urllib.parse.urlparse(url).query).get("client_id", [""])[0]
    check(browser.call("PUT", api + f"/auth/grant/{client}", {"scope": "openid"}), "grant")
    # The provider's login page sends the browser on with g_continue once the person signed in and granted.
    status, _, headers = browser.call("GET", url + "&g_continue")
    return {"status": status, "location": headers.get("Location", "")}


def main():
    command = sys.argv[1]
    if command == "prepare":
        result = prepare(sys.argv[2], int(sys.argv[3]))
    elif command == "configure":
        result = configure(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif command == "sign-in":
        result = sign_in(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
