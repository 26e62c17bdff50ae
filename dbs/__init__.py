"""DB definitions: what a server is and how to run one node of it (not where: backends).

Each is a class built on :class:`dbs.base.DB` that declares itself (``name``, ``summary``,
``port``, ``default_lock``, its ``debian_packages``, ...) and gains faults by implementing
capabilities (:mod:`harness.core.capabilities`); the registry lists them. A role: a DB imports
neither the controller nor another role.
"""
