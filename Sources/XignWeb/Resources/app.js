// The one script the pages load: WebAuthn, the sealed PIN and the calls to the JSON API. It keeps which
// passkeys this browser enrolled (device id, credential id, account) in localStorage, which is this origin's
// alone. One part per page, sharing one scope. `make lint` checks its syntax (node --check).
"use strict";
// What the pages and the manager must agree on byte for byte: encodings, the canonical message a passkey signs, and
// the sealed PIN. No page or DOM here, so the shared test vectors (Tests/Vectors/web-app.json) run it in node too.
const XignWire = (() => {
const utf8 = (text) => new TextEncoder().encode(text);
function b64u(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function fromB64u(text) {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new Error("malformed base64url");
  const raw = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}
const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
};
const sha256 = async (bytes) => new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));

// The canonical message of a signed request (SignedRequest.canonicalMessage): method, path, body hash, challenge.
async function canonicalMessage(path, body, challenge) {
  return ["xign-request-v1", "POST", path, b64u(await sha256(utf8(body))), challenge].join("\n");
}

// The PIN sealed to the manager's PIN-sealing key for one request (docs/protocol.md, "The PIN and the lockout").
// `ephemeral` (a key pair) is for the shared test vectors only; a page always draws a fresh one.
async function seal(pin, spki, binding, ephemeral) {
  const bytes = utf8(pin);
  if (bytes.length < 1 || bytes.length > 64 || bytes.includes(0)) throw new Error("A PIN has 1 to 64 characters.");
  const curve = { name: "ECDH", namedCurve: "P-256" };
  ephemeral = ephemeral || await crypto.subtle.generateKey(curve, true, ["deriveBits"]);
  const recipient = await crypto.subtle.importKey("spki", spki, curve, false, []);
  const shared = await crypto.subtle.deriveBits({ name: "ECDH", public: recipient }, ephemeral.privateKey, 256);
  const point = new Uint8Array(await crypto.subtle.exportKey("raw", ephemeral.publicKey));
  const hkdf = await crypto.subtle.importKey("raw", shared, "HKDF", false, ["deriveBits"]);
  const material = new Uint8Array(await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: concat(point, spki), info: utf8("xign pin seal v1") }, hkdf, 44 * 8));
  const key = await crypto.subtle.importKey("raw", material.slice(0, 32), "AES-GCM", false, ["encrypt"]);
  const padded = new Uint8Array(64);
  padded.set(bytes);
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv: material.slice(32, 44), additionalData: utf8(["xign-pin-v1", ...binding].join("\n")) }, key, padded);
  return { epk: b64u(point), ct: b64u(sealed) };
}

return { utf8, b64u, fromB64u, sha256, canonicalMessage, seal };
})();

if (typeof document !== "undefined") (() => {
const { utf8, b64u, fromB64u, sha256, canonicalMessage, seal } = XignWire;
// Encodings, the sealed PIN, requests signed with the passkey, and what the pages show.
const page = document.body.dataset.page;
const rpId = document.body.dataset.rpId;
// The API's paths, as the manager names them (APIPath), so the script states none of its own.
const api = JSON.parse(document.body.dataset.api);
const $ = (id) => document.getElementById(id);
const timeoutMs = 30000;

function base32(bytes) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let out = "", buffer = 0, bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte; bits += 8;
    while (bits >= 5) { out += alphabet[(buffer >> (bits - 5)) & 31]; bits -= 5; }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += alphabet[(buffer << (5 - bits)) & 31];
  return out;
}
const random = (count) => b64u(crypto.getRandomValues(new Uint8Array(count)));

// What the terminal shows goes through DisplayText; here the same: no controls, no bidi overrides, and textContent.
const clean = (text, limit = 512) => String(text ?? "").replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "").slice(0, limit);
const show = (id, text) => { $(id).textContent = clean(text); };
const status = (text) => { show("status", text); show("error", ""); };
const fail = (text) => { show("error", text); show("status", ""); };
const when = (ms) => new Date(ms).toLocaleString();
const lockText = (lock) => lock.isPermanent
  ? "Wrong PIN. This activation is locked for good after too many wrong PINs; ask your administrator to unlock it."
  : `Wrong PIN. XignIn is locked until ${when(lock.lockedUntil)}; try again after that time.`;

