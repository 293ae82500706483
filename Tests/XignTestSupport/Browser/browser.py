#!/usr/bin/env python3
"""Drives Debian's Chromium (headless, at phone size) through the manager's web app, with Chrome's virtual
authenticator (CTAP2, internal transport, user verification) as the phone's passkey store.

Usage: browser.py --profile DIR [--screenshots DIR] [--synced] COMMAND URL
  personalize URL   reads the activation PIN from stdin; opens the activation link, types it, makes the passkey
  approve URL       reads the code and the PIN (one line each) from stdin; opens the login link and approves
  deny URL          opens the login link and denies
  view URL          opens the login link and reports what it shows
  account URL       signs in on the account page and reports the devices and the waiting logins
  inbox URL         signs in, writes PROFILE/ready, and waits until a waiting login appears (the page long-polls)
  approve-waiting URL  reads the code and the PIN from stdin; signs in on the account page, opens the first waiting
                    login and approves it
  revoke URL        reads a device's name and the PIN from stdin; removes that device on the account page
  change-pin URL    reads the current and the new PIN from stdin; changes the PIN on the account page
  console-signin URL  reads the PIN from stdin; signs in to the console at URL (the manager's /console)
  console-act URL   reads an account's address and an action's button (lock, unlock, delete...) from stdin; finds the
                    account from the list at URL, opens it and presses the button; reports when it was pressed
  console-form URL  reads a form's action (addHost, setSudoPolicy...) and then its fields as ID=VALUE lines from stdin;
                    fills that form on the console page at URL and submits it; reports what the page says then
  console-pages URL reads paths (one per line) from stdin; opens each at phone and desktop size and reports what it shows
  register-provider URL  reads the PIN from stdin; on the manager's /register page, chooses it and goes on to the
                    provider's sign-in; reports where the browser is then
  page-cost URL     reads a second login link from stdin; opens URL with an empty cache and then the second with the
                    cache warm, under a slow mobile network, and reports the bytes and the time until each can be used
  assert URL        reads a JSON {"challenge", "rpId", "credentialId"} from stdin; at URL (any origin), asks the passkey
                    for an assertion over that challenge, as a page there could
The profile keeps the browser's storage (Chromium's user data) and the authenticator's credentials between runs, as
a phone keeps both. Prints one JSON object: what the page shows (status, error and the fields of each step).
Secrets come on stdin, never in argv.
"""
import argparse
import json
import os
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select

PHONE = (390, 844)


def start(profile, synced):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                     f"--window-size={PHONE[0]},{PHONE[1]}", f"--user-data-dir={os.path.join(profile, 'chromium')}"]:
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_page_load_timeout(30)
    # Headless windows are at least 500 px wide; a phone's viewport is set directly.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 1, "mobile": True})
    driver.execute_cdp_cmd("WebAuthn.enable", {"enableUI": False})
    authenticator = driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True, "automaticPresenceSimulation": True,
        "defaultBackupEligibility": synced, "defaultBackupState": synced}})["authenticatorId"]
    stored = os.path.join(profile, "credentials.json")
    if os.path.exists(stored):
        with open(stored) as f:
            for credential in json.load(f):
                driver.execute_cdp_cmd("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": credential})
    return driver, authenticator


