"""The shared core: what every role and the controller may import, and nothing else.

History ops and journals, errors, the role protocols (Lock, Nemesis, Checker, DB and the node
operations a nemesis asks of the cluster), capabilities, fault schedules, history formats (EDN).
It imports no other part of the project.
"""
