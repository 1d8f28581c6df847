"""Request bodies stored once: a skeleton per provider call, and the parts that repeat, content-addressed.

Every request of a replayed conversation repeats the one before it (the system prompt, the tools, every earlier
message) and adds a few messages, so storing each body whole grows with the square of the conversation. Instead:

- each top-level field that is a list (Anthropic `system`, `tools`, `messages`; OpenAI `input`, `tools`) is
  stored as one part per element, and the list of those parts' keys as a tree of small nodes (below); a long
  string or object (`instructions`) is one part; everything else stays inline in the skeleton;
- a part's key is a hash of its text, and a part is written once per store (`request_parts`), whoever needs it;
- the skeleton (the call's `provider_request` column) names each field in order, inline or by key.

The list tree: a node holds up to `_MAX_FANOUT` keys; a node ends after a key whose hash says so (about one key
in `_FANOUT`), so node boundaries depend on the content, not on positions. A request that appends messages
shares every node of the one before it but the last of each level, and one that drops or changes messages near
the start or in the middle (a window that moved, a context fit) shares everything after the next boundary too.
So each call stores its new messages and a few small nodes, whatever the conversation's length.

Reading joins it back: the same values in the same order, so the body re-encodes to the exact bytes the official
client sent (what RunDetail's `provider_request` promises).
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from segue._core.identity import IdentityMemo
from segue.errors import StoreError
from segue.store.statements import Statements

#: The skeleton's format marker and version.
FORMAT = "segue.body"
VERSION = 1
#: A string or object field at least this long (as JSON) is a part of its own; shorter ones stay inline.
_INLINE_LIMIT = 256
_FANOUT = 4
_MAX_FANOUT = 16
#: A key is the first 128 bits of the SHA-256 of the part's UTF-8 text, in URL-safe base64 without padding.
KEY_LENGTH = 22

Fetch = Callable[[set[str]], Mapping[str, str]]


def part_key(text: str) -> str:
    # surrogatepass: a body may hold a lone surrogate (a JSON "\ud800" escape); it hashes like any other text.
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]
    return binascii.b2a_base64(digest, newline=False)[:KEY_LENGTH].translate(_URLSAFE).decode("ascii")


_URLSAFE = bytes.maketrans(b"+/", b"-_")
#: One encoder for every part (json.dumps with options builds a new one per call).
_dumps = json.JSONEncoder(ensure_ascii=False).encode
#: The first character of a key carries 6 bits of the hash; those of a multiple of _FANOUT end a node (one key in
#: _FANOUT).
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_ENDS = frozenset(c for i, c in enumerate(_B64) if i % _FANOUT == 0)


class Splitter:
    """Splits bodies into a skeleton and parts. `known` holds the keys this process already wrote (so their
    parts are not sent to the database again); it is bounded and starts over when full."""

    def __init__(self, size: int = 200_000, seen: int = 8_192) -> None:
        self._size = size
        self.known: set[str] = set()
        # The part key of each element of bodies split before: the requests of a run share the blocks of its
        # replayed prefix, so a later request's prefix is not serialized and hashed again.
        self._seen: IdentityMemo[str] = IdentityMemo(seen)

    def split(self, body: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        """(skeleton text, the parts it needs that this process has not written yet: key -> text)."""
        new: dict[str, str] = {}
        fields: list[list[Any]] = []
        for name, value in body.items():
            if isinstance(value, list) and value:
                fields.append([name, "list", *self.list_tree(value, new)])
                continue
            if isinstance(value, (str, dict)):
                text = _dumps(value)
                if len(text) >= _INLINE_LIMIT:
                    fields.append([name, "part", self.put(text, new)])
                    continue
            fields.append([name, "value", value])
        return _dumps({FORMAT: VERSION, "fields": fields}), new

    def put(self, text: str, new: dict[str, str]) -> str:
        """The key of the part `text`, added to `new` unless this process wrote it already."""
        key = part_key(text)
        if key not in self.known:
            new[key] = text
        return key

    def list_tree(self, values: list[Any], new: dict[str, str]) -> tuple[str, int]:
        """(root key, height) of the tree of a non-empty list: one part per element, nodes above them (module
        docstring); the parts this process has not written yet go to `new`."""

        def put(text: str) -> str:
            return self.put(text, new)

        keys = [self._element(item, put) for item in values]
        height = 1
        while True:
            keys = [put("".join(node)) for node in _nodes(keys)]
            if len(keys) == 1:
                return keys[0], height
            height += 1

    def _element(self, item: Any, put: Callable[[str], str]) -> str:
        if not isinstance(item, (dict, list)):
            return put(_dumps(item))
        key = self._seen.get(item)
        if key is not None and key in self.known:
            return key
        return self._seen.put(item, put(_dumps(item)))

    def written(self, keys: Iterable[str]) -> None:
        """Remember parts the database now holds (call after the write committed)."""
        if len(self.known) >= self._size:
            self.known = set()
        self.known.update(keys)


def _nodes(keys: list[str]) -> list[list[str]]:
    nodes: list[list[str]] = [[]]
    for key in keys:
        node = nodes[-1]
        node.append(key)
        if key[0] in _ENDS or len(node) >= _MAX_FANOUT:
            nodes.append([])
    if not nodes[-1]:
        nodes.pop()
    return nodes


def parse_skeleton(text: str, where: str) -> list[list[Any]] | dict[str, Any]:
    """The skeleton's fields, or the whole body when the row holds one: segue before store schema 6 stored each
    body whole, and a process of that version still running after the store was migrated (a rolling upgrade)
    goes on writing them so."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt JSON in {where}: {e}; the row was modified outside segue") from None
    if isinstance(data, dict) and FORMAT not in data:
        return data
    if not isinstance(data, dict) or data.get(FORMAT) != VERSION or not isinstance(data.get("fields"), list):
        raise StoreError(
            f"{where} is not a {FORMAT} v{VERSION} skeleton nor a whole request body; the row was modified "
            "outside segue, or written by a newer segue (upgrade segue to read it)"
        )
    fields: list[list[Any]] = data["fields"]
    return fields


