"""helpers.estimate: a transformers model's step traced at full size on fake tensors, its ledger
against the closed forms, the planner on traced bytes, the command line; and the figures the course
quotes from elsewhere (ZeRO, DeepSpeed's estimators, Korthikanti et al., the Playbook's parameter
count), reproduced here.

The ledger and planner tests use a tiny GPT-2 (2 blocks, d = 64, T = 64, V = 512); one test plans the
real GPT-2 124M at T = 1024 on a 24 GB card. Each trace runs every operator of a step in Python on fake
tensors: a few seconds on an idle core, 5-15 s on a loaded 2-core machine, so the tests that trace are
marked slow (the whole file: about 5 minutes there; deselect them with -m 'not slow').
"""

import json

import pytest
import torch

import helpers as hp

transformers = pytest.importorskip("transformers")
E = pytest.importorskip("helpers.estimate")
GB = 10 ** 9


def tiny(**kw):
    kw = {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 64, "vocab_size": 512, "bos_token_id": 0,
          "eos_token_id": 0, **kw}
    return transformers.GPT2Config(**kw)


slow = pytest.mark.slow


# -- figures from elsewhere --------------------------------------------------------------------
def test_zero_papers_7_5b_on_64_devices():
    """Rajbhandari et al. 2020, Figure 1: 120, 31.4, 16.6 and 1.9 GB per device (their 2 + 2 + 12)."""
    got = [hp.zero_bytes(7_500_000_000, 64, stage, "mixed16").total / GB for stage in (0, 1, 2, 3)]
    assert [round(g, 1) for g in got] == [120.0, 31.4, 16.6, 1.9]


def test_deepspeeds_estimators_differ_from_zero_bytes_by_what_they_count():
    """DeepSpeed's no-offload estimators: stage 2, 2P + 18P/N; stage 3, 4 x largest layer + 18P/N. Their 18
    counts 16-bit and fp32 gradients, fp32 parameters and two moments: 4 bytes per parameter more than the
    paper's 2 + 12 sharded at stage 2 (the fp32 gradient shard); at stage 3, where the paper shards 16, the
    difference is 2P/N and the buffer that gathers the largest layer's 16-bit parameters and gradients."""
    P, N, largest = 7_500_000_000, 64, 131_072_000
    ds2 = 2 * P + 18 * P // N
    ds3 = 4 * largest + 18 * P // N
    assert ds2 - hp.zero_bytes(P, N, 2, "mixed16").total == 4 * P // N
    assert ds3 - hp.zero_bytes(P, N, 3, "mixed16").total == 4 * largest + 2 * P // N
    assert ds2 - hp.zero_bytes(P, N, 2, "mixed").total == 2 * P // N   # the course's 18P: fp32 gradients
    assert 2 * P + 18 * P == 20 * P   # at N = 1, DeepSpeed's stage 2 is the Playbook's 20P


def test_deepspeeds_docs_example_predates_its_zero2_formula():
    """deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs (v0.19.6, commit edaa722;
    the formula since f4cb866, PR #5099, first in v0.14.3): no offload, 2P + int(18P/N), printed as bytes / 2**30
    with the label "GB". Its docs' t5-3b example (docs/code-docs/source/memory.rst: 2851M parameters, 1 node of 8
    GPUs, "15.93GB | offload_optimizer=none") is the formula it replaced, 4P + int(16P/N)."""
    P, N = 2851 * 10 ** 6, 8
    printed = lambda b: f"{b / 2 ** 30:6.2f}GB"   # noqa: E731  (the estimator's own format)
    assert printed(4 * P + int(16 * P / N)) == " 15.93GB"
    assert printed(2 * P + int(18 * P / N)) == " 11.28GB"


