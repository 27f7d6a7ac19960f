"""Fingerprints: whether a saved grade is still the grade of what is in the folder now.

A submission's fingerprint covers its notebooks' bytes, the release, the course seed and the grader's own
code; a batch grades again only a submission whose fingerprint changed (or with ``--force``).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

GRADER_SOURCES = Path(__file__).resolve().parents[1]  # the course package: the grader and its references


@functools.lru_cache(maxsize=1)
def grader_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(GRADER_SOURCES.rglob("*.py")):
        digest.update(path.relative_to(GRADER_SOURCES).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def release_fingerprint(release_folder: Path, seed: int) -> str:
    digest = hashlib.sha256(f"seed {seed}\0grader {grader_fingerprint()}\0".encode())
    for path in sorted(release_folder.iterdir()) if release_folder.is_dir() else []:
        if path.is_file() and path.name != "timestamp.txt":
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def submission_fingerprint(folder: Path, notebooks: list[str], release_print: str) -> str:
    digest = hashlib.sha256(release_print.encode())
    for nb in notebooks:
        path = folder / f"{nb}.ipynb"
        digest.update(nb.encode() + b"\0" + (path.read_bytes() if path.is_file() and not path.is_symlink() else b"<none>"))
    return digest.hexdigest()


def release_digest(release_folder: Path) -> str:
    """The release's files alone (no seed, no grader): one part of :func:`parts`, read once a batch."""
    release = hashlib.sha256()
    for path in sorted(release_folder.iterdir()) if release_folder.is_dir() else []:
        if path.is_file() and path.name != "timestamp.txt":
            release.update(path.name.encode() + b"\0" + path.read_bytes())
    return release.hexdigest()


def parts(folder: Path, notebooks: list[str], release: str, seed: int) -> dict[str, str]:
    """What a grade was made of, each part on its own (a fingerprint mixes them): the submitted notebooks,
    the release (``release``: its :func:`release_digest`), the course seed and the grader's code. A regrade
    report compares them (:mod:`regrade`)."""
    submission = hashlib.sha256()
    for nb in notebooks:
        path = folder / f"{nb}.ipynb"
        submission.update(nb.encode() + b"\0" + (path.read_bytes() if path.is_file() and not path.is_symlink() else b"<none>"))
    return {"submission": submission.hexdigest(), "release": release, "seed": str(seed), "grader": grader_fingerprint()}
