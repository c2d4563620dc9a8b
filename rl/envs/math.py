"""`math`: problems from the recipe's `data:` section, answers in `\\boxed{}` graded by math-verify.

The reward is 1.0 when math-verify (Hugging Face's verifier: LaTeX and plain expressions parsed
to SymPy, compared symbolically) finds the completion's boxed answer equal to the reference
answer, else 0.0; `\\boxed{0.5}` is right for `1/2`. String equality would grade a correct
`\\frac{1}{2}` as wrong and reward formatting instead of mathematics.

Problems are drawn in a seeded order: the training rows are shuffled once per epoch (seed
`algorithm.seed`, epoch number), and batch `step` (the driver's data cursor, saved in every
checkpoint) takes the next `n` of them, so a resumed run continues where it stopped. The warm
start's negative steps read a second, independently shuffled stream of the same rows.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rl.envs.registry import Problem, register_dataset_env
from rl.prompt_data import load_rows

if TYPE_CHECKING:
    from rl.config import DataConfig

__all__ = ["MathEnv", "boxed", "verify_answer"]


def boxed(answer: str) -> str:
    return "\\boxed{" + answer + "}"


def verify_answer(answer: str, completion: str) -> bool:
    """Whether the completion's final answer equals `answer` (math-verify)."""
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - the engine extra installs it
        raise ValueError("task.name: math grades with the math-verify package, which is not installed "
                         "here (pip install 'recipe-harness[engine]')") from None
    # math-verify times out parsing with SIGALRM, which only the main thread may use.
    timeout = {} if threading.current_thread() is threading.main_thread() else {"parsing_timeout": None}
    gold = parse(boxed(answer), **timeout)
    pred = parse(completion, **timeout)
    if not gold or not pred:
        return False
    verify_timeout = {} if not timeout else {"timeout_seconds": None}
    return bool(verify(gold, pred, **verify_timeout))


@dataclass(kw_only=True)
class MathEnv:
    train: list[tuple[str, str]]
    validation: list[tuple[str, str]]
    data: DataConfig
    tokenizer: Any = None
    name: str = "math"
    _digest: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.data.chat_template and getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError("data.chat_template: the tokenizer has no chat template "
                             "(model.tokenizer: null takes the checkpoint's)")
        rows = json.dumps([self.train, self.validation]).encode()
        self._digest = hashlib.sha256(rows).hexdigest()[:16]

    @property
    def spec(self) -> dict:
        """Task identity (warm-start cache keys): the data settings and a digest of the rows."""
        keys = ("prompt_template", "chat_template", "shuffle")
        return {"name": self.name, "params": {**{k: getattr(self.data, k) for k in keys}, "rows_sha256": self._digest}}

    def render(self, prompt: str) -> str:
        text = self.data.prompt_template.replace("{prompt}", prompt)
        if self.data.chat_template:
            text = self.tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                      add_generation_prompt=True, tokenize=False)
        return text

    def _problem(self, row: tuple[str, str]) -> Problem:
        return Problem(prompt=self.render(row[0]), answer=row[1], demonstration=boxed(row[1]))

    def _order(self, stream: str, seed: int, epoch: int) -> list[int]:
        order = list(range(len(self.train)))
        if self.data.shuffle:
            random.Random(f"math:{stream}:{seed}:{epoch}").shuffle(order)
        return order

    def sample(self, n: int, *, seed: int, step: int) -> list[Problem]:
        stream, batch = ("train", step) if step >= 0 else ("warm_start", -1 - step)
        out, size, orders = [], len(self.train), {}
        for i in range(batch * n, batch * n + n):
            epoch = i // size
            if epoch not in orders:
                orders[epoch] = self._order(stream, seed, epoch)
            out.append(self._problem(self.train[orders[epoch][i % size]]))
        return out

    def validation_problems(self) -> list[Problem]:
        """The validation split in file order, at most `val_max_samples` of it."""
        limit = self.data.val_max_samples or len(self.validation)
        return [self._problem(row) for row in self.validation[:limit]]

    def score(self, problem: Problem, completion: str) -> float:
        return 1.0 if verify_answer(problem.answer, completion) else 0.0


@register_dataset_env("math")
def make_math(params: dict, data: DataConfig, tokenizer: Any) -> MathEnv:
    if params:
        raise ValueError(f"task.params.{sorted(params)[0]}: the math task takes no parameters "
                         "(its data settings live under data:)")
    keys = {"prompt_key": data.prompt_key, "answer_key": data.answer_key}
    train = load_rows(data.train.path, data.train.split, key="data.train", **keys)
    val = data.validation
    validation = load_rows(val.path, val.split, key="data.validation", **keys) if val else []
    return MathEnv(train=train, validation=validation, data=data, tokenizer=tokenizer)
