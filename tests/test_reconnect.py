"""Remote (streamable HTTP) servers through an outage: noticed at once, reconnected for as long as
they are configured, calls made meanwhile wait and run."""

from __future__ import annotations

import anyio
import pytest

from mcpd.config.model import Config, RestartPolicy, ServerConfig
from mcpd.errors import CallTimeout
from mcpd.model.servers import ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.model.tools import ToolResult
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing.remote import free_port, running_http_fixture

pytestmark = pytest.mark.anyio
S = ServerState
TINY_CAP = RestartPolicy(initial_delay=0.01, max_delay=0.1, jitter=0.0)


async def test_outage_is_noticed_without_a_call_and_without_waiting_for_a_ping() -> None:
    """The server going away closes its event stream: the supervisor reconnects at once although the
    next ping is an hour away and no call was made."""
    port = free_port()
    remote = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp", ping_interval=3600.0)
    async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
        actor = sup.actor("remote")
        async with running_http_fixture("remote", port):
            await actor.wait_state(S.RUNNING, timeout=60)
        await actor.wait_state(S.BACKOFF, timeout=60)
        assert actor.last_error


async def test_a_server_that_stops_answering_is_noticed_when_a_call_gives_up() -> None:
    """A remote server whose process hangs (connections still accepted, nothing answered): the
    cancellation of a call that timed out gets no answer either, and that is taken as trouble at
    once, not left to the next ping an hour away; nor does the unanswered notification hold the
    session's later requests for long."""
    port = free_port()
    remote = ServerConfig(
        name="remote", url=f"http://127.0.0.1:{port}/mcp", ping_interval=3600.0, ping_timeout=1.0
    )
    async with (
        open_supervisor(Config(source="<test>", servers=(remote,))) as sup,
        running_http_fixture("remote", port, "--freeze-after", "1"),
    ):
        actor = sup.actor("remote")
        await actor.wait_state(S.RUNNING, timeout=60)
        await actor.call_tool("echo", {"text": "the last answer"}, timeout=30)
        with pytest.raises(CallTimeout):
            await actor.call_tool("echo", {"text": "never answered"}, timeout=1)
        # Noticed now (a ping at once, which times out too), not at the next ping an hour away.
        await actor.wait_state(S.DEGRADED, S.STARTING, S.BACKOFF, timeout=30)


async def test_long_outage_then_back_to_running_and_waiting_call_succeeds() -> None:
    """Down for more reconnect attempts than mcpd used to allow: never failed; a call made during the
    outage waits and succeeds once the server is back; last_error is cleared then."""
    port = free_port()
    remote = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp", restart=TINY_CAP)
    attempts: int | None = None
    """Backoffs since the outage began (None before: the server's first start has its own)."""
    many = anyio.Event()

    def count(event: ServerEvent) -> None:
        nonlocal attempts
        if attempts is not None and isinstance(event, StateChanged) and event.new is S.BACKOFF:
            attempts += 1
            if attempts == 15:
                many.set()

    async with open_supervisor(Config(source="<test>", servers=(remote,)), listeners=[count]) as sup:
        actor = sup.actor("remote")
        async with running_http_fixture("remote", port):
            await actor.wait_state(S.RUNNING, timeout=60)
        attempts = 0
        results: list[ToolResult] = []
        answered = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def call_during_outage() -> None:
                results.append(await actor.call_tool("echo", {"text": "waited"}, timeout=120))
                answered.set()

            tg.start_soon(call_during_outage)
            with anyio.fail_after(120):
                await many.wait()
            assert actor.state in (S.BACKOFF, S.STARTING) and not results
            async with running_http_fixture("remote", port):
                await actor.wait_state(S.RUNNING, timeout=60)
                status = actor.status()
                with anyio.fail_after(120):
                    await answered.wait()
        assert S.FAILED not in {change.new for change in actor.history}
    assert results[0].content[0]["text"] == "waited"
    assert status.last_error is None and status.last_exit


async def test_restarted_server_that_forgot_the_session_is_reconnected() -> None:
    """A server restarted on the same port has forgotten the old session: whether the outage was seen
    first or the old session meets a 404, the next call runs on a new session."""
    port = free_port()
    remote = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp", restart=TINY_CAP)
    async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
        actor = sup.actor("remote")
        async with running_http_fixture("remote", port):
            await actor.wait_state(S.RUNNING, timeout=60)
        async with running_http_fixture("remote", port):
            result = await actor.call_tool("echo", {"text": "new session"}, timeout=120)
    assert result.content[0]["text"] == "new session"