def test_korthikanti_activations_of_a_llama_3_1_8b_shape():
    """s·b·h·(34 + 5·a·s/h) per layer, 16-bit activations, 1-byte dropout masks, scores kept: 9.25 GiB."""
    L, h, a, s, b = 32, 4096, 32, 1024, 1
    per_layer = s * b * h * (34 + 5 * a * s // h)
    assert 5 * a * s % h == 0 and per_layer == 310_378_496
    assert L * per_layer / 2 ** 30 == 9.25
    assert 5 * 96 * 2048 / 12288 == 80 and round(80 / 114, 2) == 0.70   # GPT-3 175B: the scores' share


@slow   # building 32 layers, even on the meta device: 10-30 s
def test_llama_3_1_8b_parameter_count_against_the_playbooks_formula():
    """A Llama-3.1-8B config built on the meta device has 8.03B parameters; the Playbook's simplified
    h·v + L(12h² + 13h) + 2h gives 6.97B (no grouped-query attention, no SwiGLU width, tied head)."""
    cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    P = sum(p.numel() for p in model.parameters())
    h, v, L = 4096, 128256, 32
    simplified = h * v + L * (12 * h * h + 13 * h) + 2 * h
    assert P == 8_030_261_248 and round(P / 1e9, 2) == 8.03
    assert simplified == 6_969_499_648 and round(simplified / 1e9, 2) == 6.97


# -- configs -----------------------------------------------------------------------------------
def test_configs_by_name_path_and_object(tmp_path):
    gpt2 = E.load_config("gpt2")
    assert (gpt2.n_layer, gpt2.n_embd, gpt2.vocab_size, gpt2.activation_function) == (12, 768, 50257, "gelu_new")
    llama = E.load_config("llama-1b")
    assert (llama.num_key_value_heads, llama.hidden_act, llama.tie_word_embeddings) == (8, "silu", True)
    assert E._model_facts(gpt2).params == 124_439_808
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny().to_dict()))
    assert E.load_config(path).n_layer == 2 and E.load_config(tmp_path).n_embd == 64
    assert E.load_config(tiny()).n_head == 2


def test_a_config_it_cannot_build_is_one_clear_line(tmp_path):  # no trace: the checks come first
    with pytest.raises(E.EstimateError, match="nothing is downloaded"):
        E.load_config("meta-llama/Llama-3.1-8B")
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(E.EstimateError, match="model_type"):
        E.load_config(bad)
    with pytest.raises(E.EstimateError, match="positions"):
        E.trace_step(tiny(), 128, 1)


# -- traces, the fit, the ledger ---------------------------------------------------------------
@slow
def test_the_fp32_ledger_explains_gelu_new_the_logits_and_the_model_states():
    """Three traces for the fit (affine to the byte at the third), two for each of the two variants."""
    cfg, T = tiny(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False), 64
    d, L, V = 64, 2, 512
    led = E.build_ledger(cfg, T, "fp32")
    assert led.fit.affine and "affine: exact" in str(led.fit)
    for t in led.fit.traces:                           # warmed up: every traced step starts with AdamW's state
        assert t.report.new_optimizer_state == 0 and t.report.peak_phase == "backward"
    const = {r.name: r for r in led.constant}
    per = {r.name: r for r in led.per_sequence}
    facts = E._model_facts(cfg)
    assert const["optimizer state"].unexplained == 0 and const["parameters"].unexplained == 0
    assert const["gradients"].traced == 0 and const["gradients"].unexplained == 0   # peak before gradients
    assert per["activations (blocks)"].closed == 16 * d * T * L * 4
    assert "gelu_new" in per["activations (blocks)"].reason and "12.00d" in per["activations (blocks)"].reason
    assert per["activations (blocks)"].reasons == {"gelu_new": 12 * d * T * L * 4}   # each share in bytes
    assert per["logits (forward)"].reasons == {"output object": V * T * 4}
    assert per["logits (forward)"].closed == V * T * 4 and per["logits (forward)"].unexplained == 0
    assert per["logits' gradients"].traced == 2 * V * T * 4 and per["logits' gradients"].unexplained == 0
    # what is not explained is printed as such, never hidden
    for row in led.constant + led.per_sequence:
        assert (f"UNEXPLAINED {row.unexplained:,} B" in str(row)) == bool(row.unexplained)
    assert facts.tensors * 4 == const["optimizer state"].residual


@slow
def test_gpt2s_shares_in_bytes_attention_dropout_three_score_tensors_per_head_less_the_fused_kernels_output_and_logsumexp():
    """GPT-2 124M at T = 1024 (lesson 07's ledger): each named share, in the ledger's order, to the byte."""
    T, d, h, L = 1024, 768, 12, 12
    share = {r.name: r for r in E.build_ledger("gpt2", T, "fp32").per_sequence}["activations (blocks)"].reasons
    assert list(share) == ["gelu_new", "attention dropout", "other dropouts", "use_cache"]
    assert share["gelu_new"] == 12 * 4 * d * T * L and share["use_cache"] == 2 * 4 * d * T * L
    assert share["attention dropout"] == L * (3 * 4 * T * T * h - 4 * d * T - 4 * h * T)


