"""Where mcpd keeps things by default, per platformdirs.

platformdirs and pathlib are imported on first use, not with this module: a bridge beside
every host finds its daemon through ``likely_socket_path`` and needs neither (platformdirs
brings the standard library's tempfile, shutil, bz2, lzma and random; with pathlib, two
megabytes per bridge).
"""

from __future__ import annotations

import os
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

    That is ``$MCPD_SOCKET``, else ``mcpd/mcpd.sock`` in the runtime directory when this user
    owns it: ``$XDG_RUNTIME_DIR`` (after ``su`` it still names the other user's), on macOS
    without it ``~/Library/Caches/TemporaryItems``. platformdirs may refuse a directory this
    user owns (a loose mode, a parent others can write), so the guess is only for a client
    that connects: the channel accepts a daemon of this uid alone, and on any failure the
    client resolves the path in full.
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
        if os.stat(runtime).st_uid != os.geteuid():
            return None
    except OSError:
        return None
    return os.path.join(runtime, APP, SOCKET_NAME)


def default_state_dir() -> Path:
    import platformdirs  # noqa: PLC0415 - see the module docstring

    return platformdirs.user_state_path(APP)
