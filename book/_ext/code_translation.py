"""The chapters' code cells in the edition's language: comments, docstrings and printed labels.

The chapters run once, in English (one execution cache for every edition). In the other editions this
module translates, at read time, what a code cell says to the reader and nothing that it computes:

- **comments**: a trailing comment, or a run of whole-line comments at the same indentation (one
  message, rewrapped to the run's width; a translation may set its own line breaks with "\\n");
- **docstrings** of the functions and classes a cell defines;
- **printed labels**: a string or f-string passed straight to ``print()``. In the cell the literal is
  replaced by its translation (an f-string keeps every ``{field}`` exactly as written); in the cell's
  printed output the English text is replaced by the translation, the fields' values, as executed,
  carried over unchanged. A label that the output does not show as expected stays English there.

Identifiers, string keys and any string that the code compares or indexes with are never messages.
Comments without an English word (``# (B, T, S)``) and lines a tool reads (``# noqa``) are not
messages either.

The translations are in one gettext catalog, ``book/locale/<language>/LC_MESSAGES/code.po``, with a
context per kind ("comment", "docstring", "print"); ``scripts/update_catalogs.py`` (``make catalogs``)
extracts the messages from the chapters (a changed comment keeps its old translation, marked fuzzy),
``tests/test_translations.py`` holds the catalog complete and current. A message without a usable
translation (missing, fuzzy, or an f-string whose fields differ) stays English, and the build counts
and names it at the end.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_HAN = re.compile(f"[{HAN}]")
_ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
# Comments that a tool reads, not a reader.
_PRAGMA = re.compile(r"^\s*(?:noqa|type:|fmt:|pragma|pylint:|isort:|ruff:)")
CATALOG_NAME = "code.po"
FULL_WIDTH_STOPS = "，。：；！？）”"
CONTEXTS = ("comment", "docstring", "print")


@dataclass
class Message:
    """One translatable text of a code cell."""

    context: str  # "comment", "docstring" or "print"
    text: str  # the msgid
    start: int  # character offsets in the cell's source of what a translation replaces
    end: int
    # comments: the column of the first "#" and the run's widest line (for rewrapping)
    column: int = 0
    width: int = 0
    lines: int = 1
    # print labels: the literal's prefix ("f", ""), quote, and whether it is an f-string
    prefix: str = ""
    quote: str = '"'
    # line breaks ("\\n" as written) before and after a label's text: kept as they are, not translated
    lead: str = ""
    trail: str = ""
    # whether the label is print()'s first argument (else the output before it is on its line too)
    first: bool = True

    def whole(self, text: str) -> str:
        """``text`` (the message or its translation) with the label's line breaks around it."""
        return self.lead + text + self.trail


def needs_translation(text: str) -> bool:
    """Whether a comment, docstring or label has English words in it (a Chinese word of the toy corpus
    in an English comment does not make it Chinese)."""
    if "{" in text:  # an f-string: its fields are code, not words
        text = "".join(part for kind, part in split_template(text) if kind == "text") if _balanced(text) else text
    return bool(_ENGLISH_WORD.search(text))


