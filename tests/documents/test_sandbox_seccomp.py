"""The sandbox child's syscall filter loads without starting a process of its own.

Every parsing child loads it before it reads a byte; libseccomp is found by its soname through
the loader's cache, not by ``ctypes.util.find_library``, which runs ``ldconfig -p`` once for each
library (two processes more in every child).
"""

from __future__ import annotations

import json
import subprocess
import sys

from documents.sandbox.isolation import PROJECT_ROOT

# A fresh interpreter (the filter stays on a process for good): every process started while the
# child's module loads its filter is recorded by an audit hook, then the filter is shown to hold.
PROBE = """
import errno, json, socket, sys
started = []
sys.addaudithook(lambda event, args: started.append(event) if event in (
    "subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "os.system") else None)
from documents.sandbox.child import filter_syscalls
loaded = filter_syscalls()
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    refused = False
except OSError as exc:
    refused = exc.errno == errno.EPERM
print(json.dumps({"loaded": loaded, "started": started, "refused": refused}))
"""


def test_the_syscall_filter_loads_without_starting_ldconfig() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=PROJECT_ROOT, capture_output=True, check=True, timeout=60
    )
    outcome = json.loads(done.stdout)
    assert outcome == {"loaded": True, "started": [], "refused": True}, done.stderr.decode()[-2000:]
