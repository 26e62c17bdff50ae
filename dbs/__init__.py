"""DB definitions: what a server is and how to run one node of it (not where: backends).

Each is a class that declares itself (``name``, ``summary``, ``default_nodes``, ``port``,
``default_lock``) and gains faults by implementing capabilities
(:mod:`harness.core.capabilities`); the registry lists them.
"""
