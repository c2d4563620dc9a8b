"""`arith`: integer arithmetic problems "07+12=" whose answer is the result's digits, then eos.

Operands are zero-padded to a fixed width, so with a one-token-per-character tokenizer every
prompt of a task has the same token length and a batch of prompts needs no padding (the sampler
takes prompts of any lengths, but an unpadded batch costs no padded slots). `zero_pad: false`
writes operands without leading zeros ("7+12="), so prompts differ in length: the mixed-length
parity recipe's data. `questions: N` asks each problem in one of the first N of QUESTIONS ("3+4=",
"what is 3+4?", ...): prompts of mixed lengths over the same sums, as easy to learn as the bare
ones. Subtraction orders its operands (larger first), so answers are always non-negative digit
strings.
"""

from __future__ import annotations

import operator
import random
from dataclasses import asdict, dataclass, field, fields

from rl.envs.registry import Problem, register_env

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
EOS_TEXT = "<eos>"  # a completion decoded with special tokens kept ends here
# What `questions: N` draws from, its first N, "{}" the expression (tokenizer `arith`'s characters only).
QUESTIONS = ("{}=", "what is {}?", "compute {}.", "what is the value of {}?")


@dataclass(frozen=True, kw_only=True)
class ArithParams:
    """task.params of `arith`.

    max_operand: operands are drawn uniformly from [min_operand, max_operand].
    ops: operators drawn uniformly, a subset of + - *.
    digits: operand width (zero-padded); default: the width of max_operand.
    zero_pad: false writes operands without leading zeros (prompts of varied length; `digits`
        is then the widest operand).
    questions: how many of QUESTIONS a problem's prompt is drawn from (1: always the bare "a+b=").
    """

    max_operand: int = 20
    min_operand: int = 0
    ops: tuple[str, ...] = ("+",)
    digits: int | None = None
    zero_pad: bool = True
    questions: int = 1

    @classmethod
    def from_dict(cls, params: dict) -> "ArithParams":
        known = {f.name for f in fields(cls)}
        for key in params:
            if key not in known:
                raise ValueError(f"task.params.{key}: unknown arith parameter; known: {sorted(known)}")
        kw = dict(params)
        if "ops" in kw:
            if isinstance(kw["ops"], str) or not kw["ops"]:
                raise ValueError(f"task.params.ops: expected a non-empty list of {list(OPS)}, got {kw['ops']!r}")
            kw["ops"] = tuple(kw["ops"])
        return cls(**kw)

    def __post_init__(self) -> None:
        for op in self.ops:
            if op not in OPS:
                raise ValueError(f"task.params.ops: unknown operator {op!r}; known: {list(OPS)}")
        if len(set(self.ops)) != len(self.ops):
            raise ValueError(f"task.params.ops: duplicate operator in {list(self.ops)}")
        for name in ("max_operand", "min_operand"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"task.params.{name}: expected an integer >= 0, got {value!r}")
        if self.min_operand > self.max_operand:
            raise ValueError(
                f"task.params.min_operand: {self.min_operand} exceeds max_operand {self.max_operand}"
            )
        if not isinstance(self.questions, int) or isinstance(self.questions, bool) or \
                not 1 <= self.questions <= len(QUESTIONS):
            raise ValueError(f"task.params.questions: expected 1 to {len(QUESTIONS)}, got {self.questions!r}")
        if not isinstance(self.zero_pad, bool):
            raise ValueError(f"task.params.zero_pad: expected true or false, got {self.zero_pad!r}")
        if self.digits is not None and (not isinstance(self.digits, int) or self.digits < len(str(self.max_operand))):
            raise ValueError(
                f"task.params.digits: {self.digits!r} cannot hold max_operand {self.max_operand}"
            )

    @property
    def width(self) -> int:
        return self.digits if self.digits is not None else len(str(self.max_operand))


@dataclass(kw_only=True)
class ArithEnv:
    params: ArithParams = field(default_factory=ArithParams)
    name: str = "arith"

    @property
    def spec(self) -> dict:
        params = asdict(self.params)
        params["ops"] = list(params["ops"])
        params["digits"] = self.params.width
        if params["questions"] == 1:  # left out at its default: specs (and warm-start keys) from before it stay
            del params["questions"]
        return {"name": self.name, "params": params}

    def render(self, a: int, op: str, b: int, question: int = 0) -> Problem:
        w = self.params.width if self.params.zero_pad else 0
        if op == "-" and a < b:
            a, b = b, a
        return Problem(prompt=QUESTIONS[question].format(f"{a:0{w}d}{op}{b:0{w}d}"), answer=str(OPS[op](a, b)))

    def sample(self, n: int, *, seed: int, step: int) -> list[Problem]:
        # A string seed is hashed with SHA-512 by `random`: stable across runs and platforms.
        rng = random.Random(f"arith:{seed}:{step}")
        lo, hi, ops, q = self.params.min_operand, self.params.max_operand, self.params.ops, self.params.questions
        return [self.render(rng.randint(lo, hi), rng.choice(ops), rng.randint(lo, hi),
                            rng.randrange(q) if q > 1 else 0) for _ in range(n)]

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion, cut at eos and stripped, is exactly the answer."""
        return 1.0 if completion.split(EOS_TEXT, 1)[0].strip() == problem.answer else 0.0


@register_env("arith")
def make_arith(params: dict) -> ArithEnv:
    return ArithEnv(params=ArithParams.from_dict(params))
