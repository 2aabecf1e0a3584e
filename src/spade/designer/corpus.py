"""Grounding corpus of the environment designer (spec section 7).

A corpus is a JSONL file, one document per line: ``{"text": ...}`` plus optional ``"id"``,
``"source"`` and ``"provenance"``. Each design attempt draws a fresh document (``CorpusSampler``),
truncated to a word budget (games 6000 words, tool use 4000).

The paper's corpora (web math/science text for games, pretraining code for tool use) were not
released. ``build_offline_corpus`` builds a stand-in from human-written text already on this machine:
docstrings of Python standard-library modules (tool use) and of sympy and scipy (games: math and
science). Choice (ours): the games corpus keeps the paper's 2:1 math:science mix by drawing two thirds
of the documents from sympy and one third from scipy (either side tops up when the other runs short).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import platform
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from spade.configtools import ConfigError, option
from spade.io import atomic_write_text

__all__ = [
    "CORPUS_KINDS",
    "CorpusConfig",
    "CorpusError",
    "CorpusSampler",
    "Document",
    "GAMES_PACKAGES",
    "MIN_DOC_WORDS",
    "STDLIB_MODULES",
    "build_offline_corpus",
    "load_corpus",
    "truncate_words",
]

CORPUS_KINDS = ("games", "tool_use")
MIN_DOC_WORDS = 50  # docstrings shorter than this are too thin to ground an environment

STDLIB_MODULES = (
    "argparse", "array", "ast", "asyncio", "base64", "bisect", "bz2", "calendar", "codecs", "collections",
    "concurrent.futures", "configparser", "contextlib", "contextvars", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email.headerregistry", "email.message", "email.parser",
    "email.utils", "enum", "filecmp", "fnmatch", "fractions", "ftplib", "functools", "getopt", "gettext",
    "glob", "graphlib", "gzip", "hashlib", "heapq", "hmac", "html.parser", "http.client",
    "http.cookiejar", "http.cookies", "http.server", "imaplib", "inspect", "io", "ipaddress",
    "itertools", "json", "locale", "logging", "logging.handlers", "lzma", "mailbox", "math",
    "mimetypes", "numbers", "operator", "optparse", "os", "os.path", "pathlib", "pickle", "plistlib",
    "poplib", "pprint", "queue", "random", "re", "reprlib", "sched", "secrets", "selectors", "shelve",
    "shlex", "shutil", "smtplib", "socket", "socketserver", "sqlite3", "ssl", "stat", "statistics",
    "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "time", "timeit",
    "tokenize", "tomllib", "traceback", "types", "typing", "unittest", "urllib.parse",
    "urllib.request", "urllib.robotparser", "uuid", "warnings", "wave", "weakref", "xml.dom.minidom",
    "xml.etree.ElementTree", "zipfile", "zlib", "zoneinfo",
)
# games: (package, the modules whose public names are read, share of the documents)
GAMES_PACKAGES = (
    ("sympy", ("sympy", "sympy.combinatorics", "sympy.crypto", "sympy.discrete", "sympy.geometry",
               "sympy.holonomic", "sympy.logic", "sympy.ntheory", "sympy.stats", "sympy.physics.continuum_mechanics",
               "sympy.physics.hydrogen", "sympy.physics.mechanics", "sympy.physics.optics",
               "sympy.physics.quantum", "sympy.physics.vector", "sympy.physics.wigner"), 2),
    ("scipy", ("scipy.cluster.hierarchy", "scipy.constants", "scipy.fft", "scipy.integrate",
               "scipy.interpolate", "scipy.linalg", "scipy.ndimage", "scipy.optimize", "scipy.signal",
               "scipy.sparse.csgraph", "scipy.spatial", "scipy.special", "scipy.stats"), 1),
)

_WORD = re.compile(r"\S+")


class CorpusError(ValueError):
    """A corpus file or corpus build is unusable; the message names the file and line."""


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    source: str  # where the text comes from, e.g. "python-stdlib:json.dumps" or a file name
    provenance: dict = field(default_factory=dict)  # package, version, object (offline) or file, line

    def to_record(self) -> dict:
        return {"id": self.doc_id, "text": self.text, "source": self.source, "provenance": dict(self.provenance)}


@dataclass(frozen=True)
class CorpusConfig:
    enabled: bool = option(True, "Ground design prompts on a corpus document; false = the 'w/o corpus grounding' ablation.")
    path: str = option("", "JSONL corpus ({'text': ...} per line). Empty: the offline corpus the pipeline builds.")
    games_max_words: int = option(6000, "Documents are cut to this many words in game design prompts.", min=1)
    tool_use_max_words: int = option(4000, "Documents are cut to this many words in tool-use design prompts.", min=1)
    seed_offset: int = option(0, "Added to the run seed to seed document sampling.")
    offline_max_docs: int = option(15000, "Most documents in the offline corpus (the paper used 15k).", min=1)

    def max_words_for(self, kind: str) -> int:
        """Word budget of a ``"game"``/``"games"`` or ``"tool_use"`` design prompt."""
        if kind == "tool_use":
            return self.tool_use_max_words
        if kind in ("game", "games", "puzzle", "interactive"):
            return self.games_max_words
        raise ConfigError(f"unknown corpus kind {kind!r}; expected 'games' or 'tool_use'")


# ---------------------------------------------------------------------------------------------------
# reading and sampling
# ---------------------------------------------------------------------------------------------------
def load_corpus(path: str | Path) -> list[Document]:
    """Read a JSONL corpus. Blank lines are skipped; every other line must be a JSON object with a
    non-empty string ``"text"``; ``"id"`` (default ``<file stem>:<line>``), ``"source"`` (default the
    file name) and ``"provenance"`` (a dict; default file and line) are optional. Ids must be unique.
    Raises ``CorpusError`` naming the file and line of the first bad line."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file {str(path)!r} does not exist")
    documents, seen = [], {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"corpus file {str(path)!r}, line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise CorpusError(f"{where}: expected a JSON object with a 'text' field, got {type(record).__name__}")
            text = record.get("text")
            if not isinstance(text, str) or not text.strip():
                raise CorpusError(f"{where}: 'text' must be a non-empty string")
            doc_id = record.get("id", f"{path.stem}:{number}")
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                raise CorpusError(f"{where}: 'id' must be a string or an integer, got {doc_id!r}")
            doc_id = str(doc_id)
            if doc_id in seen:
                raise CorpusError(f"{where}: id {doc_id!r} already used on line {seen[doc_id]}")
            seen[doc_id] = number
            source = record.get("source", path.name)
            if not isinstance(source, str):
                raise CorpusError(f"{where}: 'source' must be a string, got {source!r}")
            provenance = record.get("provenance", {"file": str(path), "line": number})
            if not isinstance(provenance, dict):
                raise CorpusError(f"{where}: 'provenance' must be a JSON object, got {provenance!r}")
            documents.append(Document(doc_id, text, source, provenance))
    if not documents:
        raise CorpusError(f"corpus file {str(path)!r} holds no documents")
    return documents


def truncate_words(text: str, max_words: int | None) -> str:
    """``text`` cut after its ``max_words``-th whitespace-separated word, keeping the original spacing
    and line breaks before the cut. ``None`` keeps the whole text."""
    if max_words is None:
        return text
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive integer or None, got {max_words!r}")
    for count, match in enumerate(_WORD.finditer(text), start=1):
        if count == max_words:
            return text[: match.end()]
    return text


class CorpusSampler:
    """Draws one document per design attempt, deterministically from ``seed``.

    ``sample(*key)`` with a key of ints/strings (for example ``(step, slot, attempt)``) gives the
    same document for the same seed and key whatever was drawn before, and a fresh draw for each new
    attempt; ``sample(rng)`` with a ``random.Random`` draws from that generator; ``sample()`` draws
    the next document of the sampler's own seeded stream. Returned documents are cut to
    ``max_words`` when it is set.
    """

    def __init__(self, documents, seed: int, max_words: int | None = None):
        self.documents = list(documents)
        if not self.documents:
            raise CorpusError("CorpusSampler needs at least one document")
        self.seed = int(seed)
        self.max_words = max_words
        self._stream = random.Random(f"corpus-stream:{self.seed}")

    def __len__(self) -> int:
        return len(self.documents)

    def index(self, *key) -> int:
        """The document index ``sample`` would use for ``key`` (see the class docstring)."""
        if len(key) == 1 and isinstance(key[0], random.Random):
            return key[0].randrange(len(self.documents))
        if not key:
            return self._stream.randrange(len(self.documents))
        for part in key:
            if not isinstance(part, (int, str)) or isinstance(part, bool):
                raise TypeError(f"sample keys must be ints or strings (or one random.Random), got {part!r}")
        label = "corpus:" + str(self.seed) + ":" + ":".join(f"{type(p).__name__}={p}" for p in key)
        return random.Random(label).randrange(len(self.documents))

    def sample(self, *key) -> Document:
        document = self.documents[self.index(*key)]
        if self.max_words is not None:
            text = truncate_words(document.text, self.max_words)
            if text != document.text:
                document = replace(document, text=text)
        return document


# ---------------------------------------------------------------------------------------------------
# the offline corpus
# ---------------------------------------------------------------------------------------------------
def _docstring(obj) -> str | None:
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else None
    return inspect.cleandoc(doc) if doc else None


def _public(names) -> list[str]:
    return sorted(n for n in names if isinstance(n, str) and not n.startswith("_"))


def _defined_in(obj, module_name: str) -> bool:
    """True when ``obj`` comes from ``module_name``, one of its submodules or its C accelerator
    (``_json`` for ``json``), not from an unrelated module it merely imports. Objects that do not
    say where they come from (e.g. numpy ufuncs in scipy.special) count as defined where found."""
    origin = getattr(obj, "__module__", None)
    if origin is None:
        return True
    if not isinstance(origin, str):
        return False
    return any(origin == root or origin.startswith(root + ".") for root in (module_name, "_" + module_name))


def _module_candidates(module_name: str, methods: bool):
    """(object path, docstring) for a module, its public classes and routines defined in it and, with
    ``methods``, the public methods and properties of those classes, in a fixed order."""
    module = importlib.import_module(module_name)
    yield module_name, _docstring(module)
    names = getattr(module, "__all__", None) or dir(module)
    for name in _public(names):
        obj = getattr(module, name, None)
        if not (inspect.isclass(obj) or inspect.isroutine(obj) or callable(obj)) or inspect.ismodule(obj):
            continue  # constants and numbers only carry their type's docstring
        if not _defined_in(obj, module_name if methods else module_name.split(".")[0]):
            continue
        yield f"{module_name}.{name}", _docstring(obj)
        if methods and inspect.isclass(obj):
            for attr in _public(vars(obj)):
                member = vars(obj)[attr]
                if inspect.isroutine(member) or isinstance(member, property):
                    yield f"{module_name}.{name}.{attr}", _docstring(member)


def _stdlib_candidates():
    for module_name in STDLIB_MODULES:
        try:
            yield from _module_candidates(module_name, methods=True)
        except ImportError:  # optional parts of a Python build (e.g. sqlite3) may be missing
            continue


def _package_candidates(modules):
    for module_name in modules:
        yield from _module_candidates(module_name, methods=False)


def _collect(candidates, package: str, version: str, seen_texts: set) -> list[dict]:
    records = []
    for path, doc in candidates:
        if not doc or len(doc.split()) < MIN_DOC_WORDS:
            continue
        digest = hashlib.sha256(" ".join(doc.split()).encode("utf-8")).hexdigest()
        if digest in seen_texts:
            continue
        seen_texts.add(digest)
        source = f"{package}:{path}"
        records.append({
            "id": hashlib.sha1(source.encode("utf-8")).hexdigest()[:12],
            "text": f"{path}\n\n{doc}",
            "source": source,
            "provenance": {"package": package, "version": version, "object": path},
        })
    return records


def build_offline_corpus(kind: str, out_path: str | Path, max_docs: int, seed: int) -> int:
    """Write a JSONL corpus of at most ``max_docs`` docstrings (each at least MIN_DOC_WORDS words,
    deduplicated on whitespace-normalised text) to ``out_path`` atomically; return the number written.

    ``"tool_use"``: Python standard-library docstrings (STDLIB_MODULES). ``"games"``: sympy and scipy
    docstrings (GAMES_PACKAGES; two thirds sympy). Candidates are enumerated in a fixed order and the
    kept subset and its order are drawn from ``random.Random(seed)``, so equal arguments (and equal
    package versions) give an identical file. Ids are ``<kind>-`` plus a hash of the source."""
    if kind not in CORPUS_KINDS:
        raise CorpusError(f"unknown corpus kind {kind!r}; expected one of {CORPUS_KINDS}")
    if isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1:
        raise CorpusError(f"max_docs must be a positive integer, got {max_docs!r}")
    rng = random.Random(f"offline-corpus:{kind}:{seed}")
    seen: set = set()
    if kind == "tool_use":
        pools = [(_collect(_stdlib_candidates(), "python-stdlib", platform.python_version(), seen), 1)]
    else:
        pools = []
        for package, modules, share in GAMES_PACKAGES:
            try:
                version = importlib.import_module(package).__version__
            except ImportError as exc:
                raise CorpusError(f"the games corpus needs the package {package!r}, which is not installed: {exc}") from None
            pools.append((_collect(_package_candidates(modules), package, version, seen), share))
    for records, _ in pools:
        rng.shuffle(records)
    total_share = sum(share for _, share in pools)
    quotas = [min(len(records), max_docs * share // total_share) for records, share in pools]
    spare = max_docs - sum(quotas)
    for i, (records, _) in enumerate(pools):  # top up from whichever pool has documents left
        extra = min(spare, len(records) - quotas[i])
        quotas[i] += extra
        spare -= extra
    chosen = [rec for (records, _), quota in zip(pools, quotas) for rec in records[:quota]]
    rng.shuffle(chosen)
    for record in chosen:
        record["id"] = f"{kind}-{record['id']}"
    if not chosen:
        raise CorpusError(f"the offline {kind} corpus came out empty")
    text = "".join(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n" for record in chosen)
    atomic_write_text(out_path, text)
    return len(chosen)