class ManagerError extends Error {
  constructor(status, body) {
    const text = clean(body?.error?.message || `the manager answered ${status}`);
    super(text.charAt(0).toUpperCase() + text.slice(1));
    this.code = body?.error?.code;
    this.lockout = body?.error?.lockout;
  }
}

// One request to the JSON API; a signed (JWS) answer gives its payload. The PIN only ever travels sealed.
async function call(path, body, proof) {
  const headers = { "Content-Type": "application/json" };
  if (proof) headers["X-Xign-Signature"] = proof;
  let response;
  try {
    response = await fetch(path, { method: body === undefined ? "GET" : "POST", headers, body, cache: "no-store",
                                   credentials: "same-origin", signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    throw new Error(error.name === "TimeoutError" ? "The manager did not answer in time; check the connection and try again."
                                                  : "The manager cannot be reached; check the connection and try again.");
  }
  const text = await response.text();
  if (!response.ok) {
    let parsed = null;
    try { parsed = JSON.parse(text); } catch (_) {}
    throw new ManagerError(response.status, parsed);
  }
  if ((response.headers.get("Content-Type") || "").startsWith("application/jose")) {
    const parts = text.split(".");
    if (parts.length !== 3) throw new Error("The manager's signed answer is malformed.");
    return JSON.parse(new TextDecoder().decode(fromB64u(parts[1])));
  }
  return JSON.parse(text);
}

// The manager's signing key, and the PIN-sealing key it signed (a JWS in /health, docs/protocol.md).
async function managerKeys() {
  const health = await call(api.health);
  if (typeof health.managerKey !== "string" || typeof health.pinSealingKey !== "string")
    throw new Error("The manager names no PIN-sealing key; it is older than this page.");
  const signing = fromB64u(health.managerKey);
  const [header, payload, signature] = health.pinSealingKey.split(".");
  const verifier = await crypto.subtle.importKey("spki", signing, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
  const signed = await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, verifier, fromB64u(signature || ""),
                                            new TextEncoder().encode(`${header}.${payload}`));
  const decode = (part) => { try { return JSON.parse(new TextDecoder().decode(fromB64u(part || ""))); } catch (_) { return {}; } };
  const claims = decode(payload);
  if (!signed || decode(header).typ !== "xign-pin-sealing-key+jwt" || typeof claims.key !== "string")
    throw new Error("The manager's PIN-sealing key is not signed by its key; reload the page.");
  return { signing, sealing: fromB64u(claims.key) };
}

// The passkey signs SHA-256 of the request's canonical message, so the assertion covers method, path, body and challenge.
async function signRequest(enrolment, path, body, challenge) {
  const assertion = await navigator.credentials.get({ publicKey: {
    challenge: await sha256(utf8(await canonicalMessage(path, body, challenge))), rpId, userVerification: "required", timeout: 120000,
    allowCredentials: [{ type: "public-key", id: fromB64u(enrolment.credentialId) }] } });
  const r = assertion.response;
  return "webauthn." + [r.authenticatorData, r.clientDataJSON, r.signature].map(b64u).join(".");
}

async function deviceSigned(enrolment, path, fields) {
  const { challenge } = await call(api.challenges, JSON.stringify({ deviceId: enrolment.deviceId }));
  const body = JSON.stringify(await fields(challenge));
  return call(path, body, await signRequest(enrolment, path, body, challenge));
}

const stored = () => { try { return JSON.parse(localStorage.getItem("xign.enrolments") || "[]"); } catch (_) { return []; } };
function remember(enrolment) {
  const others = stored().filter((e) => e.activationId !== enrolment.activationId);
  localStorage.setItem("xign.enrolments", JSON.stringify([...others, enrolment]));
}

function passkeyError(error) {
  if (error instanceof ManagerError) return error.lockout ? lockText(error.lockout) : error.message;
  if (error.name === "NotAllowedError") return "The passkey was not used (cancelled or timed out). Try again when ready.";
  if (error.name === "SecurityError") return `Passkeys for this manager work only at ${document.body.dataset.origin}; open the link there.`;
  if (error.name === "InvalidStateError") return "This authenticator holds a passkey for this account already.";
  return clean(error.message || String(error));
}
function busy(on) { for (const button of document.querySelectorAll("button")) button.disabled = on; }
async function guarded(work) {
  busy(true);
  try { await work(); } catch (error) { fail(passkeyError(error)); } finally { busy(false); }
}

function fragment() {
  const fields = new Map();
  for (const pair of location.hash.slice(1).split("&")) {
    const at = pair.indexOf("=");
    if (at > 0) fields.set(pair.slice(0, at), decodeURIComponent(pair.slice(at + 1)));
  }
  return fields;
}
// The activation link's page: the activation PIN, then the passkey.
async function personalize() {
  const fields = fragment();
  const activation = { id: fields.get("a") || "", secret: fields.get("s") || "", fingerprint: fields.get("k") || "" };
  if (fields.get("v") !== "1" || !/^[0-9a-f]{32}$/.test(activation.id) || !activation.secret || !activation.fingerprint) {
    $("pin-step").hidden = true;
    return fail("This activation link is incomplete. Open the whole link from your activation mail, or ask your administrator for a new one.");
  }
  if (!window.PublicKeyCredential) { $("pin-step").hidden = true; return fail("This browser cannot make passkeys; use a current browser."); }
  let session = null, key = null, decrypted = null;
  $("pin-step").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    status("Checking the PIN…");
    const keys = await managerKeys();
    key = keys.signing;
    const digest = await sha256(key);
    const expected = activation.fingerprint.length === 26 ? base32(digest.slice(0, 16)) : b64u(digest);
    if (expected !== activation.fingerprint)
      throw new Error("The manager's key does not match the activation link: the link may be forged or the connection intercepted. Do not continue.");
    const nonce = random(16);
    const answer = await call(api.personalizationDecrypt, JSON.stringify({
      activationId: activation.id, activationSecret: activation.secret, nonce,
      sealedPin: await seal($("pin").value, keys.sealing, ["decrypt", activation.id, nonce]),
      knownDeviceIds: stored().map((e) => e.deviceId) }));
    $("pin").value = "";
    if (answer.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
    if (answer.outcome === "lockout") return fail(lockText(answer.lockout));
    decrypted = answer;
    session = answer.session;
    show("account", `${answer.accountEmail} (${answer.activationAlias})`);
    const outcomes = {
      newPersonalization: "A new activation. Create a passkey to finish.",
      mergePersonalization: "An organization invite. Create a passkey to use it as an account of its own in this browser.",
      rePersonalization: "This activation is personalized on another device. A passkey here replaces it; that device stops working.",
      alreadyPersonalized: "This browser holds this activation already. A new passkey replaces the old one.",
    };
    show("outcome", outcomes[answer.outcome] || "");
    $("pin-step").hidden = true;
    $("passkey-step").hidden = false;
    status("");
  }); });
  $("create").addEventListener("click", () => guarded(async () => {
    status("Waiting for the passkey…");
    const credential = await navigator.credentials.create({ publicKey: {
      rp: { id: rpId, name: "XignIn" },
      user: { id: fromHex(activation.id), name: decrypted.accountEmail, displayName: `${decrypted.accountEmail} (${decrypted.activationAlias})` },
      challenge: fromB64u(session.challenge), pubKeyCredParams: [{ type: "public-key", alg: -7 }], attestation: "none", timeout: 120000,
      authenticatorSelection: { userVerification: "required", residentKey: "preferred" } } });
    const mode = ["rePersonalization", "alreadyPersonalized"].includes(decrypted.outcome) ? "override" : "new";
    const nonce = random(16);
    const platform = clean(navigator.userAgentData?.platform || navigator.platform || "browser", 64) || "browser";
    const result = await call(api.passkeyPersonalizations, JSON.stringify({
      sessionId: session.id, mode, nonce, device: { name: "Passkey in a browser", platform },
      attestationObject: b64u(credential.response.attestationObject), clientDataJSON: b64u(credential.response.clientDataJSON) }));
    if (result.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
    remember({ deviceId: result.deviceId, activationId: result.activationId, credentialId: b64u(credential.rawId),
               email: result.accountEmail, alias: result.activationAlias });
    $("passkey-step").hidden = true;
    $("done").hidden = false;
    show("done-text", `${result.accountEmail} (${result.activationAlias}): scan a server's login QR code or open its link to approve a login here.`);
    status("");
  }));
}
const fromHex = (hex) => Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
// The login link's page: what asks, then the code and the PIN with one passkey prompt, or deny.
async function approve() {
  const id = location.hash.slice(1).toUpperCase();
  if (!/^[A-Z2-7]{26}$/.test(id)) return fail("This login link is incomplete. Scan the QR code on the server again.");
  const enrolments = stored();
  let view;
  try { view = await call(api.confirmationView, JSON.stringify({ confirmationId: id })); } catch (error) { return fail(passkeyError(error)); }
  show("host", view.host); show("service", view.service); show("login", view.loginName);
  show("remote", [view.remoteHost, view.tty].filter(Boolean).join(", ") || "not known");
  show("time", when(view.createdAt));
  $("request").hidden = false;
  const ended = { approved: "This login was approved already.",
                  denied: view.endedBecause === "wrongCodes" ? "This login was refused: a wrong code was typed too often. Start the login on the server again."
                                                             : "This login was denied on an enrolled device.",
                  expired: "This login request ran out. Start the login on the server again.",
                  withdrawn: "The server gave up on this login. Start it again there." };
  if (view.state !== "pending") return fail(ended[view.state] || "This login request is not waiting any more.");
  if (enrolments.length === 0)
    return fail("This browser holds no XignIn passkey for this manager. Activate it first with the link in your activation mail, or open this link where you did.");
  for (const [index, e] of enrolments.entries()) {
    const option = document.createElement("option");
    option.value = String(index);
    option.textContent = clean(`${e.email} (${e.alias})`);
    $("account").append(option);
  }
  $("account").parentElement.querySelector("label[for=account]").hidden = $("account").hidden = enrolments.length === 1;
  $("decide").hidden = false;
  const chosen = () => enrolments[Number($("account").value)];
  $("decide").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    status("Waiting for the passkey…");
    const spki = (await managerKeys()).sealing;
    const nonce = random(16);
    const pin = $("pin").value;
    $("pin").value = "";
    const answer = await deviceSigned(chosen(), api.confirmationApproval, async (challenge) => ({
      deviceId: chosen().deviceId, challenge, confirmationId: id, confirmationCode: $("code").value.trim(), nonce,
      sealedPin: await seal(pin, spki, ["approval", id, challenge]) }));
    if (answer.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
    if (answer.outcome === "lockout") return fail(lockText(answer.lockout));
    $("decide").hidden = true;
    status(`Approved. The login to ${clean(answer.host || view.host)} goes on.`);
  }); });
  $("deny").addEventListener("click", () => guarded(async () => {
    status("Waiting for the passkey…");
    await deviceSigned(chosen(), api.confirmationDenial, async (challenge) => ({
      deviceId: chosen().deviceId, challenge, confirmationId: id }));
    $("decide").hidden = true;
    status("Denied. The server refuses this login.");
  }));
}
// The account page: a read-only session that long-polls the waiting logins and lists the devices; removing a
// device and changing the PIN, each an api access process.
// An api access process, as in the terminal: an authentication for it (passkey and current PIN) gives a grant,
// and the process's request is signed over the grant.
async function apiAccess(enrolment, process, pin, fields, path = api.apiAccess) {
  const spki = (await managerKeys()).sealing;
  const nonce = random(16);
  const started = await deviceSigned(enrolment, api.authentications, async (challenge) => ({
    deviceId: enrolment.deviceId, challenge, purpose: { apiAccess: { process } }, host: location.hostname, localUser: "browser", nonce }));
  if (started.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
  const finish = JSON.stringify({ authenticationId: started.authenticationId, role: started.roles[0].name, factors: ["device", "pin"],
    sealedPin: await seal(pin, spki, ["authentication", started.authenticationId, started.challenge]),
    attributeValues: {}, attributeSelections: {}, nonce });
  const finished = await call(api.authenticationFinish, finish,
                              await signRequest(enrolment, api.authenticationFinish, finish, started.challenge));
  if (finished.outcome === "lockout") throw new ManagerError(423, { error: { message: lockText(finished.lockout), lockout: finished.lockout } });
  const grant = finished.apiAccess.grant;
  const body = JSON.stringify(Object.assign({ grant, nonce }, await fields(grant, spki)));
  return call(path, body, await signRequest(enrolment, path, body, grant));
}

// The browser's enrolments in the "account" list; the chosen one, or null when the browser holds none.
function enrolmentChoice() {
  const enrolments = stored();
  if (enrolments.length === 0) {
    fail("This browser holds no XignIn passkey for this manager. Activate it first with the link in your activation mail.");
    return null;
  }
  for (const [index, e] of enrolments.entries()) {
    const option = document.createElement("option");
    option.value = String(index);
    option.textContent = clean(`${e.email} (${e.alias})`);
    $("account").append(option);
  }
  return () => enrolments[Number($("account").value)];
}

async function account() {
  const chosen = enrolmentChoice();
  if (!chosen) return;
  let seen = [], polling = false, revoking = null;

  async function poll() {
    if (polling) return;
    polling = true;
    while (polling) {
      try {
        const { confirmations } = await call(api.webPending, JSON.stringify({ waitMilliseconds: 20000, seen }));
        seen = confirmations.map((c) => c.confirmationId);
        $("waiting-list").replaceChildren(...confirmations.map((c) => {
          const item = document.createElement("li"), link = document.createElement("a");
          link.href = "/c#" + encodeURIComponent(c.confirmationId);
          link.textContent = clean(`${c.loginName} on ${c.host} (${c.service})`);
          item.append(link, document.createTextNode(clean(` from ${c.remoteHost || "an unknown address"}, ${when(c.createdAt)}`)));
          return item;
        }));
        $("waiting-empty").hidden = confirmations.length > 0;
      } catch (error) {
        polling = false;
        $("waiting").hidden = $("devices").hidden = $("change-pin").hidden = true;
        $("signin").hidden = false;
        return fail(passkeyError(error));
      }
    }
  }

  async function showDevices() {
    const { deviceId, devices } = await call(api.webDevices, JSON.stringify({}));
    $("device-list").replaceChildren(...devices.map((d) => {
      const item = document.createElement("li");
      const kind = d.keyKind === "passkey" ? "passkey" : `${d.keyKind} key`;
      const used = d.lastUsedAt ? `last used ${when(d.lastUsedAt)}` : "never used";
      item.append(document.createTextNode(clean(`${d.name} (${d.platform}, ${kind}), ${used}`)));
      if (d.deviceId === deviceId) {
        item.append(document.createTextNode(" — this browser"));
      } else {
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "secondary";
        remove.textContent = "Remove";
        remove.setAttribute("aria-label", clean(`Remove ${d.name}`));
        remove.addEventListener("click", () => {
          revoking = d;
          show("revoke-what", `${d.name} (${d.platform}, ${kind}) stops working at once.`);
          $("revoke").hidden = false;
          $("revoke-pin").focus();
        });
        item.append(document.createElement("br"), remove);
      }
      return item;
    }));
  }

  $("signin").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    status("Waiting for the passkey…");
    await deviceSigned(chosen(), api.webSessions, async (challenge) => ({ deviceId: chosen().deviceId, challenge, nonce: random(16) }));
    $("signin").hidden = true;
    $("waiting").hidden = $("devices").hidden = $("change-pin").hidden = false;
    await showDevices();
    status(`Signed in as ${chosen().email}.`);
    poll();
  }); });
  $("revoke-cancel").addEventListener("click", () => { revoking = null; $("revoke").hidden = true; });
  $("revoke").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    status("Waiting for the passkey…");
    const pin = $("revoke-pin").value;
    $("revoke-pin").value = "";
    await apiAccess(chosen(), "revokeDevice", pin, async () => ({ revokedDeviceId: revoking.deviceId }));
    $("revoke").hidden = true;
    status(`Removed ${clean(revoking.name)}; it can no longer log in or approve.`);
    revoking = null;
    await showDevices();
  }); });
  $("change-pin").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    const [current, fresh, again] = ["current-pin", "new-pin", "new-pin-again"].map((id) => $(id).value);
    for (const id of ["current-pin", "new-pin", "new-pin-again"]) $(id).value = "";
    if (fresh !== again) return fail("The two new PINs differ; type the new PIN twice the same.");
    status("Waiting for the passkey…");
    const result = await apiAccess(chosen(), "changePin", current, async (grant, spki) => ({ sealedNewPin: await seal(fresh, spki, ["grant", grant]) }));
    status(`PIN changed for ${result.activationsWithNewPin} activation(s) of your account. Use the new PIN everywhere from now on.`);
  }); });
}
// The console: signing in is an api access process for "console" (passkey and PIN); each change is signed by the
// session's passkey over a fresh challenge, and the page then loads again from the server.
async function consoleSignIn() {
  const chosen = enrolmentChoice();
  if (!chosen) return;
  $("console-signin").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    status("Waiting for the passkey…");
    const pin = $("pin").value;
    $("pin").value = "";
    const session = await apiAccess(chosen(), "console", pin, async () => ({}), api.consoleSessions);
    status(`Signed in as ${clean(session.email)} (${session.role}).`);
    location.assign("/console/accounts");
  }); });
}
async function consoleList() {
  const done = sessionStorage.getItem("xign.console.done");
  sessionStorage.removeItem("xign.console.done");
  if (done) status(done);
  const out = $("sign-out");
  if (out) out.addEventListener("click", () => guarded(async () => {
    await call(api.consoleSessionEnd, "");
    location.assign("/console");
  }));
}
async function consoleAccount() {
  await consoleList();
  const enrolment = stored().find((e) => e.deviceId === document.body.dataset.deviceId);
  const facts = $("account-facts");
  const accountId = facts ? facts.dataset.accountId : undefined;
  const role = $("role");
  if (role) role.value = role.dataset.role || "";
  const act = (action, fields) => guarded(async () => {
    if (!enrolment) throw new Error("This browser does not hold the passkey that opened the session; sign in again.");
    status("Waiting for the passkey…");
    const result = await deviceSigned(enrolment, api.consoleActions, async (challenge) =>
      Object.assign({ deviceId: enrolment.deviceId, challenge, action, accountId }, fields));
    // A PIN or a join token is shown here once and never kept; other changes show on the page loaded again.
    if (action === "invite" || action === "addHost") {
      for (const input of document.querySelectorAll(`form[data-action='${action}'] input`)) input.value = "";
      return status(result.done);
    }
    sessionStorage.setItem("xign.console.done", result.done);
    location.assign(action === "delete" ? "/console/accounts" : location.pathname + location.search);
  });
  for (const button of document.querySelectorAll("button[data-action]")) {
    button.addEventListener("click", () => act(button.dataset.action, {
      targetDeviceId: button.dataset.targetDeviceId, activationId: button.dataset.activationId, hostName: button.dataset.hostName,
      coverId: button.dataset.coverId }));
  }
  const words = (id) => $(id).value.split(/\s+/).filter((w) => w);
  const number = (id) => ($(id).value === "" ? undefined : Number($(id).value));
  const forms = { setLoginName: () => ({ loginName: $("loginName").value.trim() }),
                  setHostGroups: () => ({ hostGroups: words("hostGroups") }),
                  setRole: () => ({ role: role.value || undefined }),
                  setOfflinePolicy: () => ({ offlineGraceSeconds: number("offlineHours") === undefined ? undefined : number("offlineHours") * 3600,
                                             offlineMaxFailures: number("offlineFailures") }),
                  invite: () => ({ email: $("invite-email").value.trim(), loginName: $("invite-login").value.trim() || undefined }),
                  addHost: () => ({ hostName: $("hostName").value.trim(), hostGroups: words("hostGroups") }),
                  setSudoPolicy: () => ({ hostGroup: $("sudoHostGroup").value.trim(), service: $("sudoService").value.trim(),
                                          sudoPolicy: $("sudoPolicy").value || undefined }) };
  for (const form of document.querySelectorAll("form[data-action]")) {
    form.addEventListener("submit", (event) => { event.preventDefault(); act(form.dataset.action, forms[form.dataset.action]()); });
  }
}
// Registration through the organization's identity provider: the PIN is chosen and sealed here, the provider's
// sign-in follows, and the manager sends this browser on to the activation link, where the passkey is made.
async function register() {
  const { identityProviders, defaultIdentityProvider } = await call(api.identityProviders);
  if (!identityProviders.length) { $("register-form").hidden = true; return fail("This manager registers through no identity provider; ask your administrator."); }
  for (const p of identityProviders) {
    const option = document.createElement("option");
    option.value = p.id;
    option.textContent = clean(p.name);
    option.selected = p.id === defaultIdentityProvider;
    $("provider").append(option);
  }
  $("register-form").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    const [pin, again] = [$("new-pin").value, $("new-pin-again").value];
    $("new-pin").value = $("new-pin-again").value = "";
    if (pin !== again) return fail("The two PINs differ; type the same PIN twice.");
    const provider = $("provider").value, nonce = random(16);
    const keys = await managerKeys();
    const started = await call(api.providerRegistrations, JSON.stringify({
      identityProvider: provider, nonce, alias: $("alias").value.trim() || undefined, continueInBrowser: true,
      sealedPin: await seal(pin, keys.sealing, ["provider-registration", provider, nonce]) }));
    status("Going to the sign-in…");
    location.assign(started.authorizationUrl);
  }); });
}
// After the provider's sign-in for a registration started elsewhere (a terminal): the person who signed in types
// the code shown there, or says it is not theirs. The manager knows the registration by this browser's cookie.
async function confirmRegistration() {
  const at = $("started-at");
  at.textContent = when(Number(at.dataset.at));
  const send = (body) => guarded(async () => {
    const answer = await call(api.providerRegistrationConfirmation, JSON.stringify(body));
    for (const form of document.querySelectorAll("form")) form.hidden = true;
    (answer.outcome === "registered" ? status : fail)(answer.message);
  });
  $("confirm-form").addEventListener("submit", (event) => { event.preventDefault(); send({ code: $("code").value.trim() }); });
  $("not-mine-form").addEventListener("submit", (event) => { event.preventDefault(); send({ cancel: true }); });
}
// A registration notice mail's "not me" link: its token is in the fragment, which no server sees.
async function notMe() {
  const token = location.hash.slice(1);
  if (!token) { $("not-me-form").hidden = true; return fail("This page needs the whole link from the mail; open it from there."); }
  $("not-me-form").addEventListener("submit", (event) => { event.preventDefault(); guarded(async () => {
    const answer = await call(api.registrationCancellations, JSON.stringify({ token }));
    $("not-me-form").hidden = true;
    status(answer.message);
  }); });
}
// Which page runs.
({ personalize, approve, account, register, "register-confirm": confirmRegistration, "not-me": notMe, notice: async () => {},
   console: consoleSignIn, "console-list": consoleList, "console-account": consoleAccount })[page]()
  .catch((error) => fail(passkeyError(error)));
// A login link opened in this tab differs only after "#", which loads nothing: show the login it names, never
// the one the page showed before (its form, its state).
window.addEventListener("hashchange", () => location.reload());
})();
