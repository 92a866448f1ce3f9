"""Stock levels and order pricing."""

from inventory.pricing import line_total, order_total
from inventory.store import Store

__all__ = ["Store", "line_total", "order_total"]
