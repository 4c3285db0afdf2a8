"""What the daemon offers callers, once for every front end: the socket methods and hosts' MCP sessions.

::

    core       what the call path works on (supervisor, catalogue, usage store, prior)
    calls      the one call path: resolve, reserved tool, trust gate, usage record, the call;
               search, connect a server, the ``<available_mcps>`` snippet
    meta       the meta tools a host sees (search, connect, call, request a capability)
    session    ``HostSession``: one MCP server session for one host, transport-agnostic
    hosts      the live host sessions, told of supervisor events
    socket     a socket connection upgraded to MCP (``hello`` with ``mode: "mcp"``)
"""
