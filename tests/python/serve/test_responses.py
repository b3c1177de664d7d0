"""POST /v1/responses (the OpenAI Responses API) through the official `openai` client against the
real CPU engine: greedy outputs and prompt sizes equal the same conversation sent as chat (one
renderer, one scheduler), the streaming event sequence, previous_response_id continuing a stored
conversation from its capsule (cached tokens), retrieve / delete / store=false, a forced function
call and its function_call_output round trip on a chain-scripted checkpoint, and 400s naming
unknown fields."""
import json
import os

import pytest
from api_common import KEY, type_confusions, WEATHER_TOOL_SCHEMA, ApiServer, fresh_rng, long_system, random_text
from serve_proc import FROST

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")

TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city",
        "parameters": WEATHER_TOOL_SCHEMA, "strict": True}
OTHER_KEY = "sk-frost-other"
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                              "parameters": WEATHER_TOOL_SCHEMA}}


@pytest.fixture(scope="module")
def server(model_dir):
    s = ApiServer(model_dir, extra=["--api-key", OTHER_KEY])
    yield s
    s.stop()


def chat(server, messages, max_tokens, **kw):
    return server.openai.chat.completions.create(model="frost", messages=messages, max_tokens=max_tokens,
                                                 temperature=0, **kw)


def test_responses_equal_chat_greedy(server):
    rng = fresh_rng()
    instr, user = random_text(rng), random_text(rng)
    r = server.openai.responses.create(model="frost", instructions=instr, input=user, max_output_tokens=12,
                                       temperature=0)
    c = chat(server, [{"role": "system", "content": instr}, {"role": "user", "content": user}], 12)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == (c.choices[0].message.content or "")
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert r.status == ("incomplete" if c.choices[0].finish_reason == "length" else "completed")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    # Item list input, developer role and content parts: the same prompt.
    r2 = server.openai.responses.create(
        model="frost", max_output_tokens=12, temperature=0,
        input=[{"role": "developer", "content": instr},
               {"type": "message", "role": "user", "content": [{"type": "input_text", "text": user}]}])
    assert r2.output_text == r.output_text and r2.usage.input_tokens == r.usage.input_tokens


def test_responses_stream_events(server):
    rng = fresh_rng()
    user = random_text(rng)
    ref = server.openai.responses.create(model="frost", input=user, max_output_tokens=10, temperature=0)
    kinds, seqs, deltas, final = [], [], "", None
    for ev in server.openai.responses.create(model="frost", input=user, max_output_tokens=10, temperature=0,
                                             stream=True):
        kinds.append(ev.type)
        seqs.append(ev.sequence_number)
        if ev.type == "response.output_text.delta":
            deltas += ev.delta
        if ev.type == "response.output_text.done":
            assert ev.text == deltas
        if ev.type in ("response.completed", "response.incomplete"):
            final = ev.response
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds
    assert seqs == list(range(len(seqs))), seqs
    must = ["response.output_item.added", "response.content_part.added", "response.output_text.delta",
            "response.output_text.done", "response.content_part.done", "response.output_item.done"]
    pos = [kinds.index(k) for k in must]
    assert pos == sorted(pos), kinds
    assert kinds[-1] in ("response.completed", "response.incomplete"), kinds
    assert deltas == ref.output_text == final.output_text
    assert final.usage.output_tokens == ref.usage.output_tokens


def test_reasoning_item(thinker):
    c = chat(thinker, [{"role": "user", "content": "hello"}], 32)
    r = thinker.openai.responses.create(model="frost", input="hello", max_output_tokens=32, temperature=0)
    assert r.status == "completed" and [o.type for o in r.output] == ["reasoning", "message"], r.output
    assert r.output[0].content[0].text == c.choices[0].message.model_extra["reasoning_content"]
    assert r.output_text == c.choices[0].message.content
    kinds = [ev.type for ev in thinker.openai.responses.create(model="frost", input="hello", max_output_tokens=32,
                                                              temperature=0, stream=True)]
    assert kinds.index("response.reasoning_text.delta") < kinds.index("response.reasoning_text.done") < \
        kinds.index("response.output_text.delta"), kinds
    assert kinds[-1] == "response.completed"
    with thinker.openai.responses.stream(model="frost", input="hello", max_output_tokens=32, temperature=0) as s:
        final = s.get_final_response()
    assert final.output_text == r.output_text and final.output[0].type == "reasoning"
    # reasoning.effort "none" is the model's thinking switch off.
    off = thinker.openai.responses.create(model="frost", input="hello", max_output_tokens=8, temperature=0,
                                          reasoning={"effort": "none"})
    assert [o.type for o in off.output] == ["message"]


