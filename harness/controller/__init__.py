"""The controller: turns a spec into a run (cluster, clients, faults), stores it and checks it.

It is the only layer that knows which backend runs the nodes and which classes the names in a
spec stand for (:mod:`harness.controller.registry`).
"""
