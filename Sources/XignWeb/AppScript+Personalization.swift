/// The activation link's page: the activation PIN, then the passkey.
extension AppScript {
    static let personalization = #"""
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
            const answer = await call("/v1/personalization/decrypt", JSON.stringify({
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
            const result = await call("/v1/personalizations/passkey", JSON.stringify({
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
        """#
}
