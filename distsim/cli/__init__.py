"""``python -m distsim``: the simulator from the command line."""

from distsim.cli.commands import OneLineParser, build_parser, collect_info, main, run_command

__all__ = ["OneLineParser", "build_parser", "collect_info", "main", "run_command"]
