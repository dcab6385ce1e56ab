"""Bad input, generated: requests built from the collector's own OpenAPI document (its paths,
methods and documented body fields) carrying arbitrary JSON, wrong types, huge lists and
strings, unicode and SQL-looking text, and arbitrary bytes. The collector answers all of it
with a 2xx or 4xx, never a 5xx, and keeps serving."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NASTY = st.sampled_from([
    "'; DROP TABLE impression; --", "1 OR 1=1", "\\x00", "\x00", "🙂" * 100, "é" * 300,
    "a" * 5000, " ", "", "home", "control", "treatment", "2026-11-01T12:00:00",
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-11-01T12:00:00Z",
    "NaN", "null", "{}", "[]", "%s%s%n", "../../etc/passwd", "\u202e\ufeff",
])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40) | NASTY)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6)
                    | st.dictionaries(st.text(max_size=8) | NASTY, inner, max_size=4),
                    max_leaves=25)
HUGE_LIST = st.integers(1000, 3000).map(lambda n: [f"i{j}" for j in range(n)])
VALUES = JSON | HUGE_LIST | st.lists(NASTY, min_size=1, max_size=5, unique=True)


def body_fields(doc: dict, path: str) -> list[str]:
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return sorted(schema["oneOf"][0]["properties"])


@pytest.fixture
def api(collector):
    doc = httpx.get(collector.base + "/openapi.json").json()
    with httpx.Client(base_url=collector.base, timeout=60) as http:
        yield collector, doc, http


def _events(fields: list[str]):
    event = st.fixed_dictionaries({}, optional={f: VALUES for f in fields})
    extra = st.dictionaries(st.text(max_size=10), SCALARS, max_size=2)
    one = st.builds(lambda a, b: {**b, **a}, event, extra) | JSON
    return one | st.lists(one, max_size=20)


FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(data=st.data())
def test_documented_post_endpoints_never_answer_5xx(api, data):
    collector, doc, http = api
    paths = [p for p, ops in doc["paths"].items() if "post" in ops]
    path = data.draw(st.sampled_from(paths))
    body = data.draw(_events(body_fields(doc, path)))
    answer = http.post(path, content=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
                       headers=collector.headers())
    assert answer.status_code < 500, (path, body, answer.text)
    assert answer.headers["content-type"].startswith("application/json")


@FUZZ
@given(data=st.data())
def test_raw_bytes_headers_and_paths_never_answer_5xx(api, data):
    collector, doc, http = api
    kind = data.draw(st.sampled_from(["bytes", "get", "auth"]))
    if kind == "bytes":
        content = data.draw(st.binary(max_size=300) | st.sampled_from(
            [b"[" * 5000, b'{"items": [' + b"1," * 5000 + b"1]}", b"\xff\xfe", b"[1e999]",
             b'[{"user_id": 18446744073709551616}]']))
        answer = http.post("/v1/impressions", content=content, headers=collector.headers())
    elif kind == "get":
        key = data.draw(st.text(min_size=1, max_size=60) | NASTY.filter(bool))
        answer = http.get("/v1/experiments/" + quote(key, safe=""),
                          headers=collector.headers("read"))
    else:
        header = data.draw(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                                   max_size=80).map(str.strip))  # what HTTP can carry
        answer = http.post("/v1/interactions", content=b"[]",
                           headers={"Authorization": header})
    assert answer.status_code < 500, answer.text


def test_the_collector_still_serves_after_the_fuzz(api):
    collector, _, http = api
    assert http.get("/health").status_code == 200
