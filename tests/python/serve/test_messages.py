"""POST /v1/messages (the Anthropic Messages API) through the official `anthropic` client against
the real CPU engine: greedy outputs and prompt sizes equal the same conversation sent as OpenAI
chat (the one renderer and scheduler behind both), Anthropic's SSE event order, a forced tool
call and its tool_result round trip on a chain-scripted checkpoint (chain_model.py), capsule
reuse reported as cache_read_input_tokens, and Anthropic's error shape."""
import json
import os

import pytest
from api_common import KEY, type_confusions, WEATHER_TOOL_SCHEMA, ApiServer, fresh_rng, long_system, random_text
from serve_proc import FROST

anthropic = pytest.importorskip("anthropic")
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")

# This SDK has no temperature argument: greedy goes in the body, as any extra field does.
GREEDY = {"temperature": 0}
TOOL = {"name": "get_weather", "description": "Weather of a city", "input_schema": WEATHER_TOOL_SCHEMA}
OPENAI_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                "parameters": WEATHER_TOOL_SCHEMA}}


@pytest.fixture(scope="module")
def server(model_dir):
    s = ApiServer(model_dir)
    yield s
    s.stop()


def chat_equivalent(server, system, user, max_tokens):
    r = server.openai.chat.completions.create(
        model="frost", messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=max_tokens, extra_body=GREEDY)
    return r


def test_messages_equal_chat_greedy(server):
    rng = fresh_rng()
    system, user = random_text(rng), random_text(rng)
    m = server.anthropic.messages.create(
        model="frost", max_tokens=12, extra_body=GREEDY,
        system=[{"type": "text", "text": system}], messages=[{"role": "user", "content": user}])
    c = chat_equivalent(server, system, user, 12)
    text = "".join(b.text for b in m.content if b.type == "text")
    thinking = "".join(b.thinking for b in m.content if b.type == "thinking")
    assert text == (c.choices[0].message.content or "")
    assert thinking == (c.choices[0].message.model_extra.get("reasoning_content") or "")
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[c.choices[0].finish_reason]
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == c.usage.prompt_tokens
    assert m.usage.output_tokens == c.usage.completion_tokens


def test_messages_stream_events_and_text(server):
    rng = fresh_rng()
    system, user = random_text(rng), random_text(rng)
    ref = server.anthropic.messages.create(model="frost", max_tokens=16, extra_body=GREEDY, system=system,
                                           messages=[{"role": "user", "content": user}])
    kinds, text = [], ""
    with server.anthropic.messages.create(model="frost", max_tokens=16, extra_body=GREEDY, system=system, stream=True,
                                          messages=[{"role": "user", "content": user}]) as stream:
        for ev in stream:
            kinds.append(ev.type)
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                text += ev.delta.text
            if ev.type == "message_delta":
                assert ev.delta.stop_reason == ref.stop_reason
                assert ev.usage.output_tokens == ref.usage.output_tokens
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"], kinds
    body = kinds[1:-2]
    # Blocks: start, deltas, stop; never interleaved.
    while body:
        assert body[0] == "content_block_start", kinds
        end = body.index("content_block_stop")
        assert set(body[1:end]) <= {"content_block_delta"}, kinds
        body = body[end + 1:]
    assert text == "".join(b.text for b in ref.content if b.type == "text")
    # The SDK's own accumulator agrees.
    with server.anthropic.messages.stream(model="frost", max_tokens=16, extra_body=GREEDY, system=system,
                                          messages=[{"role": "user", "content": user}]) as s:
        final = s.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in ref.content]


