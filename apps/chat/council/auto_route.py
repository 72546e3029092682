"""Auto-route (opt-in per session): a message without a mention that would go to the
default role is handed to the role best placed to answer it, when its words match that
role's description clearly better than any other's. The person's message says where it
went and why, with a one-click undo."""

from __future__ import annotations

from apps.chat.models import Session, SessionRole
from apps.roles.routing import Route, best_placed, mentions


def auto_route(*, session: Session, links: list[SessionRole], text: str, route: Route) -> dict:
    """With auto-route on, a message without a mention that would go to the default role
    goes to the role whose description it matches clearly better than any other's (rules
    only): {"to", "from", "reason"}; {} when it stays where it was going."""
    if not session.auto_route or mentions(text):
        return {}
    default = next((link.role.handle for link in links if link.role.is_default), "")
    if not default or route.targets != (default,):
        return {}
    found = best_placed(
        text,
        descriptions={link.role.handle: link.role.description for link in links if not link.muted},
        exclude=default,
    )
    if found is None:
        return {}
    handle, word = found
    return {"to": handle, "from": default, "reason": word}
