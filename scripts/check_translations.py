"""Check translation catalogs: complete, faithful to the source's markup, and set in Chinese typography.

    python scripts/check_translations.py [PO_FILE ...]     (default: every catalog of the course)

Prints one line per problem (file, the message's first words, what is wrong) and exits 1 if there is
any. ``tests/test_translations.py`` runs the same checks on every catalog. The rules:

- **Complete.** Every message has a translation, and none is marked fuzzy (``make catalogs`` marks a
  message fuzzy when its English changed; check the translation, then remove the flag).
- **Faithful.** The translation keeps the source's math (``$...$``), inline code, roles
  (``{eq}`label```, ``{doc}`...```: the target stays, a ``{doc}`` or ``{term}`` text may be
  translated), links' addresses and ``{placeholders}``, and adds none of its own.
- **Chinese typography** (where the translation has Chinese in it), after the rules of Chinese
  technical writing:
  - full-width punctuation in Chinese sentences: ，。：；！？（）“” — never , . : ; ! ? ( ) " beside
    Chinese text, nor a Chinese sentence that ends with "."; ASCII punctuation stays inside Latin text
    and formulas (``e.g.``, ``3.4``, ``f(x)``);
  - no space between two Chinese characters, nor beside full-width punctuation;
  - a space between Chinese and a Latin word, a number, a formula or inline code
    (``权重 $a_j$ 之和``, ``第 4 章``);
  - emphasis that Markdown can still read: ``**`` beside full-width punctuation inside a Chinese
    sentence is shown as two asterisks (CommonMark's flanking rules); put the punctuation outside.
- **The notes' terms**, where the English names them: soft attention 软注意力, hard attention 硬注意力,
  volitional cue 自主性提示, non-volitional cue 非自主性提示, distracted model 分心模型, influence model
  影响力模型, attention mechanism 注意力机制, encoder 编码器, decoder 解码器, self-attention 自注意力 …
- **One Chinese term for one thing** (``CHOSEN_TERMS``), where Chinese had several: hidden state 隐状态
  (not the notes' 隐含层节点状态), greedy decoding 贪心解码 (贪心搜索 only where the English says
  "greedy search"), context vector 上下文向量 (not 中间语义表示, nor 上下文变量), a Jupyter notebook
  "Notebook" (笔记本 would read as 笔记, the notes the course quotes), widget 交互组件, visible tests 可见测试.
  Where the English names the thing, the translation uses the term; a rejected variant appears in no
  translation, unless the English itself names that variant (the glossary, or a chapter quoting the
  notes' word: "hidden state (隐含层节点状态, also called 隐状态)").
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG_GLOBS = ("book/locale/*/LC_MESSAGES/**/*.po", "attention_course/locale/*/LC_MESSAGES/*.po",
                 "book/_ext/locale/*/LC_MESSAGES/*.po")

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
FULL_WIDTH = "，。：；！？（）“”‘’、《》「」『』—…"
_HAS_HAN = re.compile(f"[{HAN}]")

# Markup whose content is not prose: (name, pattern). Replaced by a placeholder before the
# typography checks; kept verbatim by a faithful translation.
_MATH = re.compile(r"(?<!\\)\$\$?(?:[^$\\]|\\.)+?\$\$?")
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
_FIELD = re.compile(r"(?<![{\\])\{[A-Za-z_][A-Za-z0-9_]*\}(?!`)")
_URL = re.compile(r"https?://[^\s)>\]]+")


def _parenthesis_problem(text: str) -> str | None:
    """ASCII parentheses around Chinese, or around words beside Chinese; those around numbers and
    symbols, "(0.755, 0.335)", "(x, y)", "(3)", are a formula's and stay."""
    for match in re.finditer(r"\(([^()]*)\)|[()]", text):
        around = text[max(0, match.start() - 8):match.end() + 8]
        if match.group(1) is None:  # unmatched: wrong beside Chinese
            if re.search(f"[{HAN}]\\s*$", text[:match.start()]) or re.match(f"\\s*[{HAN}]", text[match.end():]):
                return around
            continue
        content = match.group(1)
        if _HAS_HAN.search(content):
            return around
        if re.search(r"[A-Za-z]{2,}", content) and (
            re.search(f"[{HAN}]\\s*$", text[:match.start()]) or re.match(f"\\s*[{HAN}]", text[match.end():])
        ):
            return around
    return None



