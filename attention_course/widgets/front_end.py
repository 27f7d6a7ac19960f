"""The widgets' front-end code as anywidget gets it: one ES module and one stylesheet per widget.

The front ends share what makes them accessible (``a11y.js``, ``a11y.css``). A widget's module
imports it (``import { radioKeys } from "./a11y.js";``), which Node resolves in the tests; but a page
runs a widget's module from a string, where a relative import has nothing to resolve against. So
``module()`` inlines each such import: the imported file's text, its ``export`` keywords dropped, in
place of the import line. Only this one form of import is allowed, so that nothing is inlined by
guesswork.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
_IMPORT = re.compile(r'^import \{ [\w, ]+ \} from "\./([\w-]+\.js)";$', re.M)
_ANY_IMPORT = re.compile(r"^\s*import\b", re.M)


def module(name: str) -> str:
    """The ES module ``name`` (a file beside this one) with its imports of sibling files inlined."""
    text = (HERE / name).read_text(encoding="utf-8")

    def inline(match: re.Match) -> str:
        imported = (HERE / match[1]).read_text(encoding="utf-8")
        if _ANY_IMPORT.search(imported):
            raise ValueError(f"{match[1]} imports in turn; front_end.module inlines one level only")
        return re.sub(r"^export (?=(function|const|class) )", "", imported, flags=re.M).rstrip("\n")

    inlined = _IMPORT.sub(inline, text)
    if _ANY_IMPORT.search(inlined):
        raise ValueError(f"{name}: an import that front_end.module cannot inline (only `import {{ a, b }} from \"./x.js\";`)")
    return inlined


def stylesheet(*names: str) -> str:
    """The stylesheets ``names`` (files beside this one), one after another."""
    return "\n".join((HERE / name).read_text(encoding="utf-8").rstrip("\n") for name in names) + "\n"
