"""A private Ray runs with token auth and a fresh random token per run (issue 12: it ran with
auth disabled, so any local user could submit work to it while a run was up)."""

import os
import subprocess
import sys

PROBE = ("import os; from rl.run import arm_private_auth; arm_private_auth(); "
         "print(os.environ.get('RAY_AUTH_MODE'), os.environ.get('RAY_AUTH_TOKEN', ''))")


def _probe(**env: str) -> tuple[str, str]:
    full = {**os.environ, "RAY_AUTH_MODE": "disabled", **env}
    full.pop("RAY_AUTH_TOKEN", None)
    if "RAY_ADDRESS" not in env:
        full.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, check=True)
    mode, _, token = out.stdout.strip().partition(" ")
    return mode, token


def test_private_ray_gets_token_auth_with_a_fresh_token_each_run():
    (mode_a, token_a), (mode_b, token_b) = _probe(), _probe()
    assert mode_a == mode_b == "token"
    assert len(token_a) == 64 and len(token_b) == 64 and token_a != token_b


def test_a_joined_cluster_keeps_its_own_settings():
    assert _probe(RAY_ADDRESS="127.0.0.1:1") == ("disabled", "")


def test_importing_rl_run_does_not_import_ray():
    """Ray reads its auth settings at import: the engine must decide before that."""
    code = "import sys, rl.run; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
