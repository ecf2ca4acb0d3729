"""Your own model: a Hugging Face `transformers` causal LM's AdamW training step, traced at full size
on fake tensors (hp.predict_memory: shapes, no data, nothing allocated), its ledger against the
closed forms, and the memory ladder planned on traced bytes.

    python -m helpers.estimate --config gpt2 --seq 1024 --batch 32 --card 24GB

- The model is built from its config with random initialisation; nothing is downloaded. A config is
  a transformers config object, a config.json path (or a folder holding one), or a name shipped in
  helpers/configs/ (gpt2: GPT-2 124M; llama-1b: a Llama-3.2-1B shape).
- Warm-up: AdamW makes its moments in its first step, after that step's peak, so a first step is
  up to 8P below a steady one. Every trace here steps the optimizer once on zero gradients before
  the traced step, so the traced step starts with its state as every later step does.
- Per-sequence bytes: the step is traced at two micro-batches b1 < b2; peak = constant + b x
  per-sequence, and the fit is checked (to the byte) at a third micro-batch b3 = 2 b2.
- attention="fused" (CLI --attention fused) traces with attention dropout off, so that PyTorch's CPU
  runs its fused SDPA kernel: a stand-in for a GPU's fused kernel, which accepts dropout. The default,
  "cpu", traces the config as it is on this CPU, where attention dropout makes SDPA run its unfused
  math kernel (its saved tensors net to about three T x T fp32 per head). The stand-in leaves out the
  fused kernel's dropout RNG state (bytes) and keeps the CPU's 4-byte scales for the other dropouts
  where CUDA keeps 1-byte masks.
- The planner is hp.choose_interventions (accumulate -> checkpoint -> bf16 -> add devices) on the
  traced bytes of each setting, which calls a rung a fit only when the step traced at that
  micro-batch fits the card and the next micro-batch traced does not. A micro-batch below the global
  batch is traced as an accumulating step's last micro-batch, with an earlier one's gradients held.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves

from .anatomy import gpt_activation_bytes
from .memory_torch import MemoryReport, MemoryTracker, Workload, _storages, predict_memory
from .sharding import StepBytes, zero_bytes
from .units import fmt_bytes

CONFIGS = Path(__file__).parent / "configs"
NAMES = {"gpt2": "gpt2.json", "llama-1b": "llama-1b.json"}


@dataclass(frozen=True)
class Setting:
    """One way to run the step: fp32 or bf16 autocast, with or without activation checkpointing."""

    precision: str
    checkpoint: bool = False

    @property
    def name(self) -> str:
        return self.precision + ("+ckpt" if self.checkpoint else "")


SETTINGS = {s.name: s for s in (Setting("fp32"), Setting("bf16"), Setting("fp32", True), Setting("bf16", True))}


class EstimateError(ValueError):
    """What the estimate cannot do, in one line that says what to do instead."""


ATTENTION = ("cpu", "fused")
_ATTN_DROPOUT = ("attn_pdrop", "attention_dropout")


def _with_attention(config, attention: str):
    """The config to trace for an attention mode: as it is ("cpu"), or with attention dropout off ("fused")."""
    if attention not in ATTENTION:
        raise EstimateError(f"unknown attention {attention!r}: use 'cpu' (this CPU's kernels, the default) or "
                            "'fused' (attention dropout off, so SDPA's fused kernel runs, as on a GPU)")
    off = {k: 0.0 for k in _ATTN_DROPOUT if getattr(config, k, 0)}
    return _variant(config, **off) if attention == "fused" and off else config


# -- the config and the model ------------------------------------------------------------------
def _transformers():
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def load_config(spec: Any):
    """A transformers config from a config object, a name in helpers/configs/ (gpt2, llama-1b), or a
    config.json path (or a folder holding one); nothing is downloaded."""
    tf = _transformers()
    if isinstance(spec, tf.PretrainedConfig):
        return spec.__class__.from_dict(spec.to_dict())   # a copy: the variants below change it
    if not isinstance(spec, (str, Path)):
        raise EstimateError(f"cannot build a config from a {type(spec).__name__}: pass a transformers config, "
                            f"a config.json path or one of {', '.join(NAMES)}")
    path = CONFIGS / NAMES[str(spec)] if str(spec) in NAMES else Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise EstimateError(f"no config {str(spec)!r}: pass one of {', '.join(NAMES)}, a config.json path or a "
                            "transformers config object (nothing is downloaded, so hub names do not work)")
    try:
        d = json.loads(path.read_text())
        d = {k: v for k, v in d.items() if not k.startswith("_")}
        return tf.AutoConfig.for_model(d.pop("model_type"), **d)
    except (KeyError, ValueError, TypeError) as exc:
        raise EstimateError(f"cannot build a config from {str(path)!r}: {str(exc).splitlines()[0] if str(exc) else exc!r} "
                            "(a config.json needs a model_type that transformers knows)") from None


def _dims(config) -> dict[str, int]:
    """d, layers, heads, vocabulary of a GPT-2- or Llama-style config."""
    get = lambda *names: next((int(getattr(config, n)) for n in names if getattr(config, n, None)), 0)  # noqa: E731
    return {"d": get("hidden_size", "n_embd"), "layers": get("num_hidden_layers", "n_layer"),
            "heads": get("num_attention_heads", "n_head"), "vocab": get("vocab_size"),
            "positions": get("max_position_embeddings", "n_positions")}


def _build(config):
    tf = _transformers()
    try:
        return tf.AutoModelForCausalLM.from_config(config)
    except ValueError as exc:
        raise EstimateError(f"transformers has no causal language model for a {type(config).__name__} "
                            f"({str(exc).splitlines()[0][:120]}): pass the config of a causal LM") from None


@dataclass(frozen=True)
class ModelFacts:
    """What the closed forms need, counted on the meta device (no memory): parameters (shared ones
    once), parameter tensors, buffer bytes, and the parameters autocast casts (those of the matmuls)."""

    params: int
    tensors: int
    buffer_bytes: int
    matmul_params: int


def _model_facts(config) -> ModelFacts:
    """Count the model's parameters on the meta device (no memory, no data)."""
    with torch.device("meta"):
        model = _build(config)
    params = dict(model.named_parameters())            # named_parameters lists a shared one once
    conv1d = getattr(__import__("transformers.pytorch_utils", fromlist=["Conv1D"]), "Conv1D", ())
    mm: dict[int, int] = {}
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, conv1d)):
            mm[id(m.weight)] = m.weight.numel()        # autocast casts a matmul's weight, not its bias
    return ModelFacts(sum(p.numel() for p in params.values()), len(params),
                      sum(b.numel() * b.element_size() for b in model.buffers()), sum(mm.values()))


