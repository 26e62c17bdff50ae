"""Faults. Each is a class that declares itself (name, summary, what it requires of the DB and
the environment, the target roles it can aim at); the controller's registry finds them."""
