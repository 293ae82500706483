/// The one script the pages load: WebAuthn, the sealed PIN and the calls to the JSON API. It keeps which passkeys this
/// browser enrolled (device id, credential id, account) in localStorage, which is this origin's alone. Written in
/// parts, one per page, that share one scope.
enum AppScript {
    static let source = ["\"use strict\";\n(() => {", shared, personalization, approval, account, dispatch, "})();"]
        .joined(separator: "\n")

    /// Encodings, the sealed PIN, requests signed with the passkey, and what the pages show.
    static let shared = #"""
        const page = document.body.dataset.page;
        const rpId = document.body.dataset.rpId;
        const $ = (id) => document.getElementById(id);
        const utf8 = (text) => new TextEncoder().encode(text);
        const timeoutMs = 30000;

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
        const concat = (...parts) => {
          const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
          let at = 0;
          for (const p of parts) { out.set(p, at); at += p.length; }
          return out;
        };
        const sha256 = async (bytes) => new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
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
          const health = await call("/health");
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

        // The PIN sealed to the manager's PIN-sealing key for one request (docs/protocol.md, "The PIN and the lockout").
        async function seal(pin, spki, binding) {
          const bytes = utf8(pin);
          if (bytes.length < 1 || bytes.length > 64 || bytes.includes(0)) throw new Error("A PIN has 1 to 64 characters.");
          const curve = { name: "ECDH", namedCurve: "P-256" };
          const ephemeral = await crypto.subtle.generateKey(curve, true, ["deriveBits"]);
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

        // The passkey signs SHA-256 of the request's canonical message, so the assertion covers method, path, body and challenge.
        async function signRequest(enrolment, path, body, challenge) {
          const canonical = ["xign-request-v1", "POST", path, b64u(await sha256(utf8(body))), challenge].join("\n");
          const assertion = await navigator.credentials.get({ publicKey: {
            challenge: await sha256(utf8(canonical)), rpId, userVerification: "required", timeout: 120000,
            allowCredentials: [{ type: "public-key", id: fromB64u(enrolment.credentialId) }] } });
          const r = assertion.response;
          return "webauthn." + [r.authenticatorData, r.clientDataJSON, r.signature].map(b64u).join(".");
        }

        async function deviceSigned(enrolment, path, fields) {
          const { challenge } = await call("/v1/challenges", JSON.stringify({ deviceId: enrolment.deviceId }));
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
        """#

    static let dispatch = #"""
        ({ personalize, approve, account })[page]().catch((error) => fail(passkeyError(error)));
        // A login link opened in this tab differs only after "#", which loads nothing: show the login it names, never
        // the one the page showed before (its form, its state).
        window.addEventListener("hashchange", () => location.reload());
        """#
}
