import RelayStore
import Synchronization

/// A page being sent by this process, and whether its lease was lost.
final class HeldPage: Sendable {
    let page: JobPage
    let lost = Atomic<Bool>(false)

    init(_ page: JobPage) {
        self.page = page
    }
}
