"""Where the course's gradebook lives, and the one way the grader opens it.

nbgrader keeps its gradebook in ``gradebook.db`` (SQLite) in the course folder unless the course's
``nbgrader_config.py`` sets ``c.CourseDirectory.db_url``: a server that instructors and TAs share (PostgreSQL).
Every reader and writer of the gradebook here, nbgrader's own pipeline included, goes through
:func:`gradebook_url`, so the grades land where formgrader reads them.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

if TYPE_CHECKING:
    from nbgrader.api import Gradebook

COURSE_ID = "attention-course"


def gradebook_url(root: Path) -> str:
    """The gradebook's SQLAlchemy URL: the course config's ``c.CourseDirectory.db_url``, else SQLite in ``root``."""
    config = root / "nbgrader_config.py"
    if config.is_file():
        from traitlets.config.loader import PyFileConfigLoader

        loaded = PyFileConfigLoader(config.name, path=str(root)).load_config()
        url = loaded.get("CourseDirectory", {}).get("db_url")
        if url:
            return str(url)
    return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"


def gradebook_location(root: Path) -> str:
    """Where the gradebook is, to print: the SQLite file's path, or the server's URL without its password."""
    url = gradebook_url(root)
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    return re.sub(r"^([^:/]+://[^:/@]*):[^@/]*@", r"\1:***@", url)


def fitted(text: str | None) -> str | None:
    """``text`` as nbgrader's gradebook can hold it in a name, email or id column (``String(128)``): PostgreSQL
    refuses a longer value, which SQLite would keep whole, so both keep its first 128 characters. None if empty."""
    return text[:128] if text else None


def has_gradebook(root: Path) -> bool:
    """Whether there is a gradebook to read (a SQLite file that exists; a server's is assumed to)."""
    url = gradebook_url(root)
    return not url.startswith("sqlite:///") or Path(url[len("sqlite:///"):]).is_file()


@contextmanager
def open_gradebook(root: Path) -> Iterator["Gradebook"]:
    """nbgrader's :class:`~nbgrader.api.Gradebook` of the course at ``root``, closed on leaving."""
    from nbgrader.api import Gradebook as NbgraderGradebook

    with NbgraderGradebook(gradebook_url(root), COURSE_ID) as gradebook:
        yield gradebook


Read = TypeVar("Read")


def each_submission(root: Path, assignment: str, read: "Callable[[object], Read]") -> dict[str, Read]:
    """{student: ``read(submission)``} for every recorded submission of ``assignment`` (empty when there is
    no gradebook or no such assignment in it), in one session."""
    from nbgrader.api import MissingEntry

    if not has_gradebook(root):
        return {}
    with open_gradebook(root) as gradebook:
        try:
            submissions = gradebook.find_assignment(assignment).submissions
        except MissingEntry:
            return {}
        return {submission.student.id: read(submission) for submission in submissions}
