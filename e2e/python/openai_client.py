"""Scenarios of the official OpenAI Python SDK against Agentry: one named by argv[1], or (with no
argument) one per line of stdin, each answered by one line of JSON.

Reads AGENTRY_BASE_URL, AGENTRY_API_KEY and AGENTRY_AGENT from the environment and prints a
JSON object on stdout: what the SDK saw, for e2e/python-clients.ts to assert. The SDK's own
retries are left at their default on purpose: Agentry tells it when not to retry.
"""
import json
import os
import sys
import time

import openai

BASE_URL = os.environ["AGENTRY_BASE_URL"]
API_KEY = os.environ["AGENTRY_API_KEY"]
AGENT = os.environ["AGENTRY_AGENT"]


def client(**kwargs):
    return openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, timeout=60, **kwargs)


def user(text):
    return [{"role": "user", "content": text}]


def error_of(e):
    """What a Python app reads from an SDK error."""
    out = {"class": type(e).__name__, "message": str(e)}
    if isinstance(e, openai.APIStatusError):
        out.update(status=e.status_code, code=e.code, type=e.type, param=e.param, body=e.body)
    return out


def models():
    c = client()
    ids = [m.id for m in c.models.list()]
    one = c.models.retrieve(AGENT)
    return {"ids": ids, "retrieved": one.id, "object": one.object}


def chat():
    r = client().chat.completions.create(model=AGENT, messages=user("hello"))
    return {
        "id": r.id,
        "object": r.object,
        "content": r.choices[0].message.content,
        "finish_reason": r.choices[0].finish_reason,
        "usage": r.usage.model_dump() if r.usage else None,
    }


def chat_stream():
    stream = client().chat.completions.create(
        model=AGENT, messages=user("hello"), stream=True, stream_options={"include_usage": True}
    )
    parts, finish, usage, ids = [], None, None, set()
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.usage:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    return {"content": "".join(parts), "finish_reason": finish, "usage": usage, "ids": len(ids)}


def chat_abort():
    """Reads until the third word, then closes the stream as an app would (break + close)."""
    stream = client().chat.completions.create(model=AGENT, messages=user("long"), stream=True)
    seen = ""
    chat_id = None
    for chunk in stream:
        chat_id = chunk.id
        seen += "".join(c.delta.content or "" for c in chunk.choices)
        if "w2" in seen:
            break
    stream.close()
    return {"id": chat_id, "closed_at_ms": int(time.time() * 1000)}


def responses():
    c = client()
    first = c.responses.create(model=AGENT, input="my name is Ada")
    second = c.responses.create(model=AGENT, input="what is my name?", previous_response_id=first.id)
    return {
        "first": {"id": first.id, "object": first.object, "status": first.status, "text": first.output_text},
        "second": {"id": second.id, "status": second.status, "text": second.output_text,
                   "usage": second.usage.model_dump() if second.usage else None},
    }


def responses_stream():
    types = []
    with client().responses.stream(model=AGENT, input="hello") as stream:
        for event in stream:
            types.append(event.type)
        final = stream.get_final_response()
    return {"types": types, "text": final.output_text, "status": final.status}


def error_unknown_model():
    try:
        client().chat.completions.create(model="no-such-agent", messages=user("x"))
    except openai.APIError as e:
        return error_of(e)
    return {"class": None}


def error_bad_key():
    try:
        openai.OpenAI(base_url=BASE_URL, api_key="sk-wrong-key-0123456789", timeout=60).chat.completions.create(
            model=AGENT, messages=user("x")
        )
    except openai.APIError as e:
        return error_of(e)
    return {"class": None}


def error_provider():
    """Default SDK retries (2): the gateway already retried the provider and says so."""
    try:
        client().chat.completions.create(model=AGENT, messages=user("x"))
    except openai.APIError as e:
        return error_of(e)
    return {"class": None}


def error_bad_request():
    try:
        client().chat.completions.create(model=AGENT, messages=[{"role": "user"}], temperature=7)
    except openai.APIError as e:
        return error_of(e)
    return {"class": None}


def responses_background():
    """A background response polled to completion, its input items listed, then deleted."""
    c = client()
    created = c.responses.create(model=AGENT, input="work in the background", background=True)
    polled = created
    deadline = time.time() + 30
    while polled.status in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.2)
        polled = c.responses.retrieve(created.id)
    items = c.responses.input_items.list(created.id)
    c.responses.delete(created.id)  # the SDK answers None: a 2xx
    try:
        c.responses.retrieve(created.id)
        after_delete = None
    except openai.APIError as e:
        after_delete = error_of(e)
    return {
        "created_status": created.status,
        "background": created.background,
        "status": polled.status,
        "text": polled.output_text,
        "items": [{"type": i.type, "role": getattr(i, "role", None)} for i in items.data],
        "after_delete": after_delete,
    }


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def chat_client_tool():
    """The client's own tool: the model's call comes back to the app, whose result continues the turn."""
    c = client()
    messages = user("weather in Paris?")
    first = c.chat.completions.create(model=AGENT, messages=messages, tools=[WEATHER])
    choice = first.choices[0]
    calls = choice.message.tool_calls or []
    messages.append(choice.message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'})
    second = c.chat.completions.create(model=AGENT, messages=messages, tools=[WEATHER])
    return {
        "finish_reason": choice.finish_reason,
        "calls": [{"name": t.function.name, "arguments": t.function.arguments} for t in calls],
        "answer": second.choices[0].message.content,
        "second_finish_reason": second.choices[0].finish_reason,
    }


SCENARIOS = {f.__name__: f for f in [
    models, chat, chat_stream, chat_abort, responses, responses_stream,
    error_unknown_model, error_bad_key, error_provider, error_bad_request,
    responses_background, chat_client_tool,
]}

def serve():
    """One scenario per stdin line, one JSON line each: the interpreter and the SDK load once."""
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            result = SCENARIOS[name]()
            result["sdk_version"] = openai.__version__
        except Exception as e:  # reported to the test, which fails on it
            result = {"crashed": f"{type(e).__name__}: {e}"}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        result = SCENARIOS[sys.argv[1]]()
        result["sdk_version"] = openai.__version__
        print(json.dumps(result))
    else:
        serve()
