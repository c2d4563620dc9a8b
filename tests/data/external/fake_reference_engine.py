"""A stand-in for another engine (e.g. NeMo-RL's run_grpo.py): it writes the reference's metrics JSON.

    python fake_reference_engine.py RUN_DIR STEPS
"""

import json
import sys
from pathlib import Path

run_dir, steps = Path(sys.argv[1]), int(sys.argv[2])
metrics = {
    "train/reward": {str(s): 0.2 + 0.05 * s for s in range(1, steps + 1)},
    "train/gen_kl_error": {str(s): 0.001 for s in range(1, steps + 1)},
}
(run_dir / "metrics.json").write_text(json.dumps(metrics))
print(f"wrote {steps} steps")
