"""The grader's own folder under the temp dir, removed when the grading process ends, however it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path


# -- the grader's folder under the temp dir ------------------------------------------------------------

# The watcher of a scratch folder, a process of its own: detached from the grader (forked once more, in a
# session of its own, deaf to hangups, Ctrl-C and SIGTERM), it reads its stdin, a pipe whose only writing
# end the grader holds, until the end, which comes when the grader ends, however it ends; then it removes
# the folder (more than once while a sandbox that is still dying writes into it).
_WATCHER = """
import os, shutil, signal, sys, time
for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
    signal.signal(number, signal.SIG_IGN)
if os.fork():
    os._exit(0)
os.setsid()
while os.read(0, 4096):
    pass
for _ in range(100):
    shutil.rmtree(sys.argv[1], ignore_errors=True)
    if not os.path.lexists(sys.argv[1]):
        break
    time.sleep(0.1)
"""
_SCRATCH: list = []  # [pid, folder, the pipe's writing end]: this process's scratch folder, once made
_SCRATCH_LOCK = threading.Lock()


def scratch_folder() -> Path:
    """This process's folder in the temp dir, which holds everything the grader makes there: the warm
    templates' spools, the folders of cold runs and of a cluster's tasks, the sandbox probe. A watcher
    removes it once this process has ended, however it ended: a grader that is SIGKILLed (a Dask worker
    killed mid-batch, the OOM killer) cannot clean up after itself, and one ended by SIGTERM runs no atexit.

    (Rather than a lock file that the next grader on the machine sweeps away, or Dask's own
    ``local_directory``, which the next worker started in it cleans: either leaves the folder until
    another grader or worker starts there, which may be never, as for a worker killed for good, and the
    latter does nothing for grading on one machine.)"""
    with _SCRATCH_LOCK:
        if _SCRATCH and _SCRATCH[0] == os.getpid():
            return _SCRATCH[1]
        folder = Path(tempfile.mkdtemp(prefix="attention-grader-"))
        read, write = os.pipe()  # neither end is inherited by what this process starts (but the watcher's stdin)
        try:
            started = subprocess.run([sys.executable, "-I", "-S", "-c", _WATCHER, str(folder)], stdin=read,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", env={})
        finally:
            os.close(read)
        if started.returncode != 0:
            print(f"warning: no watcher for {folder}: it stays if this process is killed", file=sys.stderr)
        _SCRATCH[:] = [os.getpid(), folder, write]  # the writing end stays open until this process ends
        return folder
