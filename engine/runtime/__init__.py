"""Runtime: the asyncio Engine, its event bus, events and budget parsing."""

from engine.runtime.budget import BudgetError, parse_budget
from engine.runtime.bus import EventBus, Subscription
from engine.runtime.config import RunConfig
from engine.runtime.engine import Engine

__all__ = ["BudgetError", "Engine", "EventBus", "RunConfig", "Subscription", "parse_budget"]
