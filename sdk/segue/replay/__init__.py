"""Replay: which earlier runs a run's prefix carries (the planner), the prefix rule that says whose reasoning may be
replayed, and nothing of the wire (docs/replay.md)."""
