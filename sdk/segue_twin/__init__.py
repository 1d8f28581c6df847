"""segue's twin: an offline emulator of the Anthropic and OpenAI HTTP APIs and their prompt-cache rules.

The official `anthropic` and `openai` clients talk to it unchanged, in-process (`Twin.anthropic_client()`,
`Twin.openai_client()`, `Twin.transport()`) or over loopback HTTP (`segue_twin.server.serve`). A pluggable
`Policy` plays the model. The default, `DefaultPolicy`, answers questions about the sample shop database in
`segue.demo.shop_db` when offered the demo's tools (`DatabaseChatPolicy`) and otherwise calls the app's own
tools that a message names (`AppToolPolicy`); `ScriptedPolicy` replays fixed turns. See docs/twin.md.
"""

from segue_twin.app_policy import AppToolPolicy, DefaultPolicy
from segue_twin.cache import BlockCache, BlockUsage, CacheBlock, PrefixCache
from segue_twin.core import (
    DEFAULT_MAX_BODY_BYTES,
    TWIN_API_KEY,
    TWIN_BASE_URL,
    TWIN_HEADER,
    Exchange,
    Twin,
    TwinResponse,
)
from segue_twin.db_policy import DatabaseChatPolicy, QueryPlan, plan_question
from segue_twin.errors import TwinHTTPError
from segue_twin.rules import CacheRules, rules_for
from segue_twin.scripted import ScriptedPolicy
from segue_twin.view import (
    AssistantTurn,
    ConversationView,
    PlannedCall,
    Policy,
    PolicyError,
    ToolCall,
    ToolResult,
    ToolSpec,
    Turn,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "TWIN_API_KEY",
    "TWIN_BASE_URL",
    "TWIN_HEADER",
    "AppToolPolicy",
    "AssistantTurn",
    "BlockCache",
    "BlockUsage",
    "CacheBlock",
    "CacheRules",
    "ConversationView",
    "DatabaseChatPolicy",
    "DefaultPolicy",
    "Exchange",
    "PlannedCall",
    "Policy",
    "PolicyError",
    "PrefixCache",
    "QueryPlan",
    "ScriptedPolicy",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Turn",
    "Twin",
    "TwinHTTPError",
    "TwinResponse",
    "plan_question",
    "rules_for",
]
