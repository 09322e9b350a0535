"""``memsim serve SYSTEM``: a registered memory system over memsim's HTTP protocol (``memsim.memory.http``)."""

from __future__ import annotations

import argparse
import json

from memsim.analysis.cli.options import add_cache_dir_argument, nonempty_path
from memsim.core.streams import seeded

__all__ = ["serve_arguments", "serve_main"]


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The system, where to listen, or where to write the OpenAPI document."""
    parser.add_argument("system", nargs="?", default="naive", metavar="NAME[:k=v,...]",
                        help="registered system to serve (memsim list; default naive)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8765, help="port (default 8765)")
    add_cache_dir_argument(parser)
    parser.add_argument("--openapi", type=nonempty_path, default=None, metavar="PATH",
                        help="write the protocol's OpenAPI document to PATH and exit")


def _port(text: str) -> int:
    """A TCP port number, 0..65535 (argparse turns the ValueError into a one-line usage error)."""
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {port}")
    return port


def serve_main(args: argparse.Namespace) -> int:
    """Serve until interrupted; bad system names or arguments raise ``UserError``."""
    from memsim.core.errors import UserError

    try:
        from memsim.memory.http_server import create_app, openapi_document
        import uvicorn
    except ImportError as exc:
        raise UserError(f"memsim serve needs the http extra: pip install 'memsim[http]' ({exc})") from exc
    if args.openapi is not None:
        args.openapi.write_text(json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.openapi}")
        return 0
    from memsim.memory.registry import Resources, UnknownSystemError, parse_system

    try:
        spec = parse_system(args.system)
    except (UnknownSystemError, ValueError) as exc:
        raise UserError(f"memsim serve {args.system}: {exc}") from exc
    if spec.name == "http":
        raise UserError("memsim serve http: serve the system itself, not a client of another server")
    shared = Resources()
    if args.cache_dir is not None:
        from memsim.memory.embed import Embedder

        shared = Resources(embedder_factory=lambda: Embedder(cache_dir=args.cache_dir))

    def resources(seed: int) -> Resources:

        made = shared.fork()
        made.rng = seeded(seed)
        return made

    try:
        app = create_app(spec.name, spec.args, make_resources=resources)
    except ValueError as exc:
        raise UserError(f"memsim serve {args.system}: {exc}") from exc
    print(f"serving {spec.display} on http://{args.host}:{args.port} (protocol memsim-memory/1)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