# -- one traced step ---------------------------------------------------------------------------
_modules_frozen = 0


def _freeze_new_modules() -> None:
    """Freeze what is alive out of the cycle collector's passes when modules were imported since the last
    time (transformers and its model code load on the first trace, after `import helpers` froze torch's).
    Each trace runs a full collection (hp.measure_memory); unfrozen, transformers' objects made each one
    take 0.3-0.7 s here, a fifth to a third of a GPT-2 trace. Garbage is collected first, so none is kept."""
    global _modules_frozen
    if len(sys.modules) != _modules_frozen:
        gc.collect()
        gc.freeze()
        _modules_frozen = len(sys.modules)


def _vocab_tracker(vocab: int, hidden: int, found: set[int]) -> type[MemoryTracker]:
    """hp.MemoryTracker that also notes the storages of tensors whose last dimension is the vocabulary
    (the logits, their fp32 copy, log-softmax, their gradients): the logits row of the ledger. A
    (hidden, vocabulary) tensor is the output layer's weight gradient (transposed), not a logits one."""

    class VocabTracker(MemoryTracker):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.dim() and t.shape[-1] == vocab and \
                        tuple(t.shape) != (hidden, vocab):
                    for st in _storages(t):
                        entry = self._seen.get(st)
                        if entry is not None and entry[0].category not in ("parameters", "gradients"):
                            found.add(id(entry[0]))
            return out

    return VocabTracker


@dataclass
class Traced:
    """One traced step: its report, and the bytes at the peak of the logits-sized tensors."""

    micro_batch: int
    report: MemoryReport
    vocab_bytes: dict[str, int]          # category -> bytes of logits-sized tensors alive at the peak
    grads_held: bool = False             # the last micro-batch of an accumulating step, not a lone step

    @property
    def peak(self) -> int:
        return self.report.peak


UPDATES = ("foreach", "loop", "fused")


def trace_step(config: Any, seq: int, micro_batch: int, setting: str = "fp32", *,
               hold_outputs: bool = True, attention: str = "cpu", update: str = "foreach",
               grads_held: bool = False) -> Traced:
    """Trace one AdamW step of the config's causal LM at full size on fake tensors (hp.predict_memory),
    after a warm-up optimizer step on zero gradients so that AdamW's state exists, as in every step
    after the first; its AdamW update is the multi-tensor (foreach) one, PyTorch's default on CUDA, not
    the one-tensor loop it defaults to on CPU tensors. hold_outputs: the step keeps the model's output object through backward, as
    `out = model(**batch); out.loss.backward()` does. attention: "cpu" (default) traces the config as it
    is, with this CPU's kernels; "fused" turns attention dropout off so that SDPA's fused kernel runs, a
    stand-in for a GPU's (see the module's docstring for what it leaves out). update: AdamW's traced
    update, "foreach" (default), "loop" (foreach=False: one tensor at a time) or "fused" (fused=True).
    grads_held: trace the last micro-batch of an accumulating step, which runs forward and backward with
    the fp32 gradients of an earlier micro-batch already held (made before the traced step as a zero
    gradient per trainable parameter, as many bytes as a real earlier backward leaves on a model whose
    every parameter takes part in the loss, as a causal LM's do); False (default): a lone step, from no
    gradients."""
    _freeze_new_modules()
    config = _with_attention(load_config(config), attention)
    if update not in UPDATES:
        raise EstimateError(f"unknown update {update!r}: use one of {', '.join(UPDATES)}")
    if setting not in SETTINGS:
        raise EstimateError(f"unknown setting {setting!r}: use one of {', '.join(SETTINGS)}")
    s, dims = SETTINGS[setting], _dims(config)
    if dims["positions"] and seq > dims["positions"]:
        raise EstimateError(f"seq {seq} is longer than the config's {dims['positions']} positions: pass --seq "
                            f"{dims['positions']} or less")
    tf = _transformers()

    def setup() -> Workload:
        torch.manual_seed(0)
        model = _build(config)
        model.train()
        if s.checkpoint:
            if hasattr(model, "activation_checkpointing_enable"):   # the name of gradient_checkpointing_enable
                model.activation_checkpointing_enable({"use_reentrant": False})   # from transformers 5.2x
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        opt = torch.optim.AdamW(model.parameters())
        for p in model.parameters():                    # the warm-up: AdamW's state exists
            p.grad = torch.zeros_like(p)
        opt.param_groups[0]["foreach"] = True           # the same state, in fewer traced operators
        opt.step()
        opt.param_groups[0]["foreach"] = update == "foreach"   # the traced step: AdamW as PyTorch runs it on
        # CUDA by default (foreach; exercise 8 measures its scratch); on CPU tensors its default is a
        # one-tensor-at-a-time loop ("loop"), whose update peaks differently
        opt.param_groups[0]["fused"] = update == "fused"
        opt.zero_grad(set_to_none=True)
        ids = torch.zeros((micro_batch, seq), dtype=torch.long)
        batch = {"input_ids": ids, "labels": ids}
        if grads_held:                                  # what an earlier micro-batch's backward leaves: one fp32
            for p in model.parameters():                # gradient of its parameter's size per parameter (tested
                if p.requires_grad:                     # against a real backward); made, not computed, it costs
                    p.grad = torch.zeros_like(p)        # no forward and backward of its own

        def step() -> None:
            with torch.autocast("cpu", torch.bfloat16, enabled=s.precision == "bf16"):
                out = model(**batch)
            if hold_outputs:
                out.loss.backward()
            else:
                loss = out.loss
                del out
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return Workload(step, model, opt, batch)

    found: set[int] = set()
    del tf
    with _one_sequence_per_row():
        report = predict_memory(setup, tracker=_vocab_tracker(dims["vocab"], dims["d"], found))
    return Traced(micro_batch, report, _vocab_at_peak(report, found), grads_held)


