"""`kubelab up`'s own API server in a process of its own (the default; `kubelab up --one-process` keeps it
in up's process): `python -m launcher.upapiserver --listen-fd FD --private-fd FD [--lab-fd FD] SPEC`.

Not a command for users: `kubelab up` starts it (launcher/apiservers.py supervises it as it does the
further API servers: restarted when it exits, with the kubelet's back-off) and hands it, already bound,
every socket the API server of `up` serves on:
- --listen-fd: the port users reach (--listen), HTTP or HTTPS as up's flags say;
- --private-fd: the unix socket of up's own components (scheduler, controllers, DNS, kubelets, proxy
  agents), whose requests are marked internal (apiserver.serving.Internal: not counted against the
  connection cap), as they are when the API server runs in up's process;
- --lab-fd (netns lab): APISERVER_LAB_IP:6443, bound by up inside the lab's "apiserver" namespace, where
  pods reach the API through the kubernetes Service; served with the lab CA's certificate.
SPEC is build.ApiServerOptions as JSON (spec_json), including what has no `kubelab apiserver` flag: the
advertised port and the namespace kubelets are dialed from.

Why a process: one Python process runs one core. With everything in `kubelab up`'s process, the API
server's handlers took more than half of the CPU of a burst (bench/up.py) and the components the rest,
all on one core while the machine had two; here the API server and the components each have one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import socket
import sys

from apiserver.serving import ServingOptions

from .build import ApiServerOptions

MODULE = "launcher.upapiserver"


def spec_json(options: ApiServerOptions, *, lab_cert_file: str | None = None, lab_key_file: str | None = None
              ) -> str:
    """`options` (and the lab listener's certificate) as the SPEC argument. Pure."""
    fields = dataclasses.asdict(options)
    fields["serving"] = dataclasses.asdict(options.serving)
    return json.dumps({"options": fields, "lab_cert_file": lab_cert_file, "lab_key_file": lab_key_file})


def parse_spec(text: str) -> tuple[ApiServerOptions, str | None, str | None]:
    """The inverse of spec_json. Pure."""
    spec = json.loads(text)
    fields = dict(spec["options"])
    fields["serving"] = ServingOptions(**fields["serving"])
    for name in ("etcd_servers", "authorization_modes", "disable_admission_plugins"):
        fields[name] = tuple(fields[name])
    return ApiServerOptions(**fields), spec.get("lab_cert_file"), spec.get("lab_key_file")


def argv(options: ApiServerOptions, *, listen_fd: int, private_fd: int, lab_fd: int | None = None,
         lab_cert_file: str | None = None, lab_key_file: str | None = None) -> list[str]:
    """The child's command line. Pure."""
    out = [sys.executable, "-m", MODULE, "--listen-fd", str(listen_fd), "--private-fd", str(private_fd)]
    if lab_fd is not None:
        out += ["--lab-fd", str(lab_fd)]
    return [*out, spec_json(options, lab_cert_file=lab_cert_file, lab_key_file=lab_key_file)]


async def serve(options: ApiServerOptions, listener: socket.socket, private: socket.socket, lab: socket.socket | None,
                lab_cert_file: str | None, lab_key_file: str | None) -> None:
    import uvicorn

    from apiserver.app import create_app
    from apiserver.serving import Internal, api_server, raise_open_files_limit, uvicorn_config

    from .build import build_apiserver_config

    raise_open_files_limit()
    serving_options = options.serving
    app = create_app(build_apiserver_config(options))
    host, port = options.host_port
    public = api_server(uvicorn_config(app, options=serving_options, host=host, port=port,
                                       ssl_certfile=options.tls_cert_file, ssl_keyfile=options.tls_private_key_file,
                                       graceful_shutdown=None), serving_options)
    # The private socket's and the lab's servers share the app, whose lifespan (the bootstrap) the public
    # server runs once.
    internal = uvicorn.Server(uvicorn_config(Internal(app), options=serving_options, lifespan="off",
                                             graceful_shutdown=None))
    servers: list[tuple[uvicorn.Server, socket.socket]] = [(public, listener), (internal, private)]
    if lab is not None:
        servers.append((api_server(uvicorn_config(app, options=serving_options, lifespan="off",
                                                  ssl_certfile=lab_cert_file, ssl_keyfile=lab_key_file,
                                                  graceful_shutdown=None), serving_options), lab))
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for server, _ in servers:
            server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    tasks: list[asyncio.Task[None]] = []
    for server, sock in servers:
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
        if server is public:  # the others once the bootstrap is done, as `kubelab up` in one process has it
            while not public.started and not tasks[0].done():
                await asyncio.sleep(0.01)
    # Any server ending ends them all: up's supervisor starts the process again.
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    stop()
    await asyncio.gather(*tasks, return_exceptions=True)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--private-fd", type=int, required=True)
    parser.add_argument("--lab-fd", type=int)
    parser.add_argument("spec")
    parsed = parser.parse_args(args)
    options, lab_cert_file, lab_key_file = parse_spec(parsed.spec)
    listener = socket.socket(fileno=parsed.listen_fd)
    private = socket.socket(fileno=parsed.private_fd)
    lab = socket.socket(fileno=parsed.lab_fd) if parsed.lab_fd is not None else None
    from kubelab.gctune import tune_for_long_running
    from kubelab.logs import setup as setup_logging

    setup_logging()
    tune_for_long_running()
    import uvloop

    uvloop.run(serve(options, listener, private, lab, lab_cert_file, lab_key_file))
    # Out without the interpreter's teardown (its collector walking the watch cache's heap), as `kubelab up`
    # itself ends: it took 0.38 s of every Ctrl-C with one node and an empty cluster.
    from .runner import exit_now

    exit_now(0)


if __name__ == "__main__":
    sys.exit(main())
