"""`counting`: "how many squares?" about a small RGB image of 1-9 coloured squares.

A vision task a tiny vision-language model learns on CPU in a minute: each image is a black
canvas of `image_size` pixels split into cells of `square_size` pixels; `count` distinct cells,
drawn uniformly, are filled with a colour from a fixed palette. The answer is the count's
digits, then eos. With `square_size` equal to the vision tower's patch size every square is
exactly one patch, so the signal is clean and counting is the whole job.

Images are uint8 tensors [H, W, 3], generated on the fly from (params, seed, step): the same
problems on every machine, no files. Every image has the same size; the question is one text
(`questions: 1`, the default) or, with `questions: N`, one of the first N of QUESTIONS per problem
(8 to 68 characters), so a batch's prompts differ in length as a real dataset's do.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields

import torch

from rl.envs.registry import Problem, register_env

EOS_TEXT = "<eos>"
PROMPT = "how many squares?"
# What `questions: N` draws from, its first N (tokenizer `arith_vl`'s characters only).
QUESTIONS = (PROMPT, "squares?", "count the squares.", "how many squares do you see in the image?",
             "how many coloured squares are in this picture? answer with a number.")
# Saturated, mutually distinct colours; black is the background.
PALETTE = ((230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
           (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230))


@dataclass(frozen=True, kw_only=True, eq=False)
class ImageProblem(Problem):
    """A `Problem` with an image: uint8 [H, W, 3]."""

    image: torch.Tensor


@dataclass(frozen=True, kw_only=True)
class CountingParams:
    """task.params of `counting`.

    image_size: side of the square image in pixels.
    square_size: side of each square (and of the cells they sit in) in pixels.
    min_count, max_count: the number of squares is drawn uniformly from [min_count, max_count].
    questions: how many of QUESTIONS a problem's prompt is drawn from (1: always PROMPT).
    """

    image_size: int = 24
    square_size: int = 4
    min_count: int = 1
    max_count: int = 9
    questions: int = 1

    @classmethod
    def from_dict(cls, params: dict) -> "CountingParams":
        known = {f.name for f in fields(cls)}
        for key in params:
            if key not in known:
                raise ValueError(f"task.params.{key}: unknown counting parameter; known: {sorted(known)}")
        return cls(**params)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"task.params.{f.name}: expected an integer >= 1, got {value!r}")
        if self.image_size % self.square_size:
            raise ValueError(
                f"task.params.square_size: {self.square_size} does not divide image_size {self.image_size}")
        if self.min_count > self.max_count:
            raise ValueError(f"task.params.min_count: {self.min_count} exceeds max_count {self.max_count}")
        if self.max_count > self.num_cells:
            raise ValueError(
                f"task.params.max_count: {self.max_count} squares do not fit in {self.num_cells} cells")
        if self.questions > len(QUESTIONS):
            raise ValueError(f"task.params.questions: at most {len(QUESTIONS)}, got {self.questions}")

    @property
    def cells_per_side(self) -> int:
        return self.image_size // self.square_size

    @property
    def num_cells(self) -> int:
        return self.cells_per_side ** 2


def draw(params: CountingParams, rng: random.Random, count: int) -> torch.Tensor:
    """A uint8 [H, W, 3] image with `count` squares in distinct cells."""
    s, side = params.square_size, params.cells_per_side
    image = torch.zeros(params.image_size, params.image_size, 3, dtype=torch.uint8)
    for cell in rng.sample(range(params.num_cells), count):
        row, col = divmod(cell, side)
        image[row * s:(row + 1) * s, col * s:(col + 1) * s] = torch.tensor(rng.choice(PALETTE), dtype=torch.uint8)
    return image


@dataclass(kw_only=True)
class CountingEnv:
    params: CountingParams = field(default_factory=CountingParams)
    name: str = "counting"

    @property
    def spec(self) -> dict:
        return {"name": self.name, "params": asdict(self.params)}

    def sample(self, n: int, *, seed: int, step: int) -> list[ImageProblem]:
        # A string seed is hashed with SHA-512 by `random`: stable across runs and platforms.
        rng = random.Random(f"counting:{seed}:{step}")
        out = []
        for _ in range(n):
            count = rng.randint(self.params.min_count, self.params.max_count)
            # one question: no draw, so the default's problems are what they always were
            prompt = QUESTIONS[rng.randrange(self.params.questions)] if self.params.questions > 1 else PROMPT
            out.append(ImageProblem(prompt=prompt, answer=str(count), image=draw(self.params, rng, count)))
        return out

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion, cut at eos and stripped, is exactly the count."""
        return 1.0 if completion.split(EOS_TEXT, 1)[0].strip() == problem.answer else 0.0


@register_env("counting")
def make_counting(params: dict) -> CountingEnv:
    return CountingEnv(params=CountingParams.from_dict(params))