@contextmanager
def _one_sequence_per_row():
    """Within a trace, transformers' packed-sequence test answers as on real tensors (one sequence per row).

    Without a cache (use_cache=False, or checkpointing) transformers reads the position ids to detect
    packed sequences; on fake tensors it cannot read them, keeps a [b, T] index and then builds a
    [b, 1, T, T] mask in every layer that a real step skips (it passes is_causal to SDPA). trace_step
    passes no position ids, so they are 0..T-1 in every row and a real step's answer is None.
    """
    import transformers.masking_utils as mu

    real = getattr(mu, "find_packed_sequence_indices", None)
    if real is None:   # a transformers without the packed-sequence test: nothing to answer
        yield
        return
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = real


def _vocab_at_peak(report: MemoryReport, found: set[int]) -> dict[str, int]:
    live: dict[int, Any] = {}
    i = report.trace.peak_index()
    for sign, rec in report.trace.events[:i + 1]:
        if sign > 0:
            live[id(rec)] = rec
        else:
            live.pop(id(rec), None)
    out: dict[str, int] = {}
    for key, rec in live.items():
        if key in found:
            out[rec.category] = out.get(rec.category, 0) + rec.nbytes
    return out


# -- the affine fit ----------------------------------------------------------------------------
def _rows(t: Traced) -> dict[str, int]:
    """The traced peak by ledger row: the tracker's categories, with the logits-sized tensors of the
    activations and temporaries in rows of their own."""
    b = dict(t.report.peak_breakdown)
    rows = {k: b[k] for k in ("parameters", "gradients", "optimizer state", "cast copies", "inputs")}
    rows["activations (blocks)"] = b["activations"] + b["recomputed"] - t.vocab_bytes.get("activations", 0) \
        - t.vocab_bytes.get("recomputed", 0)
    rows["logits (forward)"] = t.vocab_bytes.get("activations", 0) + t.vocab_bytes.get("recomputed", 0)
    rows["logits' gradients"] = t.vocab_bytes.get("temporaries", 0)
    rows["temporaries"] = b["temporaries"] - rows["logits' gradients"]
    return rows


@dataclass
class Fit:
    """peak = constant + micro-batch x per_sequence, from traces at two micro-batches, checked at a third."""

    setting: str
    seq: int
    traces: list[Traced]
    constant: int
    per_sequence: int
    rows_constant: dict[str, int]
    rows_per_sequence: dict[str, int]
    attention: str = "cpu"

    def predict(self, micro_batch: int) -> int:
        return self.constant + micro_batch * self.per_sequence

    @property
    def check(self) -> Traced:
        return self.traces[-1]

    @property
    def affine(self) -> bool:
        """Whether the third trace's peak is the fit's prediction to the byte (False if not checked)."""
        return len(self.traces) == 3 and self.predict(self.check.micro_batch) == self.check.peak

    def __str__(self) -> str:
        c = self.check
        name = self.setting + (", fused attention" if self.attention == "fused" else "")
        if len(self.traces) < 3:
            return (f"{name}: peak = {fmt_bytes(self.constant)} + b x {fmt_bytes(self.per_sequence)} per "
                    f"sequence (traced at b = {self.traces[0].micro_batch}, {self.traces[1].micro_batch}; not checked)")
        verdict = ("affine: exact" if self.affine else
                   f"NOT affine: traced {c.peak:,} B, fit {self.predict(c.micro_batch):,} B")
        return (f"{name}: peak = {fmt_bytes(self.constant)} + b x {fmt_bytes(self.per_sequence)} per sequence "
                f"(traced at b = {self.traces[0].micro_batch}, {self.traces[1].micro_batch}; at b = {c.micro_batch} "
                f"{verdict})")


