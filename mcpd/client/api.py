"""The client's methods, each declared once for both clients.

A ``Method`` pairs a call builder from ``_wire`` with what to hand back from its
result. Read through a blocking ``Client`` it is a plain function returning the value;
through an ``AsyncClient`` the same declaration returns an awaitable. The two clients
differ only in how a ``Call`` travels (``_run``), never in what the methods are.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Self, TypeVar, overload

from mcpd.client import _wire

if TYPE_CHECKING:
    from mcpd.client.aio import AsyncClient
    from mcpd.client.sync import Client

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _same(result: T) -> T:
    return result


class Method(Generic[P, R, T]):
    """A client method: ``build(*args)`` makes the call, ``pick(result)`` is what the caller gets."""

    def __init__(self, build: Callable[P, _wire.Call[R]], pick: Callable[[R], T]) -> None:
        self.build = build
        self.pick = pick
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type | None = None) -> Callable[P, Awaitable[T]]: ...
    @overload
    def __get__(self, client: Client, owner: type | None = None) -> Callable[P, T]: ...
    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self

        @functools.wraps(self.build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client._run(self.build(*args, **kwargs), self.pick)

        return bound


def method(build: Callable[P, _wire.Call[T]]) -> Method[P, T, T]:
    """A method whose caller gets the whole result."""
    return Method(build, _same)


class Api:
    """Every method of the daemon, for ``Client`` and ``AsyncClient`` alike."""

    status = Method(_wire.status, lambda result: result.servers)
    overview = method(_wire.status)
    """``status`` with the usage store's state beside the servers."""
    show = method(_wire.show)
    start = method(_wire.start)
    stop = method(_wire.stop)
    restart = method(_wire.restart)
    reload = method(_wire.reload)
    tools = Method(_wire.all_tools, lambda result: result.tools)
    search = method(_wire.search)
    select = method(_wire.select)
    call_tool = method(_wire.tools_call)
    connect_server = method(_wire.session_connect)
    session_tools = method(_wire.session_tools)
    snippet = Method(_wire.snippet, lambda result: result.text)
    approve = method(_wire.approve)
    trust = method(_wire.trust)
    request_capability = method(_wire.capability_request)
    report = method(_wire.report)
    resources = Method(_wire.resources, lambda result: result.resources)
    resource_templates = Method(_wire.resource_templates, lambda result: result.templates)
    read_resource = method(_wire.read_resource)
    prompts = Method(_wire.prompts, lambda result: result.prompts)
    get_prompt = method(_wire.get_prompt)
    logs = Method(_wire.logs, lambda result: result.entries)
    subscribe_resource = method(_wire.subscribe_resource)
    unsubscribe_resource = Method(_wire.unsubscribe_resource, lambda result: result.ok)
    complete = Method(_wire.complete, lambda result: result.completion)
