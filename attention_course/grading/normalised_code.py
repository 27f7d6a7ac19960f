"""Code as similarity compares it: a syntax tree normalised, cut into hashed k-grams.

Normalising (:func:`canonical_tokens`): comments and formatting go with the parse; docstrings, bare
strings, ``pass`` and ``print``/``logging``/``warnings`` calls are dropped; every name the cell binds itself
(arguments, variables, helpers, the ``self.<attribute>`` it assigns) becomes ``V``, while what it reaches
outside (``torch.exp``, ``F.one_hot``, ``softmax``, keyword names such as ``dim=``) is kept, since that is what
the code does; an import alias is replaced by the module it names; strings become ``S``; type hints go.
The statements of each block are put in a canonical order that respects their dependencies: a statement
stays after every earlier one that writes a name it reads or writes, or reads a name it writes (writing
through ``x[i] =``, ``x.a =`` or ``x.add_()`` writes ``x``; ``return``, ``raise``, ``break`` stay where they are);
among the statements free to go next, the one whose normalised text sorts first goes. Any reordering of
independent statements gives the same order, and no reordering of dependent ones is assumed.

Fingerprints (:func:`fingerprints`): the hashes of every k-gram of that token stream. Code that is no
evidence of copying, the release's notebooks and the book's code (:func:`release_fingerprints`,
:func:`book_fingerprints`), is fingerprinted the same way so that its hashes can be taken out.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from attention_course.grading.layout import REPOSITORY

K = 5  # tokens in a k-gram: about half a short statement (measured: bench/similarity_threshold.py)
BOOK = REPOSITORY / "book"


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


class _Bindings(ast.NodeVisitor):
    """The names a cell binds itself (renamed to V) and its import aliases (replaced by the module)."""

    def __init__(self):
        self.bound: set[str] = set()
        self.attributes: set[str] = set()  # self.<name> assigned in the cell
        self.aliases: dict[str, str] = {}

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bound.add(node.id)

    def visit_arg(self, node):
        self.bound.add(node.arg)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self.bound.add(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == "self":
            self.attributes.add(node.attr)
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node):
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"

    def visit_ExceptHandler(self, node):
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)


def _is_noise(statement: ast.stmt) -> bool:
    """Statements that say nothing of what the code computes: docstrings and other bare constants, pass,
    print and logging calls."""
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr):
        value = statement.value
        if isinstance(value, ast.Constant):
            return True
        if isinstance(value, ast.Call):
            func = value.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if name in QUIET_CALLS or owner in {"logging", "warnings"}:
                return True
    return False


QUIET_CALLS = {"print", "display", "debug", "info", "warning", "warn", "error", "critical", "exception"}
# Functions of torch that are also tensor methods: ``torch.exp(x, …)`` is read as ``x.exp(…)``.
TENSOR_METHODS = {"abs", "amax", "amin", "argmax", "argmin", "bmm", "clamp", "clamp_min", "cumsum", "eq",
                  "exp", "flatten", "gather", "isinf", "isnan", "log", "logsumexp", "masked_fill", "matmul", "max",
                  "mean", "min", "neg", "norm", "permute", "reshape", "scatter", "sqrt", "squeeze", "sum", "tanh",
                  "transpose", "unsqueeze", "where"}


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """(read, written) names of a statement, its nested blocks included. Writing through an attribute, a
    subscript or an in-place method (``x.add_(1)``) writes the name it starts from."""
    read, written = set(), set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            (read if isinstance(child.ctx, ast.Load) else written).add(child.id)
        elif isinstance(child, (ast.Attribute, ast.Subscript)) and not isinstance(child.ctx, ast.Load):
            base = child
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                written.add(base.id)
        elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr.endswith("_") \
                and not child.func.attr.endswith("__") and isinstance(child.func.value, ast.Name):
            written.add(child.func.value.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            written.add(child.name)
        elif isinstance(child, ast.arg):
            written.add(child.arg)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            written.update((a.asname or a.name).split(".")[0] for a in child.names)
    return read, written


def _inline_returned(statements: list[ast.stmt]) -> list[ast.stmt]:
    """``x = <expression>`` then ``return x``, read as ``return <expression>``."""
    out = []
    for statement in statements:
        previous = out[-1] if out else None
        if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Name) and isinstance(previous, ast.Assign) \
                and len(previous.targets) == 1 and isinstance(previous.targets[0], ast.Name) \
                and previous.targets[0].id == statement.value.id:
            out[-1] = ast.Return(previous.value)
        else:
            out.append(statement)
    return out


BARRIERS = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)


class _Canonical:
    """The token stream of one cell: renamed, stripped, statements in their canonical order."""

    def __init__(self, tree: ast.AST):
        bindings = _Bindings()
        bindings.visit(tree)
        self.bound = bindings.bound - set(bindings.aliases)
        self.attributes = bindings.attributes
        self.aliases = bindings.aliases

    def block(self, statements: list[ast.stmt]) -> list[str]:
        statements = _inline_returned([s for s in statements if not _is_noise(s)])
        rendered = [self.node(s) for s in statements]
        names = [_names(s) for s in statements]
        # s must stay after t (t earlier) when they touch a common name and one of them writes it, or when
        # either is a barrier (return, raise …) or a with/try whose effects are not in its names.
        after = [set() for _ in statements]
        for i, (read_i, written_i) in enumerate(names):
            for j in range(i):
                read_j, written_j = names[j]
                if (written_i & (read_j | written_j)) or (read_i & written_j) or isinstance(statements[i], BARRIERS) \
                        or isinstance(statements[j], BARRIERS):
                    after[i].add(j)
        order, placed = [], set()
        while len(order) < len(statements):
            ready = [i for i in range(len(statements)) if i not in placed and after[i] <= placed]
            chosen = min(ready, key=lambda i: (" ".join(rendered[i]), i))
            order.append(chosen)
            placed.add(chosen)
        return [token for i in order for token in rendered[i]]

    def name(self, identifier: str) -> str:
        if identifier in self.aliases:
            return self.aliases[identifier]
        return "V" if identifier in self.bound else identifier

    def node(self, node: ast.AST) -> list[str]:
        if isinstance(node, ast.Name):
            return [self.name(node.id)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and isinstance(node.func.value, ast.Name) and self.name(node.func.value.id) == "torch" \
                and node.func.attr in TENSOR_METHODS and not isinstance(node.args[0], ast.Starred):
            method = ast.Call(ast.Attribute(node.args[0], node.func.attr, ast.Load()), node.args[1:], node.keywords)
            return self.node(method)
        if isinstance(node, ast.Attribute):
            owner = self.node(node.value)
            attribute = "V" if (isinstance(node.value, ast.Name) and node.value.id == "self"
                                and node.attr in self.attributes) else node.attr
            if len(owner) == 1 and not owner[0] == "V" and "." not in attribute:  # torch.exp, F.one_hot: one token
                return [f"{owner[0]}.{attribute}"]
            return [*owner, f".{attribute}"]
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return ["S"]
            if isinstance(node.value, bytes):
                return ["B"]
            return [repr(node.value)]
        if isinstance(node, ast.arg):
            return ["V"]
        if isinstance(node, ast.keyword):
            return [f"{node.arg}=" if node.arg else "**", *self.node(node.value)]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return [type(node).__name__, *sorted(self.aliases.get(a.asname or a.name, a.name) for a in node.names)]
        if isinstance(node, (ast.expr_context, ast.Load, ast.Store, ast.Del)):
            return []
        tokens = [type(node).__name__]
        for name, value in ast.iter_fields(node):
            if name in ("type_comment", "ctx", "kind", "type_params"):
                continue
            if name in ("returns", "annotation") and value is not None:
                continue  # type hints say nothing of what the code computes
            if isinstance(value, list):
                if value and all(isinstance(v, ast.stmt) for v in value):
                    tokens += ["{", *self.block(value), "}"]
                else:
                    for item in value:
                        if isinstance(item, ast.AST):
                            tokens += self.node(item)
            elif isinstance(value, ast.AST):
                tokens += self.node(value)
            elif name in ("name", "attr", "arg", "id") and isinstance(value, str):
                tokens.append(self.name(value))
            elif isinstance(value, (int, bool)) and name == "is_async":
                tokens.append(str(value))
        return tokens


def canonical_tokens(source: str) -> list[str]:
    """``source`` as a stream of tokens that renaming, formatting, comments, docstrings and reordering of
    independent statements do not change. Code that does not parse is read by its lexical tokens, every
    name a ``V``."""
    try:
        tree = ast.parse(source)
        return _Canonical(tree).block(tree.body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (nested thousands deep: read it flat)
        return [("V" if re.match(r"[A-Za-z_]", t) else t)
                for t in re.findall(r"[A-Za-z_][A-Za-z_0-9]*|\d+\.?\d*|\S", re.sub(r"#.*", "", source))]


def fingerprints(tokens: list[str], k: int | None = None) -> set[int]:
    """The hashes of every k-gram of ``tokens`` (``K`` tokens unless ``k`` says; one hash of the whole stream
    if it is shorter)."""
    k = k or K
    if not tokens:
        return set()
    if len(tokens) < k:
        return {hash(tuple(tokens))}
    return {hash(tuple(tokens[i:i + k])) for i in range(len(tokens) - k + 1)}


def code_fingerprints(source: str) -> set[int]:
    return fingerprints(canonical_tokens(source))


# ---------------------------------------------------------------------------------------------
# What is no evidence: the release's code and the book's


def release_fingerprints(release_cells: list[dict]) -> set[int]:
    """Every code cell of the released notebook, each on its own (the given code and the answer cells'
    stubs), and each top-level definition of those cells on its own too."""
    found = set()
    for cell in release_cells:
        if cell.get("cell_type") == "code":
            found |= _source_fingerprints(cell_source(cell))
    return found


def _source_fingerprints(source: str) -> set[int]:
    found = code_fingerprints(source)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found |= code_fingerprints(ast.get_source_segment(source, node) or "")
    return found


CODE_BLOCK = re.compile(r"^(`{3,}|~{3,})\s*\{?(code-cell|code|literalinclude|python|ipython3?)\}?([^\n]*)\n(.*?)^\1[ \t]*$",
                        re.M | re.S)


def pyobject_source(path: Path, name: str) -> str:
    """The source of ``name`` (a function or class, ``Class.method`` allowed) in the Python file ``path``."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return ""
    nodes = tree.body
    for part in name.split("."):
        match = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), None)
        if match is None:
            return ""
        nodes = match.body
    return ast.get_source_segment(source, match) or ""


def book_fingerprints(book: Path = BOOK) -> frozenset[int]:
    """Every code cell and code block of the book's pages (``book/**/*.md``), and the package code they
    print with ``literalinclude`` (read once a process)."""
    return _book_fingerprints(book, K)


@lru_cache(maxsize=4)
def _book_fingerprints(book: Path, k: int) -> frozenset[int]:
    found: set[int] = set()
    for page in sorted(book.rglob("*.md")) if book.is_dir() else []:
        text = page.read_text(encoding="utf-8", errors="replace")
        for match in CODE_BLOCK.finditer(text):
            kind, argument, body = match.group(2), match.group(3).strip(), match.group(4)
            if kind == "literalinclude":
                options = dict(re.findall(r"^:(\w+):\s*(.*)$", body, re.M))
                path = (page.parent / argument).resolve()
                code = pyobject_source(path, options["pyobject"]) if "pyobject" in options else (
                    path.read_text(encoding="utf-8", errors="replace") if path.is_file() else "")
            else:
                code = "\n".join(line for line in body.splitlines() if not re.match(r"^:\w+:", line))
            found |= _source_fingerprints(code)
    return frozenset(found)
