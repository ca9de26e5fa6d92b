from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ObsKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OBS_KIND_UNSPECIFIED: _ClassVar[ObsKind]
    OBS_KIND_TOOLS: _ClassVar[ObsKind]
    OBS_KIND_INTERACTION: _ClassVar[ObsKind]
OBS_KIND_UNSPECIFIED: ObsKind
OBS_KIND_TOOLS: ObsKind
OBS_KIND_INTERACTION: ObsKind

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class RewardModel(_message.Message):
    __slots__ = ("style", "ground_truth_json")
    STYLE_FIELD_NUMBER: _ClassVar[int]
    GROUND_TRUTH_JSON_FIELD_NUMBER: _ClassVar[int]
    style: str
    ground_truth_json: str
    def __init__(self, style: _Optional[str] = ..., ground_truth_json: _Optional[str] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("data_source", "prompt", "ability", "reward_model", "extra_info_json", "agent_name")
    DATA_SOURCE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    ABILITY_FIELD_NUMBER: _ClassVar[int]
    REWARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    EXTRA_INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    data_source: str
    prompt: _containers.RepeatedCompositeFieldContainer[Message]
    ability: str
    reward_model: RewardModel
    extra_info_json: str
    agent_name: str
    def __init__(self, data_source: _Optional[str] = ..., prompt: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., ability: _Optional[str] = ..., reward_model: _Optional[_Union[RewardModel, _Mapping]] = ..., extra_info_json: _Optional[str] = ..., agent_name: _Optional[str] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ("host_version", "host_features")
    HOST_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOST_FEATURES_FIELD_NUMBER: _ClassVar[int]
    host_version: str
    host_features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host_version: _Optional[str] = ..., host_features: _Optional[_Iterable[str]] = ...) -> None: ...

class InputFile(_message.Message):
    __slots__ = ("split", "name")
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    split: str
    name: str
    def __init__(self, split: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("name", "version", "description", "protocol_minor", "features", "tools", "default_agent_loop", "data_sources", "default_inputs", "config_schema_json", "samples")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_MINOR_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_AGENT_LOOP_FIELD_NUMBER: _ClassVar[int]
    DATA_SOURCES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_INPUTS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    description: str
    protocol_minor: int
    features: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    default_agent_loop: str
    data_sources: _containers.RepeatedScalarFieldContainer[str]
    default_inputs: _containers.RepeatedCompositeFieldContainer[InputFile]
    config_schema_json: str
    samples: _containers.RepeatedCompositeFieldContainer[Sample]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., protocol_minor: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., default_agent_loop: _Optional[str] = ..., data_sources: _Optional[_Iterable[str]] = ..., default_inputs: _Optional[_Iterable[_Union[InputFile, _Mapping]]] = ..., config_schema_json: _Optional[str] = ..., samples: _Optional[_Iterable[_Union[Sample, _Mapping]]] = ...) -> None: ...

class Sample(_message.Message):
    __slots__ = ("split", "record_json", "row", "reference_solution")
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_SOLUTION_FIELD_NUMBER: _ClassVar[int]
    split: str
    record_json: str
    row: Row
    reference_solution: str
    def __init__(self, split: _Optional[str] = ..., record_json: _Optional[str] = ..., row: _Optional[_Union[Row, _Mapping]] = ..., reference_solution: _Optional[str] = ...) -> None: ...

class ConfigureRequest(_message.Message):
    __slots__ = ("config_json", "host_service")
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    HOST_SERVICE_FIELD_NUMBER: _ClassVar[int]
    config_json: str
    host_service: HostService
    def __init__(self, config_json: _Optional[str] = ..., host_service: _Optional[_Union[HostService, _Mapping]] = ...) -> None: ...

class HostService(_message.Message):
    __slots__ = ("address", "token", "features")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    address: str
    token: str
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, address: _Optional[str] = ..., token: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigureResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PreprocessRequest(_message.Message):
    __slots__ = ("index", "split", "record_json")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    index: int
    split: str
    record_json: str
    def __init__(self, index: _Optional[int] = ..., split: _Optional[str] = ..., record_json: _Optional[str] = ...) -> None: ...

class PreprocessResponse(_message.Message):
    __slots__ = ("index", "row", "skip_reason")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    row: Row
    skip_reason: str
    def __init__(self, index: _Optional[int] = ..., row: _Optional[_Union[Row, _Mapping]] = ..., skip_reason: _Optional[str] = ...) -> None: ...

class PromptRequest(_message.Message):
    __slots__ = ("row",)
    ROW_FIELD_NUMBER: _ClassVar[int]
    row: Row
    def __init__(self, row: _Optional[_Union[Row, _Mapping]] = ...) -> None: ...

class SamplingHints(_message.Message):
    __slots__ = ("max_tokens", "stop")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ...) -> None: ...