@slow
def test_the_bf16_ledger_casts_only_the_matmul_weights_and_keeps_fp32_logits():
    cfg, T, V = tiny(), 64, 512
    led = E.build_ledger(cfg, T, "bf16", explain=False)
    const = {r.name: r for r in led.constant}
    per = {r.name: r for r in led.per_sequence}
    assert const["cast copies"].traced == 2 * E._model_facts(cfg).matmul_params and const["cast copies"].unexplained == 0
    assert per["logits' gradients"].traced == 2 * V * T * 4      # fp32 under autocast
    assert per["activations (blocks)"].closed == 16 * 64 * T * 2 * 2


def test_attention_modes_are_checked_and_fused_turns_only_attention_dropout_off():
    cfg = tiny(attn_pdrop=0.1, resid_pdrop=0.1)
    fused = E._with_attention(cfg, "fused")
    assert fused.attn_pdrop == 0.0 and fused.resid_pdrop == 0.1 and cfg.attn_pdrop == 0.1   # a copy changed
    assert E._with_attention(cfg, "cpu") is cfg
    with pytest.raises(E.EstimateError, match="unknown attention 'gpu'"):
        E._with_attention(cfg, "gpu")


@slow
def test_the_traced_update_is_foreach_by_default_and_loop_or_fused_drop_its_parameter_sized_scratch():
    """At a tiny sequence the step peaks in the foreach update, with 4P of scratch (P: the parameters' bytes / 4)."""
    cfg = tiny()
    with pytest.raises(E.EstimateError, match="unknown update 'adam'"):
        E.trace_step(cfg, 8, 1, update="adam")
    traced = {u: E.trace_step(cfg, 8, 1, update=u) for u in E.UPDATES}
    params = traced["foreach"].report.peak_breakdown["parameters"]
    assert traced["foreach"].report.peak_phase == "optimizer"
    assert traced["foreach"].report.peak_breakdown["temporaries"] == params
    for u in ("loop", "fused"):
        assert traced[u].peak < traced["foreach"].peak and traced[u].report.peak_phase == "backward"
        assert traced[u].report.peak_breakdown["temporaries"] < params


def test_fused_attention_traces_the_config_without_attention_dropout():
    """On the CPU, attention dropout runs SDPA's math kernel, whose saved tensors net to three to four T x T
    fp32 tensors per head at this size (not itemized); attention="fused" is the same
    config traced with attention dropout off, to the byte."""
    T, L, a = 64, 2, 2
    cfg = tiny(attn_pdrop=0.1, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False)
    cpu, fused = E.trace_step(cfg, T, 1), E.trace_step(cfg, T, 1, attention="fused")
    assert fused.peak == E.trace_step(tiny(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False), T, 1).peak
    scores = L * a * T * T * 4
    assert 3 * scores <= cpu.peak - fused.peak < 4 * scores
    fit = E.fit_per_sequence(cfg, T, "fp32", (1, 2), check=False, attention="fused")
    assert fit.attention == "fused" and "fused attention" in str(fit) and fit.traces[0].peak == fused.peak


def test_a_trace_without_the_cache_matches_a_real_step_to_the_byte(monkeypatch):
    """use_cache=False (the ledger's variant) and checkpointing run without a cache: on fake tensors
    transformers could not read the position ids and built a [b, 1, T, T] mask per layer that a real
    step skips; the trace must hold what the real step (hp.measure_memory on real tensors) holds."""
    from helpers import memory_torch

    T, b = 64, 2
    cfgs = [tiny(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=u) for u in (False, True)]
    fake = [E.trace_step(c, T, b) for c in cfgs] + [E.trace_step(cfgs[0], T, b, "fp32+ckpt")]
    monkeypatch.setattr(E, "predict_memory",
                        lambda setup, steps=1, tracker=None: memory_torch.measure_memory(setup(), steps, tracker=tracker))
    real = [E.trace_step(c, T, b) for c in cfgs] + [E.trace_step(cfgs[0], T, b, "fp32+ckpt")]
    assert [f.peak for f in fake] == [r.peak for r in real]


