"""The controller: CLI, test spec, run orchestration, history, results store, backends, DBs."""
