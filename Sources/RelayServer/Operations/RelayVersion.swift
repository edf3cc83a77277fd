/// The relay's release, as HELLO_OK's `server` (`pushrelay/1.0.0`) and `pushrelay --version` say it.
package enum RelayVersion {
    /// The release of this build.
    package static let current = "1.0.0"
}