def test_previous_response_id_continues_from_the_capsule(server):
    rng = fresh_rng()
    instr, u1, u2 = long_system(rng), random_text(rng), random_text(rng)
    r1 = server.openai.responses.create(model="frost", instructions=instr, input=u1, max_output_tokens=8,
                                        temperature=0)
    r2 = server.openai.responses.create(model="frost", instructions=instr, input=u2, previous_response_id=r1.id,
                                        max_output_tokens=8, temperature=0)
    assert r2.previous_response_id == r1.id
    # The previous turn's prefix was restored (its capsule), not recomputed.
    assert r2.usage.input_tokens_details.cached_tokens >= 128, r2.usage
    # And the prompt is exactly the whole conversation resent as chat.
    c = chat(server, [{"role": "system", "content": instr}, {"role": "user", "content": u1},
                      {"role": "assistant", "content": r1.output_text}, {"role": "user", "content": u2}], 8)
    assert r2.usage.input_tokens == c.usage.prompt_tokens
    assert r2.output_text == (c.choices[0].message.content or "")


def test_retrieve_delete_and_store_false(server):
    r = server.openai.responses.create(model="frost", input="hello", max_output_tokens=4, temperature=0)
    got = server.openai.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text
    server.openai.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        server.openai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        server.openai.responses.create(model="frost", input="x", previous_response_id=r.id, max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"
    nostore = server.openai.responses.create(model="frost", input="hello", max_output_tokens=2, store=False)
    assert nostore.store is False
    with pytest.raises(openai.NotFoundError):
        server.openai.responses.retrieve(nostore.id)
    # Another key's stored response reads exactly like a missing one.
    kept = server.openai.responses.create(model="frost", input="hello", max_output_tokens=2)
    auth = lambda k: {"Authorization": "Bearer " + k}
    assert server.raw("GET", "/v1/responses/" + kept.id, None, auth(KEY))[0] == 200
    assert server.raw("GET", "/v1/responses/" + kept.id, None, auth(OTHER_KEY))[0] == 404
    assert server.raw("DELETE", "/v1/responses/" + kept.id, None, auth(OTHER_KEY))[0] == 404
    assert server.raw("GET", "/v1/responses/" + kept.id, None, auth(KEY))[0] == 200


def test_input_items(server):
    rng = fresh_rng()
    texts = [random_text(rng, 3) for _ in range(3)]
    r = server.openai.responses.create(
        model="frost", max_output_tokens=2, temperature=0,
        input=[{"role": "user", "content": texts[0]}, {"role": "assistant", "content": texts[1]},
               {"type": "message", "role": "user", "content": [{"type": "input_text", "text": texts[2]}]}])
    page = server.openai.responses.input_items.list(r.id)
    assert [i.content[0].text for i in page.data] == texts[::-1]  # newest first, as OpenAI
    assert all(i.id for i in page.data) and not page.has_more
    # Pages of one, oldest first, followed by the SDK's cursor (after=last_id).
    got = [i.content[0].text for i in server.openai.responses.input_items.list(r.id, order="asc", limit=1)]
    assert got == texts
    one = server.openai.responses.create(model="frost", input=texts[0], max_output_tokens=2)
    items = server.openai.responses.input_items.list(one.id).data
    assert len(items) == 1 and items[0].role == "user" and items[0].content[0].text == texts[0]
    status, _, data = server.raw("GET", f"/v1/responses/{r.id}/input_items?limit=0", None,
                                 {"Authorization": "Bearer " + KEY})
    assert status == 400 and json.loads(data)["error"]["param"] == "limit"


def test_function_call_round_trip(chain):
    user = "What is the weather in Paris?"
    r = chain.openai.responses.create(model="frost", input=user, tools=[TOOL], max_output_tokens=32, temperature=0,
                                      tool_choice={"type": "function", "name": "get_weather"})
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", r.output
    assert json.loads(calls[0].arguments) == {"city": "Paris"}
    assert calls[0].call_id.startswith("call_")

    args, done = "", None
    for ev in chain.openai.responses.create(model="frost", input=user, tools=[TOOL], max_output_tokens=32,
                                            temperature=0, stream=True,
                                            tool_choice={"type": "function", "name": "get_weather"}):
        if ev.type == "response.function_call_arguments.delta":
            args += ev.delta
        if ev.type == "response.function_call_arguments.done":
            done = ev.arguments
    assert json.loads(args) == json.loads(done) == {"city": "Paris"}
    # The SDK's accumulating helper (it needs response.completed: this call ends by itself).
    with chain.openai.responses.stream(model="frost", input=user, tools=[TOOL], max_output_tokens=32, temperature=0,
                                       tool_choice={"type": "function", "name": "get_weather"}) as s:
        final = s.get_final_response()
    assert final.status == "completed"
    assert [json.loads(o.arguments) for o in final.output if o.type == "function_call"] == [{"city": "Paris"}]

    # The output goes back by previous_response_id; the prompt equals the chat rendering.
    r2 = chain.openai.responses.create(
        model="frost", previous_response_id=r.id, tools=[TOOL], max_output_tokens=4, temperature=0,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C, sunny"}])
    c2 = chat(chain, [{"role": "user", "content": user},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"id": calls[0].call_id, "type": "function",
                           "function": {"name": "get_weather", "arguments": calls[0].arguments}}]},
                      {"role": "tool", "tool_call_id": calls[0].call_id, "content": "18 C, sunny"}], 4,
              tools=[CHAT_TOOL])
    assert r2.usage.input_tokens == c2.usage.prompt_tokens
    assert r2.output_text == (c2.choices[0].message.content or "")
    # The same conversation sent as explicit items (no previous_response_id) is the same prompt.
    r3 = chain.openai.responses.create(
        model="frost", tools=[TOOL], max_output_tokens=4, temperature=0,
        input=[{"role": "user", "content": user},
               {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather",
                "arguments": calls[0].arguments},
               {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C, sunny"}])
    assert r3.usage.input_tokens == r2.usage.input_tokens and r3.output_text == r2.output_text
    # As clients usually continue without a store: the previous output items resent as input.
    r4 = chain.openai.responses.create(
        model="frost", tools=[TOOL], max_output_tokens=4, temperature=0,
        input=[{"role": "user", "content": user}] + [o.model_dump(exclude_none=True) for o in r.output] +
              [{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C, sunny"}])
    assert r4.usage.input_tokens == r2.usage.input_tokens and r4.output_text == r2.output_text


@pytest.mark.parametrize("body,param", [
    ({"input": "x", "frobnicate": 1}, "frobnicate"),
    ({}, "input"),
    ({"input": [{"type": "input_image", "image_url": "x"}]}, "input[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "truncation": "auto"}, "truncation"),
    ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type"),
])
def test_responses_errors_name_the_field(server, body, param):
    status, _, data = server.raw("POST", "/v1/responses", dict(body, model="frost"),
                                 {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = json.loads(data)
    assert status == 400, r
    assert r["error"]["param"] == param, r
    assert param in r["error"]["message"], r


def test_type_confused_bodies_are_400s_never_a_crash(server):
    body = {"model": "frost", "max_output_tokens": 2, "temperature": 0, "instructions": "i", "store": False,
            "tools": [TOOL], "tool_choice": {"type": "function", "name": "get_weather"},
            "reasoning": {"effort": "none"}, "text": {"format": {"type": "text"}},
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "c", "output": "o"}]}
    h = {"Authorization": "Bearer " + KEY, "content-type": "application/json"}
    seen = set()
    for path, b in type_confusions(body, skip=("max_output_tokens",)):
        status, _, data = server.raw("POST", "/v1/responses", b, h)
        assert status in (200, 400, 404), (path, b, status, data)
        if status != 200:
            assert json.loads(data)["error"]["message"], path
        seen.add(status)
    assert 400 in seen and server.proc.poll() is None
