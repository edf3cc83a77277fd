import PushRelayProtocol

/// The requests a session has in flight: their ids, the order in which they take effect (``RequestOrder``), those
/// that wait for their turn in it, and the inflated body bytes each holds until it is answered.
struct SessionRequests {
    /// The requests in flight (started or waiting for their turn), by request id.
    private(set) var inFlight: Set<UInt32> = []
    /// The order in which the requests in flight take effect.
    private var order = RequestOrder()
    /// The requests in flight that wait for their turn in ``order``, by request id.
    private var waiting: [UInt32: Frame] = [:]
    /// The inflated body bytes each request in flight holds, by request id.
    private var heldBodies: [UInt32: Int] = [:]
    /// The sum of ``heldBodies``.
    private(set) var heldBytes = 0

    /// No request in flight.
    init() {}

    /// How many requests are in flight.
    var count: Int { inFlight.count }

    /// Whether no request is in flight.
    var isEmpty: Bool { inFlight.isEmpty }

    /// Whether request `id` is in flight.
    func contains(_ id: UInt32) -> Bool { inFlight.contains(id) }

    /// Request `frame` of `kind` is in flight from now on, holding `bytes` of inflated body until it is answered;
    /// returns whether it starts now (else it waits for the requests before it in ``RequestOrder``).
    mutating func arrive(_ frame: Frame, kind: RequestKind, holding bytes: Int) -> Bool {
        let id = frame.requestID
        inFlight.insert(id)
        if bytes > 0 {
            heldBodies[id] = bytes
            heldBytes += bytes
        }
        guard order.arrive(id, access: RequestOrder.Access(kind)) else {
            waiting[id] = frame
            return false
        }
        return true
    }

    /// Request `id` took effect (a SEND's job is stored, or the request was answered): the waiting requests that
    /// may start now, in arrival order.
    mutating func tookEffect(_ id: UInt32) -> [Frame] {
        order.tookEffect(id).compactMap { waiting.removeValue(forKey: $0) }
    }

    /// Request `id` was answered: it is no longer in flight. Returns the inflated bytes it held, to give back.
    mutating func answered(_ id: UInt32) -> Int {
        inFlight.remove(id)
        guard let bytes = heldBodies.removeValue(forKey: id) else { return 0 }
        heldBytes -= bytes
        return bytes
    }
}
