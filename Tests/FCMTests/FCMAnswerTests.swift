import FCM
import Foundation
import Testing

/// Google's error body for `status`, `errorCode` in its FcmError detail.
func errorBody(code: Int, status: String, errorCode: String?, message: String = "") -> Data {
    var details: [[String: Any]] = []
    if let errorCode {
        details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
    }
    let body: [String: Any] = ["error": ["code": code, "message": message, "status": status, "details": details]]
    return (try? JSONSerialization.data(withJSONObject: body)) ?? Data()
}

@Suite struct FCMAnswerTests {
    @Test func googlesTableMapsToTheRelaysOutcomeClasses() {
        let sent = Data(#"{"name":"projects/dispo-4f2a1/messages/0:1500415314455276%31bd1c9631bd1c96"}"#.utf8)
        #expect(
            FCMAnswer(status: 200, body: sent)
                == .delivered(messageName: "projects/dispo-4f2a1/messages/0:1500415314455276%31bd1c9631bd1c96"))
        #expect(
            FCMAnswer(status: 404, body: errorBody(code: 404, status: "NOT_FOUND", errorCode: "UNREGISTERED"))
                == .tokenDead(errorCode: "UNREGISTERED"))
        let invalidToken = errorBody(
            code: 400, status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
            message: "The registration token is not a valid FCM registration token")
        #expect(FCMAnswer(status: 400, body: invalidToken) == .tokenDead(errorCode: "INVALID_ARGUMENT"))
        let invalidMessage = errorBody(
            code: 400, status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
            message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 7")
        #expect(
            FCMAnswer(status: 400, body: invalidMessage)
                == .rejected(
                    errorCode: "INVALID_ARGUMENT", message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 7")
        )
        #expect(
            FCMAnswer(
                status: 403, body: errorBody(code: 403, status: "PERMISSION_DENIED", errorCode: "SENDER_ID_MISMATCH"))
                == .configurationFault(errorCode: "SENDER_ID_MISMATCH"))
        #expect(
            FCMAnswer(
                status: 401,
                body: errorBody(code: 401, status: "UNAUTHENTICATED", errorCode: "THIRD_PARTY_AUTH_ERROR"))
                == .configurationFault(errorCode: "THIRD_PARTY_AUTH_ERROR"))
        #expect(
            FCMAnswer(status: 401, body: errorBody(code: 401, status: "UNAUTHENTICATED", errorCode: nil))
                == .unauthenticated)
        #expect(
            FCMAnswer(status: 403, body: errorBody(code: 403, status: "PERMISSION_DENIED", errorCode: nil))
                == .configurationFault(errorCode: "PERMISSION_DENIED"))
        #expect(
            FCMAnswer(
                status: 429, body: errorBody(code: 429, status: "RESOURCE_EXHAUSTED", errorCode: "QUOTA_EXCEEDED"),
                retryAfter: "30") == .retryLater(errorCode: "QUOTA_EXCEEDED", retryAfter: .seconds(30)))
        #expect(
            FCMAnswer(status: 503, body: errorBody(code: 503, status: "UNAVAILABLE", errorCode: "UNAVAILABLE"))
                == .retryLater(errorCode: "UNAVAILABLE", retryAfter: nil))
        #expect(
            FCMAnswer(status: 500, body: errorBody(code: 500, status: "INTERNAL", errorCode: "INTERNAL"))
                == .retryLater(errorCode: "INTERNAL", retryAfter: nil))
        // A body that is not Google's JSON (a proxy's page) still has a class and a code.
        #expect(
            FCMAnswer(
                status: 502, body: Data("<html>Bad Gateway</html>".utf8), retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT")
                == .retryLater(errorCode: "HTTP_502", retryAfter: nil))
        // A 404 without UNREGISTERED is a wrong path or project (a front end's page): the token is not dead.
        #expect(
            FCMAnswer(status: 404, body: errorBody(code: 404, status: "NOT_FOUND", errorCode: nil, message: "No page"))
                == .rejected(errorCode: "NOT_FOUND", message: "No page"))
        #expect(
            FCMAnswer(status: 404, body: Data("<html>Not Found</html>".utf8))
                == .rejected(errorCode: "HTTP_404", message: ""))
    }
}

@Suite struct FCMMessageNameTests {
    @Test func aSuccessBodysNameIsReadInAnyLayoutAndOddOnesGoToTheDecoder() {
        let compact = Data(#"{"name":"projects/dispo-app/messages/0:1795%ab"}"#.utf8)
        let google = Data("{\n  \"name\": \"projects/dispo-app/messages/0:1795%ab\"\n}\n".utf8)
        for body in [compact, google] {
            #expect(
                FCMAnswer(status: 200, body: body) == .delivered(messageName: "projects/dispo-app/messages/0:1795%ab"))
        }
        // An escaped name is left to the JSON decoder, which reads it right.
        let escaped = Data(#"{"name":"projects\/p\/messages\/1"}"#.utf8)
        #expect(FCMAnswer(status: 200, body: escaped) == .delivered(messageName: "projects/p/messages/1"))
        #expect(FCMAnswer(status: 200, body: Data()) == .delivered(messageName: ""))
    }
}
