"""The ssh backend, in one place: :mod:`.backend` (``SshBackend``), :mod:`.transport`
(commands over multiplexed OpenSSH connections), :mod:`.hosts` (HOSTS.toml), :mod:`.docker_hosts`
(`harness hosts up|down`: test hosts in containers) and ``ssh_host.sh`` (the host-side script).

Nothing is imported here: reading a HOSTS.toml (the spec does) costs :mod:`.hosts` alone."""
