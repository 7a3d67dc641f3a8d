"""In-place JSON/JSONC and TOML edits: only the entry changes, every other byte stays."""

from __future__ import annotations

import json
import tomllib

import pytest

from mdrecall.hosts import jsonc, tomlfile
from mdrecall.hosts.jsonc import JsoncError

ENTRY = {"command": "/usr/bin/python3", "args": ["-m", "mdrecall", "mcp"], "env": {"MDRECALL_HOME": "/h/ä"}}

DOCS = [
    '{}',
    '{}\n',
    '{"mcpServers": {}}',
    '{\n  "mcpServers": {}\n}\n',
    '{"a": 1, "mcpServers": {"x": {"command": "x"}}}',
    '{\n    "mcpServers": {\n        "x": {"command": "x"}\n    },\n    "z": [1, 2, {"q": null}]\n}\n',
    '\ufeff{\n\t"mcpServers": {\n\t\t"x": {}\n\t}\n}\n',
    '{\n  "mcpServers": {\n    "x": {"command": "a \\"quoted\\" \\u00e9 // not a comment"}\n  },\n  "url": "http://x/*y*/"\n}\n',
]
JSONC_DOCS = [
    '// top\n{\n  "mcpServers": { // servers\n    "x": {"command": "x"}, // trailing\n  },\n}\n',
    '{\n  /* before */ "mcpServers": {\n    // "old": {"command": "off"},\n  }\n}\n',
    '{\n  "servers": {\n    "x": 1,\n    /* last */\n  },\n}',
]


@pytest.mark.parametrize("text", DOCS + JSONC_DOCS)
def test_set_then_remove_gives_the_same_bytes_back(text: str) -> None:
    comments = text in JSONC_DOCS
    key = "servers" if '"servers"' in text else "mcpServers"
    before = jsonc.loads(text, comments=comments)
    added = jsonc.set_member(text, [key], "mdrecall", ENTRY, comments=comments)
    after = jsonc.loads(added, comments=comments)
    expected = json.loads(json.dumps(before))
    expected.setdefault(key, {})["mdrecall"] = ENTRY
    assert after == expected
    if not comments:
        assert json.loads(added.removeprefix("\ufeff")) == expected  # still plain JSON
    again = jsonc.set_member(added, [key], "mdrecall", ENTRY, comments=comments)
    assert jsonc.loads(again, comments=comments) == expected
    removed = jsonc.remove_member(added, [key], "mdrecall", comments=comments)
    if key in before:
        assert removed == text
    else:
        assert jsonc.loads(removed, comments=comments) == {**before, key: {}}


def test_nested_containers_are_created_and_indented_like_the_file() -> None:
    text = '{\n\t"a": 1\n}\n'
    out = jsonc.set_member(text, ["agents", "mcp"], "mdrecall", {"command": "x"}, comments=False)
    assert json.loads(out) == {"a": 1, "agents": {"mcp": {"mdrecall": {"command": "x"}}}}
    assert '\n\t"agents": {\n\t\t"mcp": {\n\t\t\t"mdrecall": {\n\t\t\t\t"command": "x"\n' in out
    assert jsonc.set_member("", ["mcpServers"], "m", 1, comments=False) == '{\n  "mcpServers": {\n    "m": 1\n  }\n}\n'


@pytest.mark.parametrize(("text", "comments", "message"), [
    ('{"a": 1,}', False, "trailing comma"),
    ('{"a": 1 // x\n}', False, "comments are not allowed"),
    ('{"a": 1', False, "is missing"),
    ('{"a": 1} x', False, "after the end"),
    ('{"a": /* never closed }', True, "never closed"),
    ('{"a": "no end}', False, "string"),
    ('{a: 1}', True, "quoted key"),
    ('{"a": 01}', False, "expected ','"),
    ('{"mcpServers": {}, "mcpServers": {}}', False, "appears 2 times"),
    ('{"mcpServers": []}', False, "not an object"),
    ('[]', False, "not an object"),
])  # fmt: skip
def test_what_cannot_be_edited_safely_is_an_error_with_a_position(text: str, comments: bool, message: str) -> None:
    with pytest.raises(JsoncError, match=message):
        jsonc.set_member(text, ["mcpServers"], "mdrecall", ENTRY, comments=comments)


def test_array_items_are_dropped_and_appended_in_place() -> None:
    text = '{\n  "hooks": {\n    "Stop": [\n      {"hooks": [{"command": "theirs"}]},\n      {"hooks": [{"command": "ours"}]}\n    ]\n  }\n}\n'

    def ours(item: object) -> bool:
        return isinstance(item, dict) and item["hooks"][0]["command"] == "ours"

    dropped = jsonc.edit_array(text, ["hooks", "Stop"], ours, [], comments=False)
    assert dropped == '{\n  "hooks": {\n    "Stop": [\n      {"hooks": [{"command": "theirs"}]}\n    ]\n  }\n}\n'
    added = jsonc.edit_array(dropped, ["hooks", "Stop"], ours, [{"hooks": [{"command": "ours"}]}], comments=False)
    assert json.loads(added) == json.loads(text)
    assert jsonc.edit_array(added, ["hooks", "Stop"], ours, [{"hooks": [{"command": "ours"}]}], comments=False) == added
    assert json.loads(jsonc.edit_array("{}", ["hooks", "Start"], ours, [1], comments=False)) == {"hooks": {"Start": [1]}}


TOML = '''# top comment
model = "o3"   # inline comment

[mcp_servers.a]
command = "a"

[mcp_servers.a.env]
X = "1"

# about profiles
[profiles.p]
model = "x"
'''


def test_toml_tables_and_top_level_keys_round_trip() -> None:
    table = {"command": "/usr/bin/python3", "args": ["-m", "mdrecall"], "env": {"MDRECALL_HOME": "/h/ä", "A B": "x"}}
    added = tomlfile.set_table(TOML, ["mcp_servers", "mdrecall"], table)
    doc = tomllib.loads(added)
    assert doc["mcp_servers"]["mdrecall"] == table and doc["mcp_servers"]["a"] == {"command": "a", "env": {"X": "1"}}
    assert tomlfile.remove_table(added, ["mcp_servers", "mdrecall"]) == TOML
    replaced = tomlfile.set_table(added, ["mcp_servers", "a"], {"command": "b"})
    assert tomllib.loads(replaced)["mcp_servers"]["a"] == {"command": "b"}  # sub-tables went with it
    assert "# about profiles\n[profiles.p]" in replaced  # a comment above the next table stays with it
    notify = tomlfile.set_top_key(TOML, "notify", ["a", "b"])
    assert tomllib.loads(notify)["notify"] == ["a", "b"] and notify.index("notify") < notify.index("[mcp_servers.a]")
    assert tomlfile.remove_top_key(notify, "notify") == TOML
    bare = "[t]\nx = 1\n"
    assert tomlfile.remove_top_key(tomlfile.set_top_key(bare, "notify", ["a"]), "notify") == bare
    multi = 'notify = [\n  "x",\n  "y",\n]\n' + bare
    assert tomllib.loads(tomlfile.set_top_key(multi, "notify", ["z"]))["notify"] == ["z"]
    assert tomlfile.header_path('[mcp_servers."mdrecall"]  # c') == ["mcp_servers", "mdrecall"]
    assert tomlfile.header_path("[[arr]]") == ["[[", "arr"]
    assert tomlfile.header_path('x = "[not a header]"') is None
