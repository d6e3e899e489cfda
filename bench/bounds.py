"""The search a bench runs, as its command line gives it: a preset and the model's bounds."""

from __future__ import annotations

import argparse


def add_search_arguments(parser: argparse.ArgumentParser, servers: int, max_log: int) -> None:
    """--preset, --servers, --max-generation, --max-log, --max-crashes, --network, --no-symmetry."""
    from hwm.properties.protocol import PRESETS

    parser.add_argument("--preset", default="raft", choices=sorted(PRESETS))
    parser.add_argument("--servers", type=int, default=servers)
    parser.add_argument("--max-generation", type=int, default=4)
    parser.add_argument("--max-log", type=int, default=max_log)
    parser.add_argument("--max-crashes", type=int, default=1)
    parser.add_argument("--network", default="rpc", choices=["rpc", "async"])
    parser.add_argument("--no-symmetry", action="store_true")


def bounds_of(args: argparse.Namespace) -> dict:
    return dict(servers=args.servers, max_generation=args.max_generation, max_log=args.max_log,
                max_crashes=args.max_crashes, network=args.network)


def model_of(preset: str, **config):
    """The preset's model under these Config fields."""
    from hwm.model.registry import build_model
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    return build_model(PRESETS[preset].protocol, Config(**config))
