"""Captures: the values a pane source hands over, and which rows a styled archive keeps."""

from __future__ import annotations
