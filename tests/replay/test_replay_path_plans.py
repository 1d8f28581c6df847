"""The replay plan says what changes when a path serves (segue.replay.paths; issue #42 item 2).

The replay is planned once per path in replay/; the loop (segue.run.serving) only executes what `PathPlans`
says: which reasoning each path's request carries, and the run's summary once a path served.
"""

from __future__ import annotations

from segue._core.contracts import ProviderNote, ServingPath
from segue.generated import Message, ReplaySummary, ReplayWarning, TextBlock
from segue.replay.paths import PathPlans, replayed_run, still_sent, vendor_dropped

AIMED = ServingPath(vendor="anthropic", model="claude-sonnet-4-6", reasoning_vendor="anthropic")
BACKUP = ServingPath(vendor="anthropic", model="claude-haiku-4-5", reasoning_vendor="anthropic")
OTHER = ServingPath(vendor="openai", model="gpt-4.1-mini", reasoning_vendor=None)


def summary(kept: list[str], dropped: tuple[str, ...] = (), warnings: tuple[ReplayWarning, ...] = ()) -> ReplaySummary:
    return ReplaySummary(
        runs_full=["r1", "r2", "r3"],
        runs_text=[],
        reasoning_kept=kept,
        reasoning_dropped=list(dropped),
        warnings=list(warnings),
    )


MODEL_WARNING = ReplayWarning(run_id="r2", cause="model", message="reasoning dropped: the model changed")
PLANS = PathPlans(
    aimed=AIMED,
    summaries={AIMED: summary(["r1", "r2", "r3"]), BACKUP: summary(["r1"], ("r2", "r3"), (MODEL_WARNING,))},
    seeds={AIMED: "seed-aimed", BACKUP: "seed-backup"},
)


def test_each_path_carries_what_its_plan_keeps_less_what_an_earlier_request_went_without() -> None:
    assert PLANS.sent(None) == {AIMED: {"r1", "r2", "r3"}, BACKUP: {"r1"}}
    assert PLANS.sent(frozenset({"r1", "r3"})) == {AIMED: {"r1", "r3"}, BACKUP: {"r1"}}


def test_the_first_response_makes_the_serving_paths_plan_the_runs_summary() -> None:
    got, bound = PLANS.served(PLANS.summaries[AIMED], None, BACKUP, "anthropic", "claude-haiku-4-5")
    assert got is PLANS.summaries[BACKUP] and bound == {"r1"}


def test_a_later_response_on_another_path_drops_what_that_plan_does_not_keep_with_its_cause() -> None:
    got, bound = PLANS.served(PLANS.summaries[AIMED], frozenset({"r1", "r2", "r3"}), BACKUP, "anthropic", "x")
    assert (got.reasoning_kept, got.reasoning_dropped, bound) == (["r1"], ["r2", "r3"], {"r1"})
    causes = {w.run_id: w.cause for w in got.warnings}
    assert causes == {"r2": "model", "r3": "follows"}  # r3 has no warning of its own on that path


def test_a_member_the_replay_was_not_planned_for_gets_no_reasoning() -> None:
    got, bound = PLANS.served(PLANS.summaries[AIMED], None, OTHER, "openai", "gpt-4.1-mini")
    assert got.reasoning_kept == [] and bound == frozenset()
    assert {w.cause for w in got.warnings} == {"cross-vendor"}
    assert "a Failover member the replay was not planned for" in got.warnings[0].message


def test_reasoning_the_vendor_dropped_leaves_the_summary_but_stays_on_the_wire() -> None:
    messages = [Message(role="user", content=[TextBlock(text="q")], meta={"segue.replayed": "r2"})]
    note = ProviderNote(kind="vendor-dropped", message="thinking block ignored", message_index=0)
    assert replayed_run(note, messages) == "r2"
    assert replayed_run(ProviderNote(kind="vendor-dropped", message="m", message_index=5), messages) is None
    got = vendor_dropped(PLANS.summaries[AIMED], "r2", note)
    assert got.reasoning_kept == ["r1", "r3"] and got.warnings[-1].cause == "vendor-dropped"
    assert still_sent(got) == {"r1", "r2", "r3"}  # a resumed run sends it as before


def test_the_seed_is_the_planned_one_unless_the_request_carried_other_reasoning() -> None:
    prefix = [Message(role="user", content=[TextBlock(text="q")])]
    assert PLANS.seed(BACKUP, {"r1"}, prefix, None) == "seed-backup"
    hashed = PLANS.seed(BACKUP, set(), prefix, None)
    assert hashed not in ("seed-backup", "seed-aimed") and len(hashed) > 10
