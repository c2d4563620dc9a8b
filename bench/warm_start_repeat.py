"""Is the warm start the same twice? `python3 bench/warm_start_repeat.py RESOLVED_RECIPE SEED [DEVICE]`

Trains the recipe's warm start twice from the same seed (fresh caches) and prints the two final
losses and whether every weight is bit-identical. Resolve the recipe first with
`harness show RECIPE --scale S > RESOLVED_RECIPE`.
"""

from __future__ import annotations

import json
import sys
import tempfile

import torch
import yaml

from rl.config import parse_config
from rl.envs import make_env
from rl.models import build_model
from rl.tokenizer import load_tokenizer
from rl.warm_start import warm_start


def main() -> None:
    cfg = parse_config(yaml.safe_load(open(sys.argv[1])))
    seed, device = int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "cuda"
    tokenizer = load_tokenizer(cfg.model.tokenizer, model_path=cfg.model.path)
    env = make_env(cfg.task, data=cfg.data, tokenizer=tokenizer)
    runs = []
    for _ in range(2):
        model = build_model(cfg.model, vocab_size=len(tokenizer), seed=seed)
        info = warm_start(model, tokenizer, env, cfg.algorithm.warm_start, seed=seed,
                          cache_dir=tempfile.mkdtemp(), device=device)
        runs.append((info, model.state_dict()))
    (a, wa), (b, wb) = runs
    same = all(torch.equal(wa[k], wb[k]) for k in wa)
    print(json.dumps({"seed": seed, "device": device, "loss": [a["loss"], b["loss"]],
                      "seconds": [a["seconds"], b["seconds"]],
                      "bit_identical": same}))


if __name__ == "__main__":
    main()
