"""Step 1 of a run: its request, validated once, all of it, before any I/O.

Each value's own type and bounds are its generated class's (ReplayKnobs, Compaction, ModelSettings, ContextBlock
check their fields when constructed, from the schemas); this module keeps the rules between arguments (knobs
that do not combine, a run given twice, SingleCall's window) and what no schema field says (the agent's
vendors, id and metadata limits, lone surrogates).

`RunParams` (schemas/protocol.schema.json) is the one definition of what a run is asked. Agent.run and
Agent.stream take its fields as explicit keyword arguments (tests/run/test_run_params.py holds their signatures to
the schema), the protocol receives it as it is, and retry / resume rebuild one from the run's RunMeta.
`validate` checks every argument and returns a `RunRequest`: the RunParams with each default filled in, plus the
replay knobs it implies. What needs a stored row (do the replayed runs exist, are they this tenant's, have they
finished?) is checked where they are read, in the plan step; nothing is written before both pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from segue._core.hashing import canonical_json
from segue._core.json_types import OutputSpec, output_spec
from segue.errors import FieldError, InputError, ReplayRunError
from segue.generated import (
    Compaction,
    ContextBlock,
    Message,
    ModelSettings,
    PrewarmParams,
    ReplayKnobs,
    RunParams,
    get_converter,
)
from segue.replay import compaction as compactions
from segue.run.conversation import as_history
from segue.run.settings import SettingsCheck, check_paths, merged, settings_of
from segue.store.records import DEFAULT_TENANT

DEFAULT_MAX_INPUT_CHARS = 1_000_000
#: The app's metadata is stored twice (the run row and one tag per key): its canonical JSON is capped.
MAX_METADATA_CHARS = 65_536
#: Identifiers (tenant_id, idempotency_key, model, metadata keys) fit the store's 200-character columns.
MAX_ID_CHARS = 200
#: RunParams fields that are about the transport, not the run: the protocol's agent name and event switch.
TRANSPORT_FIELDS = frozenset({"agent", "events"})
#: Agent.run / Agent.stream arguments that are not RunParams fields: the app's live objects for its tools
#: (RunContext.deps), never stored, sent or fingerprinted, so the protocol has no such field.
PYTHON_ONLY = frozenset({"deps"})
#: RunParams.input of a prewarm's request (RunParams requires one): never sent, recorded or fingerprinted, since a
#: prewarm stops before the user message.
PREWARM_INPUT = "(prewarm: no user message)"
#: The cache key of a conversation without a tenant: this, then the conversation's first run id.
CONVERSATION_KEY = "conversation-"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$", re.IGNORECASE)


@attrs.frozen(kw_only=True)
class Rules:
    """What the agent a run is for allows: the checks that depend on the agent, not on the request alone."""

    single_call: bool
    has_store: bool
    vendors: tuple[str, ...]
    max_input_chars: int
    #: The agent's own output_type and repair turns, for runs that do not pass theirs.
    output: OutputSpec | None = None
    output_repairs: int = 1
    #: The agent's own model settings (a run's override them key by key), and each serving driver's check of them.
    model_settings: ModelSettings | None = None
    settings_checks: tuple[SettingsCheck, ...] = ()
    #: The agent's compaction policy, for runs that do not pass their own.
    compaction: Compaction | None = None


@attrs.frozen(kw_only=True)
class RunRequest:
    """A validated run request: `params` with every default filled in (context blocks with their placement, run
    ids as stored), the replay knobs it implies (None: nothing to replay), and the run it retries."""

    params: RunParams
    knobs: ReplayKnobs | None
    retry_of: str | None = None
    #: Structured output (params.output_type is its schema), None: the answer is text only.
    output: OutputSpec | None = None
    #: The app's `deps=` object, handed to tools as RunContext.deps: not a RunParams field (never stored, not in
    #: the idempotency fingerprint), so a retry or a resume takes it again.
    deps: Any = attrs.field(default=None, eq=False, repr=False)
    #: A sub-run's link to the run whose tool call made it (segue.run.lineage.Parent); None: a top-level run.
    parent: Any = attrs.field(default=None, eq=False)

    # The fields whose RunParams type is optional only because they have defaults:
    @property
    def tenant_id(self) -> str:
        return self.params.tenant_id or DEFAULT_TENANT

    def cache_key(self, run_id: str) -> str:
        """The prompt cache routing key of the run's requests (OpenAI's `prompt_cache_key`, OpenRouter's
        `session_id`): the tenant when the app names one (one customer's requests route together), else the
        conversation, named by its first run: the first of `runs=` (every turn passes its conversation's runs,
        oldest first), or this run when it starts one. The same on every request of a run and on every turn of a
        conversation, so its prefix stays byte-stable; never one key for every user, whose requests would overflow
        the ~15 requests a minute OpenAI routes to one machine per prefix and key."""
        if self.tenant_id != DEFAULT_TENANT:
            return self.tenant_id
        runs = self.params.runs
        return f"{CONVERSATION_KEY}{runs[0] if runs else run_id}"

    @property
    def history(self) -> list[Message]:
        return self.params.history or []

    @property
    def context(self) -> list[ContextBlock]:
        return self.params.context or []

    @property
    def metadata(self) -> dict[str, Any]:
        return self.params.metadata or {}

    @property
    def replay_last(self) -> int | Literal["all"]:
        """The window as validated: unset means every run in full (see `validate_knobs`)."""
        return self.params.replay_last if self.params.replay_last is not None else "all"

    @property
    def replay_reasoning(self) -> bool:
        return self.params.replay_reasoning is not False

    @property
    def settings(self) -> ModelSettings:
        """The run's model settings, the agent's merged in (empty: every vendor default)."""
        return self.params.model_settings or ModelSettings()

    @property
    def replay_step(self) -> int:
        return self.params.replay_step or 1

    @property
    def repairs(self) -> int:
        """Structured output: repair turns an answer that does not match gets."""
        return self.params.output_repairs or 0


def run_arguments(params: RunParams) -> dict[str, Any]:
    """Agent.run / Agent.stream keyword arguments for `params`: the fields it sets (unset ones take the
    signature's defaults), `input` as `user_input`, without the transport fields."""
    out: dict[str, Any] = {"user_input": params.input}
    for field in attrs.fields(RunParams):
        value = getattr(params, field.name)
        if field.name not in TRANSPORT_FIELDS and field.name != "input" and value is not None:
            out[field.name] = value
    return out


def validate(arguments: Mapping[str, Any], rules: Rules, *, agent: str) -> RunRequest:
    """The request for Agent.run(**arguments) (every RunParams field but the transport's, `user_input` for
    `input`), or InputError / ReplayRunError naming the offending value."""
    expected = {f.name for f in attrs.fields(RunParams)} - TRANSPORT_FIELDS - {"input"} | {"user_input"}
    if set(arguments) != expected:
        raise TypeError(f"run arguments must be exactly {sorted(expected)}, got {sorted(arguments)}")
    user_input = arguments["user_input"]
    if not isinstance(user_input, str) or not user_input.strip():
        raise InputError(f"user_input must be a non-empty string, got {user_input!r:.80}")
    if len(user_input) > rules.max_input_chars:
        raise InputError(
            f"user_input has {len(user_input):,} characters, over the limit of {rules.max_input_chars:,}; "
            "send large documents as files or tool results, or raise Agent(max_input_chars=...)"
        )
    check_text("user_input", user_input)
    return _validate(arguments, rules, agent)


def validate_prewarm(arguments: Mapping[str, Any], rules: Rules, *, agent: str) -> RunRequest:
    """The request for Agent.prewarm(**arguments): the arguments of the next run that decide its prefix (every
    PrewarmParams field but `agent`), checked as that run's would be. Its `params.input` is PREWARM_INPUT: a prewarm
    sends everything before the user message and nothing after it."""
    expected = {f.name for f in attrs.fields(PrewarmParams)} - {"agent"}
    if set(arguments) != expected:
        raise TypeError(f"prewarm arguments must be exactly {sorted(expected)}, got {sorted(arguments)}")
    return _validate(
        {**arguments, "user_input": PREWARM_INPUT, "idempotency_key": None, "metadata": None}, rules, agent
    )


def _validate(arguments: Mapping[str, Any], rules: Rules, agent: str) -> RunRequest:
    """Every argument but the user input (checked by the caller)."""
    user_input, tenant_id = arguments["user_input"], arguments["tenant_id"]
    idempotency_key, model, vendor = arguments["idempotency_key"], arguments["model"], arguments["vendor"]
    metadata, context, history = arguments["metadata"], arguments["context"], arguments["history"]
    runs, replay_last = arguments["runs"], arguments["replay_last"]
    replay_reasoning, replay_budget_tokens = arguments["replay_reasoning"], arguments["replay_budget_tokens"]
    replay_step, replay_keep = arguments["replay_step"], arguments["replay_keep"]
    compaction = compaction_of(arguments["compaction"], "compaction")
    if compaction is None and replay_keep is None and replay_last in (None, "all") and not replay_budget_tokens:
        compaction = rules.compaction  # the agent's, unless the run picks another way to bound its replay
    if replay_last is None:
        # runs= alone replays every run in full (each fitted to the context window): what replay is for. SingleCall
        # replays question + answer only, so its default is 0.
        replay_last = 0 if rules.single_call else "all"
    # A prewarm takes no output_type of its own: it warms the prefix with the agent's (the format is in it).
    output, output_repairs = _output(arguments.get("output_type"), arguments.get("output_repairs"), rules)
    own = settings_of(arguments.get("model_settings"), "model_settings")
    settings = merged(rules.model_settings, own)
    if own is not None:  # without its own, the run's are the agent's, asked of every path when the agent was made
        check_paths(settings, rules.settings_checks)
    # Compaction(vendor=True) turns on the serving path's own compaction, refused here where a path has none.
    settings = compactions.with_vendor(
        compaction, settings, lambda s: check_paths(s, rules.settings_checks), "compaction"
    )
    if not isinstance(tenant_id, str) or not tenant_id:
        raise InputError(f"tenant_id must be a non-empty string, got {tenant_id!r}")
    _check_id("tenant_id", tenant_id)
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
        raise InputError(f"idempotency_key must be a non-empty string or None, got {idempotency_key!r}")
    if idempotency_key is not None:
        _check_id("idempotency_key", idempotency_key)
    if model is not None and (not isinstance(model, str) or not model):
        raise InputError(f"model must be a model name or None, got {model!r}")
    if model is not None:
        _check_id("model", model)
    if vendor is not None and vendor not in rules.vendors:
        raise InputError(
            f"vendor must name one of this agent's provider vendors ({', '.join(rules.vendors)}) or be None, "
            f"got {vendor!r:.60}"
        )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InputError(f"metadata must be a dict, got {type(metadata).__name__}")
    _check_metadata(dict(metadata or {}))
    blocks = _context(context)
    messages = as_history(history)
    check_text("history", get_converter().unstructure(messages, list[Message]))
    knobs = validate_knobs(
        runs,
        replay_last,
        replay_reasoning,
        replay_budget_tokens,
        replay_step=replay_step,
        replay_keep=replay_keep,
        single_call=rules.single_call,
        compaction=compaction,
    )
    if knobs is not None:
        if not rules.has_store:
            raise ReplayRunError(
                "runs= needs a store: create the agent with store=RunStore(...)", run_id=None, reason="invalid"
            )
        # Stable context with runs= is checked in the plan, against the conversation's (segue.run.plan).
    params = RunParams(
        agent=agent,
        input=user_input,
        runs=knobs.runs if knobs is not None else None,
        replay_last=replay_last,
        replay_reasoning=replay_reasoning,
        replay_budget_tokens=replay_budget_tokens,
        replay_step=replay_step,
        replay_keep=replay_keep,
        compaction=compaction,
        history=messages,
        context=blocks,
        tenant_id=tenant_id,
        metadata=dict(metadata or {}),
        idempotency_key=idempotency_key,
        model=model,
        vendor=vendor,
        output_type=output.schema if output is not None else None,
        output_repairs=output_repairs if output is not None else None,
        model_settings=settings,
    )
    return RunRequest(params=params, knobs=knobs, output=output)


def _output(output_type: Any, repairs: Any, rules: Rules) -> tuple[OutputSpec | None, int]:
    """The run's structured output: its own output_type, else the agent's; a schema dict equal to the agent's
    (a retry, the protocol) keeps the agent's type, so the value converts the same way."""
    if repairs is not None and (isinstance(repairs, bool) or not isinstance(repairs, int) or repairs < 0):
        raise InputError(f"output_repairs must be a whole number >= 0 (repair turns), got {repairs!r:.40}")
    repairs = rules.output_repairs if repairs is None else repairs
    if output_type is None:
        return rules.output, repairs
    spec = output_spec(output_type)
    if rules.output is not None and spec.schema == rules.output.schema:
        return rules.output, repairs
    return spec, repairs


def _context(context: Any) -> list[ContextBlock]:
    blocks = []
    for i, b in enumerate(context or []):
        if not isinstance(b, ContextBlock):  # its text and placement ContextBlock checked when constructed
            raise InputError(f"context must hold ContextBlock objects, got {type(b).__name__}")
        check_text(f"context[{i}].text", b.text)
        blocks.append(attrs.evolve(b, placement=b.placement or "dynamic"))
    return blocks


def is_run_id(value: object) -> bool:
    """Run ids are ULIDs: 26 Crockford base32 characters (either case)."""
    return isinstance(value, str) and _ULID.match(value) is not None


def run_id_of(value: object) -> str | None:
    """The run id as segue stores it (ULIDs are case-insensitive; stored upper case), or None if it is not one."""
    return value.upper() if isinstance(value, str) and is_run_id(value) else None


def validate_knobs(
    runs: Any,
    replay_last: Any,
    replay_reasoning: Any,
    replay_budget_tokens: Any = None,
    *,
    replay_step: Any = None,
    replay_keep: Any = None,
    single_call: bool = False,
    compaction: Compaction | None = None,
) -> ReplayKnobs | None:
    """The replay knobs, or None when there is nothing to replay. Each knob's type and bounds are ReplayKnobs'
    own (schemas/replay.schema.json); what is checked here is what no one field says: run ids as stored (upper
    case), each once, and the knobs that do not combine."""
    # Values come from apps and JSON-RPC clients unchecked, hence `Any`.
    if runs is not None and (isinstance(runs, str) or not isinstance(runs, Sequence)):
        raise ReplayRunError(
            f"runs must be a list of run ids, got {type(runs).__name__} {runs!r:.80}", run_id=None, reason="invalid"
        )
    ids = [run_id_of(given) or given for given in runs or ()]
    try:
        knobs = ReplayKnobs(
            runs=ids,
            replay_last=replay_last,
            replay_reasoning=replay_reasoning,
            replay_budget_tokens=replay_budget_tokens,
            replay_step=replay_step,
            replay_keep=replay_keep,
            compaction=compaction,
        )
    except FieldError as e:
        raise ReplayRunError(e.problem, run_id=None, reason="invalid") from None
    seen: set[str] = set()
    for run_id in ids:
        if run_id in seen:
            raise ReplayRunError(
                f"run {run_id} appears twice in runs=; pass each run once, oldest first",
                run_id=run_id,
                reason="duplicate",
            )
        seen.add(run_id)
    _check_combination(knobs, single_call)
    return knobs if ids else None


def _check_combination(knobs: ReplayKnobs, single_call: bool) -> None:
    """The rules between knobs: each value alone was checked by ReplayKnobs."""
    last, keep, step, budget = knobs.replay_last, knobs.replay_keep, knobs.replay_step, knobs.replay_budget_tokens
    if keep is not None and isinstance(last, int) and last > keep:
        raise ReplayRunError(
            f"replay_keep={keep} replays fewer runs than replay_last={last} puts in full; pass "
            f"replay_keep >= {last}, or a smaller replay_last",
            run_id=None,
            reason="invalid",
        )
    if step is not None and keep is None and not isinstance(last, int):
        raise ReplayRunError(
            f"replay_step={step} moves a window of replay_last=N or replay_keep=M runs, which needs an int "
            f"replay_last, got {last!r:.40}; pass replay_last=N or replay_keep=M with it, or leave replay_step out",
            run_id=None,
            reason="invalid",
        )
    if knobs.compaction is not None and (keep is not None or last != "all" or budget):
        raise ReplayRunError(
            "compaction replays its summary and every run after it in full; it does not combine with replay_last="
            f"{last!r:.20}, replay_keep={keep!r:.20} or replay_budget_tokens={budget!r:.20}: leave those out, or "
            "the compaction",
            run_id=None,
            reason="invalid",
        )
    if single_call and last != 0:
        raise ReplayRunError(
            f"SingleCall replays runs as question + answer only: pass replay_last=0, not {last!r}",
            run_id=None,
            reason="unsupported",
        )


def compaction_of(value: Any, name: str = "Agent(compaction=...)") -> Compaction | None:
    """The compaction policy from a Compaction or a dict of its fields (each value checked by Compaction itself),
    or InputError naming the value."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {f.name for f in attrs.fields(Compaction)})
        if unknown:
            raise InputError(
                f"{name} has no field {unknown[0]!r}; it takes every, trigger_tokens, instruction and vendor"
            )
        try:
            value = Compaction(**value)
        except FieldError as e:
            raise InputError(f"{name}.{e.problem}") from None
    if not isinstance(value, Compaction):
        raise InputError(f"{name} must be a segue.Compaction or a dict of its fields, got {type(value).__name__}")
    compactions.check_vendor(value, name)
    if value.every is None and value.trigger_tokens is None and not value.vendor:
        raise InputError(f"{name} needs every=S (runs) or trigger_tokens=T (replayed tokens): when to compact")
    return value


def check_text(name: str, value: Any) -> None:
    """Refuse a lone surrogate (what a JSON `\\ud800` escape decodes to): no vendor API and no database driver can
    encode it, so it would fail later, after rows were written."""
    if isinstance(value, str):
        found = None if value.isascii() else _SURROGATE.search(value)
        if found is not None:
            raise InputError(
                f"{name} has a lone surrogate (U+{ord(found.group()):04X}) at index {found.start()}, which is not "
                "valid Unicode text; decode the bytes as UTF-8 (errors='replace' if they may be broken)"
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(f"{name}[{key!r}]", key)
            check_text(f"{name}[{key!r}]", item)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_text(f"{name}[{i}]", item)


def _check_id(name: str, value: str) -> None:
    check_text(name, value)
    if len(value) > MAX_ID_CHARS or "\x00" in value:
        raise InputError(
            f"{name} must be at most {MAX_ID_CHARS} characters without NUL, got {len(value):,} characters: "
            f"{value[:40]!r}..."
        )


def _check_metadata(metadata: dict[Any, Any]) -> None:
    check_text("metadata", metadata)
    try:
        size = len(canonical_json(metadata))
    except (TypeError, ValueError) as e:
        raise InputError(f"metadata must be plain JSON (str, numbers, bools, None, lists, dicts): {e}") from None
    if size > MAX_METADATA_CHARS:
        raise InputError(
            f"metadata is {size:,} characters of JSON, over the limit of {MAX_METADATA_CHARS:,}; keep tags and "
            "small state there, and large data in your own storage (store its id in metadata)"
        )
    for key in metadata:
        if not isinstance(key, str) or len(key) > MAX_ID_CHARS:
            raise InputError(f"metadata keys must be strings of at most {MAX_ID_CHARS} characters, got {key!r:.60}")