def test_thinking_blocks(thinker):
    msgs = [{"role": "user", "content": "hello"}]
    c = thinker.openai.chat.completions.create(model="frost", messages=msgs, max_tokens=32, extra_body=GREEDY)
    reasoning = c.choices[0].message.model_extra["reasoning_content"]
    assert reasoning.strip() == "Let me think" and c.choices[0].message.content.strip() == "Hi there"
    m = thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs)
    assert [b.type for b in m.content] == ["thinking", "text"], m.content
    assert m.content[0].thinking == reasoning and m.content[1].text == c.choices[0].message.content
    assert m.stop_reason == "end_turn"
    kinds = []
    with thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs,
                                           stream=True) as stream:
        for ev in stream:
            if ev.type == "content_block_start":
                kinds.append((ev.index, ev.content_block.type))
            if ev.type == "content_block_delta":
                kinds.append((ev.index, ev.delta.type))
    assert kinds[0] == (0, "thinking") and kinds[-1] == (1, "text_delta"), kinds
    assert {k for k in kinds if k[0] == 0} == {(0, "thinking"), (0, "thinking_delta")}, kinds
    with thinker.anthropic.messages.stream(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs) as s:
        final = s.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in m.content]
    # Anthropic's own switch turns it off: then the template closes the block and no thinking comes back.
    off = thinker.anthropic.messages.create(model="frost", max_tokens=8, extra_body=GREEDY, messages=msgs,
                                            thinking={"type": "disabled"})
    assert [b.type for b in off.content] == ["text"]


def stop_candidates(rng, text, avoid):
    """Random 2..4-character pieces of `text` that start and end with a non-space and occur in
    none of `avoid` (so the first place they appear in the raw output is in `text`)."""
    out = set()
    for _ in range(200):
        n = rng.randint(2, 4)
        if len(text) < n:
            break
        i = rng.randrange(len(text) - n + 1)
        piece = text[i:i + n]
        if piece.strip() == piece and not any(piece in a for a in avoid):
            out.add(piece)
    return sorted(out)


def test_stop_sequence_is_reported(thinker):
    """The stop string that ended the turn comes back as stop_reason "stop_sequence" with
    stop_sequence naming it (non-streamed, streamed events, the SDK's accumulator), in the text
    part and in the thinking part; the end token stays end_turn with stop_sequence None."""
    rng = fresh_rng()
    msgs = [{"role": "user", "content": "hello"}]
    c = thinker.openai.chat.completions.create(model="frost", messages=msgs, max_tokens=32, extra_body=GREEDY)
    reasoning, content = c.choices[0].message.model_extra["reasoning_content"], c.choices[0].message.content
    ref = thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs)
    assert ref.stop_reason == "end_turn" and ref.stop_sequence is None
    never = "zq#" + str(rng.randrange(1000))
    cases = []
    for stop in stop_candidates(rng, content.strip(), [reasoning, "</think>", "<think>"])[:2]:
        cases.append((stop, reasoning, content[:content.index(stop)]))
    for stop in stop_candidates(rng, reasoning.strip(), ["<think>"])[:1]:
        cases.append((stop, reasoning[:reasoning.index(stop)], ""))
    assert len(cases) >= 2, (reasoning, content)
    for stop, want_thinking, want_text in cases:
        stops = [never, stop] if rng.random() < 0.5 else [stop, never]
        m = thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs,
                                              stop_sequences=stops)
        assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", stop), (stops, m)
        assert "".join(b.text for b in m.content if b.type == "text") == want_text, (stop, m)
        assert "".join(b.thinking for b in m.content if b.type == "thinking") == want_thinking, (stop, m)
        # OpenAI's route keeps finish_reason "stop" for the same stop.
        oc = thinker.openai.chat.completions.create(model="frost", messages=msgs, max_tokens=32, extra_body=GREEDY,
                                                    stop=stops)
        assert oc.choices[0].finish_reason == "stop" and (oc.choices[0].message.content or "") == want_text
        deltas = []
        with thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs,
                                               stop_sequences=stops, stream=True) as stream:
            for ev in stream:
                if ev.type == "message_start":
                    assert ev.message.stop_sequence is None
                if ev.type == "message_delta":
                    deltas.append((ev.delta.stop_reason, ev.delta.stop_sequence))
        assert deltas == [("stop_sequence", stop)], (stops, deltas)
        with thinker.anthropic.messages.stream(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs,
                                               stop_sequences=stops) as s:
            final = s.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", stop)
        assert [b.model_dump() for b in final.content] == [b.model_dump() for b in m.content]
    # A stop that never appears: end_turn, no stop_sequence, the whole output.
    m = thinker.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, messages=msgs,
                                          stop_sequences=[never])
    assert (m.stop_reason, m.stop_sequence) == ("end_turn", None)
    assert [b.model_dump() for b in m.content] == [b.model_dump() for b in ref.content]