def display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (1-based line numbers: index 0 unused)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _is_docstring_token(tree: ast.AST) -> set[int]:
    """Line numbers on which a function's or class's docstring starts."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.add(first.value.lineno)
    return lines


def _print_arguments(tree: ast.AST) -> list[ast.expr]:
    """(argument, whether it is the first) of the string and f-string arguments of every ``print(...)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            for index, arg in enumerate(node.args):
                if isinstance(arg, ast.JoinedStr) or (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    found.append((arg, index == 0))
    return found


_PIECE = re.compile(r"""([A-Za-z]*)('''|\"\"\"|'|")""")


def _string_pieces(tokens: list[tokenize.TokenInfo], start: tuple[int, int], end: tuple[int, int]):
    """The STRING tokens from ``start`` to ``end`` (an implicit concatenation): [(prefix, quote, raw content)]."""
    pieces = []
    for token in tokens:
        if token.type == tokenize.STRING and token.start >= start and token.end <= end:
            match = _PIECE.match(token.string)
            prefix, quote = match[1], match[2]
            pieces.append((prefix, quote, token.string[len(prefix) + len(quote):-len(quote)], token))
    return pieces


def extract(source: str) -> list[Message]:
    """The messages of one code cell, in source order. A cell that is not Python has none."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return []
    lines = source.splitlines(keepends=True)
    offset = _offsets(source)
    messages: list[Message] = []

    # Comments: trailing ones alone, whole-line ones in runs (same column, consecutive lines).
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    run: list[tokenize.TokenInfo] = []

    def close_run():
        if not run:
            return
        text = " ".join(_comment_text(t.string) for t in run)
        if needs_translation(text) and not _PRAGMA.match(text):
            first, last = run[0], run[-1]
            messages.append(Message(
                "comment", text, offset[first.start[0]] + first.start[1], offset[last.end[0]] + last.end[1],
                column=first.start[1], width=max(display_width(t.string) for t in run), lines=len(run)))
        run.clear()

    for token in comments:
        whole_line = not lines[token.start[0] - 1][:token.start[1]].strip()
        text = _comment_text(token.string)
        if whole_line and text and run and token.start[0] == run[-1].start[0] + 1 and token.start[1] == run[0].start[1]:
            run.append(token)
            continue
        close_run()
        if whole_line and text:
            run.append(token)
        elif text and needs_translation(text) and not _PRAGMA.match(text):
            messages.append(Message("comment", text, offset[token.start[0]] + token.start[1],
                                    offset[token.end[0]] + token.end[1], column=token.start[1],
                                    width=display_width(token.string)))
    close_run()

    # Docstrings: the text between the quotes.
    docstring_lines = _is_docstring_token(tree)
    for token in tokens:
        if token.type == tokenize.STRING and token.start[0] in docstring_lines:
            match = _PIECE.match(token.string)
            prefix, quote = match[1], match[2]
            if "b" in prefix.lower() or "f" in prefix.lower():
                continue
            content = token.string[len(prefix) + len(quote):-len(quote)]
            if needs_translation(content) and "\n" not in content:
                begin = offset[token.start[0]] + token.start[1] + len(prefix) + len(quote)
                messages.append(Message("docstring", content, begin, begin + len(content), quote=quote))

    # Printed labels: the raw text of the literal (an implicit concatenation joined).
    for arg, first_argument in _print_arguments(tree):
        pieces = _string_pieces(tokens, _token_position(lines, arg.lineno, arg.col_offset),
                                _token_position(lines, arg.end_lineno, arg.end_col_offset))
        if not pieces or any(set(p.lower()) & {"r", "b"} for p, _, _, _ in pieces):
            continue
        is_f = isinstance(arg, ast.JoinedStr)
        quote = pieces[0][1]
        if len(quote) != 1 or any(q != quote for _, q, _, _ in pieces):
            continue
        text = "".join(content if ("f" in p.lower() or not is_f) else content.replace("{", "{{").replace("}", "}}")
                       for p, _, content, _ in pieces)
        if not needs_translation(text) or (is_f and not _balanced(text)):
            continue
        first, last = pieces[0][3], pieces[-1][3]
        lead, text, trail = re.fullmatch(r"((?:\\n)*)(.*?)((?:\\n)*)", text, re.S).groups()
        messages.append(Message("print", text, offset[first.start[0]] + first.start[1], offset[last.end[0]] + last.end[1],
                                prefix="f" if is_f else "", quote=quote, lead=lead, trail=trail,
                                first=first_argument))
    messages.sort(key=lambda m: m.start)
    return messages


def _comment_text(comment: str) -> str:
    return comment.lstrip("#").strip()


def _token_position(lines: list[str], lineno: int, byte_col: int) -> tuple[int, int]:
    """ast's (line, UTF-8 byte column) as tokenize's (line, character column)."""
    return lineno, len(lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


# ---- f-string templates ---------------------------------------------------------------------------

def _balanced(template: str) -> bool:
    try:
        split_template(template)
    except ValueError:
        return False
    return True


def split_template(template: str) -> list[tuple[str, str]]:
    """An f-string's raw text as [("text", raw literal text) | ("field", "{expression!r:spec}")]."""
    parts, i, literal = [], 0, []
    while i < len(template):
        c = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            literal.append(template[i:i + 2])
            i += 2
        elif c == "{":
            depth, j, quote = 0, i, None
            while j < len(template):
                ch = template[j]
                if quote:
                    if ch == quote:
                        quote = None
                elif ch in "'\"":
                    quote = ch
                elif ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if depth != 0:
                raise ValueError(f"unbalanced braces in {template!r}")
            if literal:
                parts.append(("text", "".join(literal)))
                literal = []
            parts.append(("field", template[i:j + 1]))
            i = j + 1
        elif c == "}":
            raise ValueError(f"a single '}}' in {template!r}")
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append(("text", "".join(literal)))
    return parts


def fields(template: str) -> list[str]:
    return [part for kind, part in split_template(template) if kind == "field"]


def _literal_value(raw: str, braces: bool) -> str:
    """What a piece of a string literal's raw text prints (escapes applied; "{{" -> "{" in an f-string)."""
    if braces:
        raw = raw.replace("{{", "{").replace("}}", "}")
    if "\\" not in raw:
        return raw
    return ast.literal_eval('"""' + raw + ' """')[:-1]


def label_pattern(message: Message) -> re.Pattern:
    """A regular expression for what ``message`` (a printed label) shows in the output: its text, each
    field's value captured, within one line (a field at the start reaches back to the start of the line,
    one at the end to its end)."""
    if not message.prefix:
        # a print() argument of its own: at the start of a line or after print's separator, and before
        # the next separator or the end of a line
        return re.compile(r"(?:^|(?<=[ \n" + FULL_WIDTH_STOPS + r"]))" + re.escape(_literal_value(message.whole(message.text), braces=False))
                          + r"(?P<sep> |(?=\n)|$)", re.M)
    parts = split_template(message.whole(message.text))
    pattern = []
    for index, (kind, part) in enumerate(parts):
        if kind == "text":
            pattern.append(re.escape(_literal_value(part, braces=True)))
        else:
            last = index == len(parts) - 1
            if index == 0:
                pattern.append(f"^(?P<f{index}>[^\\n]*?)" if not last else f"^(?P<f{index}>[^\\n]*)")
            else:
                pattern.append(f"(?P<f{index}>[^\\n]*)" if last else f"(?P<f{index}>[^\\n]*?)")
    if parts and parts[-1][0] == "text":
        pattern.append("(?P<sep> ?)")
    return re.compile("".join(pattern), re.M)


def render_label(message: Message, translation: str, match: re.Match) -> str:
    """The translated label with the values that ``match`` captured from the English output."""
    if not message.prefix:
        shown = _literal_value(message.whole(translation), braces=False)
        # print's separator after a label that ends in full-width punctuation ("查询：") is not needed
        return shown + ("" if shown.endswith(tuple(FULL_WIDTH_STOPS)) else match["sep"])
    values = {}
    for index, (kind, part) in enumerate(split_template(message.whole(message.text))):
        if kind == "field":
            values.setdefault(part, match[f"f{index}"])
    shown = []
    for kind, part in split_template(message.whole(translation)):
        shown.append(_literal_value(part, braces=True) if kind == "text" else values[part])
    shown = "".join(shown)
    separator = match.groupdict().get("sep") or ""
    return shown + ("" if shown.endswith(tuple(FULL_WIDTH_STOPS)) else separator)


# ---- Translating a cell -----------------------------------------------------------------------------

Catalog = dict  # {(context, msgid): msgstr}, only usable translations


def usable(message: Message, translation: str | None) -> bool:
    """Whether ``translation`` can replace ``message`` without changing what the code does."""
    if not translation or not translation.strip():
        return False
    if message.context == "print":
        if message.quote in translation or translation.endswith("\\") or "\n" in translation:
            return False
        if message.prefix:
            try:
                same = sorted(fields(translation)) == sorted(fields(message.text))
                first = split_template(message.text)[0]
                # a field that starts a later argument shows what print wrote before it too: it stays first
                return same and (message.first or first[0] == "text" or split_template(translation)[0] == first)
            except ValueError:
                return False
        try:
            _literal_value(translation, braces=False)
        except (ValueError, SyntaxError):
            return False
        return True
    if message.context == "docstring":
        return message.quote not in translation and not translation.endswith("\\") and "\n" not in translation
    return True


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns (a Chinese character is two), broken between
    characters, never inside a Latin word, a number or `code`."""
    if "\n" in text:
        return [line.strip() for line in text.split("\n")]
    units = re.findall(r"`[^`]*`|[A-Za-z0-9_.,:;()\[\]{}=<>+\-*/'^|~%$]+|\s+|.", text)
    lines, line = [], ""
    for unit in units:
        if line and display_width(line + unit.rstrip()) > width:
            # break after the line's last full-width comma or stop, if that leaves it at least 3/5 full
            cut = max(line.rfind(mark) for mark in "，。；：")
            if cut >= 0 and display_width(line[:cut + 1]) >= 0.6 * width:
                lines.append(line[:cut + 1])
                line = line[cut + 1:].lstrip() + unit
            else:
                lines.append(line.rstrip())
                line = unit.lstrip()
        else:
            line += unit
    if line.strip():
        lines.append(line.rstrip())
    # Never start a line with closing punctuation.
    for i in range(1, len(lines)):
        while lines[i] and lines[i][0] in "，。：；！？）”、":
            lines[i - 1] += lines[i][0]
            lines[i] = lines[i][1:]
    return [line for line in lines if line]


@dataclass
class CellResult:
    code: str
    labels: list[tuple[Message, str]] = field(default_factory=list)  # (message, translation) applied to the code
    translated: list[Message] = field(default_factory=list)
    missing: list[Message] = field(default_factory=list)


def translate_code(source: str, catalog: Catalog) -> CellResult:
    """The cell's code with every message that has a usable translation replaced by it."""
    result = CellResult(source)
    edits = []
    for message in extract(source):
        translation = catalog.get((message.context, message.text))
        if not usable(message, translation):
            result.missing.append(message)
            continue
        result.translated.append(message)
        if message.context == "comment":
            indent = "\n" + " " * message.column
            if message.lines > 1 or "\n" in translation:
                text = indent.join("# " + line for line in wrap(translation, max(message.width - 2, 24)))
            else:
                text = "# " + translation
            edits.append((message.start, message.end, text))
        elif message.context == "docstring":
            edits.append((message.start, message.end, translation))
        else:
            result.labels.append((message, translation))
            edits.append((message.start, message.end,
                          f"{message.prefix}{message.quote}{message.whole(translation)}{message.quote}"))
    code = source
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text + code[end:]
    result.code = code
    return result


def translate_output(text: str, labels: list[tuple[Message, str]]) -> tuple[str, set[str]]:
    """The printed output ``text`` with the cell's labels translated; the labels found (their English)."""
    found = set()
    # the same label printed twice is one label
    labels = list({(message.context, message.prefix, message.whole(message.text)): (message, translation)
                   for message, translation in labels}.values())
    # f-strings first (their text is longest and most specific), then plain strings, longest first.
    order = sorted(range(len(labels)), key=lambda i: (not labels[i][0].prefix, -len(labels[i][0].text)))
    for i in order:
        message, translation = labels[i]
        try:
            pattern = label_pattern(message)
        except (ValueError, SyntaxError):
            continue

        def replace(match, message=message, translation=translation):
            return render_label(message, translation, match)

        text, count = pattern.subn(replace, text)
        if count:
            found.add(message.whole(message.text))
    return text, found


# ---- The catalog ------------------------------------------------------------------------------------

def catalog_path(srcdir: Path, language: str) -> Path:
    return Path(srcdir) / "book" / "locale" / language / "LC_MESSAGES" / CATALOG_NAME


def read_catalog(path: Path) -> Catalog:
    """{(context, msgid): msgstr} of the translated, not fuzzy, entries of ``path`` ({} if none)."""
    from babel.messages.pofile import read_po

    if not path.is_file():
        return {}
    with path.open("rb") as handle:
        po = read_po(handle)
    return {(m.context, m.id): m.string for m in po
            if m.id and isinstance(m.id, str) and m.string and not m.fuzzy}


def chapter_cells(page: Path) -> list[str]:
    """The sources of a MyST notebook page's code cells."""
    import jupytext

    text = page.read_text(encoding="utf-8")
    if "```{code-cell}" not in text:
        return []
    return [cell.source for cell in jupytext.reads(text, fmt="md:myst").cells if cell.cell_type == "code"]


def template(pages: list[tuple[str, Path]]):
    """A babel Catalog of every message of the pages' code cells ([(name, path)]), each located by page."""
    from babel.messages.catalog import Catalog as BabelCatalog

    catalog = BabelCatalog(project="attention-course", domain="code")
    explain = {"comment": "a comment in a code cell",
               "docstring": "a docstring in a code cell: one line, no {quote}",
               "print": "a printed label: keep every {field} as written; no {quote}, no line break"}
    for name, path in pages:
        for source in chapter_cells(path):
            for message in extract(source):
                note = explain[message.context].format(quote=message.quote * (3 if message.context == "docstring" else 1),
                                                       field="{field}")
                existing = catalog.get(message.text, context=message.context)
                if existing is not None:
                    if (name, None) not in existing.locations:
                        existing.locations.append((name, None))
                    continue
                catalog.add(message.text, context=message.context, locations=[(name, None)], auto_comments=[note])
    return catalog


# ---- Sphinx -------------------------------------------------------------------------------------------

def _cell_transform():
    from docutils import nodes
    from sphinx.transforms import SphinxTransform

    class CodeCellsInTheEditionsLanguage(SphinxTransform):
        """In a non-English edition: the code cells' comments, docstrings and printed labels translated."""

        default_priority = 346

        def apply(self, **kwargs) -> None:
            from sphinx.builders.gettext import MessageCatalogBuilder

            from attention_course.i18n import LANGUAGES, language_of

            config = self.config
            if not getattr(config, "course_editions", None) or language_of(config.language) == LANGUAGES[0]:
                return
            if isinstance(self.app.builder, MessageCatalogBuilder):
                return
            path = catalog_path(self.env.srcdir, config.language)
            if path.is_file():  # a translation changed: the page is read again
                self.env.note_dependency(str(path))
            catalog = read_catalog(path)
            missing, counts = [], {"messages": 0, "translated": 0, "labels": 0, "labels_shown": 0}
            # A function that an earlier cell defined prints its labels in a later cell's output too.
            page_labels, all_labels, shown = [], set(), set()
            for cell in self.document.findall(nodes.container):
                if cell.get("nb_element") != "cell_code":
                    continue
                sources = [n for c in cell.children if isinstance(c, nodes.container)
                           and c.get("nb_element") == "cell_code_source" for n in c.findall(nodes.literal_block)]
                result = translate_code(sources[0].astext(), catalog) if sources else CellResult("")
                counts["messages"] += len(result.translated) + len(result.missing)
                counts["translated"] += len(result.translated)
                missing += [m.text for m in result.missing]
                if result.translated:
                    sources[0].children = [nodes.Text(result.code)]
                    sources[0].rawsource = result.code
                page_labels = result.labels + page_labels
                all_labels |= {m.whole(m.text) for m in result.translated + result.missing if m.context == "print"}
                for output in cell.findall(nodes.literal_block):
                    if "output" not in output.get("classes", []) or "stream" not in output.get("classes", []):
                        continue
                    text, found = translate_output(output.astext(), page_labels)
                    shown |= found
                    if found:
                        output.children = [nodes.Text(text)]
                        output.rawsource = text
            counts["labels"], counts["labels_shown"] = len(all_labels), len(shown)
            tallies = getattr(self.env, "code_translation", {})
            tallies[self.env.docname] = {**counts, "missing": missing}
            self.env.code_translation = tallies

    return CodeCellsInTheEditionsLanguage


def report(app, exception) -> None:
    from sphinx.util import logging

    from attention_course.i18n import LANGUAGES, language_of

    if exception is not None or language_of(app.config.language) == LANGUAGES[0]:
        return
    logger = logging.getLogger(__name__)
    tallies = getattr(app.env, "code_translation", {})
    translated = sum(t["translated"] for t in tallies.values())
    total = sum(t["messages"] for t in tallies.values())
    labels = sum(t["labels"] for t in tallies.values())
    shown = sum(t["labels_shown"] for t in tallies.values())
    logger.info(f"code_translation: {translated} of {total} messages of the code cells translated; "
                f"{shown} of {labels} printed labels translated in the output")
    missing = {doc: t["missing"] for doc, t in sorted(tallies.items()) if t["missing"]}
    if missing:
        listed = "; ".join(f"{doc} ({len(m)}: {m[0][:50]!r}…)" for doc, m in missing.items())
        logger.info(f"code_translation: code-cell messages without a translation in the {app.config.language} "
                    f"edition, shown in English: {listed} (run `make catalogs` and translate them in "
                    f"book/locale/{app.config.language}/LC_MESSAGES/{CATALOG_NAME})")


def _configure(app, config) -> None:
    # A change to this module re-reads every page (what it translates is decided at read time).
    from reader_ux import files_hash

    config.code_translation_code = files_hash(Path(__file__))


def setup(app) -> dict:
    app.add_config_value("code_translation_code", "", "env", [str])
    app.connect("config-inited", _configure)
    app.add_transform(_cell_transform())
    app.connect("build-finished", report)
    return {"version": "1", "env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}


def code_shape(source: str) -> str:
    """What ``source`` computes, for comparing a cell with its translation: its syntax tree without
    comments, layout or docstrings, each string or f-string passed straight to print() a placeholder."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                first.value.value = "<docstring>"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            node.args = [ast.Constant("<label>") if isinstance(arg, ast.JoinedStr) or (
                isinstance(arg, ast.Constant) and isinstance(arg.value, str)) else arg for arg in node.args]
    return ast.dump(tree, annotate_fields=False)
