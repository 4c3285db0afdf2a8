"""What every front end's calls work on: the supervised set, its catalogue, the usage store and prior."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

import msgspec

from mcpd.discovery.prior import UsagePrior
from mcpd.front.activity import Activity
from mcpd.front.loglevels import LogLevels
from mcpd.front.server_requests import ServerRequests
from mcpd.front.subscriptions import Subscriptions
from mcpd.registry.catalog import Catalog
from mcpd.store.db import Store
from mcpd.supervisor.supervisor import Supervisor


@dataclass(kw_only=True)
class Core:
    supervisor: Supervisor
    catalog: Catalog
    usage: Store = field(default_factory=lambda: Store.disabled("usage recording is off"))
    prior: UsagePrior = field(default_factory=UsagePrior)
    activity: Activity = field(default_factory=Activity)
    requests: ServerRequests = field(default_factory=ServerRequests)
    """Routes servers' requests (sampling, elicitation, roots) to the callers of running calls."""
    subscriptions: Subscriptions = field(init=False)
    """Resource subscriptions of every client, one per URI on each server."""
    log_levels: LogLevels = field(init=False)
    """The log level hosts want, asked of every server."""
    resavers: list[Callable[[], int]] = field(default_factory=list)
    """What keeps records in memory that a store which lost them (its file deleted, or read-only
    meanwhile) is given again; each returns how many it saved (``daemon.serving.keep_store``)."""
    forgetters: list[Callable[[Collection[str]], Awaitable[None]]] = field(default_factory=list)
    """What keeps hosts' subscriptions beyond ``subscriptions`` (the HTTP sessions set aside), told
    of the servers a reload removed, after ``Subscriptions.forget``; each waits a bounded time."""

    def __post_init__(self) -> None:
        self.subscriptions = Subscriptions(self.supervisor)
        self.log_levels = LogLevels(self.supervisor)


class Caller(msgspec.Struct, frozen=True):
    """Who a call is recorded for: the client's name and its session (a Struct: made for every call,
    and a frozen dataclass's ``__init__`` costs five times as much)."""

    client: str | None
    session: str
