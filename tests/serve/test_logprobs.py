"""Log-probabilities from plumb serve (docs/serve.md, "Log-probabilities"), read with the `openai` client.

Chat `logprobs`/`top_logprobs` and completions `logprobs`/`echo`, streamed and not: one entry per token,
top lists sorted and led by the greedy choice, `bytes` that rebuild the text (a character split across
byte-level BPE tokens included), and the prompt's log-likelihoods (echo, max_tokens 0) equal to what
`plumb perplexity` computes for the same tokens: both are engine/log_probs.h's log-softmax of the logits of
one prefill. The lm-evaluation-harness run (test_lm_eval_local_completions) is opt-in: PLUMB_LM_EVAL_PYTHON
names a Python that has lm_eval installed (it needs ~750 MB of packages, see docs/serve.md).
"""

import json
import math
import os
import subprocess
import tempfile
import urllib.request

import openai
import pytest

from test_openai_client import MODEL, PLUMB, post_raw, start_server, stop_server

TASK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lm_eval_task")
TEXT = ("The quick brown fox jumps over the lazy dog. A stitch in time saves nine. All that glitters is "
        "not gold. Where there is smoke there is fire. Actions speak louder than words.")


@pytest.fixture(scope="module")
def server():
    # An f32 KV cache, as `plumb perplexity`'s: the fast kernel family's default f16 cache moves a
    # log-probability by ~1e-3, more than the comparison allows.
    url, proc = start_server("--kv-dtype", "f32")
    yield url
    stop_server(proc)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="none", max_retries=0, timeout=120)


def tokenize(server, text):
    status, body = post_raw(server + "/tokenize", json.dumps({"prompt": text}).encode())
    assert status == 200
    return body["tokens"]


def check_sorted_tops(entries, n):
    for e in entries:
        assert len(e.top_logprobs) == n
        values = [t.logprob for t in e.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert all(v <= 0 for v in values)


def test_chat_logprobs_are_the_greedy_tokens_and_spell_the_reply(client):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Name three colours."}],
                                       max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 12
    check_sorted_tops(content, 3)
    for e in content:  # greedy: the token taken is the most probable one
        assert e.top_logprobs[0].token == e.token
        assert e.top_logprobs[0].logprob == e.logprob
    assert bytes(b for e in content for b in e.bytes).decode() == r.choices[0].message.content


def test_chat_logprobs_report_a_split_character_s_bytes(client):
    # SmolLM2 writes each of these kanji/kana as two or three byte-level tokens.
    r = client.chat.completions.create(model="m", max_tokens=12, temperature=0, logprobs=True,
                                       messages=[{"role": "user",
                                                  "content": "Write the Japanese word for Japan in kanji."}])
    content = r.choices[0].logprobs.content
    partial = [e for e in content if e.token == "\ufffd"]
    assert partial, [e.token for e in content]
    for e in partial:
        with pytest.raises(UnicodeDecodeError):
            bytes(e.bytes).decode()
    joined = bytes(b for e in content for b in e.bytes)
    assert joined.decode(errors="replace") == r.choices[0].message.content


def test_chat_stream_carries_the_same_logprobs(client):
    kw = dict(model="m", messages=[{"role": "user", "content": "What is the capital of France?"}],
              max_tokens=10, temperature=0, logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**kw).choices[0].logprobs.content
    streamed = [e for c in client.chat.completions.create(stream=True, **kw)
                if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in whole]
    for a, b in zip(streamed, whole):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-9)
        assert [t.token for t in a.top_logprobs] == [t.token for t in b.top_logprobs]


def test_a_reply_that_stops_lists_no_stop_token(client):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Say OK."}],
                                       max_tokens=40, temperature=0, logprobs=True)
    assert r.choices[0].finish_reason == "stop"
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens - 1  # the end-of-turn token is not content
    assert bytes(b for e in content for b in e.bytes).decode() == r.choices[0].message.content


def test_completion_logprobs_and_text_offsets(client):
    r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=8, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert token in top and top[token] == value and len(top) <= 3  # the top 2 and the token itself
        assert max(top.values()) == value  # greedy
    text = r.choices[0].text
    assert lp.text_offset[0] == 0
    for token, offset in zip(lp.tokens, lp.text_offset):
        assert text[offset:].startswith(token)


