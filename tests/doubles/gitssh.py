"""Git over SSH for a directory of bare repositories, as a Git host's SSH endpoint looks to `git`: an SSH server on
a loopback port (asyncssh, which pip installs, so no system sshd is needed), with its own host key and one
authorized client key, that runs only `git-upload-pack` and `git-receive-pack` on repositories under its root.
The client side stays OpenSSH's `ssh`, started by `git`, exactly as the product runs it.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path

import asyncssh

from cutover.demo.world import _free_port

SERVICES = frozenset({"git-upload-pack", "git-receive-pack"})  # what GitHub's and Gitea's SSH endpoints run


class SshGitServer:
    def __init__(self, root: Path, *, workdir: Path) -> None:
        self.root, self.dir = root.resolve(), workdir
        self.port = _free_port()
        self.client_key = workdir / "client_key"
        self.known_hosts = workdir / "known_hosts"
        self.commands: list[str] = []  # what clients asked to run, refused ones included
        self._server: asyncssh.SSHAcceptor | None = None

    def url(self, repository: str) -> str:
        return f"ssh://git@127.0.0.1:{self.port}{self.root / repository}"

    async def __aenter__(self) -> SshGitServer:
        self.dir.mkdir(parents=True, exist_ok=True)
        host_key = asyncssh.generate_private_key("ssh-ed25519", comment="host")
        client_key = asyncssh.generate_private_key("ssh-ed25519", comment="deploy")
        client_key.write_private_key(str(self.client_key))  # OpenSSH's format, which `ssh -i` reads
        self.client_key.chmod(0o600)
        host_public = host_key.export_public_key().decode().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_public[0]} {host_public[1]}\n")
        self._server = await asyncssh.create_server(
            asyncssh.SSHServer, "127.0.0.1", self.port, server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
            process_factory=self._serve, encoding=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or ""
        self.commands.append(command)
        argv = self._allowed(command)
        if argv is None:
            process.stderr.write(f"fatal: {command!r} is not a Git service here\n".encode())
            process.exit(128)
            return
        env = dict(os.environ)
        if protocol := process.env.get("GIT_PROTOCOL"):  # git sends it with SendEnv for protocol v2
            env["GIT_PROTOCOL"] = str(protocol)
        child = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                     stdout=asyncio.subprocess.PIPE,
                                                     stderr=asyncio.subprocess.PIPE, env=env)
        await process.redirect(stdin=child.stdin, stdout=child.stdout, stderr=child.stderr)
        process.exit(await child.wait())
        await process.wait_closed()

    def _allowed(self, command: str) -> list[str] | None:
        """A Git service on a repository under the root, as `git` asks for it (`git-upload-pack '/path'`)."""
        try:
            argv = shlex.split(command)
        except ValueError:
            return None
        if len(argv) != 2 or argv[0] not in SERVICES:
            return None
        path = Path(argv[1]).resolve()
        return argv if path.is_relative_to(self.root) and path.is_dir() else None