def test_a_trace_with_gradients_held_peaks_higher_by_the_gradients_bytes():
    """The last micro-batch of an accumulating step runs backward with an earlier micro-batch's fp32
    gradients held: the lone step peaks early in backward with no gradients, so the held step's peak is
    the lone one plus 4P, the gradients' bytes, at the same moment."""
    cfg, T = tiny(), 64
    for update in ("foreach", "loop"):
        lone, held = E.trace_step(cfg, T, 2, update=update), E.trace_step(cfg, T, 2, update=update, grads_held=True)
        params = lone.report.peak_breakdown["parameters"]
        assert lone.report.peak_phase == held.report.peak_phase == "backward" and not lone.grads_held and held.grads_held
        assert lone.report.peak_breakdown["gradients"] == 0 and held.report.peak_breakdown["gradients"] == params
        assert held.peak - lone.peak == params          # 4P: the fp32 gradients, as many bytes as the parameters



def tiny_llama(**kw):
    cfg = E.load_config("llama-1b")
    for k, v in {"hidden_size": 48, "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 12, "vocab_size": 500, **kw}.items():
        setattr(cfg, k, v)
    return cfg


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("make", [tiny, tiny_llama], ids=["gpt2", "llama"])
def test_a_real_backward_leaves_one_gradient_of_its_parameters_size_per_parameter(make, precision):
    """trace_step(grads_held=True) makes an earlier micro-batch's gradients as zeros_like(p) for every parameter
    instead of running that micro-batch: what a real forward and backward leaves must be just that (no parameter
    without a gradient, none in another dtype, none on a larger storage it was cut from)."""
    torch.manual_seed(0)
    model = E._build(make())
    model.train()
    ids = torch.randint(0, 100, (2, 16))
    with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
        model(input_ids=ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.dtype == p.dtype and p.grad.untyped_storage().nbytes() == p.numel() * p.element_size(), name


def test_a_llama_blocks_fp32_bytes_are_named_by_part_to_the_byte():
    """Traced at 1 and 2 blocks, micro-batches 2 and 4: one block per sequence is its RMSNorms' 3d + 1 each,
    attention's rotated q, K and V at n_kv_heads (no repeat_kv copies), output and logsumexp, SwiGLU's 4 d_ff."""
    T, d, ff, h, kv = 40, 48, 160, 4, 2 * 12
    br = E.block_row(tiny_llama(), T, "fp32")
    assert br.affine and br.row.closed == 16 * d * T * 4
    assert br.parts == {"RMSNorm": 4 * T * 2 * (3 * d + 1), "attention": 4 * T * (2 * d + 2 * kv + h),
                        "SwiGLU": 4 * T * 4 * ff}
    assert br.row.traced == sum(br.parts.values()) and br.row.unexplained == 0
    assert "UNEXPLAINED" not in str(br) and "SwiGLU" in str(br)
    assert br.logits == {"logits (forward)": 2 * 4 * 500 * T, "logits' gradients": 2 * 4 * 500 * T}
    wrong = E.Row("activations (block)", br.row.closed, br.row.traced + 4, explained=br.row.explained)
    assert "UNEXPLAINED 4 B" in str(wrong)      # a byte the parts do not name is printed, never hidden


@slow
def test_a_llama_blocks_bf16_bytes_are_named_by_part_and_a_gpt2_block_is_printed_unexplained():
    T = 40
    br = E.block_row(tiny_llama(), T, "bf16")
    assert br.affine and br.row.unexplained == 0 and br.row.closed == 16 * 48 * T * 2
    gpt = E.block_row(tiny(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False), 64, "fp32")
    assert gpt.parts == {} and f"UNEXPLAINED {gpt.row.unexplained:,} B" in str(gpt)


@slow
def test_llama_1b_one_block_per_sequence_at_t_1024_fp32_and_bf16():
    """Lesson 07's Llama: 24.52d fp32 values per token and block (205.66 MB) against the closed form's 16d;
    in bf16 134.36 MB against 67.11 MB; every byte named; logits rows in V x T units."""
    T, V = 1024, 128256
    rows = {s: E.block_row("llama-1b", T, s) for s in ("fp32", "bf16")}
    assert all(r.affine and r.row.unexplained == 0 for r in rows.values())
    assert rows["fp32"].row.traced == 205_660_160 and rows["bf16"].row.traced == 134_356_992
    assert rows["fp32"].logits == {"logits (forward)": 12 * V * T, "logits' gradients": 12 * V * T}
    assert rows["bf16"].logits == {"logits (forward)": 10 * V * T, "logits' gradients": 12 * V * T}

# -- the planner -------------------------------------------------------------------------------
@slow
def test_the_planner_calls_a_rung_a_fit_only_when_its_trace_fits_and_the_next_does_not():
    cfg, T = tiny(), 64
    fits = {"fp32": E.fit_per_sequence(cfg, T, "fp32", check=False)}
    card = fits["fp32"].predict(5) + 1
    plan = E.plan_from_traces(fits, cfg, 32, card).plan
    assert plan.rungs == ("accumulate",) and plan.setting == "fp32" and plan.micro_batch * plan.accumulation == 32
    assert plan.fits and plan.traced_fit <= card < plan.traced_next and plan.micro_batch <= plan.largest
    held = E.trace_step(cfg, T, plan.largest, grads_held=True)     # accumulating (k > 1): gradients held
    assert plan.traced_largest == held.peak <= card and held.grads_held   # the largest, traced, fits
    assert plan.traced_largest > E.trace_step(cfg, T, plan.largest).peak  # above the lone step's peak
    with pytest.raises(E.EstimateError, match="no rung fits"):       # no trace: the fit says micro-batch 0
        E.plan_from_traces(fits, cfg, 32, 1000)


@slow
def test_gpt2_124m_on_24_gb_traced_to_fit_and_the_next_micro_batch_not():
    """The issue's case: the closed-form planner said micro-batch 16 x 2 (14.95 GB); the step traced at
    full size says less. Traces of the full model on fake tensors (a few seconds each)."""
    cfg, T, card = E.load_config("gpt2"), 1024, 24 * GB
    fits = {"fp32": E.fit_per_sequence(cfg, T, "fp32", check=False)}
    ladder = E.plan_from_traces(fits, cfg, 32, card)
    plan = ladder.plan
    assert plan.setting == "fp32" and plan.rungs == ("accumulate",)
    assert plan.traced_fit <= card < plan.traced_next and plan.micro_batch <= plan.largest
    assert plan.micro_batch < 16                             # the closed-form planner's 16 does not fit
    closed = hp.StepBytes(16 * 124_439_808, hp.gpt_activation_bytes(d=768, n_layers=12, n_heads=12, seq=T,
                                                                   vocab=50257).total)
    old = hp.choose_interventions({"fp32": closed}, 32, card)
    assert old.micro_batch == 16 and old.fits                # the closed form, 16d per token: a lower bound
    assert plan.traced_fit > closed.predict(plan.micro_batch)


# -- the command line --------------------------------------------------------------------------
def test_cli_errors_are_one_line(capsys, tmp_path):
    assert E._main(["--config", "nope", "--seq", "64", "--batch", "8", "--card", "1GB"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no config 'nope'") and "\n" not in err
    assert E._main(["--config", "gpt2", "--seq", "64", "--batch", "8", "--card", "24"]) == 2
    assert "with a unit" in capsys.readouterr().err
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps(dict(tiny().to_dict(), n_layer=200)))
    assert E._main(["--config", str(deep), "--seq", "64", "--batch", "8", "--card", "1GB"]) == 2
    assert "too deep" in capsys.readouterr().err
    assert E._parse_bytes("24GB") == 24 * GB and E._parse_bytes("80GiB") == 80 * 2 ** 30


@slow
def test_cli_prints_the_ledger_and_the_ladder_with_progress_lines(capsys, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny().to_dict()))
    rc = E._main(["--config", str(path), "--seq", "64", "--batch", "8", "--card", "10MB", "--settings", "fp32",
                  "--no-explain"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "per sequence" in out.out and "closed-form planner" in out.out and "planner on traced bytes" in out.out
    assert "tracing fp32 at micro-batch 2" in out.err
