"""One definition of serving throughput for every figure the report sets side by side, measured,
published or predicted, CPU or GPU: for n sequences of p prompt tokens and g generated tokens,
generated tokens/s = n x g / (prefill time + decode time). Time to first token (the prefill of
the batch's prompts) and time per output token are figures of their own, and so is prompt
tokens/s; prompt tokens never count in the throughput the TCO prices (docs/report.md)."""
from dataclasses import dataclass
from typing import Optional

# What a published or imported tokens/s counts.
COUNTS = ("generated", "prompt+generated", "decode-only")


@dataclass
class Serving:
    n_seq: int
    n_prompt: int
    n_gen: int
    total_s: float             # prefill and decode, the whole batch
    prefill_s: Optional[float]  # every prompt's prefill; None where the source does not say
    kind: str                  # measured | published | predicted
    source: str                # the run, the publication (and any conversion), or the model and its inputs
    low: Optional[float] = None   # generated tokens/s at the slow end of the inputs' ranges (predictions)
    high: Optional[float] = None  # and at the fast end

    @property
    def generated_tokens_per_s(self):
        return self.n_seq * self.n_gen / self.total_s

    @property
    def decode_s(self):
        return None if self.prefill_s is None else self.total_s - self.prefill_s

    @property
    def ttft_s(self):
        return self.prefill_s

    @property
    def tpot_s(self):
        return None if self.prefill_s is None else self.decode_s / self.n_gen

    @property
    def prompt_tokens_per_s(self):
        return self.n_seq * self.n_prompt / self.prefill_s if self.prefill_s else None

    def interval(self):
        """(low, high) generated tokens/s: the prediction's range, or the figure itself."""
        rate = self.generated_tokens_per_s
        return (self.low if self.low is not None else rate, self.high if self.high is not None else rate)


def from_rate(n_seq, n_prompt, n_gen, generated_tokens_per_s, prefill_s, kind, source):
    """A Serving of a figure given as generated tokens/s."""
    return Serving(n_seq, n_prompt, n_gen, n_seq * n_gen / generated_tokens_per_s, prefill_s, kind, source)


def generated_rate(tokens_per_s, counts, n_prompt, n_gen):
    """(generated tokens/s, the conversion in words) of a figure that counts `counts`, or None
    where it cannot be converted: a decode-only rate leaves out the prefill."""
    if counts == "generated":
        return tokens_per_s, "counts generated tokens over the whole run: as defined here"
    if counts == "prompt+generated":
        rate = tokens_per_s * n_gen / (n_prompt + n_gen)
        return rate, (f"counts prompt and generated tokens: {tokens_per_s:,.4g} x {n_gen} / ({n_prompt} + {n_gen}) "
                      f"= {rate:,.4g} generated tokens/s")
    return None