def fit_per_sequence(config: Any, seq: int, setting: str = "fp32", micro_batches: tuple[int, int] = (2, 4), *,
                     hold_outputs: bool = True, check: bool = True, attention: str = "cpu",
                     progress: Callable[[str], None] | None = None) -> Fit:
    """Trace the step at two micro-batches b1 < b2, fit peak = constant + b x per-sequence bytes (and each
    ledger row likewise), and (check) trace a third, 2 b2, to check the fit to the byte. attention: as in
    trace_step."""
    b1, b2 = micro_batches
    if not 0 < b1 < b2:
        raise EstimateError(f"micro_batches must be two sizes 0 < b1 < b2, got {micro_batches!r}")
    config = _with_attention(load_config(config), attention)
    traces = []
    for b in (b1, b2, 2 * b2) if check else (b1, b2):
        if progress:
            progress(f"tracing {setting} at micro-batch {b} ...")
        traces.append(trace_step(config, seq, b, setting, hold_outputs=hold_outputs))
    fit = _fit(setting, seq, traces, attention)
    if check and not fit.affine:   # the peak may fall elsewhere at small micro-batches: fit b2, 2 b2; check 4 b2
        if progress:
            progress(f"not affine at b = {b1}, {b2}, {2 * b2}: tracing {setting} at micro-batch {4 * b2} ...")
        retry = _fit(setting, seq, traces[1:] + [trace_step(config, seq, 4 * b2, setting, hold_outputs=hold_outputs)],
                     attention)
        fit = retry if retry.affine else fit
    return fit


def _fit(setting: str, seq: int, traces: list[Traced], attention: str = "cpu") -> Fit:
    t1, t2 = traces[0], traces[1]
    b1, b2 = t1.micro_batch, t2.micro_batch
    per = (t2.peak - t1.peak) // (b2 - b1)
    r1, r2 = _rows(t1), _rows(t2)
    rows_per = {k: (r2[k] - r1[k]) // (b2 - b1) for k in r1}
    return Fit(setting, seq, traces, t1.peak - b1 * per, per, {k: r1[k] - b1 * rows_per[k] for k in r1}, rows_per,
               attention)


# -- the ledger --------------------------------------------------------------------------------
@dataclass
class Row:
    """One ledger row: the closed form's bytes, the traced bytes, and the residual's reason."""

    name: str
    closed: int | None
    traced: int
    reason: str = ""
    explained: int | None = None          # bytes of the residual the reason accounts for (checked)
    reasons: dict[str, int] = field(default_factory=dict)   # each named reason's share of the residual (variant traces)

    @property
    def residual(self) -> int:
        return self.traced - (self.closed or 0)

    @property
    def unexplained(self) -> int:
        return self.residual - (self.explained or 0)

    def __str__(self) -> str:
        closed = "-" if self.closed is None else _mb(self.closed)
        why = self.reason if self.residual or self.explained else ""   # a reason explains a residual: none, none shown
        if self.unexplained:
            why = (why + "; " if why else "") + f"UNEXPLAINED {self.unexplained:,} B"
        lines = [w for w in why.split("; ") if w]          # one reason per line
        head = f"  {self.name:<21}{closed:>13}{_mb(self.traced):>13}{_mb(self.residual):>13}  "
        return "\n".join([head + (lines[0] if lines else "")] + [" " * len(head) + w for w in lines[1:]]).rstrip()


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f} MB"


@dataclass
class Ledger:
    """The step's bytes, one row per kind: model states (constant) and per sequence."""

    setting: str
    fit: Fit
    constant: list[Row]
    per_sequence: list[Row]

    def __str__(self) -> str:
        head = f"  {'row':<21}{'closed form':>13}{'traced':>13}{'residual':>13}  reason"
        note = ("  (no variants traced under checkpointing: the peak moves between them, so rows do not compare)"
                if SETTINGS[self.setting].checkpoint else "")
        if not self.fit.affine:
            note += ("\n  (the fit is not affine: the peak falls at a different point of the step at different "
                     "micro-batches, so its rows are not a constant and a per-sequence part; trust the traced peaks)")
        shown = lambda rows: [str(r) for r in rows if r.traced or r.closed]   # noqa: E731  (empty rows left out)
        return "\n".join([str(self.fit), "  -- constant part (at the peak)", head, *shown(self.constant),
                          "  -- per sequence", head, *shown(self.per_sequence)] + ([note] if note else []))


def _variant(config, **changes):
    c = load_config(config)
    for k, v in changes.items():
        setattr(c, k, v)
    return c