class PromptResponse(_message.Message):
    __slots__ = ("messages", "tools", "hints")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    hints: SamplingHints
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., hints: _Optional[_Union[SamplingHints, _Mapping]] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("row", "trajectory_id", "step", "rollout_n", "validate", "endpoint_base_url", "endpoint_api_key")
    ROW_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_N_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_BASE_URL_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_API_KEY_FIELD_NUMBER: _ClassVar[int]
    row: Row
    trajectory_id: str
    step: int
    rollout_n: int
    validate: bool
    endpoint_base_url: str
    endpoint_api_key: str
    def __init__(self, row: _Optional[_Union[Row, _Mapping]] = ..., trajectory_id: _Optional[str] = ..., step: _Optional[int] = ..., rollout_n: _Optional[int] = ..., validate: _Optional[bool] = ..., endpoint_base_url: _Optional[str] = ..., endpoint_api_key: _Optional[str] = ...) -> None: ...

class StartResponse(_message.Message):
    __slots__ = ("instance_id", "messages", "lease_seconds")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    lease_seconds: int
    def __init__(self, instance_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., lease_seconds: _Optional[int] = ...) -> None: ...

class ObsRequest(_message.Message):
    __slots__ = ("instance_id", "assistant", "kind", "turn", "history")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    assistant: Message
    kind: ObsKind
    turn: int
    history: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, instance_id: _Optional[str] = ..., assistant: _Optional[_Union[Message, _Mapping]] = ..., kind: _Optional[_Union[ObsKind, str]] = ..., turn: _Optional[int] = ..., history: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("tool_call_id", "name", "text", "step_reward", "error", "metrics", "duration_ns")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STEP_REWARD_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    name: str
    text: str
    step_reward: float
    error: bool
    metrics: _containers.ScalarMap[str, float]
    duration_ns: int
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., text: _Optional[str] = ..., step_reward: _Optional[float] = ..., error: _Optional[bool] = ..., metrics: _Optional[_Mapping[str, float]] = ..., duration_ns: _Optional[int] = ...) -> None: ...

class ObsResponse(_message.Message):
    __slots__ = ("messages", "tool_results", "turn_reward", "done", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    TURN_REWARD_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    turn_reward: float
    done: bool
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., tool_results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ..., turn_reward: _Optional[float] = ..., done: _Optional[bool] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class EndRequest(_message.Message):
    __slots__ = ("instance_id", "aborted")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    aborted: bool
    def __init__(self, instance_id: _Optional[str] = ..., aborted: _Optional[bool] = ...) -> None: ...

class EndResponse(_message.Message):
    __slots__ = ("has_reward", "reward", "reward_components", "metrics", "extra_json", "messages")
    class RewardComponentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    HAS_REWARD_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    REWARD_COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    has_reward: bool
    reward: float
    reward_components: _containers.ScalarMap[str, float]
    metrics: _containers.ScalarMap[str, float]
    extra_json: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, has_reward: _Optional[bool] = ..., reward: _Optional[float] = ..., reward_components: _Optional[_Mapping[str, float]] = ..., metrics: _Optional[_Mapping[str, float]] = ..., extra_json: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class ScoreItem(_message.Message):
    __slots__ = ("data_source", "solution_str", "ground_truth_json", "extra_info_json")
    DATA_SOURCE_FIELD_NUMBER: _ClassVar[int]
    SOLUTION_STR_FIELD_NUMBER: _ClassVar[int]
    GROUND_TRUTH_JSON_FIELD_NUMBER: _ClassVar[int]
    EXTRA_INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    data_source: str
    solution_str: str
    ground_truth_json: str
    extra_info_json: str
    def __init__(self, data_source: _Optional[str] = ..., solution_str: _Optional[str] = ..., ground_truth_json: _Optional[str] = ..., extra_info_json: _Optional[str] = ...) -> None: ...

class ScoreResult(_message.Message):
    __slots__ = ("score", "components", "extra_json", "error")
    class ComponentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    score: float
    components: _containers.ScalarMap[str, float]
    extra_json: str
    error: str
    def __init__(self, score: _Optional[float] = ..., components: _Optional[_Mapping[str, float]] = ..., extra_json: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScoreItem]
    def __init__(self, items: _Optional[_Iterable[_Union[ScoreItem, _Mapping]]] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoreResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ScoreResult, _Mapping]]] = ...) -> None: ...

class JudgeRequest(_message.Message):
    __slots__ = ("messages", "max_tokens", "temperature", "stop")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    max_tokens: int
    temperature: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ...) -> None: ...

class JudgeResponse(_message.Message):
    __slots__ = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "model")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    def __init__(self, text: _Optional[str] = ..., finish_reason: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...
