"""The `kubelab` command line (the CLI contract of README.md and docs/ARCHITECTURE.md): `main` parses the
command line with parsers.build_parser and hands it to the command's function (components.py, upcommand.py,
tools.py, proxyrender.py)."""

from __future__ import annotations

import os
import sys

# gRPC (under aetcd) logs a line at every fork() the netns dataplane makes; only its errors matter here. Set
# before the commands' modules are imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")



def _stop_quietly(signum: int, frame: object) -> None:
    raise SystemExit(0)


# `kubelab apiserver`: SIGTERM (or Ctrl-C) before the server runs stops it at once, with 0: nothing is made
# before uvicorn runs the app's lifespan (etcd, the leases). While it runs, uvicorn takes these signals
# itself: one during the start-up lets the start-up end, then shuts down as after it (the master lease
# removed); uvicorn then puts this handler back and raises the signal again, which lands here.
# kube-apiserver ends a stop with 0 too; Python's default would report SIGTERM's 143 and a
# KeyboardInterrupt traceback. The handler goes in here, before the imports that take seconds on a loaded
# machine, so that a supervisor's SIGTERM soon after the start is taken too.
if next((word for word in sys.argv[1:] if not word.startswith("-")), None) == "apiserver":
    import signal

    for _sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(_sig, _stop_quietly)

from .parsers import build_parser  # after the handler above

SIGPIPE_EXIT = 141  # what a shell reports for a command killed by SIGPIPE (128 + 13)

__all__ = ["build_parser", "main"]


def _setup_logging(verbose: bool) -> None:
    from kubelab import logs

    logs.setup(verbose)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at the interpreter's exit
    except BrokenPipeError:
        # The reader went away (`kubelab trace ... -o json | head`): stop quietly, as a Unix tool
        # killed by SIGPIPE does (the shell's 128 + 13). Python ignores SIGPIPE and raises instead;
        # stdout goes to /dev/null so the interpreter's last flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_EXIT
    return code


if __name__ == "__main__":
    raise SystemExit(main())
