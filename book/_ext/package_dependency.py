"""Sphinx extension: chapters execute again when the course package they import changes.

MyST-NB's execution cache (jupyter-cache) keys a notebook on its own code cells only. A chapter that
calls ``attention_course`` would keep its old outputs and figures after the package changed, and
Sphinx would not even re-read it. This extension hashes the package's sources, and keeps two records:

- beside the execution cache, the hash of the package that filled it: when the package differs, the
  cache is emptied (and the new hash recorded at once, since all it will hold from then on is run
  with the new package). Every edition of the book shares the one cache, so the first edition built
  after a change executes the chapters again, and the others find them executed;
- in each build's doctrees, the hash of the last successful build: when it differs, every document
  is read again, so that each edition shows what the current code computes.
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
    # Python, the widgets' front-end code that chapters embed in their pages, and the translations of
    # the figures' and widgets' text (a chapter draws each figure in every language).
    for path in sorted(p for p in (root / PACKAGE).rglob("*") if p.suffix in {".py", ".js", ".css", ".po"}):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _cache_dir(app: Sphinx) -> Path:
    configured = getattr(app.config, "nb_execution_cache_path", "")
    return Path(configured) if configured else Path(app.outdir).parent / ".jupyter_cache"


def _stamp(app: Sphinx) -> Path:
    return Path(app.doctreedir) / STAMP_NAME


def _cache_stamp(app: Sphinx) -> Path:
    cache = _cache_dir(app)
    return cache.with_name(cache.name + "." + STAMP_NAME)


def builder_inited(app: Sphinx) -> None:
    current = package_hash(Path(app.confdir))
    cache, cache_stamp = _cache_dir(app), _cache_stamp(app)
    # A cache filled by another version of the package (or by an unknown one) is emptied.
    filled_by = cache_stamp.read_text() if cache_stamp.is_file() else None
    if filled_by != current:
        if cache.exists():
            logger.info("course package changed since the chapters were executed: every chapter executes again")
            shutil.rmtree(cache, ignore_errors=True)
        cache_stamp.parent.mkdir(parents=True, exist_ok=True)
        cache_stamp.write_text(current)
    stamp = _stamp(app)
    app.env.course_package_changed = stamp.is_file() and stamp.read_text() != current
    app.env.course_package_hash = current


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
