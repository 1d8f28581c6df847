"""The twin's default model: the shop analyst for the demo's tools, and a plain tool caller for an app's own.

`DefaultPolicy` plays `DatabaseChatPolicy` when the request offers one of the demo's tools (`list_tables`,
`describe_table`, `run_query`) and the message names no other offered tool, so `segue demo` behaves as documented.
Otherwise `AppToolPolicy` answers:

- a message that names offered tools gets one assistant turn calling each of them, with arguments built from the
  tool's JSON Schema and the message (segue_twin.arguments). When the message gives no value for a required
  parameter (and the schema has no default), the twin does not call the tool with a made-up value: it answers
  that it found none, naming the parameter and how to give it, and says so in the turn's note (a run note of kind
  twin-note), since a model would ask or guess and the twin can do neither. A tool is named by its name
  (`get_weather`, or `get weather`), or clearly by its name's and description's words: at least two of them
  (four letters or more, plural `s` ignored; a word of the name counts twice, so "where is my order 4417?" names
  `look_up_order`) are in the message, and more of them than of any other tool's;
- once the results of those calls are in the conversation, it reports them as text and stops;
- any other message gets a text answer saying that this is segue's twin and what it can do.

Deterministic for a given conversation, like every twin policy.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from segue_twin.arguments import fill
from segue_twin.db_policy import DESCRIBE_TABLE, LIST_TABLES, RUN_QUERY, DatabaseChatPolicy
from segue_twin.view import AssistantTurn, ConversationView, PlannedCall, ToolResult, ToolSpec

#: The demo's tools: while one is offered (and no other tool is named), the shop analyst answers.
SHOP_TOOLS = (LIST_TABLES, DESCRIBE_TABLE, RUN_QUERY)
#: A tool is named by its description when at least this many of its words are in the message.
DESCRIPTION_WORDS = 2
#: Longest tool result quoted back in the report.
REPORT_CHARS = 2000
#: Words too common to say which tool a message means.
_COMMON = frozenset(
    "about after also been before being both does each from have into just like more most much only other over "
    "same some such than that their them then there these they this those through under very what when where "
    "which while will with would your please could should tool tools call calls return returns using given".split()
)


def question(view: ConversationView) -> tuple[int, str]:
    """The index and text of the message being answered: the latest user turn with text, preferring one that is
    not carrying tool results (text sent along with results is a runtime note, not a new question)."""
    asked = [i for i, t in enumerate(view.turns) if t.role == "user" and t.text.strip()]
    plain = [i for i in asked if not view.turns[i].tool_results]
    index = (plain or asked or [-1])[-1]
    return index, view.turns[index].text if index >= 0 else ""


def _forms(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    return {name.lower(), spaced.lower()}


def _names(spec: ToolSpec, text: str) -> bool:
    lowered = text.lower()
    return any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", lowered) for form in _forms(spec.name) if form)


def _words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text).replace("_", " ").lower())
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w for w in words if len(w) >= 4 and w not in _COMMON}


def named_tools(specs: Sequence[ToolSpec], text: str, *, exclude: Collection[str] = ()) -> list[ToolSpec]:
    """The offered tools ``text`` names, in offer order: by name, else the one its words clearly fit."""
    candidates = [s for s in specs if s.name not in exclude]
    by_name = [s for s in candidates if _names(s, text)]
    if by_name:
        return by_name
    asked = _words(text)
    scores = [(len(_words(f"{s.name} {s.description}") & asked) + len(_words(s.name) & asked), s) for s in candidates]
    best = max((score for score, _ in scores), default=0)
    top = [s for score, s in scores if score == best]
    return top if best >= DESCRIPTION_WORDS and len(top) == 1 else []


class AppToolPolicy:
    """Calls the offered tools a message names, then reports their results; otherwise says what the twin is."""

    def respond(self, view: ConversationView) -> AssistantTurn:
        asked_at, text = question(view)
        results = [r for turn in view.turns[asked_at + 1 :] for r in turn.tool_results]
        if results:
            return AssistantTurn(text=_report(results), reasoning="The tool results are in my context; report them.")
        chosen = named_tools(view.tool_specs, text)
        if not chosen:
            return AssistantTurn(text=_introduction(view), reasoning="The message names none of the offered tools.")
        plain = _without_names(text, view.tool_specs)
        filled = [(s, fill(s.parameters, plain)) for s in chosen]
        unfound = [(s.name, f.made_up) for s, f in filled if f.made_up]
        if unfound:
            return _no_value(unfound)
        calls = tuple(PlannedCall(name=s.name, arguments=f.arguments) for s, f in filled)
        names = ", ".join(s.name for s in chosen)
        return AssistantTurn(tool_calls=calls, reasoning=f"The message asks for {names}; call it with its schema.")


class DefaultPolicy:
    """`Twin()`'s policy: the shop analyst for the demo's tools, `AppToolPolicy` for an app's own (module notes)."""

    def __init__(self) -> None:
        self.shop = DatabaseChatPolicy()
        self.app = AppToolPolicy()

    def respond(self, view: ConversationView) -> AssistantTurn:
        shop = any(name in SHOP_TOOLS for name in view.tools)
        if shop and not named_tools(view.tool_specs, question(view)[1], exclude=SHOP_TOOLS):
            return self.shop.respond(view)
        return self.app.respond(view)

    def summarize(self, view: ConversationView) -> str | None:
        """A vendor compaction's summary (view.Summarizer): the shop analyst's facts over the demo's tools; None
        elsewhere (the twin's generic summary)."""
        return self.shop.summarize(view) if any(name in SHOP_TOOLS for name in view.tools) else None


def _without_names(text: str, specs: Sequence[ToolSpec]) -> str:
    """``text`` without the tool names in it, so a digit in a name is not read as an argument."""
    for spec in specs:
        for form in sorted(_forms(spec.name), key=len, reverse=True):
            text = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", " ", text, flags=re.IGNORECASE)
    return text


def _report(results: Sequence[ToolResult]) -> str:
    lines = []
    for result in results:
        content = result.content if len(result.content) <= REPORT_CHARS else result.content[:REPORT_CHARS] + "…"
        verb = "failed with" if result.is_error else "returned"
        lines.append(f"{result.name or result.call_id} {verb}: {content}")
    return lines[0] if len(lines) == 1 else "The tools answered:\n" + "\n".join(f"- {line}" for line in lines)


def _no_value(unfound: Sequence[tuple[str, Sequence[str]]]) -> AssistantTurn:
    """The answer when the message gives no value for a tool's required parameter: say so, and how to give it."""
    missing = "; ".join(f"{name}'s {', '.join(params)}" for name, params in unfound)
    return AssistantTurn(
        text=f"I am segue's twin, an offline stand-in for the model: I found no value for {missing} in your "
        "message, so I called no tool (a model would ask you or guess; I do neither). Give it in the message, "
        f"e.g. `{unfound[0][1][0]}: ...` or in quotes, or script the model with ScriptedPolicy.",
        reasoning="A required argument is not in the message; do not make one up.",
        note=f"segue's twin found no value for {missing} in the message, so it called no tool and answered saying "
        "so (a model would ask or guess)",
    )


def _introduction(view: ConversationView) -> str:
    offered = f"this request offers {', '.join(view.tools)}" if view.tools else "this request offers no tools"
    return (
        "I am segue's twin, an offline stand-in for the model, so I do not answer questions myself. I call a tool "
        f"when your message names it, by its name or clearly by its description ({offered}), and report what it "
        f"returns. With the demo's tools ({', '.join(SHOP_TOOLS)}) I answer questions about the sample shop database."
    )
