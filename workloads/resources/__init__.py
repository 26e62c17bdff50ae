"""The protected resource's implementations (:mod:`harness.core.resource` is the protocol):
``redis`` (a Lua script orders and logs every write) and ``postgres`` (a table, SQL fencing)."""
