from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    # The daemon is an asyncio program (its child processes use asyncio's subprocess machinery).
    return "asyncio"
