"""Build the retrieval-quality corpus from documentation installed by Debian packages.

Real pages nobody on this team wrote, each with a known-item query taken from its own title
(never written to fit the answer), so anyone can rebuild the same corpus:

- English: ``postgresql-doc-15`` (PostgreSQL 15 manual, DocBook HTML) and ``python-django-doc``
  (Django 3.2 documentation, Sphinx HTML);
- Simplified Chinese: ``gimp-help-zh-cn`` (GIMP manual) and ``libreoffice-help-zh-cn``
  (LibreOffice help), keeping only pages whose title and body are Chinese (both packages leave
  some pages untranslated).

    apt-get install -y postgresql-doc-15 python-django-doc gimp-help-zh-cn libreoffice-help-zh-cn
    .venv/bin/python bench/eval_corpus.py --pages 300 --out corpus.jsonl

A second corpus, ``--source debian``, for a figure that does not rest on those four: Debian's own
books, English from The Debian Administrator's Handbook (``debian-handbook``) and Chinese from the
Debian Reference (``debian-reference-zh-cn``): two different books, so no query's translation is
in the corpus to be found instead of its page. Their HTML pages hold several DocBook sections
each; a page here is one section, its own text (each subsection is a page of its own), searched
by its heading ("12.1.2.2. Setting up LVM" -> "Setting up LVM").

    apt-get install -y debian-handbook debian-reference-zh-cn
    .venv/bin/python bench/eval_corpus.py --source debian --pages 300 --out corpus.jsonl

A page: its body text (navigation, scripts and styles removed; at most ``--max-chars``
characters, so a run fits a small machine), its query: the page title without section numbers
and site suffix ("F.2. amcheck" -> "amcheck", "Django's cache framework — Django 3.2.25
documentation" -> "Django's cache framework"). Pages whose query is shared with another page
(an ambiguous known item), too short, or whose body is nearly empty are left out. The sample is
deterministic (sorted paths, seeded choice).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

SOURCES = {
    "en": [
        ("postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html")),
        ("python-django-doc", Path("/usr/share/doc/python-django-doc/html")),
    ],
    "zh": [
        ("gimp-help-zh-cn", Path("/usr/share/gimp/2.0/help/zh_CN")),
        ("libreoffice-help-zh-cn", Path("/usr/share/libreoffice/help/zh-CN/text")),
    ],
}
# Another corpus: (package, folder, the files' pattern) a language, a DocBook section a page.
DEBIAN_SOURCES = {
    "en": [("debian-handbook", Path("/usr/share/doc/debian-handbook/html/en-US"), "*.html")],
    "zh": [("debian-reference-zh-cn", Path("/usr/share/debian-reference"), "*.zh-cn.html")],
}
CORPORA = ("manuals", "debian")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_NUMBERING = re.compile(r"^\s*(?:[A-Z]\.|\d+\.)?(?:\d+\.)*\d*\.?\s+")
_SUFFIXES = re.compile(r"\s+[—|-]\s+(?:Django \S+ documentation|PostgreSQL.*|GIMP.*)$")
# Chrome of the two HTML generators (DocBook, Sphinx) and LibreOffice's help viewer.
_CHROME = (
    "script, style, nav, header, footer, .navheader, .navfooter, .related, .sphinxsidebar, "
    "#hd, #ft, .breadcrumbs, #DisplayArea > .lang, #TopLeftHeader, .leftside, #SearchFrame"
)
# And in Debian's books, the Handbook's banner and title bar (Publican) and tables of contents.
_BOOK_CHROME = f"{_CHROME}, #banner, #title, .docnav, .toc"


def query_of(title: str) -> str:
    title = " ".join(title.replace("\xa0", " ").split())
    title = _SUFFIXES.sub("", title)
    return _NUMBERING.sub("", title).strip()


def page_of(path: Path) -> tuple[str, str] | None:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(path.read_text(encoding="utf-8", errors="replace"))
    title_node = tree.css_first("title")
    if title_node is None or tree.body is None:
        return None
    for node in tree.css(_CHROME):
        node.decompose()
    text = " ".join(tree.body.text(separator=" ").split())
    return query_of(title_node.text()), text


def sections_of(path: Path) -> Iterator[tuple[str, str]]:
    """Each DocBook section of an HTML page: its heading as the query, its own text (without its
    subsections, which come as sections of their own), innermost first."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(path.read_text(encoding="utf-8", errors="replace"))
    if tree.body is None:
        return
    for node in tree.css(_BOOK_CHROME):
        node.decompose()
    # In reverse document order a section comes after its subsections, which are taken out of it
    # once read.
    for section in reversed(tree.css("div.section, section.section")):
        heading = section.css_first("h1, h2, h3, h4, h5, h6")
        if heading is not None:
            yield query_of(heading.text()), " ".join(section.text(separator=" ").split())
        section.decompose()