def build_ledger(config: Any, seq: int, setting: str = "fp32", *, explain: bool = True, attention: str = "cpu",
                 progress: Callable[[str], None] | None = None) -> Ledger:
    """The ledger of one setting: each row's closed form (the course's 16P-family counts and 16d per
    token and block via hp.gpt_activation_bytes), the traced bytes, and the residual; with explain,
    variant traces (a fused GELU, use_cache=False, the output object dropped before backward) measure
    what each named reason accounts for. attention: as in trace_step."""
    config = load_config(config)
    s, dims, facts = SETTINGS[setting], _dims(config), _model_facts(config)
    fit = fit_per_sequence(config, seq, setting, attention=attention, progress=progress)
    config = _with_attention(config, attention)          # the variants below start from the traced config
    P, tc, tp = facts.params, fit.rows_constant, fit.rows_per_sequence
    peak = fit.traces[0].report
    vb = 2 if s.precision == "bf16" else 4
    d, L, a, V = dims["d"], dims["layers"], dims["heads"], dims["vocab"]

    grads_reason = ("the peak comes in backward before the gradients exist"
                    if tc["gradients"] == 0 and peak.peak_phase == "backward" else
                    "the peak comes in backward, once gradients are made" if peak.peak_phase == "backward"
                    else "")
    constant = [
        Row("parameters", 4 * P, tc["parameters"], "buffers (not parameters)", facts.buffer_bytes),
        Row("gradients", 4 * P, tc["gradients"], grads_reason, -4 * P if tc["gradients"] == 0 and grads_reason else None),
        Row("optimizer state", 8 * P, tc["optimizer state"],
            f"AdamW's step counters: 4 B x {facts.tensors} parameter tensors", 4 * facts.tensors),
    ]
    cast_closed = 2 * P if s.precision == "bf16" else 0
    cast_explained = 2 * facts.matmul_params - cast_closed if s.precision == "bf16" else 0
    constant.append(Row("cast copies", cast_closed, tc["cast copies"],
                        "autocast copies only the matmuls' weights (not embeddings' lookups, norms)"
                        if s.precision == "bf16" else "", cast_explained))
    for k in ("activations (blocks)", "logits (forward)", "logits' gradients", "temporaries", "inputs"):
        if tc[k]:
            constant.append(Row(k, None, tc[k], "not per sequence: scratch of one step's backward or optimizer"
                                if k == "temporaries" else ""))

    blocks = gpt_activation_bytes(d=d, n_layers=L, n_heads=a, seq=seq, vocab=V, value_bytes=vb)
    course_blocks = (d * seq * L * vb) if s.checkpoint else blocks.blocks   # checkpointed: each block's input
    per = [Row("activations (blocks)", course_blocks, tp["activations (blocks)"]),
           Row("logits (forward)", blocks.logits, tp["logits (forward)"]),
           Row("logits' gradients", 0, tp["logits' gradients"]),
           Row("temporaries", 0, tp["temporaries"]),
           Row("cast copies", 0, tp["cast copies"]),
           Row("inputs", 8 * seq, tp["inputs"], "labels are input_ids: one int64 tensor", 0)]
    if explain and not s.checkpoint:   # checkpointing moves the peak into backward: rows do not compare
        _explain(config, seq, setting, fit, per, dims, progress)
    _explain_logits(per, seq, V, setting)
    return Ledger(setting, fit, constant, per)


def _explain(config, seq: int, setting: str, fit: Fit, per: list[Row], dims: dict[str, int],
             progress: Callable[[str], None] | None) -> None:
    """Trace variants, each on top of the one before (so no byte is claimed twice); where a row's
    per-sequence bytes drop, the drop is that reason's share of the row's residual."""
    vb = 2 if SETTINGS[setting].precision == "bf16" else 4
    steps: list[tuple[str, str, dict[str, Any], bool]] = []   # key, reason, config changes, hold outputs
    if getattr(config, "activation_function", None) == "gelu_new":
        steps.append(("gelu_new", "gelu_new (a Python tanh formula) keeps its intermediates for backward",
                      {"activation_function": "gelu_pytorch_tanh"}, True))
    attn = [k for k in ("attn_pdrop", "attention_dropout") if getattr(config, k, 0)]
    if attn:
        steps.append(("attention dropout", "attention dropout: the CPU's SDPA (scaled_dot_product_attention) then runs its unfused math kernel, whose saved tensors "
                      "net to about three T x T fp32 tensors per head (not itemized)",
                      dict.fromkeys(attn, 0.0), True))
    other = [k for k in ("resid_pdrop", "embd_pdrop", "hidden_dropout", "dropout") if getattr(config, k, 0)]
    if other:
        steps.append(("other dropouts", "the other dropouts keep a 4-byte fp32 scale per value on the CPU", dict.fromkeys(other, 0.0),
                      True))
    if getattr(config, "use_cache", False) and not SETTINGS[setting].checkpoint:
        steps.append(("use_cache", "use_cache=True, the config's default (a cache for generation)", {"use_cache": False},
                      True))
    steps.append(("output object", "the step holds the output object (its logits) through backward", {}, False))
    changes: dict[str, Any] = {}
    before = fit
    by_name = {r.name: r for r in per}
    for key, reason, change, hold in steps:
        changes.update(change)
        if progress:
            progress(f"explaining ({reason.split(' (')[0]}) ...")
        after = fit_per_sequence(_variant(config, **changes), seq, setting, hold_outputs=hold, check=False,
                                 micro_batches=(fit.traces[0].micro_batch, fit.traces[1].micro_batch))
        for name, row in by_name.items():
            drop = before.rows_per_sequence[name] - after.rows_per_sequence[name]
            if drop > 0:                                 # a row that grows is not explained by the change
                if name == "activations (blocks)":
                    size = f"{drop / (vb * seq * dims['d'] * dims['layers']):.2f}d values per token and block"
                elif name.startswith("logits"):
                    size = f"{drop / (seq * dims['vocab']):g} B per token and vocabulary entry"
                else:
                    size = f"{drop / (seq * dims['d']):.2f}d bytes per token"
                row.reason = (row.reason + "; " if row.reason else "") + f"{reason}: {_mb(drop)} = {size}"
                row.explained = (row.explained or 0) + drop
                row.reasons[key] = drop
        before = after


def _explain_logits(per: list[Row], seq: int, vocab: int, setting: str) -> None:
    """The logits rows hold only tensors whose last dimension is the vocabulary (the tracker notes
    them by shape): what the closed form's one fp32 copy leaves out is named by its size."""
    rows = {r.name: r for r in per}
    vt = seq * vocab
    g = rows["logits' gradients"]
    if g.traced % (4 * vt) == 0 and g.traced:
        g.reason, g.explained = (f"backward's logits-sized gradients (of the logits, of their log-softmax): "
                                 f"{g.traced // (4 * vt)} x V·T fp32 values"), g.traced
    elif g.traced % (2 * vt) == 0 and g.traced:
        g.reason, g.explained = (f"backward's gradients of the logits: {g.traced / (4 * vt):g} x V·T fp32 values "
                                 "(bf16 ones count half)"), g.traced
    f = rows["logits (forward)"]
    if f.closed is not None and f.residual - (f.explained or 0) == 0 and f.traced:
        f.reason = ("the closed form's V·T fp32 values are cross-entropy's log-softmax, saved for backward"
                    + ("; " + f.reason if f.reason else ""))