def _node(texts: Mapping[str, str], key: str) -> list[str]:
    """The keys a list node holds (its text is their concatenation)."""
    text = texts[key]
    return [text[i : i + KEY_LENGTH] for i in range(0, len(text), KEY_LENGTH)]


class Parts:
    """Parts read back: fetched level by level for many list trees at once, into `texts` (key -> text), which a
    caller may share between reads: a key always names the same text."""

    def __init__(self, fetch: Fetch, texts: dict[str, str] | None = None) -> None:
        self._fetch = fetch
        self.texts: dict[str, str] = {} if texts is None else texts

    def load(self, keys: set[str]) -> None:
        wanted = keys - self.texts.keys()
        if not wanted:
            return
        found = self._fetch(wanted)
        missing = wanted - found.keys()
        if missing:
            raise StoreError(
                f"{len(missing)} stored request part(s) are missing from request_parts "
                f"(e.g. {sorted(missing)[0]}); they were deleted outside segue"
            )
        self.texts.update(found)

    def elements(self, trees: list[tuple[str, int]], keys: Iterable[str] = ()) -> list[list[str]]:
        """The element keys of each list tree ((root key, height) each), loading the trees' nodes and elements and
        the parts `keys` with one fetch per level for all of them together."""
        # Per tree: the keys of the level reached, and how many node levels are still below them.
        levels = [[root] for root, _ in trees]
        below = [height for _, height in trees]
        self.load(set(keys) | {root for root, _ in trees})
        while any(below):
            for i, height in enumerate(below):
                if height:
                    levels[i] = [k for key in levels[i] for k in _node(self.texts, key)]
                    below[i] -= 1
            self.load({k for level in levels for k in level})
        return levels

    def value(self, key: str) -> Any:
        """A loaded part's JSON value."""
        return json.loads(self.texts[key])


def join_all(skeletons: list[tuple[str, str]], fetch: Fetch) -> list[dict[str, Any]]:
    """The bodies of `skeletons` ((text, where) each), fetching parts level by level for all of them at once."""
    read = [parse_skeleton(text, where) for text, where in skeletons]
    parsed = [fields for fields in read if isinstance(fields, list)]
    parts = Parts(fetch)
    trees = [(f[2], f[3]) for fields in parsed for f in fields if f[1] == "list"]
    elements = iter(parts.elements(trees, {f[2] for fields in parsed for f in fields if f[1] == "part"}))

    bodies: list[dict[str, Any]] = []
    for fields in read:
        if isinstance(fields, dict):  # a whole body (written before store schema 6)
            bodies.append(fields)
            continue
        body: dict[str, Any] = {}
        for field in fields:
            kind = field[1]
            if kind == "list":
                body[field[0]] = [parts.value(k) for k in next(elements)]
            elif kind == "part":
                body[field[0]] = parts.value(field[2])
            else:
                body[field[0]] = field[2]
        bodies.append(body)
    return bodies


class Bodies:
    """The request bodies of one RunStore: what a write stores (`prepare`, then `insert` inside the write's
    transaction, then `written` after it committed) and what a read joins back (`read`, inside a read)."""

    def __init__(self, parts: Any) -> None:
        self._parts = parts  # the bound RequestPart model
        self.splitter = Splitter()

    @functools.cached_property
    def _statements(self) -> Statements:
        return Statements(self._parts._meta.database)

    def prepare(self, body: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        return self.splitter.split(body)

    def insert(self, parts: Mapping[str, str]) -> None:
        """Inside a write: the parts no row holds yet (one already there is left as it is: same key, same text)."""
        self._statements.insert(self._parts, ({"key": k, "body": v} for k, v in parts.items()), ignore_existing=True)

    def written(self, parts: Iterable[str]) -> None:
        self.splitter.written(parts)

    def read(self, skeletons: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """Inside a read: the exact bodies of `skeletons` ((skeleton text, where it is stored) each)."""
        return join_all(skeletons, self.fetch)

    def parts(self, texts: dict[str, str] | None = None) -> Parts:
        """A reader of parts for one read (inside it), remembering what it fetched in `texts` when given."""
        return Parts(self.fetch, texts)

    def fetch(self, keys: set[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        wanted = sorted(keys)
        model = self._parts
        for start in range(0, len(wanted), _BATCH):
            query = model.select(model.key, model.body).where(model.key.in_(wanted[start : start + _BATCH]))
            found.update(query.tuples())
        return found


#: Rows per statement: SQLite allows 32,766 parameters (999 before 3.32); two per part row.
_BATCH = 400
