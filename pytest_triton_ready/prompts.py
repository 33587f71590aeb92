"""The small shipped set of prompts streamed requests carry where a model takes text: ordinary
questions of a few words, varied per request (a numbered suffix) so that no cache answers them."""

from __future__ import annotations

import random
from collections.abc import Callable

QUESTIONS = (
    "Summarize the benefits of regular exercise in one sentence.",
    "What is the capital of France?",
    "Explain what a load balancer does.",
    "Write a haiku about the ocean.",
    "List three uses of a hash table.",
    "Translate 'good morning' into Spanish.",
    "Why is the sky blue?",
    "Describe a healthy breakfast.",
    "What does an inference server do?",
    "Give one tip for writing clear documentation.",
    "How many minutes are in a day?",
    "Name a common sorting algorithm and its complexity.",
)

TextSource = Callable[[int], tuple[str, int]]


def shipped_prompts(max_tokens: int, seed: int | None = None) -> TextSource:
    """Request n gets one of QUESTIONS with ` (request n)` appended, each asking for `max_tokens`."""
    rng = random.Random(seed)

    def prompt(n: int) -> tuple[str, int]:
        return f"{rng.choice(QUESTIONS)} (request {n})", max_tokens

    return prompt
