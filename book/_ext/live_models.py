"""Sphinx extension: the chapters' live models, served from the build.

The ``LiveTranslator`` widget of chapters 6 and 10 exports the chapter's trained model
(``attention_course.live_model``) into ``_build/.live_models/`` and names the file, ``live-model-<hash>.js``,
in the page. When the build is
finished this copies into each edition's ``_static/live/`` the engine (``attention_course/widgets/
live_engine.js``, as ``live-engine.js``) and every model file a page names. A page that names a file
which is not there is a Sphinx warning (an error under ``-W``): its explorer would fail to start.
Nothing here is added to a page's scripts; the explorer loads both files when the reader starts it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

FOLDER = Path("_static") / "live"
_MODEL_FILE = re.compile(r"live-model-[0-9a-f]{16}\.js")


def build_finished(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from attention_course.live_model import export_dir
    from attention_course.widgets import front_end

    outdir = Path(app.outdir)
    named: dict[str, str] = {}
    for page in sorted(outdir.rglob("*.html")):
        if "_static" in page.relative_to(outdir).parts:
            continue
        for name in _MODEL_FILE.findall(page.read_text(encoding="utf-8")):
            named.setdefault(name, page.relative_to(outdir).as_posix())
    if not named:
        return
    target = outdir / FOLDER
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(front_end.HERE / "live_engine.js", target / "live-engine.js")
    for name, page in sorted(named.items()):
        source = export_dir() / name
        if source.is_file():
            shutil.copy2(source, target / name)
        else:
            logger.warning("live_models: %s names the live model %s, which is not in %s (run its chapter again: "
                           "remove _build/.jupyter_cache)", page, name, export_dir(), type="live_models")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
