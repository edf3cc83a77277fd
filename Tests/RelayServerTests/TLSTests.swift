import Foundation
import NIOSSL
import PushRelayClient
import PushRelayProtocol
import RelayServer
import Testing

extension RelayServerSuites {
    /// The listener with TLS, and with required client certificates, through the Swift client.
    @Suite struct TLSTests {
        /// A self-signed P-256 certificate for 127.0.0.1 made with openssl; returns (certificate, key) paths.
        private static func selfSigned(_ name: String, in folder: String) throws -> (String, String) {
            let (certificate, key) = ("\(folder)/\(name).pem", "\(folder)/\(name)-key.pem")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", certificate, "-days", "2", "-subj", "/CN=\(name)", "-addext", "subjectAltName=IP:127.0.0.1",
            ]
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0)
            return (certificate, key)
        }

        @Test func clientsConnectOverTLSAndClientCertificatesAreRequiredWhenConfigured() async throws {
            let folder = NSTemporaryDirectory() + "pushrelay-tls-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let (serverCertificate, serverKey) = try Self.selfSigned("relay", in: folder)
            let (clientCertificate, clientKey) = try Self.selfSigned("backend", in: folder)
            var serverTLS = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(serverCertificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: serverKey, format: .pem))
            )
            serverTLS.certificateVerification = .noHostnameVerification
            serverTLS.trustRoots = .file(clientCertificate)
            let configuredTLS = serverTLS
            try await RelayHarness.with(configure: { $0.tls = configuredTLS }) { relay in
                var clientTLS = TLSConfiguration.makeClientConfiguration()
                clientTLS.trustRoots = .file(serverCertificate)
                clientTLS.certificateChain = try NIOSSLCertificate.fromPEMFile(clientCertificate).map {
                    .certificate($0)
                }
                clientTLS.privateKey = .privateKey(try NIOSSLPrivateKey(file: clientKey, format: .pem))
                let client = PushRelayClient(
                    configuration: .init(
                        host: "127.0.0.1", port: relay.listener.port, tenant: "circl",
                        credential: relay.credentials["circl"]!, tls: clientTLS, reconnect: false
                    ),
                    group: relay.group
                )
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                #expect(try await client.send(circlMessage(to: ["ada"])).job.delivered == 1)
                await client.close()

                // Without a client certificate the handshake fails; without TLS nothing is answered.
                var anonymous = TLSConfiguration.makeClientConfiguration()
                anonymous.trustRoots = .file(serverCertificate)
                let refused = PushRelayClient(
                    configuration: .init(
                        host: "127.0.0.1", port: relay.listener.port, tenant: "circl",
                        credential: relay.credentials["circl"]!, tls: anonymous, reconnect: false, connectTimeout: 3
                    ),
                    group: relay.group
                )
                await #expect(throws: PushRelayClientError.self) { try await refused.ping() }
                let plain = relay.client("circl")
                await #expect(throws: PushRelayClientError.self) { try await plain.ping() }
            }
        }
    }
}
