"""schemathesis hooks for xign-manager: signed answers (application/jose) are checked, not skipped.

A signed answer is a compact JWS whose payload is JSON. The spec gives the compact form as the schema and the
payload's schema as `x-xign-signed-payload`; this deserializer checks the header and the payload against the
latter, and hands the compact string on for the former.
"""
import base64
import binascii
import functools
import json
import os
import pathlib
import zlib

import jsonschema_rs  # schemathesis's own validator
import schemathesis
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

COUNT_FILE = os.environ.get("XIGN_API_CHECK_SIGNED")
SPEC = yaml.safe_load((pathlib.Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml").read_text())


def _decode(part: str) -> dict:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"a JWS part is not base64url JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError("a JWS part is not a JSON object")
    return value


def _validator(schema: dict):
    return jsonschema_rs.Draft202012Validator({**schema, "components": SPEC["components"]})


@functools.lru_cache(maxsize=None)
def _signed_payload_validator(path: str, method: str, status: int):
    """The validator of the operation's `x-xign-signed-payload`, compiled once; None when the spec names none."""
    response = SPEC["paths"][path][method.lower()]["responses"][str(status)]
    if "$ref" in response:
        response = SPEC["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
    schema = response["content"]["application/jose"].get("x-xign-signed-payload")
    return schema and _validator(schema)


@schemathesis.deserializer("application/jose")
def signed_answer(ctx, response):
    compact = response.content.decode("ascii", errors="strict")
    parts = compact.split(".")
    if len(parts) != 3:
        raise ValueError(f"a signed answer has {len(parts)} parts, not the 3 of a compact JWS")
    header, payload = _decode(parts[0]), _decode(parts[1])
    if header.get("alg") != "ES256":
        raise ValueError(f"a signed answer uses alg {header.get('alg')!r}, not ES256")
    validator = _signed_payload_validator(ctx.operation.path, ctx.operation.method, response.status_code)
    if validator is None:
        raise ValueError(f"{ctx.operation.method} {ctx.operation.path} {response.status_code} names no x-xign-signed-payload")
    problems = [f"/{'/'.join(map(str, error.instance_path))}: {error.message}" for error in validator.iter_errors(payload)]
    if problems:
        raise ValueError("the signed payload breaks the spec: " + "; ".join(problems))
    # run.sh reports how many signed answers were checked, so a run that reached none is not mistaken for coverage.
    if COUNT_FILE:
        with open(COUNT_FILE, "a") as count:
            count.write(f"{response.status_code} {ctx.operation.method} {ctx.operation.path}\n")
    return compact


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def seal_pin(pin: str, manager_key: bytes, *binding: str) -> dict:
    """The PIN sealed as docs/protocol.md says, written from that text alone (a second implementation besides
    XignCrypto/PINSeal.swift): ECDH P-256, HKDF-SHA256, AES-256-GCM over the PIN padded to 64 bytes."""
    recipient = serialization.load_der_public_key(manager_key)
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    point = ephemeral.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    material = HKDF(hashes.SHA256(), 44, salt=point + manager_key, info=b"xign pin seal v1").derive(ephemeral.exchange(ec.ECDH(), recipient))
    associated = "\n".join(["xign-pin-v1", *binding]).encode()
    sealed = AESGCM(material[:32]).encrypt(material[32:], pin.encode().ljust(64, b"\0"), associated)
    return {"epk": _base64url(point), "ct": _base64url(sealed)}


SEED = json.loads(os.environ.get("XIGN_API_CHECK_SEED", "{}"))
# Which seeded values each operation's body takes; startAuthentication also gets a login to the service the seed can use.
SEEDED_FIELDS = {
    "decryptPersonalizationInitializationData": {"activationId", "activationSecret"},
    "register": set(),
    "challenge": {"deviceId"},
    "startAuthentication": {"deviceId"},
    "revokeDevice": {"deviceId"},
    "pendingConfirmations": {"deviceId"},
    "denyConfirmation": {"deviceId"},
}


@functools.lru_cache(maxsize=None)
def _request_validator(path: str, method: str):
    return _validator(SPEC["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"])


@schemathesis.hook
def map_body(context, body):
    """Every other schema-valid body of these operations gets the seed's real identifiers (a deterministic half,
    so a run can be replayed); invalid bodies stay as generated, so the negative checks see what they expect."""
    fields = SEEDED_FIELDS.get(context.operation.definition.raw.get("operationId"))
    if not SEED or fields is None or not isinstance(body, dict) or zlib.crc32(json.dumps(body, sort_keys=True).encode()) % 2:
        return body
    if not _request_validator(context.operation.path, context.operation.method).is_valid(body):
        return body
    seeded = {**body, **{field: SEED[field] for field in fields}}
    manager_key = base64.urlsafe_b64decode(SEED["managerKey"] + "=" * (-len(SEED["managerKey"]) % 4))
    if context.operation.definition.raw.get("operationId") == "decryptPersonalizationInitializationData":
        # The seeded activation's PIN, sealed to the manager for this request: the check reaches the PIN.
        seeded["sealedPin"] = seal_pin("24680", manager_key, "decrypt", seeded["activationId"], seeded["nonce"])
    if context.operation.definition.raw.get("operationId") == "register":
        # A PIN that meets the policy, sealed for the body's category: registrations get past the seal.
        seeded["sealedPin"] = seal_pin("24680", manager_key, "registration", seeded["categoryId"])
    if context.operation.definition.raw.get("operationId") == "startAuthentication":
        seeded.update(purpose={"login": {"service": "pam"}})
        seeded.pop("confirmationCode", None)
    return seeded
