"""The assignments in Chinese: the one nbgrader source notebook, translated through a gettext catalog.

Each solution notebook is written in English. Its translatable text is extracted into the catalog
``attention_course/locale/zh_CN/LC_MESSAGES/exercises.po`` (``make catalogs``; a changed English
message keeps its old translation, marked fuzzy): the markdown cells, block by block; and, in the given
code cells (setup, visible tests, scratch cells; never an answer cell, which a student fills in and
nbgrader compares with its stub), the comments and the human-readable string literals: an
``assert``'s message, a raised error's, what ``print`` shows, and the ``what`` argument of the
notebook's own test helpers (``expect_close(got, expected, what)``). Code, identifiers, numbers and
anything compared are never messages.

``release`` then writes ``<notebook>.zh.ipynb`` beside nbgrader's released ``<notebook>.ipynb``
(:func:`write_translation`): the released notebook itself with those texts replaced, every cell, grade
id and nbgrader field kept, the checksums of the locked and graded cells computed again as
``nbgrader validate`` computes them, and ``metadata.attention_course.language`` "zh" (the English
one gets "en"). The gradebook knows one notebook per assignment: the Chinese file is the same notebook
in another language, graded under the English notebook's name (``intake.adopt_translation``) against
the Chinese release (so that its translated read-only cells are not "edited"), and its feedback page
shows the Chinese release's instructions and tests (:class:`ChineseFeedback`).
"""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from attention_course.i18n import po_messages

LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
DOMAIN = "exercises"
LANGUAGE_KEY = "attention_course"  # notebook metadata: {"attention_course": {"language": "en" | "zh"}}
TRANSLATED = {"zh": ("zh_CN", "zh")}  # course language -> (catalog folder, file-name tag)
MESSAGE_PARAMETERS = {"what"}  # parameters of the notebook's own helpers that take a message
_HIDDEN = re.compile(r"^[ \t]*#+[ \t]*(BEGIN|END) HIDDEN TESTS", re.M)
_NOT_PROSE_COMMENT = re.compile(r"^\s*(#+\s*(BEGIN|END) (HIDDEN TESTS|SOLUTION)|#\s*YOUR CODE HERE|#\s*noqa)", re.I)
_RULE = re.compile(r"#+\s*[-=#*~_]{3,}\s*")
_PYTHON_ERROR = re.compile(r"^name '[^']*' is not defined$")  # imitates Python's own NameError: kept


def catalog_path(language: str = "zh") -> Path:
    return LOCALE_DIR / TRANSLATED[language][0] / "LC_MESSAGES" / f"{DOMAIN}.po"


def translated_name(notebook: str, language: str) -> str:
    """The file stem of a notebook's translation: ``soft-hard`` -> ``soft-hard.zh``."""
    return f"{notebook}.{TRANSLATED[language][1]}"


def is_translation(stem: str) -> bool:
    """Whether a released file stem is a translation (``soft-hard.zh``), not a notebook of its own."""
    return any(stem.endswith(f".{tag}") for _, tag in TRANSLATED.values())


def language_of_notebook(notebook) -> str:
    """The language a notebook was released in: its metadata's, "en" when it has none."""
    meta = notebook.get("metadata", {}) if isinstance(notebook, dict) else {}
    value = (meta.get(LANGUAGE_KEY) or {}).get("language") if isinstance(meta.get(LANGUAGE_KEY), dict) else None
    return value if value in TRANSLATED else "en"


