"""Padded vocabularies: an assistant that shares the target's tokenizer but not its width.

Qwen2.5-7B and larger pad their embeddings to `vocab_size` 152064 rows, Qwen2.5-0.5B–3B to
151936, with one tokenizer (151665 ids). Transformers 5.23 tells tokenizers apart by the
configs' vocab sizes (`_validate_assistant`), so it takes such a pair for one with two
tokenizers and refuses it; under sampling it also subtracts the assistant's probabilities
from the target's, position by position (`_speculative_sampling`), which needs one width.

So the assistant is given the target's width where it is loaded: its config says the
target's vocab size, and its output layer is wrapped so that its logits have the target's
width. Rows it lacks get the dtype's lowest value, so a draft never picks them and their
probability q is 0 under sampling; rows past the target's are dropped (the tokenizer
produces no id there). An id the assistant has no row for (a padding row of the target's,
which only an untrained row could make it emit) reads the assistant's last row, so a
draft after it is a guess the target verifies rather than an index error. Greedy output
stays the target's: it verifies every candidate.

Wrapping the layer rather than widening its weight keeps a tied head tied (a wider copy of
the 0.5B's 151936×896 head would cost 272 MB in bf16), and the int8 copy still finds the
linear layer inside (`assisted.models.quantize`). The widening is a `torch.cat` with a fixed
fill, a small fraction of the head product itself per drafted token, where `F.pad` costs many
times more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def fit_vocabulary(assistant: PreTrainedModel, vocab_size: int) -> None:
    """Give `assistant` (in place) the target's `vocab_size`: its config, its logits' width
    and the ids it reads (the module's note). Nothing changes where the sizes agree."""
    config = assistant.config.get_text_config()
    rows = config.vocab_size
    if rows == vocab_size:
        return
    assistant.set_output_embeddings(WidenedHead(assistant.get_output_embeddings(), vocab_size))
    if vocab_size > rows:
        assistant.set_input_embeddings(ClampedEmbedding(assistant.get_input_embeddings(), rows))
    config.vocab_size = vocab_size


class WidenedHead(nn.Module):
    """An output layer whose logits are `vocab_size` wide: rows past its own are the dtype's
    lowest value, rows past `vocab_size` are dropped."""

    def __init__(self, head: nn.Module, vocab_size: int):
        super().__init__()
        self.head = head
        self.vocab_size = vocab_size

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)[..., : self.vocab_size]
        missing = self.vocab_size - logits.shape[-1]
        if missing <= 0:
            return logits
        # torch.cat, not F.pad: many times faster here (the module's note).
        fill = logits.new_full((1,), torch.finfo(logits.dtype).min)
        return torch.cat([logits, fill.expand(*logits.shape[:-1], missing)], dim=-1)


class ClampedEmbedding(nn.Module):
    """An input embedding that reads ids past its `rows` as its last row."""

    def __init__(self, embedding: nn.Module, rows: int):
        super().__init__()
        self.embedding = embedding
        self.rows = rows

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(input_ids.clamp(max=self.rows - 1))