def keep_credentials(driver, authenticator, profile):
    credentials = driver.execute_cdp_cmd("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    path = os.path.join(profile, "credentials.json")
    with open(path + ".new", "w") as f:
        json.dump(credentials, f)
    os.replace(path + ".new", path)


def text(driver, element_id):
    try:
        return driver.find_element(By.ID, element_id).text
    except WebDriverException:
        return ""


def visible(driver, element_id):
    try:
        return driver.find_element(By.ID, element_id).is_displayed()
    except WebDriverException:
        return False


def wait(driver, done, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if text(driver, "error") or done():
            return
        time.sleep(0.05)
    raise SystemExit(json.dumps({"error": "timed out waiting for the page", "status": text(driver, "status")}))


class Shots:
    def __init__(self, directory, command):
        self.directory, self.command, self.taken = directory, command, []

    def __call__(self, driver, step):
        if not self.directory:
            return
        path = os.path.join(self.directory, f"{self.command}-{len(self.taken) + 1}-{step}.png")
        driver.save_screenshot(path)
        self.taken.append(path)


def report(driver, shots, *fields):
    result = {"error": text(driver, "error"), "status": text(driver, "status"), "screenshots": shots.taken}
    for field in fields:
        result[field] = text(driver, field)
    return result


def personalize(driver, url, shots):
    pin = sys.stdin.readline().rstrip("\n")
    driver.get(url)
    wait(driver, lambda: visible(driver, "pin-step"))
    shots(driver, "pin")
    if text(driver, "error"):
        return report(driver, shots)
    driver.find_element(By.ID, "pin").send_keys(pin)
    driver.find_element(By.CSS_SELECTOR, "#pin-step button").click()
    wait(driver, lambda: visible(driver, "passkey-step"))
    shots(driver, "account")
    if text(driver, "error"):
        return report(driver, shots, "account", "outcome")
    account, outcome = text(driver, "account"), text(driver, "outcome")
    driver.find_element(By.ID, "create").click()
    wait(driver, lambda: visible(driver, "done"))
    shots(driver, "done")
    return dict(report(driver, shots, "done-text"), account=account, outcome=outcome)


def view(driver, url, shots):
    if url:
        driver.get(url)
    wait(driver, lambda: visible(driver, "decide"))
    shots(driver, "request")
    return report(driver, shots, "host", "service", "login", "remote", "time")


def decide(driver, url, shots, button):
    seen = view(driver, url, shots)
    if seen["error"]:
        return seen
    if button == "approve":
        code, pin = sys.stdin.readline().strip(), sys.stdin.readline().rstrip("\n")
        driver.find_element(By.ID, "code").send_keys(code)
        driver.find_element(By.ID, "pin").send_keys(pin)
    driver.find_element(By.ID, button).click()
    wait(driver, lambda: not visible(driver, "decide") or text(driver, "status").startswith(("Approved", "Denied")))
    shots(driver, "decided")
    return dict(seen, **report(driver, shots))


def follow(driver, url, shots):
    """Approves the login at url, then opens the next login's link (on stdin after the code and PIN) in the same tab,
    as a person who scans the next QR code does: only the part after "#" differs."""
    first = decide(driver, url, shots, "approve")
    second = sys.stdin.readline().strip()
    driver.get(second)
    wait(driver, lambda: visible(driver, "decide") and text(driver, "remote") != first.get("remote"), seconds=15)
    shots(driver, "next")
    return dict(report(driver, shots, "host", "service", "login", "remote"), first=first)


# Lighthouse's mobile profile ("slow 4G"): 150 ms round trip, 1.6 Mbit/s down, 750 kbit/s up.
SLOW_MOBILE = {"offline": False, "latency": 150, "downloadThroughput": 1.6e6 / 8, "uploadThroughput": 750e3 / 8}

# Set at the document's start: when the approval form first shows, in the page's own clock.
USABLE_MARK = """new MutationObserver(() => {
  const form = document.getElementById('decide');
  if (form && form.offsetParent !== null && window.xignUsableAt === undefined) window.xignUsableAt = performance.now();
}).observe(document, {subtree: true, childList: true, attributes: true});"""


def page_cost(driver, url, shots):
    second = sys.stdin.readline().strip()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", SLOW_MOBILE)
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": USABLE_MARK})
    # The floor under the same network: one small answer from the same server on a new connection.
    parts = urllib.parse.urlsplit(url)
    driver.get(f"{parts.scheme.lower()}://{parts.netloc.lower()}/health")
    result = {"floorMs": round(driver.execute_script(
        "return performance.getEntriesByType('navigation')[0].responseEnd"))}
    for name, link in (("cold", url), ("warm", second)):
        driver.get("about:blank")
        driver.get(link)
        wait(driver, lambda: driver.execute_script("return window.xignUsableAt !== undefined"))
        result[name] = driver.execute_script("""
            const entries = performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'));
            return {usableMs: Math.round(window.xignUsableAt),
                    bytes: entries.reduce((sum, e) => sum + (e.transferSize || 0), 0),
                    requests: entries.length,
                    fromNetwork: entries.filter(e => e.transferSize > 0).length};""")
    shots(driver, "page")
    return dict(report(driver, shots), **result)


def items(driver, list_id):
    return [item.text for item in driver.find_elements(By.CSS_SELECTOR, f"#{list_id} li")]


def sign_in(driver, url, shots):
    driver.get(url)
    wait(driver, lambda: visible(driver, "signin"))
    if text(driver, "error"):
        return report(driver, shots)
    driver.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(driver, lambda: visible(driver, "devices") and items(driver, "device-list"))
    shots(driver, "account")
    return dict(report(driver, shots), devices=items(driver, "device-list"), waiting=items(driver, "waiting-list"))


def inbox(driver, url, shots, profile):
    """Signs in, says so in PROFILE/ready, and waits until a login appears in the list, which the page long-polls."""
    seen = sign_in(driver, url, shots)
    if seen["error"]:
        return seen
    open(os.path.join(profile, "ready"), "w").close()
    wait(driver, lambda: items(driver, "waiting-list"), seconds=40)
    shots(driver, "waiting")
    return dict(seen, **report(driver, shots), waiting=items(driver, "waiting-list"))


def approve_waiting(driver, url, shots):
    """What a person does who was shown the account page and a code in place of a QR code."""
    seen = sign_in(driver, url, shots)
    if seen["error"]:
        return seen
    wait(driver, lambda: items(driver, "waiting-list"), seconds=40)
    shots(driver, "waiting")
    waiting = items(driver, "waiting-list")
    driver.find_element(By.CSS_SELECTOR, "#waiting-list li a").click()
    return dict(decide(driver, None, shots, "approve"), waiting=waiting)


def revoke(driver, url, shots):
    name, pin = sys.stdin.readline().strip(), sys.stdin.readline().rstrip("\n")
    seen = sign_in(driver, url, shots)
    if seen["error"]:
        return seen
    for item in driver.find_elements(By.CSS_SELECTOR, "#device-list li"):
        if name in item.text and item.find_elements(By.TAG_NAME, "button"):
            item.find_element(By.TAG_NAME, "button").click()
            break
    else:
        return dict(seen, error=f"no removable device named {name}")
    driver.find_element(By.ID, "revoke-pin").send_keys(pin)
    shots(driver, "revoke")
    driver.find_element(By.ID, "revoke-confirm").click()
    wait(driver, lambda: text(driver, "status").startswith("Removed"))
    shots(driver, "revoked")
    return dict(seen, **report(driver, shots), devices=items(driver, "device-list"))


def change_pin(driver, url, shots):
    current, new = sys.stdin.readline().rstrip("\n"), sys.stdin.readline().rstrip("\n")
    seen = sign_in(driver, url, shots)
    if seen["error"]:
        return seen
    for element_id, value in [("current-pin", current), ("new-pin", new), ("new-pin-again", new)]:
        driver.find_element(By.ID, element_id).send_keys(value)
    driver.find_element(By.ID, "change-pin-submit").click()
    wait(driver, lambda: text(driver, "status").startswith("PIN changed"))
    shots(driver, "changed")
    return dict(seen, **report(driver, shots))


DESKTOP = (1280, 800)


def size(driver, width_height):
    width, height = width_height
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def console_signin(driver, url, shots):
    pin = sys.stdin.readline().rstrip("\n")
    driver.get(url)
    wait(driver, lambda: visible(driver, "console-signin"))
    if text(driver, "error"):
        return report(driver, shots)
    driver.find_element(By.ID, "pin").send_keys(pin)
    shots(driver, "signin")
    driver.find_element(By.CSS_SELECTOR, "#console-signin button").click()
    wait(driver, lambda: "/console/accounts" in driver.current_url)
    shots(driver, "accounts")
    return dict(report(driver, shots), url=driver.current_url, title=driver.title)


def console_act(driver, url, shots):
    email, action = sys.stdin.readline().strip(), sys.stdin.readline().strip()
    driver.get(url)
    search = driver.find_elements(By.ID, "q")
    if not search:
        return dict(report(driver, shots), title=driver.title)
    search[0].send_keys(email)
    driver.find_element(By.CSS_SELECTOR, "form.search button").click()
    wait(driver, lambda: "q=" in driver.current_url)
    links = [a for a in driver.find_elements(By.CSS_SELECTOR, "tbody a") if a.text == email]
    if not links:
        return dict(report(driver, shots), error=f"no account {email} in the list")
    links[0].click()
    wait(driver, lambda: visible(driver, "account-facts"))
    shots(driver, "account")
    buttons = driver.find_elements(By.CSS_SELECTOR, f"button[data-action='{action}']")
    if not buttons:
        return dict(report(driver, shots), error=f"no {action} button", state=text(driver, "account-state"))
    before = driver.current_url
    pressed = time.time()
    buttons[0].click()
    wait(driver, lambda: text(driver, "status") and not text(driver, "status").startswith("Waiting"))
    answered = time.time()
    shots(driver, "done")
    return dict(report(driver, shots), pressedAt=int(pressed * 1000), answeredAt=int(answered * 1000),
                state=text(driver, "account-state"), url=driver.current_url, before=before)


def console_form(driver, url, shots):
    action = sys.stdin.readline().strip()
    fields = [line.rstrip("\n").split("=", 1) for line in sys.stdin if "=" in line]
    driver.get(url)
    forms = driver.find_elements(By.CSS_SELECTOR, f"form[data-action='{action}']")
    if not forms:
        return dict(report(driver, shots), error=f"no {action} form")
    for element_id, value in fields:
        element = driver.find_element(By.ID, element_id)
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        else:
            element.clear()
            element.send_keys(value)
    shots(driver, "filled")
    forms[0].find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    wait(driver, lambda: text(driver, "status") and not text(driver, "status").startswith("Waiting"))
    shots(driver, "done")
    return dict(report(driver, shots), url=driver.current_url)


def console_pages(driver, url, shots):
    pages = []
    for path in [line.strip() for line in sys.stdin if line.strip()]:
        for width_height, name in [(PHONE, "phone"), (DESKTOP, "desktop")]:
            size(driver, width_height)
            driver.get(url + path)
            wait(driver, lambda: driver.find_elements(By.TAG_NAME, "h1"))
            slug = "-".join(part if len(part) < 32 else "one" for part in path.split("?")[0].strip("/").split("/"))
            shots(driver, f"{slug}-{name}")
            body = driver.find_element(By.TAG_NAME, "body")
            pages.append({"path": path, "size": name, "h1": driver.find_element(By.TAG_NAME, "h1").text,
                          "text": body.text, "scripts": len(driver.find_elements(By.CSS_SELECTOR, "main script")),
                          "overflow": driver.execute_script(
                              "return document.documentElement.scrollWidth > window.innerWidth + 1"),
                          "error": text(driver, "error")})
    return dict(report(driver, shots), pages=pages)


def register_provider(driver, url, shots):
    """The web app's registration through an identity provider: the PIN twice, then on to the provider's sign-in."""
    pin = sys.stdin.readline().rstrip("\n")
    driver.get(url)
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#provider option"))
    for element_id in ["new-pin", "new-pin-again"]:
        driver.find_element(By.ID, element_id).send_keys(pin)
    shots(driver, "register")
    providers = [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#provider option")]
    origin = url.split("/register")[0]
    driver.find_element(By.CSS_SELECTOR, "#register-form button").click()
    wait(driver, lambda: not driver.current_url.startswith(origin))
    return dict(report(driver, shots), url=driver.current_url, providers=providers)


def confirm_registration(driver, url, shots):
    """Opens where the identity provider sends the browser back (URL), then answers the page that asks for the
    registration's code: each line of stdin is a code to type, or "not mine"."""
    answers = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    driver.get(url)
    wait(driver, lambda: visible(driver, "confirm-form") or text(driver, "notice"))
    shots(driver, "asked")
    asked = {"notice": text(driver, "notice"), "page": driver.find_element(By.TAG_NAME, "main").text,
             "started-at": text(driver, "started-at")}
    attempts = []
    for answer in answers:
        if not visible(driver, "confirm-form"):
            break
        driver.execute_script("for (const id of ['status', 'error']) document.getElementById(id).textContent = '';")
        if answer == "not mine":
            driver.find_element(By.CSS_SELECTOR, "#not-mine-form button").click()
        else:
            field = driver.find_element(By.ID, "code")
            field.clear()
            field.send_keys(answer)
            driver.find_element(By.CSS_SELECTOR, "#confirm-form button").click()
        wait(driver, lambda: text(driver, "status"))
        shots(driver, f"answer-{len(attempts) + 1}")
        attempts.append({"status": text(driver, "status"), "error": text(driver, "error"),
                         "form": visible(driver, "confirm-form")})
    return dict(report(driver, shots), attempts=attempts, **asked)


def assertion(driver, url, shots):
    request = json.loads(sys.stdin.readline())
    driver.get(url)
    return driver.execute_async_script("""
        const [request, done] = arguments;
        const b64u = (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
        const from = (t) => Uint8Array.from(atob(t.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((t.length + 3) % 4)), (c) => c.charCodeAt(0));
        navigator.credentials.get({ publicKey: { challenge: from(request.challenge), rpId: request.rpId, userVerification: "required",
                                                 allowCredentials: [{ type: "public-key", id: from(request.credentialId) }] } })
          .then((a) => done({ header: "webauthn." + [a.response.authenticatorData, a.response.clientDataJSON, a.response.signature].map(b64u).join("."),
                              origin: location.origin }))
          .catch((e) => done({ error: e.name + ": " + e.message }));
    """, request)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", required=True)
    parser.add_argument("--screenshots")
    parser.add_argument("--synced", action="store_true")
    commands = ["personalize", "approve", "deny", "view", "follow", "page-cost", "assert", "account", "inbox", "approve-waiting", "revoke", "change-pin",
                "console-signin", "console-act", "console-form", "console-pages", "register-provider", "confirm-registration"]
    parser.add_argument("command", choices=commands)
    parser.add_argument("url")
    arguments = parser.parse_args()
    os.makedirs(arguments.profile, exist_ok=True)
    if arguments.screenshots:
        os.makedirs(arguments.screenshots, exist_ok=True)
    driver, authenticator = start(arguments.profile, arguments.synced)
    shots = Shots(arguments.screenshots, arguments.command)
    try:
        if arguments.command == "personalize":
            result = personalize(driver, arguments.url, shots)
        elif arguments.command == "view":
            result = view(driver, arguments.url, shots)
        elif arguments.command == "follow":
            result = follow(driver, arguments.url, shots)
        elif arguments.command == "page-cost":
            result = page_cost(driver, arguments.url, shots)
        elif arguments.command == "assert":
            result = assertion(driver, arguments.url, shots)
        elif arguments.command == "account":
            result = sign_in(driver, arguments.url, shots)
        elif arguments.command == "inbox":
            result = inbox(driver, arguments.url, shots, arguments.profile)
        elif arguments.command == "approve-waiting":
            result = approve_waiting(driver, arguments.url, shots)
        elif arguments.command == "revoke":
            result = revoke(driver, arguments.url, shots)
        elif arguments.command == "change-pin":
            result = change_pin(driver, arguments.url, shots)
        elif arguments.command == "console-signin":
            result = console_signin(driver, arguments.url, shots)
        elif arguments.command == "console-act":
            result = console_act(driver, arguments.url, shots)
        elif arguments.command == "console-form":
            result = console_form(driver, arguments.url, shots)
        elif arguments.command == "console-pages":
            result = console_pages(driver, arguments.url, shots)
        elif arguments.command == "register-provider":
            result = register_provider(driver, arguments.url, shots)
        elif arguments.command == "confirm-registration":
            result = confirm_registration(driver, arguments.url, shots)
        else:
            result = decide(driver, arguments.url, shots, arguments.command)
        result["console"] = [entry["message"] for entry in driver.get_log("browser")] if hasattr(driver, "get_log") else []
        keep_credentials(driver, authenticator, arguments.profile)
    finally:
        driver.quit()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