def language_of_file(path: Path, released: dict[str, object] | None = None) -> str:
    """The language of a submitted notebook file: its metadata's; without metadata (a student's tool dropped
    it), the language whose release shares more of its markdown cells; "en" for an unreadable file."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return "en"
    if not isinstance(data, dict):
        return "en"
    meta = data.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get(LANGUAGE_KEY), dict) and meta[LANGUAGE_KEY].get("language"):
        return language_of_notebook(data)
    if not released:
        return "en"
    cells = data.get("cells") if isinstance(data.get("cells"), list) else []
    texts = {_text(c.get("source", "")) for c in cells if isinstance(c, dict) and c.get("cell_type") == "markdown"}
    shared = {lang: len(texts & {_text(c.source) for c in nb.cells if c.cell_type == "markdown"})
              for lang, nb in released.items()}
    best = max(shared, key=lambda lang: (shared[lang], lang == "en"))
    return best if shared[best] else "en"


def _text(source) -> str:
    return ("".join(source) if isinstance(source, list) else str(source)).strip()


# -- which cells, and which of their text -------------------------------------------------------------


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader") or {}


def translatable_cell(cell) -> bool:
    """Markdown cells other than written answers; code cells other than answers."""
    return not _meta(cell).get("solution")


@dataclass(frozen=True)
class Piece:
    """One message's place in a cell's source: characters [start, end) and how to write its translation."""
    start: int
    end: int
    message: str
    kind: str  # "markdown", "comment", "comment-block", "string"
    indent: str = ""  # comment blocks and wrapped strings: the continuation lines' indentation
    quote: str = '"'
    prefix: str = ""  # "f" for an f-string
    width: int = 0  # the source's widest line, for wrapping


def markdown_pieces(source: str) -> list[Piece]:
    """The blocks of a markdown cell (paragraphs, headings, lists, tables) with prose in them; display math
    and fenced code alone are not messages."""
    pieces, start, lines, offset = [], None, source.splitlines(keepends=True), 0
    fence = None
    blocks: list[tuple[int, int]] = []
    for line in lines:
        stripped = line.strip()
        if fence is None and re.match(r"^(```|~~~)", stripped):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        if not stripped and fence is None:
            if start is not None:
                blocks.append((start, offset))
                start = None
        elif start is None:
            start = offset
        offset += len(line)
    if start is not None:
        blocks.append((start, offset))
    for begin, end in blocks:
        text = source[begin:end].rstrip("\n")
        if _is_prose(re.sub(r"(?s)\$\$.*?\$\$|```.*?```", " ", text)):
            # (a line break inside inline code is a space to Markdown: the message has the space, so that
            # the code span is one piece of code to the translators' checks)
            message = re.sub(r"(?<!`)`[^`]+`(?!`)", lambda m: m[0].replace("\n", " "), text)
            pieces.append(Piece(begin, begin + len(text), message, "markdown"))
    return pieces


def _is_prose(text: str) -> bool:
    """At least two words of letters (not in inline code or math, nor parts of identifiers such as d_model)."""
    text = re.sub(r"`[^`]*`|\$[^$]*\$", " ", text)
    return len(re.findall(r"(?<!\w)[A-Za-z]{2,}(?!\w)", text)) >= 2


def _hidden_lines(source: str) -> set[int]:
    """1-based line numbers inside a hidden-tests block (the solution's; the release has none)."""
    hidden, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        marker = _HIDDEN.match(line)
        if marker and marker[1] == "BEGIN":
            inside = True
        if inside:
            hidden.add(number)
        if marker and marker[1] == "END":
            inside = False
    return hidden


def notebook_helpers(notebook) -> dict[str, list[str]]:
    """{name: positional parameters} of the functions the notebook's given code cells define."""
    helpers = {}
    for cell in notebook.cells:
        if cell.get("cell_type") != "code" or not translatable_cell(cell):
            continue
        try:
            tree = ast.parse(_text_raw(cell.get("source", "")))
        except SyntaxError:
            continue
        helpers.update({node.name: [a.arg for a in node.args.args] for node in ast.walk(tree)
                        if isinstance(node, ast.FunctionDef)})
    return helpers


def code_pieces(source: str, helpers: dict[str, list[str]] | None = None) -> list[Piece]:
    """The comments and message strings of a code cell (see the module's docstring); ``helpers``: the
    notebook's own functions (:func:`notebook_helpers`), whose ``what`` argument is a message."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return []
    starts = _line_starts(source)
    position = lambda row, col: starts[row - 1] + col  # noqa: E731
    hidden = _hidden_lines(source)
    width = max((len(line) for line in source.splitlines()), default=0)
    pieces: list[Piece] = []

    # Comments: a run of full-line comments at one column is one message; a comment after code is one.
    lines = source.splitlines()
    run: list[tokenize.TokenInfo] = []

    def flush() -> None:
        if run:
            text = " ".join(t.string.lstrip("#").strip() for t in run)
            if _is_prose(text):
                first, last = run[0], run[-1]
                pieces.append(Piece(position(*first.start), position(*last.end), text, "comment-block",
                                    indent=lines[first.start[0] - 1][:first.start[1]], width=width))
            run.clear()

    for token in tokens:
        if token.type != tokenize.COMMENT or token.start[0] in hidden:
            continue
        if _NOT_PROSE_COMMENT.match(token.string) or _RULE.fullmatch(token.string):
            flush()  # (a rule, "# -----", stays as it is, and ends a run)
            continue
        alone = not lines[token.start[0] - 1][:token.start[1]].strip()
        if not alone:
            flush()
            text = token.string.lstrip("#").strip()
            if _is_prose(text):
                pieces.append(Piece(position(*token.start), position(*token.end), text, "comment"))
            continue
        if run and (token.start[0] != run[-1].start[0] + 1 or token.start[1] != run[-1].start[1]):
            flush()
        run.append(token)
    flush()

    # Message strings: the groups of string tokens that make up a message expression's literals.
    helpers = {**{node.name: [a.arg for a in node.args.args] for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef)}, **(helpers or {})}
    message_nodes: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            message_nodes.append(node.msg)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            message_nodes.extend(node.exc.args)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                message_nodes.extend(node.args)
            elif node.func.id in helpers:
                names = helpers[node.func.id]
                message_nodes.extend(arg for name, arg in zip(names, node.args) if name in MESSAGE_PARAMETERS)
                message_nodes.extend(k.value for k in node.keywords if k.arg in MESSAGE_PARAMETERS)
    literals = []
    for node in message_nodes:
        for child in ast.walk(node):
            if isinstance(child, ast.JoinedStr) or (isinstance(child, ast.Constant) and isinstance(child.value, str)):
                literals.append(child)
    seen: set[int] = set()
    for literal in literals:
        begin, end = position(literal.lineno, literal.col_offset), position(literal.end_lineno, literal.end_col_offset)
        if begin in seen or literal.lineno in hidden:
            continue
        group = [t for t in tokens if t.type == tokenize.STRING and begin <= position(*t.start) and position(*t.end) <= end]
        if not group:
            continue
        seen.add(begin)
        piece = _string_piece(group, position, lines, width)
        if piece is not None:
            pieces.append(piece)
    pieces.sort(key=lambda p: p.start)
    return [p for i, p in enumerate(pieces) if i == 0 or p.start >= pieces[i - 1].end]


def _line_starts(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return starts + [total]


_STRING = re.compile(r"(?is)^([a-z]*)('''|\"\"\"|'|\")(.*)\2$")


def _string_piece(group, position, lines, width) -> Piece | None:
    bodies, prefixes = [], set()
    for token in group:
        match = _STRING.match(token.string)
        if match is None or len(match[2]) == 3:
            return None  # (a docstring or other triple-quoted text is not a message)
        prefix = match[1].lower()
        if prefix not in ("", "f"):
            return None
        prefixes.add(prefix)
        bodies.append((prefix, match[3].replace("\\" + match[2], match[2])))
    fstring = "f" in prefixes
    text = "".join(body if prefix == "f" or not fstring else body.replace("{", "{{").replace("}", "}}")
                   for prefix, body in bodies)
    if not _is_prose(re.sub(r"\{[^{}]*\}", " ", text)) or _PYTHON_ERROR.match(text):
        return None
    first = group[0]
    second = group[1] if len(group) > 1 else None
    indent = " " * second.start[1] if second is not None and second.start[0] != first.start[0] else ""
    quote = _STRING.match(first.string)[2]
    return Piece(position(*first.start), position(*group[-1].end), text, "string", indent=indent, quote=quote,
                 prefix="f" if fstring else "", width=width)


def cell_pieces(cell, helpers: dict[str, list[str]] | None = None) -> list[Piece]:
    if not translatable_cell(cell):
        return []
    source = _text_raw(cell.get("source", ""))
    return markdown_pieces(source) if cell.get("cell_type") == "markdown" else (
        code_pieces(source, helpers) if cell.get("cell_type") == "code" else [])


def _text_raw(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def messages(notebook) -> list[tuple[str, str]]:
    """(message, where) of every translatable text of ``notebook``, in order; ``where`` names the cell."""
    found, helpers = [], notebook_helpers(notebook)
    for index, cell in enumerate(notebook.cells):
        where = _meta(cell).get("grade_id") or f"cell {index}"
        found.extend((piece.message, where) for piece in cell_pieces(cell, helpers))
    return found


# -- writing a translation ---------------------------------------------------------------------------


class IncompleteTranslation(LookupError):
    """Messages of the notebook with no (or a fuzzy) translation in the catalog."""


def read_catalog(language: str = "zh", path: Path | None = None) -> dict[str, str]:
    """{English: translation} of the catalog's translated, non-fuzzy messages."""
    path = path or catalog_path(language)
    return po_messages(path) if path.is_file() else {}


def _display_width(text: str) -> int:
    return sum(2 if ord(ch) > 0x2e7f else 1 for ch in text)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken after a space or a Chinese character or
    punctuation mark, never inside {…}, a backslash escape or a Latin word."""
    lines, current, depth = [], "", 0
    last_break = -1
    for i, ch in enumerate(text):
        current += ch
        depth += (ch == "{") - (ch == "}")
        breakable = depth == 0 and (ch == " " or ord(ch) > 0x2e7f) and not current.endswith("\\")
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if breakable and nxt not in "，。：；！？）”、" and not (ord(ch) > 0x2e7f and nxt and ord(nxt) <= 0x2e7f and nxt not in " "
                                                         and ch not in "，。：；！？（）“”、"):
            last_break = len(current)
        if _display_width(current) > width and last_break > 0:
            lines.append(current[:last_break])
            current, last_break = current[last_break:], -1
    if current:
        lines.append(current)
    return lines


def _render(piece: Piece, translation: str) -> str:
    if piece.kind == "markdown":
        return translation
    if piece.kind == "comment":
        return "# " + translation
    if piece.kind == "comment-block":
        room = max(40, max(piece.width, 100) - len(piece.indent) - 2)
        return ("\n" + piece.indent).join("# " + line.strip() for line in _wrap(translation, room))
    quote = piece.quote if piece.quote not in translation.replace("\\" + piece.quote, "") else (
        "'" if piece.quote == '"' else '"')
    if quote in translation.replace("\\" + quote, ""):
        translation = re.sub(rf"(?<!\\){quote}", "\\" + quote, translation)
    parts = [translation]
    if piece.indent:  # the English was written over several lines: so is the translation
        room = max(40, max(piece.width, 100) - len(piece.indent) - 3)
        parts = _wrap(translation, room)
    return ("\n" + piece.indent).join(f"{piece.prefix}{quote}{part}{quote}" for part in parts)


def _fields(text: str) -> list[str]:
    return sorted(re.findall(r"(?<!\{)\{[^{}]*\}(?!\})", text))


def translate_source(source: str, pieces: list[Piece], catalog: dict[str, str], missing: list[str]) -> str:
    out, at = [], 0
    for piece in pieces:
        translation = catalog.get(piece.message)
        if translation is None:
            missing.append(piece.message)
            continue
        if piece.kind == "string" and piece.prefix == "f" and _fields(translation) != _fields(piece.message):
            raise ValueError(f"the translation of {piece.message[:60]!r} changes its {{fields}}: "
                             f"{_fields(piece.message)} -> {_fields(translation)}")
        out.append(source[at:piece.start])
        out.append(_render(piece, translation))
        at = piece.end
    out.append(source[at:])
    return "".join(out)


def translate_notebook(notebook, language: str = "zh", catalog: dict[str, str] | None = None,
                       strict: bool = True):
    """(a copy of the released ``notebook`` with its messages translated, its checksums computed again and its
    language in its metadata, the messages that had no translation). ``strict``: raise
    :class:`IncompleteTranslation` for a message without a translation (else it stays English)."""
    from nbgrader.utils import compute_checksum, is_grade, is_locked, is_solution

    catalog = read_catalog(language) if catalog is None else catalog
    translated = copy.deepcopy(notebook)
    missing: list[str] = []
    helpers = notebook_helpers(translated)
    for cell in translated.cells:
        pieces = cell_pieces(cell, helpers)
        if pieces:
            source = translate_source(_text_raw(cell.source), pieces, catalog, missing)
            if source != cell.source:
                cell.source = source
                meta = cell.metadata.get("nbgrader") or {}
                if "checksum" in meta and (is_grade(cell) or is_solution(cell) or is_locked(cell)):
                    meta["checksum"] = compute_checksum(cell)
    if missing and strict:
        raise IncompleteTranslation(f"{len(missing)} message(s) of the notebook have no {language} translation "
                                    f"(run `make catalogs` and translate): " + "; ".join(m[:50] for m in missing[:5]))
    set_language(translated, language)
    return translated, missing


def set_language(notebook, language: str) -> None:
    notebook.metadata.setdefault(LANGUAGE_KEY, {})["language"] = language


def write_translation(release_folder: Path, notebook: str, language: str = "zh",
                      catalog: dict[str, str] | None = None) -> list[str]:
    """Write ``<notebook>.<tag>.ipynb`` beside the released ``<notebook>.ipynb``, and mark the English one "en".
    Returns the messages that had no translation (they stay English)."""
    path = release_folder / f"{notebook}.ipynb"
    released = nbformat.read(path, as_version=4)
    set_language(released, "en")
    nbformat.write(released, path)
    translated, missing = translate_notebook(released, language, catalog, strict=False)
    nbformat.write(translated, release_folder / f"{translated_name(notebook, language)}.ipynb")
    return missing


# -- feedback -----------------------------------------------------------------------------------------


class ChineseFeedback(NbGraderPreprocessor):
    """For a student who submitted a translation: the feedback page shows that release's instructions and
    tests. nbgrader's autograde put the gradebook's (English) read-only and test cells back; here each one
    gets the translated release's cell of the same grade id (its visible part), and the page its language."""

    release_dir = Unicode(help="The course's release folder").tag(config=True)
    results_dir = Unicode(help="The grader's results folder").tag(config=True)

    def preprocess(self, nb, resources):
        from attention_course.grading.grade import NotebookResult
        from attention_course.grading.nbgrader_bridge import results_path

        info = resources["nbgrader"]
        path = results_path(Path(self.results_dir), info["assignment"], info["student"], info["notebook"])
        language = NotebookResult.load(path).language if path.is_file() else "en"
        if language not in TRANSLATED:
            return nb, resources
        release = Path(self.release_dir) / info["assignment"] / f"{translated_name(info['notebook'], language)}.ipynb"
        if not release.is_file():
            return nb, resources
        released = {(c.metadata.get("nbgrader") or {}).get("grade_id"): c
                    for c in nbformat.read(release, as_version=4).cells if (c.metadata.get("nbgrader") or {}).get("grade_id")}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader") or {}
            twin = released.get(meta.get("grade_id"))
            if twin is None or twin.cell_type != cell.cell_type or meta.get("solution"):
                continue
            if meta.get("locked") or meta.get("grade"):
                cell.source = twin.source
        resources["attention_course_language"] = language
        return nb, resources