# -- one block's row, at full width ------------------------------------------------------------
@dataclass
class BlockRow:
    """One block's activations per sequence, traced at full width with 1 and 2 blocks at micro-batches 2
    and 4 (four short traces: the difference of differences is one block, one sequence), against the
    course's 16d closed form; the residual named by what each part of the block keeps for backward."""

    row: Row
    logits: dict[str, int]       # per sequence, from the 1-block fit: "logits (forward)", "logits' gradients"
    affine: bool                 # each trace's activations are 1 or 2 blocks' per sequence x micro-batch + a constant
    traces: list[Traced]
    parts: dict[str, int] = field(default_factory=dict)   # a Llama block's bytes by part, summing to row.traced

    def __str__(self) -> str:
        head = f"  {'row':<21}{'closed form':>13}{'traced':>13}{'residual':>13}  reason"
        note = "" if self.affine else "\n  (NOT affine: the blocks' bytes are not b x one block per sequence; trust no row)"
        return "\n".join(["  -- one block, per sequence (traced with 1 and 2 blocks at micro-batches 2, 4; any split "
                          "of the residual by part is a formula's: the trace checks only its total)", head,
                          str(self.row)]) + note


def _llama_block_parts(config, seq: int, precision: str) -> dict[str, int]:
    """What a Hugging Face Llama block keeps for backward per sequence, by part, in bytes, on this CPU
    (SDPA's fused kernel, whose output is laid out so that o_proj's input is the same storage).
    fp32: every part 4-byte values. bf16 (CPU autocast): the norms and the residual stream stay fp32;
    autocast casts a norm's output to bf16 once per projection that reads it (q, k, v; gate, up); RoPE's
    fp32 cos/sin make rotated q and k fp32, which SDPA casts back to bf16; the generation cache holds
    the fp32 rotated K (use_cache); the projections' outputs are bf16."""
    d, ff, h = config.hidden_size, config.intermediate_size, config.num_attention_heads
    hd = getattr(config, "head_dim", None) or d // h
    kv = config.num_key_value_heads * hd
    if precision == "fp32":
        return {"RMSNorm": 4 * seq * 2 * (3 * d + 1),   # two per block: input, normalized, output (d each); rsqrt
                "attention": 4 * seq * (d + 2 * kv + d + h),   # rotated q; K, V at n_kv_heads; output; logsumexp
                "SwiGLU": 4 * seq * 4 * ff}             # gate (the SiLU input), SiLU output, up, their product
    cache = 4 * kv if getattr(config, "use_cache", False) else 0
    return {"RMSNorm": seq * (2 * (4 * d + 4 + 4 * d) + 5 * 2 * d),
            "attention": seq * (2 * d + 2 * 2 * kv + 4 * h + 2 * d + cache),
            "SwiGLU": seq * 4 * 2 * ff}


_PART_REASONS = {
    "fp32": {
        "RMSNorm": "two RMSNorms, each its input, normalized input and output (3d) and rsqrt (1 per token)",
        "attention": "attention: rotated q (d), K and V at n_kv_heads (repeat_kv's copies not saved), SDPA's "
                     "output (o_proj's input, one storage) and logsumexp per head",
        "SwiGLU": "SwiGLU: gate (the SiLU input), SiLU output, up and their product, d_ff each"},
    "bf16": {
        "RMSNorm": "two RMSNorms, each its fp32 input, rsqrt and normalized input, and a bf16 copy of its output "
                   "per projection that reads it (5 in all)",
        "attention": "attention: bf16 q, K, V (K, V at n_kv_heads), SDPA's bf16 output and fp32 logsumexp, the "
                     "generation cache's fp32 rotated K",
        "SwiGLU": "SwiGLU: gate, SiLU output, up and their product, d_ff each in bf16"},
}


