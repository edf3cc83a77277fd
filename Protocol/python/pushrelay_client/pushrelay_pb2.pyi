# Generated from Protocol/pushrelay.proto by Protocol/generate.sh (libprotoc 3.21.12); do not edit.
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACCEPTED: JobState
ALREADY_AUTHENTICATED: ErrorCode
AUTHENTICATION_FAILED: ErrorCode
BAD_COMPRESSION: ErrorCode
BAD_FRAME: ErrorCode
CANCELLED: JobState
CANCEL_JOB: FrameKind
CLEAR_MUTE: FrameKind
COMPLETED: JobState
DECOMPRESSED_TOO_LARGE: ErrorCode
DESCRIPTOR: _descriptor.FileDescriptor
DUPLICATE_REQUEST_ID: ErrorCode
ENVIRONMENT_UNSPECIFIED: Environment
ERROR: FrameKind
ERROR_CODE_UNSPECIFIED: ErrorCode
FAILED: JobState
FRAME_KIND_UNSPECIFIED: FrameKind
FRAME_TOO_LARGE: ErrorCode
GET_PREFERENCES: FrameKind
GOODBYE: FrameKind
HELLO: FrameKind
HELLO_REQUIRED: ErrorCode
INTERNAL: ErrorCode
INVALID_ARGUMENT: ErrorCode
INVALID_BODY: ErrorCode
JOB_STATE_UNSPECIFIED: JobState
JOB_STATUS: FrameKind
LIST_DEVICES: FrameKind
LIST_MUTES: FrameKind
LIST_NOTIFICATION_TYPES: FrameKind
NOT_FOUND: ErrorCode
NOT_SUPPORTED: ErrorCode
NO_PROVIDER_KEY: ErrorCode
PING: FrameKind
PRODUCTION: Environment
PROVIDER_KEY_UNREADABLE: ErrorCode
QUERY_DELIVERIES: FrameKind
RATE_LIMITED: ErrorCode
REGISTER_DEVICE: FrameKind
RESULT_EVENT: FrameKind
RUNNING: JobState
SANDBOX: Environment
SCHEDULED: JobState
SEND: FrameKind
SET_MUTE: FrameKind
SET_PREFERENCES: FrameKind
SET_PRESENCE: FrameKind
SHUTTING_DOWN: ErrorCode
SUBSCRIBE_RESULTS: FrameKind
TOO_MANY_CONNECTIONS: ErrorCode
TOO_MANY_RECIPIENTS: ErrorCode
UNAVAILABLE: ErrorCode
UNKNOWN_KIND: ErrorCode
UNREGISTER_DEVICE: FrameKind
UNSUBSCRIBE_RESULTS: FrameKind
UNSUPPORTED_VERSION: ErrorCode

