"""Sphinx extension: chapters execute again when the course package they import changes.

MyST-NB's execution cache (jupyter-cache) keys a notebook on its own code cells only. A chapter that
calls ``attention_course`` would keep its old outputs and figures after the package changed, and
Sphinx would not even re-read it. This extension hashes the package's sources; when the hash differs
from the one recorded by the last successful build, it empties the execution cache and marks every
document as outdated, so that the rebuild shows what the current code computes.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "attention_course"
STAMP_NAME = "course-package.sha256"


def package_hash(root: Path) -> str:
    digest = hashlib.sha256()
    # Python, and the widgets' front-end code that chapters embed in their pages.
    for path in sorted(p for p in (root / PACKAGE).rglob("*") if p.suffix in {".py", ".js", ".css"}):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _cache_dir(app: Sphinx) -> Path:
    configured = getattr(app.config, "nb_execution_cache_path", "")
    return Path(configured) if configured else Path(app.outdir).parent / ".jupyter_cache"


def _stamp(app: Sphinx) -> Path:
    return Path(app.doctreedir) / STAMP_NAME


def builder_inited(app: Sphinx) -> None:
    current = package_hash(Path(app.confdir))
    stamp = _stamp(app)
    app.env.course_package_changed = stamp.is_file() and stamp.read_text() != current
    app.env.course_package_hash = current
    if app.env.course_package_changed:
        logger.info("course package changed since the last build: every chapter executes again")
        shutil.rmtree(_cache_dir(app), ignore_errors=True)


def env_get_outdated(app: Sphinx, env, added, changed, removed) -> list[str]:
    if getattr(env, "course_package_changed", False):
        return sorted(env.found_docs - added - changed - removed)
    return []


def build_finished(app: Sphinx, exception) -> None:
    if exception is None:
        _stamp(app).parent.mkdir(parents=True, exist_ok=True)
        _stamp(app).write_text(app.env.course_package_hash)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", builder_inited)
    app.connect("env-get-outdated", env_get_outdated)
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
