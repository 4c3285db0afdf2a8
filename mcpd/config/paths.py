"""Where mcpd keeps things by default, per platformdirs.

platformdirs and pathlib are imported on first use, not with this module: a bridge beside
every host finds its daemon through ``likely_socket_path`` and needs neither (platformdirs
brings the standard library's tempfile, shutil, bz2, lzma and random: 1.5 MB per bridge, and
pathlib 0.7 MB more).
"""

from __future__ import annotations

import os
import stat
import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

APP = "mcpd"
SOCKET_NAME = "mcpd.sock"


def default_config_path() -> Path:
    import platformdirs  # noqa: PLC0415 - see the module docstring

    return platformdirs.user_config_path(APP) / "config.toml"


def default_runtime_dir() -> Path:
    import platformdirs  # noqa: PLC0415 - see the module docstring

    # Without XDG_RUNTIME_DIR platformdirs falls back to /tmp/runtime-$UID and warns; the
    # fallback is fine for us (the directory is created 0700), the warning is noise.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return platformdirs.user_runtime_path(APP)


def default_socket_path() -> Path:
    """``$MCPD_SOCKET``, else ``mcpd.sock`` in the user runtime dir."""
    from pathlib import Path  # noqa: PLC0415 - see the module docstring

    override = os.environ.get("MCPD_SOCKET")
    return Path(override) if override else default_runtime_dir() / SOCKET_NAME


def likely_socket_path() -> str | None:
    """``default_socket_path()`` as it usually is, found without platformdirs; else None.

    That is ``$MCPD_SOCKET``, else ``mcpd/mcpd.sock`` in the runtime directory
    (``$XDG_RUNTIME_DIR``; on macOS without it ``~/Library/Caches/TemporaryItems``) when the
    daemon's folder is already there and the directory is one platformdirs would take: this
    user's own (after ``su`` the variable names the other user's), a real directory, mode 0700.
    None sends the caller to platformdirs (before any daemon ran, or on an unusual set-up).
    """
    override = os.environ.get("MCPD_SOCKET")
    if override:
        return override
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if not runtime and sys.platform == "darwin":
        runtime = os.path.expanduser("~/Library/Caches/TemporaryItems")
    if not os.path.isabs(runtime):
        return None
    try:
        info = os.lstat(runtime)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    folder = os.path.join(runtime, APP)
    return os.path.join(folder, SOCKET_NAME) if os.path.isdir(folder) else None


def default_state_dir() -> Path:
    import platformdirs  # noqa: PLC0415 - see the module docstring

    return platformdirs.user_state_path(APP)
