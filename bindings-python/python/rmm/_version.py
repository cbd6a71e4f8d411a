"""``__version__`` and ``__git_commit__`` (RMM's ``rmm._version``).

``__version__`` is the RMM release this package is a drop-in for, read from the package's
``VERSION`` file as RMM reads its own (``26.10.00``): code that checks RMM's version sees the API
it gets. rmm-rs's own version (the wheel's) is ``__rmm_rs_version__``.

``__git_commit__`` is the commit the package was built from when the build wrote it into the
package's ``GIT_COMMIT`` file (``scripts/gpu-stage.sh`` does), and ``""`` otherwise, as in RMM.
"""

import importlib.resources

from rmm import _rmm

__version__: str = importlib.resources.files(__package__).joinpath("VERSION").read_text().strip()
__rmm_rs_version__: str = _rmm.__version__

try:
    __git_commit__: str = importlib.resources.files(__package__).joinpath("GIT_COMMIT").read_text().strip()
except (FileNotFoundError, NotADirectoryError):
    __git_commit__ = ""

__all__ = ["__git_commit__", "__rmm_rs_version__", "__version__"]