def test_messages_cache_read_on_the_next_turn(server):
    rng = fresh_rng()
    system = long_system(rng)
    msgs = [{"role": "user", "content": random_text(rng)}]
    first = server.anthropic.messages.create(model="frost", max_tokens=8, extra_body=GREEDY, system=system, messages=msgs)
    msgs += [{"role": "assistant", "content": first.content}, {"role": "user", "content": random_text(rng)}]
    second = server.anthropic.messages.create(model="frost", max_tokens=8, extra_body=GREEDY, system=system, messages=msgs)
    # The second turn's prefix (the first turn's history) was restored, not recomputed.
    assert second.usage.cache_read_input_tokens >= 128, second.usage
    assert second.usage.input_tokens > 0


def test_messages_tool_round_trip(chain):
    import jsonschema
    user = "What is the weather in Paris?"
    m = chain.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, tools=[TOOL],
                                        tool_choice={"type": "tool", "name": "get_weather"},
                                        messages=[{"role": "user", "content": user}])
    assert m.stop_reason == "tool_use", m
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].input == {"city": "Paris"}
    jsonschema.validate(uses[0].input, WEATHER_TOOL_SCHEMA)

    # Streamed: the input arrives as input_json_delta; the SDK accumulates it into the block.
    partial = ""
    with chain.anthropic.messages.create(model="frost", max_tokens=32, extra_body=GREEDY, tools=[TOOL], stream=True,
                                         tool_choice={"type": "tool", "name": "get_weather"},
                                         messages=[{"role": "user", "content": user}]) as stream:
        for ev in stream:
            if ev.type == "content_block_start":
                assert ev.content_block.type == "tool_use" and ev.content_block.name == "get_weather"
            if ev.type == "content_block_delta":
                assert ev.delta.type == "input_json_delta"
                partial += ev.delta.partial_json
            if ev.type == "message_delta":
                assert ev.delta.stop_reason == "tool_use"
    assert json.loads(partial) == {"city": "Paris"}
    with chain.anthropic.messages.stream(model="frost", max_tokens=32, extra_body=GREEDY, tools=[TOOL],
                                         tool_choice={"type": "tool", "name": "get_weather"},
                                         messages=[{"role": "user", "content": user}]) as s:
        final = s.get_final_message()
    assert [b.input for b in final.content if b.type == "tool_use"] == [{"city": "Paris"}]

    # The result goes back; the prompt is exactly the OpenAI chat rendering of that conversation.
    turn2 = [{"role": "user", "content": user}, {"role": "assistant", "content": m.content},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                           "content": [{"type": "text", "text": "18 C, sunny"}]},
                                          {"type": "text", "text": "And tomorrow?"}]}]
    r2 = chain.anthropic.messages.create(model="frost", max_tokens=6, extra_body=GREEDY, tools=[TOOL], messages=turn2)
    c2 = chain.openai.chat.completions.create(
        model="frost", max_tokens=6, extra_body=GREEDY, tools=[OPENAI_TOOL],
        messages=[{"role": "user", "content": user},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"id": uses[0].id, "type": "function",
                       "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
                  {"role": "tool", "tool_call_id": uses[0].id, "content": "18 C, sunny"},
                  {"role": "user", "content": "And tomorrow?"}])
    assert r2.usage.input_tokens + r2.usage.cache_read_input_tokens == c2.usage.prompt_tokens
    assert "".join(b.text for b in r2.content if b.type == "text") == (c2.choices[0].message.content or "")


