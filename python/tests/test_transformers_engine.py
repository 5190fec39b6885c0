"""Hugging Face transformers as an engine (python/examples/transformers_engine.py), judged on the committed
suite's model cases the way the example PyTorch engine is (python/tests/test_torch_engine.py):

- the fp32 engine (the model loaded in float32) passes every model case with no allowance;
- the bf16 engine (loaded in bfloat16) passes with bf16_activations, the allowance it declares;
- every planted bug (transformers_engine.BUGS) fails the cases its entry names, in fp32 and under
  bf16_activations; a bug whose entry names no bf16 case passes every bf16 check, which documents what that
  allowance cannot see.

Skipped, saying why, without transformers (and accelerate, which its GGUF loader needs) or the model file.
The model is loaded once per mode (about 10 s each: the loader reads the GGUF twice, its vocabulary included)
and every bug is planted into it and restored; one torch thread, as CI runs this on 2 cores."""
import os
import pathlib
import sys

import pytest

# Before transformers (and huggingface_hub) is first imported, which reads it once: the GGUF is local and the Hub
# is never to be asked (the engine module sets the same default, but the skip below imports transformers first).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch", reason="python/examples/transformers_engine.py needs PyTorch")
pytest.importorskip("transformers", reason="python/examples/transformers_engine.py needs transformers")
pytest.importorskip("accelerate", reason="transformers' GGUF loader needs accelerate")

import plumb  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "examples"))
import transformers_engine as te  # noqa: E402

SUITE = plumb.Suite(ROOT / "fixtures" / "suite")
MODEL = pathlib.Path(os.environ.get("PLUMB_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
MODEL_CASES = [c for c in SUITE if c.op in te.MODEL_OPS]

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason=f"{MODEL} is absent (scripts/fetch-model smollm2)")

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def judged():
    """judged(mode, bug) → plumb.verify's rows for every model case, computed once per (mode, bug); the model
    itself is loaded once per mode (te.load_model's cache)."""
    computed = {}

    def get(mode, bug=None):
        if (mode, bug) not in computed:
            results = te.run(SUITE, mode, bug, MODEL_CASES, model_dir=MODEL.parent)
            computed[mode, bug] = plumb.verify(SUITE, results, allow=te.MODES[mode].allow)[0]
        return computed[mode, bug]

    return get


def failing(rows):
    return {r.case for r in rows if not r.passed}


@pytest.mark.parametrize("mode", sorted(te.MODES))
def test_every_model_case_passes_with_the_modes_allowances(mode, judged):
    rows = judged(mode)
    assert {r.case for r in rows} == {c.name for c in MODEL_CASES}
    assert not failing(rows), plumb.format_rows(rows)
    if not te.MODES[mode].allow:
        assert not any(r.allowance for r in rows)


def test_op_cases_are_refused_not_computed():
    op_case = next(c for c in SUITE if c.op not in te.MODEL_OPS)
    with pytest.raises(NotImplementedError, match="not this adapter's job"):
        te.Engine("fp32")(op_case)
    assert te.run(SUITE, "fp32", cases=[op_case]) == {}


@pytest.mark.parametrize("mode", sorted(te.MODES))
@pytest.mark.parametrize("bug", sorted(te.BUGS))
def test_each_planted_bug_fails_the_cases_it_names(bug, mode, judged):
    rows, named = judged(mode, bug), set(getattr(te.BUGS[bug], mode))
    table = plumb.format_rows([r for r in rows if not r.passed])
    assert named <= failing(rows), f"{bug} ({te.BUGS[bug].what}) passes {named - failing(rows)} in {mode}:\n{table}"
    if not named:  # the allowance hides it: every check passes, which the entry says
        assert not failing(rows), f"{bug} now fails in {mode}: name the cases in te.BUGS:\n{table}"


class WithoutDecodeTokens:
    """A case as a suite older than end_to_end's decode_tokens input presents it."""

    def __init__(self, case):
        self._case = case

    def __getattr__(self, name):
        return getattr(self._case, name)

    def inputs(self, framework="numpy", device=None):
        t = self._case.inputs(framework, device)
        t.pop("decode_tokens", None)
        return t


def test_a_suite_without_decode_tokens_feeds_the_expected_tokens():
    case = SUITE.case(te.E2E)
    if "decode_tokens" not in case.input_names:
        pytest.skip("this suite predates decode_tokens: the fallback is what every other test runs")
    n = case.params["decode_steps"]
    assert torch.equal(case.inputs("torch")["decode_tokens"], case.expected("torch")["tokens"][:n])
    engine = te.Engine("fp32", model_dir=MODEL.parent)
    assert torch.equal(engine(WithoutDecodeTokens(case))["logits"], engine(case)["logits"])


def test_a_planted_bug_is_restored_after_the_case(judged):
    """Bugs are planted into the one loaded model; the model must compute exactly as before afterwards."""
    case = SUITE.case(te.E2E)
    clean = te.Engine("fp32", model_dir=MODEL.parent)(case)["logits"]
    for bug in te.BUGS:
        te.Engine("fp32", bug, model_dir=MODEL.parent)(case)
    assert torch.equal(te.Engine("fp32", model_dir=MODEL.parent)(case)["logits"], clean)