def _corpus_words() -> list[str]:
    """The Chinese words of the toy corpus, which its sentences separate by spaces (汤姆 追逐 杰瑞)."""
    from attention_course import corpus

    words = {corpus.PLACE_MARKER, corpus.CLAUSE_JOINER[1]}
    for lexicon in (corpus.NOUNS, corpus.VERBS, corpus.MANNERS, corpus.PLACES, corpus.TIMES):
        words |= set(lexicon.values())
    return sorted(words, key=len, reverse=True)


# Two corpus words side by side, as a tokenised sentence writes them: not a space inside Chinese text.
_CORPUS_WORD = "(?:" + "|".join(map(re.escape, _corpus_words())) + ")"
_CORPUS_PAIR = rf"{_CORPUS_WORD} +{_CORPUS_WORD}(?![{HAN}])"

# The notes' terms: (English pattern in the source, Chinese the translation must use).
TERMS = [
    (r"\bsoft attention\b", "软注意力"),
    (r"\bhard attention\b", "硬注意力"),
    (r"\bnon-volitional\b", "非自主性"),
    (r"(?<!non-)\bvolitional\b", "自主性"),
    (r"\bdistracted model\b", "分心模型"),
    (r"\binfluence model\b", "影响力模型"),
    (r"\battention mechanisms?\b", "注意力机制"),
    (r"\bencoders?\b", "编码器"),
    (r"\bdecoders?\b", "解码器"),
    (r"\bself-attention\b", "自注意力"),
    (r"\bmulti-head\b", "多头"),
]


@dataclass(frozen=True)
class Term:
    """One thing with one Chinese name in the course.

    english: where the source's prose names the thing (a pattern, case-insensitive); its translation
    must then contain ``chinese``. rejected: variants (patterns) that no translation may use, unless its
    source names that variant itself (a pattern in ``allowed_if``, else the variant's own text: the
    glossary's "隐含层节点状态 is the notes' term"). rejected_here: variants that a translation may not
    use where the source names the thing, but may elsewhere (控件 is right for a "control")."""

    name: str
    english: str
    chinese: str
    rejected: tuple[str, ...] = ()
    rejected_here: tuple[str, ...] = ()
    allowed_if: str | None = None


CHOSEN_TERMS = [
    Term("hidden state", r"\bhidden[- ]states?\b", "隐状态", rejected=("隐含层节点状态", "隐藏状态")),
    Term("greedy decoding", r"\bgreedy decoding\b", "贪心解码", rejected=("贪心搜索",),
         allowed_if=r"\bgreedy search\b|贪心搜索"),
    Term("context vector", r"\bcontext vectors?\b", "上下文向量", rejected=("中间语义表示", "上下文变量", "语境向量")),
    # Jupyter's own name, as its English interface shows it; 笔记本 would read as the notes (笔记).
    Term("notebook", r"\bnotebooks?\b", "Notebook", rejected=("笔记本(?!电脑)", "记事本")),
    Term("widget", r"\bwidgets?\b", "交互组件", rejected=("小部件", "小组件"), rejected_here=("控件", "(?<!小)部件")),
    Term("visible tests", r"\bvisible tests?\b", "可见测试", rejected=("公开测试", "公开的测试", "可见的测试")),
]


@dataclass(frozen=True)
class Problem:
    path: Path
    message: str
    what: str

    def __str__(self) -> str:
        shown = " ".join(self.message.split())
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        try:
            where = self.path.relative_to(ROOT)
        except ValueError:
            where = self.path
        return f"{where}: {shown!r}: {self.what}"


def _roles(text: str) -> list[tuple[str, str]]:
    """(role, target) of every role: the target of `{doc}`Text <target>``, or the whole content."""
    found = []
    for role, content in _ROLE.findall(text):
        explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content, re.S)
        found.append((role, explicit[2] if explicit else content))
    return found


