"""Run the engine: process group, time limit, Ctrl-C, progress bar, engine.log, final status.json."""

from harness.launch.runner import STATES, LaunchResult, launch

__all__ = ["STATES", "LaunchResult", "launch"]
