"""The bench's side of bench/peers.py: the twin on loopback with a clock the bench moves, the ledger of its
responses per turn, and a contender driven one turn at a time (segue in this process, a peer in its own
virtual environment through bench/peers/_peer_protocol.py).

The twin's clock: `segue_twin.Twin(clock=...)` takes any callable; the bench runs the twin's HTTP server
(`segue_twin.server.serve`) in its own process with a `BenchClock`, wall time plus an offset it advances between
turns. No twin change and no test-only endpoint is needed, because the bench, not the peer, decides when the
next turn starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import attrs
from ledger import Call, price_exchanges

from segue.catalog import Catalog
from segue_twin import Twin
from segue_twin.server import TwinServer, serve

HERE = Path(__file__).resolve().parent


class BenchClock:
    """Wall time plus an offset the bench advances: the twin's cache entries expire as if that time passed."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@attrs.frozen(kw_only=True)
class Turn:
    """One user turn of a scenario. `pause` is the time (seconds) the twin's clock moves before it."""

    question: str
    vendor: str
    model: str
    prompt: str
    conversation: int = 1
    pause: float = 0.0


@attrs.frozen(kw_only=True)
class TurnResult:
    ok: bool
    error: str | None
    calls: tuple[Call, ...]


class Driver(Protocol):
    """A contender, one turn at a time. `between(seconds, clock, coming)` moves the clock by `seconds` before the
    turn `coming` (a contender that pre-warms does so on the way)."""

    def turn(self, turn: Turn) -> tuple[bool, str | None]: ...

    def between(self, seconds: float, clock: BenchClock, coming: Turn) -> None: ...

    def close(self) -> None: ...


class Host:
    """A fresh twin (fresh caches) behind a loopback server, with the bench's clock and the priced ledger."""

    def __init__(self, server: TwinServer, clock: BenchClock, catalog: Catalog) -> None:
        self.server, self.clock, self.catalog = server, clock, catalog

    @property
    def anthropic_url(self) -> str:
        return self.server.url

    @property
    def openai_url(self) -> str:
        return self.server.url + "/v1"

    def seen(self) -> int:
        return len(self.server.twin.exchanges)

    def calls_since(self, mark: int) -> tuple[Call, ...]:
        exchanges = list(self.server.twin.exchanges)[mark:]
        return tuple(price_exchanges(exchanges, self.catalog))


@contextmanager
def host(catalog: Catalog) -> Iterator[Host]:
    clock = BenchClock()
    with serve("127.0.0.1", 0, twin=Twin(clock=clock, history=1_000_000)) as server:
        yield Host(server, clock, catalog)


def play(driver: Driver, turns: Sequence[Turn], where: Host) -> tuple[list[TurnResult], list[Call]]:
    """Every turn in order, the clock moved by each turn's pause first; the calls made between turns (pre-warms)
    are returned apart from the turns'."""
    results: list[TurnResult] = []
    between: list[Call] = []
    for t in turns:
        if t.pause:
            mark = where.seen()
            driver.between(t.pause, where.clock, t)
            between += where.calls_since(mark)
        mark = where.seen()
        ok, error = driver.turn(t)
        results.append(TurnResult(ok=ok, error=error, calls=where.calls_since(mark)))
    return results, between


class PeerProcess:
    """A peer's turn script (bench/peers/_<peer>_turns.py) running in the peer's virtual environment."""

    def __init__(self, python: Path, script: str, settings: dict[str, Any], where: Host) -> None:
        from segue.demo import shop_db

        self._tmp = tempfile.TemporaryDirectory()
        config = Path(self._tmp.name) / "config.json"
        config.write_text(
            json.dumps(
                {
                    **settings,
                    "shop_db": shop_db.__file__,
                    "shop_sql": shop_db.shop_sql(),
                    "anthropic_url": where.anthropic_url,
                    "openai_url": where.openai_url,
                    "workdir": self._tmp.name,
                }
            )
        )
        self._log = open(Path(self._tmp.name) / "stderr.log", "w+")
        self._proc = subprocess.Popen(
            [str(python), str(HERE / script), str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=HERE,
            env={
                **os.environ,
                "ANTHROPIC_BASE_URL": where.anthropic_url,
                "ANTHROPIC_API_KEY": "bench",
                "OPENAI_BASE_URL": where.openai_url,
                "OPENAI_API_KEY": "bench",
            },
        )

    def turn(self, turn: Turn) -> tuple[bool, str | None]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        spec = {k: getattr(turn, k) for k in ("question", "vendor", "model", "prompt", "conversation")}
        try:
            self._proc.stdin.write(json.dumps(spec) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            return False, f"peer exited: {self.stderr_tail()}"
        line = self._proc.stdout.readline()
        if not line:
            return False, f"peer exited: {self.stderr_tail()}"
        answer = json.loads(line)
        return bool(answer["ok"]), answer.get("error")

    def between(self, seconds: float, clock: BenchClock, coming: Turn) -> None:
        clock.advance(seconds)

    def stderr_tail(self) -> str:
        self._log.flush()
        self._log.seek(0)
        lines = [x for x in self._log.read().strip().splitlines() if x.strip()]
        return lines[-1][:300] if lines else f"exit code {self._proc.poll()}"

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._log.close()
        self._tmp.cleanup()
