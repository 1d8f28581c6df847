"""Schema files may reference each other's types only without a cycle: each file is one generated module."""

from __future__ import annotations


def first_cycle(deps: dict[str, set[str]]) -> list[str] | None:
    """`deps`: each module's modules it references. The first cycle found, as the chain that closes it, or None."""
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(m: str, chain: list[str]) -> list[str] | None:
        if m in done:
            return None
        if m in visiting:
            return [*chain, m]
        visiting.add(m)
        for d in sorted(deps[m]):
            if (cycle := visit(d, [*chain, m])) is not None:
                return cycle
        visiting.discard(m)
        done.add(m)
        return None

    for m in sorted(deps):
        if (cycle := visit(m, [])) is not None:
            return cycle
    return None
