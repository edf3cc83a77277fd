import NIOCore
import NIOPosix

/// The thread on which requests that answer pages of rows (QUERY_DELIVERIES, LIST_DEVICES) decode and encode them.
///
/// `serve` runs its tasks on NIO's event loops, one per core, which also carry every connection. A page of 1,000
/// delivery rows takes milliseconds to decode and encode; on those loops a tenant keeping pages in flight put its
/// work in the queue of every task that came after it, another tenant's HELLO included. On a thread of its own
/// the work is shared out by the operating system's scheduler instead, which runs a thread that wakes for a short
/// request ahead of one that has been busy.
final class RowReadExecutor: TaskExecutor {
    /// The process's one row-read thread.
    static let shared = RowReadExecutor()

    private let loop: any EventLoop

    private init() {
        loop = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()
    }

    /// Whether the caller runs on the row-read thread.
    var isCurrent: Bool { loop.inEventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}
