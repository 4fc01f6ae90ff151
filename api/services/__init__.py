"""The services the routers and the console share: the one home of every Temporal start, query, update and
signal the API makes, of the reads and actions both faces offer, and of the recall REST and MCP share.

A service takes typed inputs (the principal, ids, the engine, a :data:`~api.services.client.ClientSource`),
returns typed results and raises :class:`~memory.errors.MnemoError` subclasses; it knows nothing of a request
or a response, so a router and a console page calling it cannot drift apart.
"""
