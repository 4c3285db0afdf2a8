"""Everything that crosses the socket or a package boundary, in one leaf package.

Imports only msgspec and the standard library, so every layer may use it and a client
loads it without the daemon::

    states     server states and their transition table
    servers    status snapshots, server info, supervisor events, reload plans
    tools      tools as servers list them, catalogue entries, results, rendered registries
    trust      verifier findings, held-back changes, pinned definitions
    usage      call and capability-request records, the usage report
    protocol   the socket's messages and every method's params and result
"""
