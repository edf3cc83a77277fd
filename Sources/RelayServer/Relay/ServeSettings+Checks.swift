import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ServeSettings {
    /// Checks that ``readyFile`` can be written, before the relay listens: a relay that cannot say it is ready
    /// should not start at all, rather than fail once it accepts connections.
    ///
    /// The file is written atomically (a temporary file in its folder, then renamed), so what must be writable
    /// is the folder; a path that is a folder is refused too. Nothing is left behind.
    ///
    /// - Throws: ``ServeSettingsError`` naming `ready_file`, the path and the system's reason.
    package func checkReadyFile() throws(ServeSettingsError) {
        guard let readyFile else { return }
        func refused(_ reason: String) -> ServeSettingsError {
            ServeSettingsError(
                "ready_file \(readyFile) cannot be written: \(reason) (set another with ready_file, --ready-file or "
                    + "PUSHRELAY_READY_FILE)")
        }
        let url = URL(fileURLWithPath: readyFile)
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue {
            throw refused("it is a folder")
        }
        let probe = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).check-\(getpid())"
        ).path
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw refused(String(cString: strerror(errno)).lowercased())
        }
        close(descriptor)
        unlink(probe)
    }
}
