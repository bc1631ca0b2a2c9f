"""Drives a running `dew serve` with the real PyPI `openai` client, as users point existing code at it.

Run by tests/serve_openai_client_test.cpp with the test venv's python ($DEW_CACHE/venv-test, made by
scripts/setup.sh with a pinned `openai`). Exits 0 when every check passes; otherwise the failing check's
assertion names what differed.

    python openai_client_check.py --base-url http://127.0.0.1:PORT/v1 --api-key KEY --model NAME
"""
import argparse
import sys

import openai
from openai import OpenAI


def check_models(client, model):
    ids = [m.id for m in client.models.list()]
    assert ids == [model], f"models.list() gave {ids}, expected [{model!r}]"


def chat(client, model, **extra):
    extra.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "The capital of France?"}], **extra)


def check_chat(client, model):
    reply = chat(client, model, max_tokens=8)
    choice = reply.choices[0]
    assert reply.object == "chat.completion", reply.object
    assert isinstance(choice.message.content, str), choice.message
    assert choice.message.role == "assistant", choice.message.role
    assert choice.finish_reason in ("stop", "length"), choice.finish_reason
    usage = reply.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, usage
    assert 0 < usage.completion_tokens <= 8, usage
    return reply


def check_chat_stream(client, model, whole):
    chunks = list(chat(client, model, max_tokens=8, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content, f"streamed {text!r}, whole {whole.choices[0].message.content!r}"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason], finishes
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None, last
    assert last.usage.completion_tokens == whole.usage.completion_tokens, (last.usage, whole.usage)


def check_chat_logprobs_and_n(client, model):
    reply = chat(client, model, max_tokens=4, logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
    content = reply.choices[0].logprobs.content
    assert len(content) == 4, f"{len(content)} log-probability entries for 4 tokens"
    for entry in content:
        assert entry.logprob <= 0 and isinstance(entry.token, str) and isinstance(entry.bytes, list), entry
        assert len(entry.top_logprobs) == 2, entry.top_logprobs
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob, entry.top_logprobs
    several = chat(client, model, max_tokens=3, n=2, seed=3)
    assert [c.index for c in several.choices] == [0, 1], several.choices


def check_completions(client, model):
    reply = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0, logprobs=2,
                                      extra_body={"ignore_eos": True})
    choice = reply.choices[0]
    assert isinstance(choice.text, str) and choice.finish_reason == "length", choice
    assert len(choice.logprobs.tokens) == 5 and len(choice.logprobs.token_logprobs) == 5, choice.logprobs
    assert reply.usage.completion_tokens == 5, reply.usage
    streamed = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0, stream=True,
                                         extra_body={"ignore_eos": True})
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text == choice.text, f"streamed {text!r}, whole {choice.text!r}"
    # echo + logprobs scores the prompt too: its first token's entries are None (nothing predicts it).
    scored = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0, logprobs=2,
                                       echo=True, extra_body={"ignore_eos": True})
    lp = scored.choices[0].logprobs
    n_prompt = scored.usage.prompt_tokens
    assert scored.choices[0].text == "Once upon a time" + choice.text, scored.choices[0].text
    assert len(lp.tokens) == n_prompt + 5 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, lp
    assert all(x <= 0 for x in lp.token_logprobs[1:]), lp.token_logprobs
    assert "".join(lp.tokens[:n_prompt]) == "Once upon a time", lp.tokens
    assert lp.tokens[n_prompt:] == choice.logprobs.tokens, (lp.tokens, choice.logprobs.tokens)


def check_errors(client, model, base_url):
    try:
        chat(client, model, max_tokens=4, temperature=5)
        raise AssertionError("temperature=5 was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and "temperature" in str(e), e
        assert e.body["param"] == "temperature", e.body
    try:
        client.completions.create(model=model, prompt="word " * 300, max_tokens=2)
        raise AssertionError("a prompt past the context was accepted")
    except openai.BadRequestError as e:
        assert e.code == "context_length_exceeded", e
    try:
        chat(client, "no-such-model", max_tokens=2)
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        assert e.status_code == 404, e
    stranger = OpenAI(base_url=base_url, api_key="wrong", max_retries=0)
    try:
        stranger.models.list()
        raise AssertionError("a wrong API key was accepted")
    except openai.AuthenticationError as e:
        assert e.status_code == 401, e


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120)
    check_models(client, args.model)
    whole = check_chat(client, args.model)
    check_chat_stream(client, args.model, whole)
    check_chat_logprobs_and_n(client, args.model)
    check_completions(client, args.model)
    check_errors(client, args.model, args.base_url)
    print(f"openai {openai.__version__}: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
