/// The accounts shared by all connections that a ``SessionStateMachine`` draws on: the process's inflated-bytes
/// budget, the credential's request limit and the tenant's connection cap. Its calls answer at once, on the
/// connection's event loop; they are the only outside state the machine reaches, and tests pass a ledger of their
/// own.
protocol SessionLedger {
    /// Takes `bytes` of inflated request bodies for a connection that holds `connectionHeld` already
    /// (``InflatedBytesBudget/take(_:connectionHeld:wake:)``); `false` when they do not fit: nothing is taken, and
    /// the session is told ``SessionStateMachine/bytesReleased()`` when bytes are next given back.
    func takeBodyBytes(_ bytes: Int, connectionHeld: Int) -> Bool
    /// Gives back `bytes` taken with ``takeBodyBytes(_:connectionHeld:)``.
    func releaseBodyBytes(_ bytes: Int)
    /// Takes `cost` tokens of the request limit of `key` (a credential's public key: tenant and credential id):
    /// `nil` when taken, else the milliseconds after which they will be there.
    func admitTokens(_ cost: Int, key: String) -> UInt32?
    /// Takes one of `tenant`'s authenticated connections; `false` when it holds ``connectionsPerTenant``.
    func admitConnection(of tenant: String) -> Bool
    /// Gives back one of `tenant`'s connections.
    func releaseConnection(of tenant: String)
    /// The most authenticated connections one tenant may hold.
    var connectionsPerTenant: Int { get }
}

/// The process's ledger: its ``InflatedBytesBudget``, the service's ``RequestLimiter`` and the listener's
/// ``ConnectionAdmission``, shared by every connection.
struct ProcessLedger: SessionLedger {
    /// The inflated bodies of all connections' requests in flight.
    let bodies: InflatedBytesBudget
    /// Each credential's request limit.
    let requests: RequestLimiter
    /// Each tenant's connection cap.
    let admission: ConnectionAdmission
    /// Called once, from any thread, when bytes are given back after ``takeBodyBytes(_:connectionHeld:)`` found
    /// none: the connection's handler brings it to its event loop.
    var wake: @Sendable () -> Void

    /// Takes the bytes from the process's budget, which calls ``wake`` once when they did not fit.
    func takeBodyBytes(_ bytes: Int, connectionHeld: Int) -> Bool {
        bodies.take(bytes, connectionHeld: connectionHeld, wake: wake)
    }

    /// Gives the bytes back to the process's budget.
    func releaseBodyBytes(_ bytes: Int) {
        bodies.release(bytes)
    }

    /// Takes the tokens from the credential's bucket.
    func admitTokens(_ cost: Int, key: String) -> UInt32? {
        requests.admit(key, cost: cost)
    }

    /// Takes one of the tenant's connections.
    func admitConnection(of tenant: String) -> Bool {
        admission.admit(tenant: tenant)
    }

    /// Gives one of the tenant's connections back.
    func releaseConnection(of tenant: String) {
        admission.release(tenant: tenant)
    }

    /// The listener's cap per tenant.
    var connectionsPerTenant: Int { admission.maximumPerTenant }
}
