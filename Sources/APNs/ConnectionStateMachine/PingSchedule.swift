import NIOCore

/// When a connection sends PINGs and whether the peer answers them: one after `idlePingInterval` without a
/// read, and at least every `pingInterval` whatever the traffic; one left unanswered for `pingTimeout` means the
/// peer is gone. Times come in as arguments.
struct PingSchedule {
    /// What a housekeeping tick asks of the connection.
    enum Check: Equatable {
        /// Nothing is due.
        case none
        /// Send a PING with this payload.
        case send(UInt64)
        /// The outstanding PING went unanswered past its deadline.
        case timedOut
    }

    /// When the connection last read bytes.
    private(set) var lastRead: NIODeadline
    /// When the last PING was sent.
    private(set) var lastSent: NIODeadline
    /// The PING awaiting its acknowledgement: its payload and the time by which the acknowledgement must come.
    private(set) var outstanding: (data: UInt64, deadline: NIODeadline)?
    /// PINGs sent.
    private(set) var sent = 0
    /// PINGs acknowledged.
    private(set) var acknowledged = 0

    /// A schedule counting from `now`.
    init(now: NIODeadline) {
        lastRead = now
        lastSent = now
    }

    /// Notes that bytes were read at `now`.
    mutating func read(at now: NIODeadline) {
        lastRead = now
    }

    /// Notes a PING acknowledgement carrying `data`; only the outstanding PING's counts.
    mutating func acknowledge(_ data: UInt64) {
        guard outstanding?.data == data else { return }
        outstanding = nil
        acknowledged += 1
    }

    /// Forgets the outstanding PING (the connection is given up).
    mutating func cancel() {
        outstanding = nil
    }

    /// Whether the outstanding PING's acknowledgement is overdue at `now`, and while one is outstanding no other
    /// is sent. Else whether a PING is due at `now` (when `mayPing`, i.e. once the connection is set up): if so,
    /// it is counted as sent, with the time as its payload.
    mutating func check(
        at now: NIODeadline, mayPing: Bool, configuration: ConnectionStateMachine.Configuration
    ) -> Check {
        if let outstanding {
            return outstanding.deadline <= now ? .timedOut : .none
        }
        guard mayPing,
            now - lastRead >= configuration.idlePingInterval || now - lastSent >= configuration.pingInterval
        else { return .none }
        let data = now.uptimeNanoseconds
        outstanding = (data, now + configuration.pingTimeout)
        lastSent = now
        sent += 1
        return .send(data)
    }
}