class Alert(_message.Message):
    __slots__ = ["body", "launch_image", "loc_args", "loc_key", "subtitle", "subtitle_loc_args", "subtitle_loc_key", "title", "title_loc_args", "title_loc_key"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_IMAGE_FIELD_NUMBER: _ClassVar[int]
    LOC_ARGS_FIELD_NUMBER: _ClassVar[int]
    LOC_KEY_FIELD_NUMBER: _ClassVar[int]
    SUBTITLE_FIELD_NUMBER: _ClassVar[int]
    SUBTITLE_LOC_ARGS_FIELD_NUMBER: _ClassVar[int]
    SUBTITLE_LOC_KEY_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TITLE_LOC_ARGS_FIELD_NUMBER: _ClassVar[int]
    TITLE_LOC_KEY_FIELD_NUMBER: _ClassVar[int]
    body: str
    launch_image: str
    loc_args: _containers.RepeatedScalarFieldContainer[str]
    loc_key: str
    subtitle: str
    subtitle_loc_args: _containers.RepeatedScalarFieldContainer[str]
    subtitle_loc_key: str
    title: str
    title_loc_args: _containers.RepeatedScalarFieldContainer[str]
    title_loc_key: str
    def __init__(self, title: _Optional[str] = ..., subtitle: _Optional[str] = ..., body: _Optional[str] = ..., launch_image: _Optional[str] = ..., title_loc_key: _Optional[str] = ..., title_loc_args: _Optional[_Iterable[str]] = ..., subtitle_loc_key: _Optional[str] = ..., subtitle_loc_args: _Optional[_Iterable[str]] = ..., loc_key: _Optional[str] = ..., loc_args: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelJob(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ClearMute(_message.Message):
    __slots__ = ["scope", "thread_id", "user_id"]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    scope: str
    thread_id: str
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class ClearMuteResult(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class DeadToken(_message.Message):
    __slots__ = ["invalidated_at_ms", "job_id", "reason", "token", "user_id"]
    INVALIDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    invalidated_at_ms: int
    job_id: str
    reason: str
    token: str
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., token: _Optional[str] = ..., reason: _Optional[str] = ..., invalidated_at_ms: _Optional[int] = ..., job_id: _Optional[str] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ["answered_at_ms", "apns_id", "attempt", "job_id", "latency_ms", "outcome", "provider_message_id", "reason", "sent_at_ms", "token", "user_id"]
    ANSWERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    APNS_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    answered_at_ms: int
    apns_id: str
    attempt: int
    job_id: str
    latency_ms: int
    outcome: str
    provider_message_id: str
    reason: str
    sent_at_ms: int
    token: str
    user_id: str
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ..., token: _Optional[str] = ..., apns_id: _Optional[str] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., attempt: _Optional[int] = ..., sent_at_ms: _Optional[int] = ..., answered_at_ms: _Optional[int] = ..., latency_ms: _Optional[int] = ..., provider_message_id: _Optional[str] = ...) -> None: ...

class DeliveryList(_message.Message):
    __slots__ = ["deliveries", "next_cursor"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    next_cursor: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ["active", "app_version", "device_id", "environment", "invalidated_at_ms", "locale", "platform", "provider", "registered_at_ms", "time_zone", "token", "topics", "user_id"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    APP_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LOCALE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    active: bool
    app_version: str
    device_id: str
    environment: Environment
    invalidated_at_ms: int
    locale: str
    platform: str
    provider: str
    registered_at_ms: int
    time_zone: str
    token: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., token: _Optional[str] = ..., platform: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., device_id: _Optional[str] = ..., app_version: _Optional[str] = ..., locale: _Optional[str] = ..., time_zone: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., active: bool = ..., registered_at_ms: _Optional[int] = ..., invalidated_at_ms: _Optional[int] = ..., provider: _Optional[str] = ...) -> None: ...

class DeviceList(_message.Message):
    __slots__ = ["devices", "next_cursor"]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    next_cursor: str
    def __init__(self, devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class DeviceOutcome(_message.Message):
    __slots__ = ["apns_id", "attempts", "environment", "invalidated_at_ms", "outcome", "provider_message_id", "reason", "token", "user_id"]
    APNS_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    apns_id: str
    attempts: int
    environment: Environment
    invalidated_at_ms: int
    outcome: str
    provider_message_id: str
    reason: str
    token: str
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., token: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., apns_id: _Optional[str] = ..., attempts: _Optional[int] = ..., invalidated_at_ms: _Optional[int] = ..., provider_message_id: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["code", "field", "message", "request_id", "retry_after_ms"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    field: str
    message: str
    request_id: int
    retry_after_ms: int
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ..., retry_after_ms: _Optional[int] = ..., field: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class GetPreferences(_message.Message):
    __slots__ = ["user_id"]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class HeldDevices(_message.Message):
    __slots__ = ["devices", "environment", "job_id", "next_attempt_ms", "reason"]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    devices: int
    environment: Environment
    job_id: str
    next_attempt_ms: int
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., devices: _Optional[int] = ..., reason: _Optional[str] = ..., next_attempt_ms: _Optional[int] = ..., environment: _Optional[_Union[Environment, str]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["accept_zstd", "client_name", "credential", "max_version", "min_version", "tenant"]
    ACCEPT_ZSTD_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSION_FIELD_NUMBER: _ClassVar[int]
    MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    accept_zstd: bool
    client_name: str
    credential: str
    max_version: int
    min_version: int
    tenant: str
    def __init__(self, min_version: _Optional[int] = ..., max_version: _Optional[int] = ..., tenant: _Optional[str] = ..., credential: _Optional[str] = ..., client_name: _Optional[str] = ..., accept_zstd: bool = ...) -> None: ...

class HelloOk(_message.Message):
    __slots__ = ["connection_id", "idle_timeout_ms", "max_decompressed_bytes", "max_frame_bytes", "max_in_flight", "max_recipients", "server", "tenant", "version"]
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DECOMPRESSED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_RECIPIENTS_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    connection_id: str
    idle_timeout_ms: int
    max_decompressed_bytes: int
    max_frame_bytes: int
    max_in_flight: int
    max_recipients: int
    server: str
    tenant: str
    version: int
    def __init__(self, version: _Optional[int] = ..., tenant: _Optional[str] = ..., connection_id: _Optional[str] = ..., max_frame_bytes: _Optional[int] = ..., max_decompressed_bytes: _Optional[int] = ..., max_in_flight: _Optional[int] = ..., max_recipients: _Optional[int] = ..., idle_timeout_ms: _Optional[int] = ..., server: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ["created_at_ms", "delivered", "devices", "error", "failed", "finished_at_ms", "job_id", "notification_type", "skipped", "state", "waiting", "waiting_reason"]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    created_at_ms: int
    delivered: int
    devices: int
    error: str
    failed: int
    finished_at_ms: int
    job_id: str
    notification_type: str
    skipped: int
    state: JobState
    waiting: int
    waiting_reason: str
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., notification_type: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., devices: _Optional[int] = ..., delivered: _Optional[int] = ..., failed: _Optional[int] = ..., skipped: _Optional[int] = ..., error: _Optional[str] = ..., waiting: _Optional[int] = ..., waiting_reason: _Optional[str] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListDevices(_message.Message):
    __slots__ = ["cursor", "limit", "user_id"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    limit: int
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListMutes(_message.Message):
    __slots__ = ["user_id"]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ListNotificationTypes(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Mute(_message.Message):
    __slots__ = ["scope", "thread_id", "until_ms", "user_id"]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    scope: str
    thread_id: str
    until_ms: int
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., scope: _Optional[str] = ..., until_ms: _Optional[int] = ...) -> None: ...

class MuteList(_message.Message):
    __slots__ = ["mutes"]
    MUTES_FIELD_NUMBER: _ClassVar[int]
    mutes: _containers.RepeatedCompositeFieldContainer[Mute]
    def __init__(self, mutes: _Optional[_Iterable[_Union[Mute, _Mapping]]] = ...) -> None: ...

class NotificationType(_message.Message):
    __slots__ = ["default_enabled", "environments", "expiration_seconds", "interruption_level", "mandatory", "max_per_day", "max_per_hour", "name", "priority", "push_type", "quiet_hours_action", "retry_for_seconds", "subscription", "template_values"]
    DEFAULT_ENABLED_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    EXPIRATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MANDATORY_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_DAY_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PUSH_TYPE_FIELD_NUMBER: _ClassVar[int]
    QUIET_HOURS_ACTION_FIELD_NUMBER: _ClassVar[int]
    RETRY_FOR_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_VALUES_FIELD_NUMBER: _ClassVar[int]
    default_enabled: bool
    environments: _containers.RepeatedScalarFieldContainer[Environment]
    expiration_seconds: int
    interruption_level: str
    mandatory: bool
    max_per_day: int
    max_per_hour: int
    name: str
    priority: int
    push_type: str
    quiet_hours_action: str
    retry_for_seconds: int
    subscription: str
    template_values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., push_type: _Optional[str] = ..., priority: _Optional[int] = ..., mandatory: bool = ..., default_enabled: bool = ..., subscription: _Optional[str] = ..., template_values: _Optional[_Iterable[str]] = ..., expiration_seconds: _Optional[int] = ..., interruption_level: _Optional[str] = ..., quiet_hours_action: _Optional[str] = ..., max_per_hour: _Optional[int] = ..., max_per_day: _Optional[int] = ..., environments: _Optional[_Iterable[_Union[Environment, str]]] = ..., retry_for_seconds: _Optional[int] = ...) -> None: ...

class NotificationTypeList(_message.Message):
    __slots__ = ["notifications_per_second", "quiet_hours_end", "quiet_hours_start", "quiet_hours_time_zone", "subscription_topics", "token_policy", "types"]
    NOTIFICATIONS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    QUIET_HOURS_END_FIELD_NUMBER: _ClassVar[int]
    QUIET_HOURS_START_FIELD_NUMBER: _ClassVar[int]
    QUIET_HOURS_TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_TOPICS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_POLICY_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    notifications_per_second: int
    quiet_hours_end: str
    quiet_hours_start: str
    quiet_hours_time_zone: str
    subscription_topics: _containers.RepeatedScalarFieldContainer[str]
    token_policy: str
    types: _containers.RepeatedCompositeFieldContainer[NotificationType]
    def __init__(self, types: _Optional[_Iterable[_Union[NotificationType, _Mapping]]] = ..., subscription_topics: _Optional[_Iterable[str]] = ..., token_policy: _Optional[str] = ..., quiet_hours_start: _Optional[str] = ..., quiet_hours_end: _Optional[str] = ..., quiet_hours_time_zone: _Optional[str] = ..., notifications_per_second: _Optional[int] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ["nonce"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ["nonce"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class Preferences(_message.Message):
    __slots__ = ["preferences", "user_id"]
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    preferences: _containers.RepeatedCompositeFieldContainer[TypePreference]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., preferences: _Optional[_Iterable[_Union[TypePreference, _Mapping]]] = ...) -> None: ...

class Presence(_message.Message):
    __slots__ = ["thread_id", "until_ms", "user_id"]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    until_ms: int
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., until_ms: _Optional[int] = ...) -> None: ...

class QueryDeliveries(_message.Message):
    __slots__ = ["cursor", "from_ms", "job_id", "limit", "to_ms", "token", "user_id"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    from_ms: int
    job_id: str
    limit: int
    to_ms: int
    token: str
    user_id: str
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ..., token: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class RegisterDevice(_message.Message):
    __slots__ = ["app_version", "device_id", "environment", "locale", "platform", "provider", "time_zone", "token", "topics", "user_id"]
    APP_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    LOCALE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    app_version: str
    device_id: str
    environment: Environment
    locale: str
    platform: str
    provider: str
    time_zone: str
    token: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., token: _Optional[str] = ..., platform: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., device_id: _Optional[str] = ..., app_version: _Optional[str] = ..., locale: _Optional[str] = ..., time_zone: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ...) -> None: ...

class RegisterDeviceResult(_message.Message):
    __slots__ = ["device", "previous_user_id", "replaced_token", "status"]
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    CREATED: RegisterDeviceResult.Status
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    MOVED: RegisterDeviceResult.Status
    PREVIOUS_USER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLACED: RegisterDeviceResult.Status
    REPLACED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STALE: RegisterDeviceResult.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_UNSPECIFIED: RegisterDeviceResult.Status
    UPDATED: RegisterDeviceResult.Status
    device: Device
    previous_user_id: str
    replaced_token: str
    status: RegisterDeviceResult.Status
    def __init__(self, status: _Optional[_Union[RegisterDeviceResult.Status, str]] = ..., previous_user_id: _Optional[str] = ..., replaced_token: _Optional[str] = ..., device: _Optional[_Union[Device, _Mapping]] = ...) -> None: ...

class ResultEvent(_message.Message):
    __slots__ = ["dead_token", "held", "receipt"]
    DEAD_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    dead_token: DeadToken
    held: HeldDevices
    receipt: Delivery
    def __init__(self, receipt: _Optional[_Union[Delivery, _Mapping]] = ..., dead_token: _Optional[_Union[DeadToken, _Mapping]] = ..., held: _Optional[_Union[HeldDevices, _Mapping]] = ...) -> None: ...

class Send(_message.Message):
    __slots__ = ["alert", "badge", "category", "collapse_id", "content_available", "custom_json", "exclude_user_ids", "expiration", "idempotency_key", "interruption_level", "mutable_content", "notification_type", "priority", "relevance_score", "scope", "send_at_local", "send_at_ms", "sound", "template_values", "thread_id", "tokens", "topic", "user_ids", "wait"]
    class TemplateValuesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALERT_FIELD_NUMBER: _ClassVar[int]
    BADGE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    COLLAPSE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_JSON_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRATION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MUTABLE_CONTENT_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SEND_AT_LOCAL_FIELD_NUMBER: _ClassVar[int]
    SEND_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SOUND_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_VALUES_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    USER_IDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    alert: Alert
    badge: int
    category: str
    collapse_id: str
    content_available: bool
    custom_json: str
    exclude_user_ids: _containers.RepeatedScalarFieldContainer[str]
    expiration: int
    idempotency_key: str
    interruption_level: str
    mutable_content: bool
    notification_type: str
    priority: int
    relevance_score: float
    scope: str
    send_at_local: str
    send_at_ms: int
    sound: str
    template_values: _containers.ScalarMap[str, str]
    thread_id: str
    tokens: _containers.RepeatedCompositeFieldContainer[TokenTarget]
    topic: str
    user_ids: _containers.RepeatedScalarFieldContainer[str]
    wait: bool
    def __init__(self, notification_type: _Optional[str] = ..., user_ids: _Optional[_Iterable[str]] = ..., tokens: _Optional[_Iterable[_Union[TokenTarget, _Mapping]]] = ..., topic: _Optional[str] = ..., exclude_user_ids: _Optional[_Iterable[str]] = ..., idempotency_key: _Optional[str] = ..., alert: _Optional[_Union[Alert, _Mapping]] = ..., badge: _Optional[int] = ..., sound: _Optional[str] = ..., thread_id: _Optional[str] = ..., category: _Optional[str] = ..., content_available: bool = ..., mutable_content: bool = ..., interruption_level: _Optional[str] = ..., relevance_score: _Optional[float] = ..., custom_json: _Optional[str] = ..., template_values: _Optional[_Mapping[str, str]] = ..., collapse_id: _Optional[str] = ..., expiration: _Optional[int] = ..., priority: _Optional[int] = ..., wait: bool = ..., scope: _Optional[str] = ..., send_at_ms: _Optional[int] = ..., send_at_local: _Optional[str] = ...) -> None: ...

class SendResult(_message.Message):
    __slots__ = ["devices", "duplicate", "job", "job_id", "outcomes", "outcomes_truncated"]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    devices: int
    duplicate: bool
    job: Job
    job_id: str
    outcomes: _containers.RepeatedCompositeFieldContainer[DeviceOutcome]
    outcomes_truncated: bool
    def __init__(self, job_id: _Optional[str] = ..., duplicate: bool = ..., devices: _Optional[int] = ..., outcomes: _Optional[_Iterable[_Union[DeviceOutcome, _Mapping]]] = ..., job: _Optional[_Union[Job, _Mapping]] = ..., outcomes_truncated: bool = ...) -> None: ...

class SetMute(_message.Message):
    __slots__ = ["scope", "thread_id", "until_ms", "user_id"]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    scope: str
    thread_id: str
    until_ms: int
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., scope: _Optional[str] = ..., until_ms: _Optional[int] = ...) -> None: ...

class SetPreferences(_message.Message):
    __slots__ = ["preferences", "user_id"]
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    preferences: _containers.RepeatedCompositeFieldContainer[TypePreference]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., preferences: _Optional[_Iterable[_Union[TypePreference, _Mapping]]] = ...) -> None: ...

class SetPresence(_message.Message):
    __slots__ = ["seconds", "thread_id", "user_id"]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    seconds: int
    thread_id: str
    user_id: str
    def __init__(self, user_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., seconds: _Optional[int] = ...) -> None: ...

class SubscribeResults(_message.Message):
    __slots__ = ["receipts"]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    receipts: bool
    def __init__(self, receipts: bool = ...) -> None: ...

class Subscribed(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class TokenTarget(_message.Message):
    __slots__ = ["token"]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class TypePreference(_message.Message):
    __slots__ = ["enabled", "mandatory", "notification_type"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MANDATORY_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    mandatory: bool
    notification_type: str
    def __init__(self, notification_type: _Optional[str] = ..., enabled: bool = ..., mandatory: bool = ...) -> None: ...

class UnregisterDevice(_message.Message):
    __slots__ = ["platform", "token", "user_id"]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    platform: str
    token: str
    user_id: str
    def __init__(self, token: _Optional[str] = ..., user_id: _Optional[str] = ..., platform: _Optional[str] = ...) -> None: ...

class UnregisterDeviceResult(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class UnsubscribeResults(_message.Message):
    __slots__ = ["subscription_request_id"]
    SUBSCRIPTION_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_request_id: int
    def __init__(self, subscription_request_id: _Optional[int] = ...) -> None: ...

class FrameKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Environment(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