def block_row(config: Any, seq: int, setting: str = "fp32") -> BlockRow:
    """One block's activations per sequence, traced (lone steps, the one-tensor AdamW update, so that the
    peak falls in backward with every block's activations alive), against the 16d closed form. For an fp32
    or bf16 Llama the residual is split by part by a formula (_llama_block_parts), whose sum alone the trace
    checks; what the parts do not name, and any other model's residual, is printed UNEXPLAINED."""
    config = load_config(config)
    s, dims = SETTINGS[setting], _dims(config)
    if s.checkpoint:
        raise EstimateError("block_row traces without checkpointing: under it a block keeps only its input")
    rows: dict[tuple[int, int], dict[str, int]] = {}
    traces = []
    for layers in (1, 2):
        for b in (2, 4):   # at micro-batch 1 a full-vocabulary step can peak late in backward, blocks freed
            t = trace_step(_variant(config, num_hidden_layers=layers), seq, b, setting, update="loop")
            traces.append(t)
            rows[layers, b] = _rows(t)
    per = {layers: {k: (rows[layers, 4][k] - rows[layers, 2][k]) // 2 for k in rows[layers, 2]} for layers in (1, 2)}
    traced = per[2]["activations (blocks)"] - per[1]["activations (blocks)"]
    acts = {k: v["activations (blocks)"] for k, v in rows.items()}
    affine = all(acts[2, b] - acts[1, b] == b * traced for b in (2, 4)) and \
        all(t.report.peak_phase == "backward" for t in traces)
    vb = 2 if s.precision == "bf16" else 4
    closed = gpt_activation_bytes(d=dims["d"], n_layers=1, n_heads=dims["heads"], seq=seq, vocab=dims["vocab"],
                                  value_bytes=vb).blocks
    row, parts = Row("activations (block)", closed, traced), {}
    if getattr(config, "model_type", "") == "llama":
        parts = _llama_block_parts(config, seq, s.precision)
        row.explained = sum(parts.values()) - closed
        row.reason = "; ".join(f"{_PART_REASONS[s.precision][k]}: {_mb(v)} = {v / (vb * seq * dims['d']):.2f}d "
                               f"{s.precision} values" for k, v in parts.items()) + "; less the closed form's 16d"
    return BlockRow(row, {k: per[1][k] for k in ("logits (forward)", "logits' gradients")}, affine, traces, parts)


# -- the planner on traced bytes ---------------------------------------------------------------
@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: the setting, its accumulation, and the traced steps that decide it."""

    rungs: tuple[str, ...]
    setting: str
    micro_batch: int
    accumulation: int
    largest: int                 # the largest micro-batch whose traced step fits
    traced_fit: int              # traced peak at micro_batch
    traced_next: int             # traced peak at largest + 1 (does not fit)
    card: int
    traced_largest: int | None = None   # traced peak at largest (fits)
    global_batch: int = 0               # a micro-batch below it is traced with gradients held (k > 1)

    @property
    def fits(self) -> bool:
        """The step traced at micro_batch and at largest fits the card; the one at largest + 1 does not."""
        return self.traced_fit <= self.card < self.traced_next and (self.traced_largest or 0) <= self.card

    def __str__(self) -> str:
        steps = " -> ".join(self.rungs) if self.rungs else "nothing to change"
        return (f"{steps} ({self.setting}): micro-batch {self.micro_batch} x {self.accumulation}, traced peak "
                f"{fmt_bytes(self.traced_fit)} of {fmt_bytes(self.card)}; largest micro-batch {self.largest} "
                + (f"({fmt_bytes(self.traced_largest)}; " if self.traced_largest is not None else "(")
                + f"traced at {self.largest + 1}: {fmt_bytes(self.traced_next)}, does not fit)"
                + ("; micro-batches below the global batch traced with an earlier one's gradients held"
                   if self.largest + 1 < self.global_batch or self.accumulation > 1 else ""))


@dataclass
class Ladder:
    """What the planner chose on traced bytes, and the rungs it tried."""

    plan: Rung | None
    tried: list[str] = field(default_factory=list)
    devices: str = ""

    def __str__(self) -> str:
        return "\n".join([*(f"  tried: {t}" for t in self.tried),
                          f"  plan: {self.plan}" if self.plan else f"  plan: {self.devices}"])


def plan_from_traces(fits: dict[str, Fit] | Callable[[str], Fit], config: Any, global_batch: int, card_bytes: int, *,
                     max_accumulation: int = 64, min_micro_batch: int = 1,
                     progress: Callable[[str], None] | None = None) -> Ladder:
    """hp.choose_interventions on each setting's traced constant and per-sequence bytes (fits: setting
    name -> Fit, or a function that fits a setting when the ladder reaches it; fp32, fp32+ckpt,
    bf16+ckpt are used), with every fit decided by traces in the fit's attention mode: a rung is a fit
    only when the step traced at its micro-batch fits card_bytes and the step traced at the largest fitting micro-batch + 1 does not.
    A micro-batch below global_batch is an accumulating step (k > 1): it is traced as its last micro-batch,
    with an earlier micro-batch's gradients held (trace_step's grads_held); one of global_batch, as a lone step.
    The add-devices rung is the sharding arithmetic on the last setting's traced bytes, not traced."""
    from .planner import choose_interventions

    config = load_config(config)
    get = fits if callable(fits) else fits.get
    steps: dict[str, Fit] = {}
    traced: dict[tuple[str, int], int] = {}        # each (setting, micro-batch) traced once
    for s in ("fp32", "fp32+ckpt", "bf16+ckpt"):   # fitted lazily: a setting is traced when the ladder reaches it
        fit = get(s)
        if fit is not None:
            if fit.per_sequence <= 0:
                raise EstimateError(f"{s}: the traced step does not grow with the micro-batch; cannot plan on it")
            steps[s] = fit
            for t in getattr(fit, "traces", []):     # the fit's own traces decide too where they are the step
                if t.grads_held == (t.micro_batch < global_batch):   # the rung runs: not traced again
                    traced.setdefault((s, t.micro_batch), t.peak)
        plan = None
        if steps:
            seq = next(iter(steps.values())).seq

            def peak(setting: str, b: int) -> int:
                if (setting, b) not in traced:
                    if progress:
                        progress(f"tracing {setting} at micro-batch {b} ...")
                    traced[setting, b] = trace_step(config, seq, b, setting, attention=steps[setting].attention,
                                                    grads_held=b < global_batch).peak   # accumulating: k > 1
                return traced[setting, b]
            plan = choose_interventions(steps, global_batch, card_bytes, n_params=_model_facts(config).params,
                                        optimizer="adamw", max_accumulation=max_accumulation,
                                        min_micro_batch=min_micro_batch, peak=peak)
            if "add devices" not in plan.rungs:
                break
    if plan is None:
        raise EstimateError("the planner needs a setting's traced bytes: pass fits['fp32'] (or fp32+ckpt, bf16+ckpt)")
    if "add devices" not in plan.rungs:
        return Ladder(Rung(plan.rungs, plan.setting, plan.micro_batch, plan.accumulation, plan.largest, plan.estimate,
                           plan.next_estimate, card_bytes, traced.get((plan.setting, plan.largest)), global_batch),
                      list(plan.tried))
    if plan.zero_stage is None:
        raise EstimateError(f"no rung fits {fmt_bytes(card_bytes)}, not even on 1024 devices at ZeRO stage 3: "
                            "use a larger card or a shorter sequence")
    return Ladder(None, list(plan.tried), f"add devices: {plan.devices} devices at ZeRO stage {plan.zero_stage} "
                  f"for micro-batches of {plan.micro_batch} x {plan.accumulation} (sharding arithmetic on the traced "
                  f"{plan.setting} bytes: model states by hp.zero_bytes, not traced)")


