/// The login link's page: what asks, then the code and the PIN with one passkey prompt, or deny.
extension AppScript {
    static let approval = #"""
        async function approve() {
          const id = location.hash.slice(1).toUpperCase();
          if (!/^[A-Z2-7]{26}$/.test(id)) return fail("This login link is incomplete. Scan the QR code on the server again.");
          const enrolments = stored();
          let view;
          try { view = await call("/v1/confirmations/view", JSON.stringify({ confirmationId: id })); } catch (error) { return fail(passkeyError(error)); }
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
            const answer = await deviceSigned(chosen(), "/v1/confirmations/approve", async (challenge) => ({
              deviceId: chosen().deviceId, challenge, confirmationId: id, confirmationCode: $("code").value.trim(), nonce,
              sealedPin: await seal(pin, spki, ["approval", id, challenge]) }));
            if (answer.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
            if (answer.outcome === "lockout") return fail(lockText(answer.lockout));
            $("decide").hidden = true;
            status(`Approved. The login to ${clean(answer.host || view.host)} goes on.`);
          }); });
          $("deny").addEventListener("click", () => guarded(async () => {
            status("Waiting for the passkey…");
            await deviceSigned(chosen(), "/v1/confirmations/deny", async (challenge) => ({
              deviceId: chosen().deviceId, challenge, confirmationId: id }));
            $("decide").hidden = true;
            status("Denied. The server refuses this login.");
          }));
        }
        """#
}
