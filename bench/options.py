"""What the bench scripts' command lines share: --threads, a whole number of at least 1, refused
otherwise in argparse's one error line (torch.set_num_threads(0) raises a RuntimeError)."""

from __future__ import annotations

import argparse


def thread_count(text: str) -> int:
    """--threads' value as an int; below 1, or not a whole number, is argparse's error."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of threads, 1 or more (got "
                                         f"{text!r})") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more threads (got {count})")
    return count


def thread_counts(text: str) -> list[int]:
    """A comma-separated list of --threads values, each as thread_count takes it."""
    return [thread_count(part.strip()) for part in text.split(",")]
