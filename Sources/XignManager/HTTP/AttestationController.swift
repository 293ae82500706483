import Hummingbird
import XignProtocol

/// TPM key attestation: the credential for a new attestation key, and the EK certificate check `xign-setup doctor`
/// asks for.
struct AttestationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.attestations)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return try Response.json(
                .created, try await manager.startAttestation(body: try await request.collectBody(), from: client))
        }
        router.post(RouterPath(APIPath.endorsementChecks)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return try Response.json(
                .ok,
                try await manager.checkEndorsement(
                    try await request.decodeBody(as: EndorsementCheckRequest.self), from: client))
        }
    }
}
