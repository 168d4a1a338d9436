"""Checks of PROTOCOL.md §5: notifications pushed on the GET stream (a new stream gets
the current selection at once)."""
from __future__ import annotations

from typing import Optional

from ...client import IdeTimeout
from ...wire import json_text
from .outcomes import RECOMMENDED, Fail, Skip
from .registry import check
from .context import CheckContext, selection_problems, shape


@check("stream.selection_on_open", "§5", "the current selection is sent when a GET stream opens", rule=RECOMMENDED)
async def check_selection_on_open(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    _, current = await ctx.tool("get_selection", session=sid)
    if not isinstance(current, dict) or current.get("current") is not True:
        raise Skip("no active editor selection in the IDE (select some text to run this check)")
    _, response = await ctx.open_stream(sid)
    try:
        event = await response.next_event(ctx.timeout)
    except IdeTimeout:
        raise Fail("get_selection reports a current selection, but no selection_changed came on the new stream",
                   shape(current))
    if event is None:
        raise Fail("the stream ended without sending the selection")
    evidence = "event: %s\nid: %s\ndata: %s" % (event.event, event.id, event.data[:600])
    if event.event != "message" or event.id is not None:
        raise Fail("pushes are `event: message` with no id: line", evidence)
    try:
        message = json_text.loads(event.data)
    except json_text.JsonTextError:
        raise Fail("event data is not JSON", evidence)
    if not isinstance(message, dict) or message.get("method") != "selection_changed" or "id" in message:
        raise Fail("the first event is not a selection_changed notification", evidence)
    problems = selection_problems(message.get("params"), False)
    if problems:
        raise Fail("selection_changed params: " + "; ".join(problems), evidence)
    return None