def cjk_share(text: str) -> float:
    letters = [c for c in text if c.isalnum()]
    return sum(1 for c in letters if _CJK.match(c)) / len(letters) if letters else 0.0


def _found(lang: str, source: str) -> Iterator[tuple[str, str, str, str]]:
    """(package, page id, query, text) of every page of ``source``'s packages in ``lang``."""
    sources = SOURCES[lang] if source == "manuals" else DEBIAN_SOURCES[lang]
    for package, root, *pattern in sources:
        if not root.is_dir():
            print(f"  ({package} is not installed: {root} missing)", file=sys.stderr)
            continue
        for path in sorted(root.rglob(pattern[0] if pattern else "*.html")):
            if {"_modules", "_sources"} & set(path.parts) or path.stem in (
                "genindex",
                "search",
                "py-modindex",
            ):
                continue  # Sphinx's highlighted source code and index pages: not documentation
            page = f"{package}:{path.relative_to(root)}"
            if source == "debian":
                for n, (query, text) in enumerate(sections_of(path)):
                    yield package, f"{page}#{n}", query, text
            elif (found := page_of(path)) is not None:
                yield package, page, *found


def candidates(lang: str, max_chars: int, source: str = "manuals") -> Iterator[dict[str, str]]:
    for package, page, query, text in _found(lang, source):
        if len(text) < 200 or len(query) < (2 if lang == "zh" else 4):
            continue
        if lang == "zh" and (len(_CJK.findall(query)) < 2 or cjk_share(text[:max_chars]) < 0.3):
            continue  # an untranslated page
        yield {"id": page, "lang": lang, "source": package, "query": query, "text": text[:max_chars]}


def build(pages: int, max_chars: int = 3000, seed: int = 7, source: str = "manuals") -> list[dict[str, str]]:
    """``pages`` pages per language (fewer if the packages hold fewer), English first, from
    ``source``: ``manuals`` (the four packages) or ``debian`` (Debian's two books)."""
    corpus: list[dict[str, str]] = []
    for lang in SOURCES:
        found = list(candidates(lang, max_chars, source))
        counts = Counter(p["query"].lower() for p in found)
        unique = [p for p in found if counts[p["query"].lower()] == 1]
        chosen = random.Random(seed).sample(unique, min(pages, len(unique)))
        corpus.extend(sorted(chosen, key=lambda p: p["id"]))
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages per language")
    parser.add_argument("--max-chars", type=int, default=3000, help="characters kept per page")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--source", choices=CORPORA, default="manuals", help="which documentation")
    parser.add_argument("--out", required=True, help="JSON lines, one page a line")
    args = parser.parse_args()
    corpus = build(args.pages, args.max_chars, args.seed, args.source)
    with open(args.out, "w", encoding="utf-8") as out:
        for page in corpus:
            out.write(json.dumps(page, ensure_ascii=False) + "\n")
    by = Counter((p["lang"], p["source"]) for p in corpus)
    print(", ".join(f"{lang}/{source}: {n}" for (lang, source), n in sorted(by.items())))


if __name__ == "__main__":
    main()
