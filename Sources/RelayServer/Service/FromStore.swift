import PushRelayProtocol
import RelayStore

/// The value of a store call, with a store error as the protocol's (``ProtocolError/init(_:)``: `UNAVAILABLE` for a
/// database that does not answer, `INVALID_ARGUMENT` for a value it refuses, ...): the one place a request's store
/// errors become what the client is answered. Store calls throw only ``RelayStore/RelayStoreError``; anything else
/// would be the relay's own fault, `INTERNAL`.
func fromStore<Value>(_ call: () async throws -> Value) async throws(ProtocolError) -> Value {
    do {
        return try await call()
    } catch let error as RelayStoreError {
        throw ProtocolError(error)
    } catch {
        throw ProtocolError(.internal, "\(error)")
    }
}
