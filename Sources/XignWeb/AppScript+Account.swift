/// The account page: a read-only session that long-polls the waiting logins and lists the devices; removing a device
/// and changing the PIN, each an api access process.
extension AppScript {
    static let account = #"""
        // An api access process, as in the terminal: an authentication for it (passkey and current PIN) gives a grant,
        // and the process's request is signed over the grant.
        async function apiAccess(enrolment, process, pin, fields) {
          const spki = (await managerKeys()).sealing;
          const nonce = random(16);
          const started = await deviceSigned(enrolment, "/v1/authentications", async (challenge) => ({
            deviceId: enrolment.deviceId, challenge, purpose: { apiAccess: { process } }, host: location.hostname, localUser: "browser", nonce }));
          if (started.nonce !== nonce) throw new Error("The manager's answer is not for this request; try again.");
          const finish = JSON.stringify({ authenticationId: started.authenticationId, role: started.roles[0].name, factors: ["device", "pin"],
            sealedPin: await seal(pin, spki, ["authentication", started.authenticationId, started.challenge]),
            attributeValues: {}, attributeSelections: {}, nonce });
          const finished = await call("/v1/authentications/finish", finish,
                                      await signRequest(enrolment, "/v1/authentications/finish", finish, started.challenge));
          if (finished.outcome === "lockout") throw new ManagerError(423, { error: { message: lockText(finished.lockout), lockout: finished.lockout } });
          const grant = finished.apiAccess.grant;
          const body = JSON.stringify(Object.assign({ grant, nonce }, await fields(grant, spki)));
          return call("/v1/api-access", body, await signRequest(enrolment, "/v1/api-access", body, grant));
        }

        async function account() {
          const enrolments = stored();
          if (enrolments.length === 0)
            return fail("This browser holds no XignIn passkey for this manager. Activate it first with the link in your activation mail.");
          for (const [index, e] of enrolments.entries()) {
            const option = document.createElement("option");
            option.value = String(index);
            option.textContent = clean(`${e.email} (${e.alias})`);
            $("account").append(option);
          }
          const chosen = () => enrolments[Number($("account").value)];
          let seen = [], polling = false, revoking = null;

          async function poll() {
            if (polling) return;
            polling = true;
            while (polling) {
              try {
                const { confirmations } = await call("/v1/web/pending", JSON.stringify({ waitMilliseconds: 20000, seen }));
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
            const { deviceId, devices } = await call("/v1/web/devices", JSON.stringify({}));
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
            await deviceSigned(chosen(), "/v1/web/sessions", async (challenge) => ({ deviceId: chosen().deviceId, challenge, nonce: random(16) }));
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
        """#
}