def _explicit_text_roles(text: str) -> set[str]:
    return {role for role, content in _ROLE.findall(text) if re.fullmatch(r"(.*?)\s*<([^<>]+)>", content, re.S)}


def markup_problems(source: str, translation: str) -> list[str]:
    """What of the source's markup the translation lost or added."""
    problems = []
    # A {doc} or {term} without explicit text may gain one in the translation ({doc}`第 4 章 <04-x>`).
    kinds = [
        ("math", lambda t: set(_MATH.findall(_ROLE.sub("", t)))),
        ("inline code", lambda t: {m.group() for m in _CODE.finditer(_ROLE.sub("", _MATH.sub("", t)))}),
        ("roles", lambda t: set(_roles(t))),
        ("link addresses", lambda t: {url for _, url in _LINK.findall(t)}),
        ("{placeholders}", lambda t: set(_FIELD.findall(_CODE.sub("", _MATH.sub("", t))))),
    ]
    for name, find in kinds:
        before, after = find(source), find(translation)
        if before != after:
            lost, added = sorted(map(str, before - after)), sorted(map(str, after - before))
            detail = "; ".join(part for part in (f"lost {lost}" if lost else "", f"added {added}" if added else "") if part)
            problems.append(f"{name} differ from the source: {detail}")
    return problems


def _role_stand_in(match: re.Match) -> str:
    """What a role shows on the page, for the typography checks."""
    role, content = match[1], match[2]
    explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content, re.S)
    if explicit and role in {"doc", "term", "ref", "download", "numref"}:
        shown = explicit[1]
        return re.sub(r"%s|\{number\}|\{name\}", "1", shown) if role == "numref" else shown
    if role == "numref":
        return "图 1"  # Sphinx's zh_CN "图 %s": Chinese on the left, a number on the right
    if role == "term":
        return content
    return "X"  # {eq} "(3)", {doc} "4. 标题", {math}: set apart by spaces like Latin text


def prose(text: str) -> str:
    """``text`` as typography sees it: markup replaced by what it shows, or by a Latin stand-in."""
    text = _ROLE.sub(_role_stand_in, text)
    text = _MATH.sub("X", text)
    text = _CODE.sub("X", text)
    text = _LINK.sub(lambda m: m[1], text)
    text = _URL.sub("X", text)
    text = _FIELD.sub("X", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!$])", r"\1", text)  # Markdown escapes show the character
    return text


def typography_problems(translation: str, source: str = "") -> list[str]:
    if not _HAS_HAN.search(translation):
        return []
    text = prose(translation)
    flat = re.sub(r"\*+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])", "", text)  # emphasis marks do not count
    problems = []
    H, F = f"[{HAN}]", f"[{FULL_WIDTH}]"
    rules = [
        (rf"{H}[,;:!?]|[,;:!?]\s*{H}", "ASCII , ; : ! ? beside Chinese: use ，；：！？"),
        # (the notes' section numbers, 一.1 and 二.2, are numbers)
        (rf"(?![一二三四五六七八九十]\.\d){H}\.(?!\.)|(?<![.\d])\.\s+{H}", "ASCII full stop beside Chinese: use 。"),
        (rf"{H}\s*\"|\"\s*{H}|\"[^\"]*{H}[^\"]*\"", "ASCII quotes in Chinese text: use “”"),
        (rf"(?<![{HAN}])(?!{_CORPUS_PAIR}){H}+ +{H}", "a space between Chinese characters"),
        (rf"{F} +\S|\S +{F}", "a space beside full-width punctuation"),
        (rf"{H}[A-Za-z0-9]|[A-Za-z0-9]{H}", "no space between Chinese and a Latin word, number, formula or code"),
    ]
    for pattern, what in rules:
        found = re.search(pattern, flat)
        if found:
            problems.append(f"{what} (at {flat[max(0, found.start() - 12):found.end() + 12]!r})")
    parenthesis = _parenthesis_problem(flat)
    if parenthesis:
        problems.append(f"ASCII parentheses in Chinese text: use （） (at {parenthesis!r})")
    if re.search(rf"{H}[^{HAN}]*\.\s*$", flat) and not re.search(r"(?:e\.g|i\.e|et al|etc)\.\s*$", flat):
        problems.append("a Chinese sentence that ends with '.': use 。")
    if _literal_emphasis(translation) > _literal_emphasis(source):
        problems.append("emphasis (* or **) that Markdown shows as asterisks: keep full-width punctuation "
                        "outside **…**, or put a space before **")
    return problems


