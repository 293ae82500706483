// The web app's XignWire (Sources/XignWeb/Resources/app.js) against the shared vectors in web-app.json, in node's
// WebCrypto (the browsers' API; the browser tests drive the same code in Chromium). WebAppVectorTests runs this;
// it prints each mismatch and exits 1.
import { readFileSync } from "node:fs";
import { webcrypto } from "node:crypto";
import vm from "node:vm";

const file = (path) => new URL(path, import.meta.url);
const source = readFileSync(file("../../Sources/XignWeb/Resources/app.js"), "utf8");
const wire = vm.runInContext(source + "\nXignWire;",
  vm.createContext({ crypto: webcrypto, TextEncoder, TextDecoder, btoa, atob }));
const vectors = JSON.parse(readFileSync(file("web-app.json"), "utf8"));
const curve = { name: "ECDH", namedCurve: "P-256" };
let failures = 0;
const expect = (holds, what) => { if (!holds) { failures += 1; console.log(`mismatch: ${what}`); } };

for (const v of vectors.canonicalRequests) {
  const canonical = await wire.canonicalMessage(v.path, v.body, v.challenge);
  expect(canonical === v.canonical, `canonical message of ${v.path}: ${JSON.stringify(canonical)}`);
  const challenge = wire.b64u(await wire.sha256(wire.utf8(canonical)));
  expect(challenge === v.webauthnChallenge, `WebAuthn challenge of ${v.path}: ${challenge}`);
}
const recipient = wire.fromB64u(vectors.recipientPublicKey);
for (const v of vectors.sealedPins) {
  const privateKey = await webcrypto.subtle.importKey("pkcs8", wire.fromB64u(v.ephemeralKey), curve, true, ["deriveBits"]);
  const { kty, crv, x, y } = await webcrypto.subtle.exportKey("jwk", privateKey);
  const publicKey = await webcrypto.subtle.importKey("jwk", { kty, crv, x, y }, curve, true, []);
  const sealed = await wire.seal(v.pin, recipient, v.binding, { privateKey, publicKey });
  expect(sealed.epk === v.epk, `ephemeral point for ${v.binding.join("/")}: ${sealed.epk}`);
  expect(sealed.ct === v.ct, `sealed PIN for ${v.binding.join("/")}: ${sealed.ct}`);
}
console.log(`${vectors.canonicalRequests.length + vectors.sealedPins.length} vectors, ${failures} mismatch(es)`);
process.exit(failures === 0 ? 0 : 1);