# -- the command line --------------------------------------------------------------------------
_UNITS = {"B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
          "KIB": 2 ** 10, "MIB": 2 ** 20, "GIB": 2 ** 30, "TIB": 2 ** 40}


def _parse_bytes(text: str) -> int:
    """'24GB' -> 24 * 10**9, '80GiB' -> 80 * 2**30 (a unit is required)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]+)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise EstimateError(f"cannot read the card size {text!r}: write it with a unit, e.g. 24GB or 80GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _main(argv: list[str] | None = None) -> int:
    """python -m helpers.estimate: the ledger and the ladder of a config's training step."""
    ap = argparse.ArgumentParser(prog="python -m helpers.estimate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help=f"{', '.join(NAMES)}, or a config.json path")
    ap.add_argument("--seq", type=int, required=True, help="sequence length T")
    ap.add_argument("--batch", type=int, required=True, help="global batch (sequences per optimizer step)")
    ap.add_argument("--card", required=True, help="memory of one device, e.g. 24GB or 80GiB")
    ap.add_argument("--settings", default="fp32", help=f"ledgers to print, comma-separated among {', '.join(SETTINGS)} "
                    "(default fp32; the ladder traces the others it needs)")
    ap.add_argument("--explain", default="none", help="settings whose residuals variant traces name, e.g. fp32 "
                    "(default none; each costs about 10 more traces; not under checkpointing)")
    ap.add_argument("--no-explain", action="store_true", help="same as --explain none")
    ap.add_argument("--attention", choices=ATTENTION, default="cpu", help="cpu: this CPU's kernels, where attention "
                    "dropout runs SDPA's unfused math kernel (default); fused: attention dropout off, so the fused "
                    "kernel runs, a stand-in for a GPU's")
    ap.add_argument("--max-layers", type=int, default=64, help="refuse to trace deeper models (default 64)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    progress = lambda msg: print(f"  [{time.perf_counter() - t0:5.1f} s] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        for name, v in (("--seq", args.seq), ("--batch", args.batch)):
            if v < 1:
                raise EstimateError(f"{name} must be 1 or more, got {v}")
        card = _parse_bytes(args.card)
        config = load_config(args.config)
        dims = _dims(config)
        if dims["layers"] > args.max_layers:
            raise EstimateError(f"{dims['layers']} layers is too deep to trace here in reasonable time (the trace "
                                f"runs every operator in Python): trace fewer layers (num_hidden_layers) and "
                                f"scale the per-block row, or pass --max-layers {dims['layers']}")
        settings = [s.strip() for s in args.settings.split(",")]
        for s in settings:
            if s not in SETTINGS:
                raise EstimateError(f"unknown setting {s!r}: use {', '.join(SETTINGS)}")
        facts = _model_facts(config)
        print(f"{args.config}: {facts.params:,} parameters, T = {args.seq}, global batch {args.batch}, "
              f"card {fmt_bytes(card)}; AdamW, warmed up (its state exists before the traced step)")
        fits: dict[str, Fit] = {}
        for s in settings:
            explain = not args.no_explain and s in args.explain.split(",")
            ledger = build_ledger(config, args.seq, s, explain=explain, attention=args.attention, progress=progress)
            fits[s] = ledger.fit
            print(ledger)
            if not explain and any(r.unexplained for r in ledger.per_sequence) and not SETTINGS[s].checkpoint:
                print(f"  (to name these residuals, trace variants of the config: --explain {s}, about 10 more traces)")
        from .planner import choose_interventions
        acts = gpt_activation_bytes(d=dims["d"], n_layers=dims["layers"], n_heads=dims["heads"], seq=args.seq,
                                    vocab=dims["vocab"])
        closed = {"fp32": StepBytes(zero_bytes(facts.params, 1, 0).total, acts.total)}
        print(f"closed-form planner (hp.choose_interventions on 16P + 16d per token and the logits, fp32, "
              f"a lower bound): {choose_interventions(closed, args.batch, card, n_params=facts.params, optimizer='adamw')}")
        def fit_for(s: str) -> Fit:           # a rung's setting is traced only when the ladder reaches it
            if s not in fits:
                fits[s] = fit_per_sequence(config, args.seq, s, check=False, attention=args.attention,
                                           progress=progress)
            return fits[s]

        ladder = plan_from_traces(fit_for, config, args.batch, card, progress=progress)
        print("planner on traced bytes:")
        print(ladder)
    except (EstimateError, RuntimeError, MemoryError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (RuntimeError, MemoryError)) and not isinstance(exc, EstimateError):
            msg = (f"the fake-tensor trace failed ({type(exc).__name__}: {msg[:160]}): the model may be too large "
                   "or use an operator fake tensors do not support; trace fewer layers (num_hidden_layers)")
        print(f"error: {msg}", file=sys.stderr)
        return 2
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
