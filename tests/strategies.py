"""Hypothesis strategies for packets and control messages."""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from hypothesis import strategies as st

from mirror_host import control as c
from mirror_host.wire import ControlPacket, TextFramePacket, VTFramePacket

uuids = st.uuids().map(lambda u: UUID(int=u.int))
u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
i64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
seq = st.integers(min_value=1, max_value=(1 << 64) - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
data = st.binary(max_size=64)
doubles = st.floats(allow_nan=False, allow_infinity=False)
opt_bool = st.one_of(st.none(), st.booleans())

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | doubles | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)

vt_frames = st.builds(
    VTFramePacket,
    subscription_id=uuids,
    sequence=seq,
    columns=st.integers(1, 1000),
    rows=st.integers(1, 1000),
    data=st.binary(max_size=200),
)
text_frames = st.builds(
    TextFramePacket,
    subscription_id=uuids,
    sequence=seq,
    columns=st.integers(0, 1000),
    rows=st.integers(0, 1000),
    truncated=st.booleans(),
    text=text,
)
control_packets = st.builds(ControlPacket, body=st.binary(max_size=100))
packets = st.one_of(vt_frames, text_frames, control_packets)

panes = st.builds(
    c.PaneDescriptor,
    id=uuids,
    title=text,
    directory=text,
    busy=st.booleans(),
    project_name=st.none() | text,
    subtitle=st.none() | text,
    role=st.none() | text,
)

commands = st.one_of(
    st.just(c.ListCommand()),
    st.just(c.ProfilesCommand()),
    st.builds(c.AgentsInputCommand, pane=text, prompt=text),
    st.builds(c.AgentsDispatchCommand, pane=text, prompt=text),
    st.builds(
        c.CreateCommand,
        resource=text,
        worktree_id=text,
        launch=st.none() | st.builds(c.Launch, profile=text, prompt=st.none() | text),
        background=st.booleans(),
    ),
    st.builds(
        c.SendCommand,
        pane=text,
        text=text,
        trailing_enter=st.booleans(),
        source=text,
        wait=st.booleans(),
        capture_output=st.booleans(),
    ),
)
command_requests = st.builds(
    c.CommandRequest,
    request_id=uuids,
    request=st.builds(c.CommandEnvelope, output=st.just("json"), command=commands),
)

_BY_TYPE: dict[Any, st.SearchStrategy[Any]] = {
    UUID: uuids,
    bytes: data,
    str: text,
    bool: st.booleans(),
    float: doubles,
}


def _for_field(cls: type, field: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    name = field.name
    special: dict[str, st.SearchStrategy[Any]] = {
        "panes": st.lists(panes, max_size=3).map(tuple),
        "capabilities": st.lists(text, max_size=4).map(tuple),
        "lines": st.lists(text, max_size=4).map(tuple),
        "representation": st.sampled_from(c.Representation),
        "intent": st.sampled_from(c.Intent),
        "reason": st.sampled_from(c.EndReason),
        "direction": st.sampled_from(c.ScrollDirection),
        "styled_scrollback": st.none() | st.builds(c.StyledScrollback, data=data, row_offset=i64),
        "command_request": command_requests,
        "command_response": st.builds(c.CommandResponse, request_id=uuids, response=json_values),
        "sequence": u64,
        "offset": i64,
        "total": i64,
    }
    base = special.get(name)
    if base is None:
        type_name = str(field.type)
        if "UUID" in type_name:
            base = uuids
        elif "bytes" in type_name:
            base = data
        elif "bool" in type_name:
            base = st.booleans()
        elif "int" in type_name:
            base = i64
        elif "float" in type_name:
            base = doubles
        else:
            base = text
    if field.metadata.get("optional") and name != "styled_scrollback":
        return st.none() | base
    return base


def message_of(cls: type) -> st.SearchStrategy[Any]:
    """A strategy for one control message class."""
    return st.builds(cls, **{f.name: _for_field(cls, f) for f in dataclasses.fields(cls)})


messages = st.one_of([message_of(cls) for cls in c.MESSAGE_TYPES.values()])
