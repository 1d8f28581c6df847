"""The keys segue writes into `agent_runs.meta`, kept apart from the app's own `metadata` by their `segue.` prefix."""

from __future__ import annotations

#: PrefixDescriptor of the run (written with its first response): what its reasoning is bound to.
PREFIX_META_KEY = "segue.prefix"
#: {tool name: hash of its definition} offered to the run, to warn when a replayed call's tool changed.
TOOLS_META_KEY = "segue.tools"
#: ReplaySummary (with the knobs) when the run used runs=.
REPLAY_META_KEY = "segue.replay"
#: What retry() and resume() need to rebuild the request: history, context, model override, replay knobs.
REQUEST_META_KEY = "segue.request"
#: The tool calls a paused (waiting_approval) run waits on.
PENDING_META_KEY = "segue.pending"
#: RunNote list: what drivers and Failover reported besides the answer, once per distinct note (segue.notes).
NOTES_META_KEY = "segue.notes"
#: The trailing runtime-state layout decision and its reason.
LAYOUT_META_KEY = "segue.layout"
