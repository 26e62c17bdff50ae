"""The ssh backend, in one place: :mod:`.backend` (the backend), :mod:`.transport` (commands
over multiplexed OpenSSH connections), :mod:`.hosts` (HOSTS.toml), :mod:`.docker_hosts`
(`harness hosts up|down`: test hosts in containers) and ``ssh_host.sh`` (the host-side script).
"""

from harness.controller.backends.ssh.backend import SshBackend

__all__ = ["SshBackend"]
