"""Remote commands (``command`` / ``commandReceipt``): rules, receipts, backends."""

from __future__ import annotations