def test_count_tokens_equals_the_prompt(chain):
    rng = fresh_rng()
    system, user = random_text(rng), random_text(rng)
    n = chain.anthropic.messages.count_tokens(model="frost", system=system, tools=[TOOL],
                                              messages=[{"role": "user", "content": user}])
    m = chain.anthropic.messages.create(model="frost", max_tokens=2, system=system, tools=[TOOL], extra_body=GREEDY,
                                        messages=[{"role": "user", "content": user}])
    assert n.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens
    with pytest.raises(anthropic.BadRequestError) as e:
        chain.anthropic.messages.count_tokens(model="frost", messages=[{"role": "user", "content": user}],
                                              extra_body={"max_tokens": 3})
    assert "max_tokens" in str(e.value)


def status_and_error(server, body, headers=None):
    h = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    h.update(headers or {})
    status, _, data = server.raw("POST", "/v1/messages", body, h)
    return status, json.loads(data)


@pytest.mark.parametrize("body,status,etype,word", [
    ({"model": "frost", "messages": [{"role": "user", "content": "hi"}]}, 400, "invalid_request_error", "max_tokens"),
    ({"model": "frost", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], "frobnicate": 1},
     400, "invalid_request_error", "frobnicate"),
    ({"model": "frost", "max_tokens": 4, "messages": [{"role": "robot", "content": "hi"}]},
     400, "invalid_request_error", "messages[0].role"),
    ({"model": "frost", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     400, "invalid_request_error", "messages[0].content[0].type"),
    ({"model": "frost", "max_tokens": 4, "tools": [{"type": "web_search_20250305", "name": "w"}],
      "messages": [{"role": "user", "content": "hi"}]}, 400, "invalid_request_error", "tools[0].type"),
    ({"model": "claude-nope", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
     404, "not_found_error", "claude-nope"),
])
def test_messages_errors_in_anthropic_shape(server, body, status, etype, word):
    got, r = status_and_error(server, body)
    assert got == status, r
    assert r["type"] == "error" and r["error"]["type"] == etype, r
    assert word in r["error"]["message"], r


def test_messages_auth_and_version_headers(server):
    got, r = status_and_error(server, {"model": "frost", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]},
                              {"x-api-key": "wrong"})
    assert got == 401 and r["error"]["type"] == "authentication_error", r
    got, r = status_and_error(server, {"model": "frost", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]},
                              {"anthropic-version": "1999-01-01"})
    assert got == 400 and "anthropic-version" in r["error"]["message"], r
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.base, api_key="wrong", max_retries=0).messages.create(
            model="frost", max_tokens=2, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.BadRequestError) as e:
        server.anthropic.messages.create(model="frost", max_tokens=2, messages=[{"role": "user", "content": "x"}],
                                         stop_sequences=["a", "b", "c", "d", "e"])
    assert "stop" in str(e.value)


def test_type_confused_bodies_are_400s_never_a_crash(server):
    """Found by this test: a number where a string belongs made json::value() throw and the
    server abort. Every node of a full request is replaced by every other JSON type."""
    body = {"model": "frost", "max_tokens": 2, "temperature": 0, "system": [{"type": "text", "text": "s"}],
            "stop_sequences": ["zz"], "tool_choice": {"type": "auto"},
            "thinking": {"type": "disabled"}, "output_config": {"effort": "low"},
            "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                           {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}]}
    h = {"x-api-key": KEY, "content-type": "application/json"}
    seen = set()
    for path, b in type_confusions(body, skip=("max_tokens",)):
        status, _, data = server.raw("POST", "/v1/messages", b, h)
        assert status in (200, 400, 404), (path, b, status, data)
        r = json.loads(data)
        if status != 200:
            assert r["type"] == "error" and r["error"]["message"], (path, r)
        seen.add(status)
    assert 400 in seen and server.proc.poll() is None
