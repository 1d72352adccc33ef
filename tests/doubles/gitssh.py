"""Git over SSH for a directory of bare repositories: Debian's OpenSSH server on a loopback port, with its
own host key, one authorized client key and nothing else, as a Git host's SSH endpoint looks to `git`.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
from pathlib import Path

from cutover.demo.world import _free_port


def _keypair(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)


class SshGitServer:
    def __init__(self, root: Path, *, workdir: Path) -> None:
        self.root, self.dir = root, workdir
        self.port = _free_port()
        self.client_key = workdir / "client_key"
        self.known_hosts = workdir / "known_hosts"
        self._process: asyncio.subprocess.Process | None = None

    def url(self, repository: str) -> str:
        return f"ssh://{getpass.getuser()}@127.0.0.1:{self.port}{self.root / repository}"

    async def __aenter__(self) -> SshGitServer:
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        self.dir.mkdir(parents=True, exist_ok=True)
        _keypair(self.dir / "host_key")
        _keypair(self.client_key)
        (self.dir / "authorized_keys").write_text((self.dir / "client_key.pub").read_text())
        host_public = (self.dir / "host_key.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_public[0]} {host_public[1]}\n")
        config = self.dir / "sshd_config"
        config.write_text(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.dir / "host_key"}
PidFile {self.dir / "sshd.pid"}
AuthorizedKeysFile {self.dir / "authorized_keys"}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
LogLevel ERROR
""")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd privilege separation needs it
        self._process = await asyncio.create_subprocess_exec(sshd, "-D", "-e", "-f", str(config),
                                                             stderr=asyncio.subprocess.DEVNULL, env=dict(os.environ))
        for _ in range(200):  # until the port takes connections
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                await writer.wait_closed()
                return self
            except OSError:
                await asyncio.sleep(0.02)
        raise RuntimeError("sshd did not start")

    async def __aexit__(self, *exc: object) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