def _literal_emphasis(text: str) -> int:
    """How many * characters Markdown shows literally in ``text``."""
    from markdown_it import MarkdownIt

    text = _MATH.sub("X", _CODE.sub("X", _ROLE.sub("X", text)))
    tokens = MarkdownIt("commonmark").parseInline(text)
    return sum(child.content.count("*") for token in tokens for child in (token.children or []) if child.type == "text")


def term_problems(source: str, translation: str) -> list[str]:
    """The notes' terms that the English prose names and the translation does not use (a role's target,
    such as {doc}`05-encoder-decoder`, is not prose; what the page shows for it is translated)."""
    problems = []
    def shown(role: re.Match) -> str:  # a {doc}'s or {term}'s own text is prose; a target or file name is not
        explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", role[2], re.S)
        return explicit[1] if explicit and role[1] in {"doc", "term", "ref", "numref"} else " "

    text = _CODE.sub(" ", _MATH.sub(" ", _ROLE.sub(shown, source)))
    for pattern, chinese in TERMS:
        found = re.search(pattern, text, re.I)
        if found and chinese not in translation:
            problems.append(f"the source says {found.group()!r}: the translation should use {chinese}")
    # The translation's prose: a code span, a formula, a link's address or a role's target is not a term.
    said = _URL.sub(" ", _CODE.sub(" ", _MATH.sub(" ", _ROLE.sub(shown, translation))))
    said = _LINK.sub(lambda m: m[1], said)
    for term in CHOSEN_TERMS:
        found = re.search(term.english, text, re.I)
        if found and term.chinese not in said:
            problems.append(f"the source says {found.group()!r}: the translation should use {term.chinese}")
        for variant in (*term.rejected, *(term.rejected_here if found else ())):
            used = re.search(variant, said)
            if used and not re.search(term.allowed_if or variant, source, re.I):
                problems.append(f"{used.group()!r} for {term.name}: the course's term is {term.chinese} "
                                "(scripts/check_translations.py, CHOSEN_TERMS)")
    return problems


def check_catalog(path: Path) -> list[Problem]:
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        catalog = read_po(handle)
    problems = []
    for message in catalog:
        if not message.id or not isinstance(message.id, str):
            continue
        source, translation = message.id, message.string or ""
        found = []
        if not translation.strip():
            found.append("not translated")
        elif message.fuzzy:
            found.append("fuzzy: its English changed; check the translation, then remove the fuzzy flag")
        if translation.strip():
            if translation != source:
                found += markup_problems(source, translation)
                found += typography_problems(translation, source)
                found += term_problems(source, translation)
            elif _needs_translation(source) and not _kept(message):
                found.append("the translation is the English source: translate it (or, for English that "
                             "stays English, such as a sentence of the toy corpus, add a comment '# keep: why')")
        problems += [Problem(path, source, what) for what in found]
    return problems


def _needs_translation(source: str) -> bool:
    """Whether a message has English words in its prose (a formula or code alone stays as it is)."""
    return bool(re.search(r"[a-z]{3,}", prose(source))) and not _HAS_HAN.search(source)


def _kept(message) -> bool:
    """A translator's comment '# keep: ...' says that the English stays (the corpus's sentences)."""
    return any(comment.strip().startswith("keep:") for comment in message.user_comments)


def catalogs(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in CATALOG_GLOBS for p in root.glob(pattern))


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p).resolve() for p in (argv if argv is not None else sys.argv[1:])] or catalogs()
    problems = [problem for path in paths for problem in check_catalog(path)]
    for problem in problems:
        print(problem)
    counted = {}
    for problem in problems:
        counted[problem.path] = counted.get(problem.path, 0) + 1
    print(f"{len(problems)} problem(s) in {len(counted)} of {len(paths)} catalog(s).")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