def test_echo_scores_the_prompt_as_perplexity_does(server, client):
    """Echo + max_tokens 0 over perplexity's windows: the same per-token numbers (their mean, from the
    printed PPL, for 16-token windows; one token exactly for 4-token windows, where one token is scored)."""
    ids = tokenize(server, TEXT)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(TEXT)
    try:
        for ctx in (16, 4):
            out = subprocess.run([PLUMB, "perplexity", "--model", MODEL, "--file", f.name, "--ctx", str(ctx),
                                  "--threads", "1"], capture_output=True, text=True, check=True).stdout
            ppl = float(out.split("PPL = ")[1].split()[0])
            nll = []
            for w in range(len(ids) // ctx):
                window = ids[w * ctx:(w + 1) * ctx]  # SmolLM2 adds no BOS: perplexity replaces nothing
                r = client.completions.create(model="m", prompt=window, max_tokens=0, echo=True, logprobs=0)
                lp = r.choices[0].logprobs
                assert lp.token_logprobs[0] is None and len(lp.token_logprobs) == ctx
                assert r.usage.completion_tokens == 0 and r.choices[0].finish_reason == "length"
                nll += [-x for x in lp.token_logprobs[ctx // 2 + 1:]]  # perplexity scores j+1 for j >= ctx/2
            # The CLI prints 4 decimals: a mean NLL within 1e-4 of the CLI's.
            assert math.log(ppl) == pytest.approx(sum(nll) / len(nll), abs=1e-4 / ppl + 1e-4), ctx
    finally:
        os.unlink(f.name)


def test_echo_with_one_new_token_as_lm_eval_asks(server, client):
    ids = tokenize(server, "Paris is the capital of France")
    r = client.completions.create(model="m", prompt=[ids], max_tokens=1, echo=True, logprobs=1, temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(ids) + 1 and lp.top_logprobs[0] is None
    assert r.choices[0].text.startswith("Paris is the capital of France")
    scored = client.completions.create(model="m", prompt=ids, max_tokens=0, echo=True, logprobs=1)
    assert scored.choices[0].logprobs.token_logprobs == pytest.approx(lp.token_logprobs[:-1], abs=1e-9)
    streamed = list(client.completions.create(model="m", prompt=ids, max_tokens=1, echo=True, logprobs=1,
                                              temperature=0, stream=True))
    tokens = [t for c in streamed if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.tokens]
    assert tokens == lp.tokens
    assert "".join(c.choices[0].text for c in streamed if c.choices) == r.choices[0].text


def test_logprob_refusals(server, client):
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], top_logprobs=21,
                                       logprobs=True)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], top_logprobs=2)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="m", prompt="Hi", logprobs=21)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="m", prompt=[1, -5], max_tokens=1)
    status, body = post_raw(server + "/detokenize", json.dumps({"tokens": tokenize(server, TEXT)}).encode())
    assert status == 200 and body["prompt"] == TEXT


def test_lm_eval_local_completions(server):
    """lm-evaluation-harness's `local-completions` model on a local multiple-choice task: it finds
    /tokenize, asks echo + logprobs, and its per-choice log-likelihoods equal plumb's own scoring."""
    python = os.environ.get("PLUMB_LM_EVAL_PYTHON")
    if not python:
        pytest.skip("PLUMB_LM_EVAL_PYTHON is not set (a Python with lm_eval[api]; opt-in, docs/serve.md)")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([python, "-m", "lm_eval", "--model", "local-completions", "--model_args",
                        f"model=plumb,base_url={server}/v1/completions,num_concurrent=1,max_retries=1",
                        "--include_path", TASK_DIR, "--tasks", "plumb_capitals",
                        "--output_path", out, "--log_samples"], check=True, timeout=600, cwd=TASK_DIR,
                       env=dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1"))
        results = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs]
        summary = json.load(open(next(p for p in results if os.path.basename(p).startswith("results"))))
        acc = summary["results"]["plumb_capitals"]["acc,none"]
        print(f"lm_eval plumb_capitals acc = {acc}")
        assert acc >= 0.5  # 4 choices: chance is 0.25
        samples = [json.loads(line) for p in results if os.path.basename(p).startswith("samples")
                   for line in open(p)]
    # Each choice's log-likelihood, scored again here: the continuation's tokens' log-probabilities.
    checked = 0
    for s in samples:
        context = s["arguments"]["gen_args_0"]["arg_0"]
        for k, resp in enumerate(s["resps"]):  # per choice: [[log-likelihood, is_greedy]]
            choice_ll = float(resp[0][0])
            continuation = s["arguments"][f"gen_args_{k}"]["arg_1"]
            ctx_ids = tokenize_plain(server, context)
            ids = ctx_ids + tokenize_plain(server, continuation)
            body = json.dumps({"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 0}).encode()
            status, r = post_raw(server + "/v1/completions", body)
            assert status == 200
            ours = sum(r["choices"][0]["logprobs"]["token_logprobs"][len(ctx_ids):])
            assert choice_ll == pytest.approx(ours, abs=1e-4)
            checked += 1
    assert checked == 4 * len(samples) == 40


def tokenize_plain(server, text):
    status, body = post_raw(server + "/tokenize", json.dumps({"prompt": text, "add_special_tokens": False}).encode())
    assert status == 200
    return body["tokens"]
