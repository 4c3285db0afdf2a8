"""The HTTP front end: hosts' MCP sessions over MCP Streamable HTTP (``POST``/``GET``/``DELETE /mcp``).

::

    token      the bearer token: generated once, kept in a 0600 file (``mcpd token`` prints it)
    sessions   one ``HostSession`` per ``Mcp-Session-Id``, and which stream each message goes to
    app        the ASGI app (starlette): token, Host and Origin checks, then the three methods
    listener   the address bound and the token read at start, before any server is spawned
    server     uvicorn inside the daemon's task group, on that listener; stopped with the daemon

Only ``token`` is imported when HTTP is off (by ``mcpd token``): starlette and uvicorn are
loaded by ``server``, which the daemon imports only when ``[daemon] http`` is set, once its
children are spawned.
"""
